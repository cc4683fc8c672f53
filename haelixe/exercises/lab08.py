"""Lab 08 · Convolution is a strided view: the exercises and their checkers.

The windows view is checked against the engine's own (haelixe.ops.windows): the same
shape and strides over the same storage, no byte copied, on images that are contiguous,
sliced and channels-last, so a layout that assumes contiguous strides shows. A wrong
layout is drawn beside the right one. conv2d is checked against F.conv2d; max-pool's
backward against autograd through F.max_pool2d, on images with tied maxima, and a wrong
routing is drawn: where each window's gradient should go, and where it went.
"""

from __future__ import annotations

import numpy as np

from ..creation import arange, tensor
from ..nn import functional as F
from ..ops.windows import window_layout
from ..ops.windows import windows as engine_windows
from ..tensor import Tensor
from ..viz.layout import element_positions, render_layout_svg
from .core import Lab, first_hint
from .values import as_array, describe, first_difference

LAB = Lab(8, "Convolution is a strided view")


def engine_window_view(x, kh, kw, stride=1):
    """The engine's windows view of x (N, C, H, W): (N, C, kh, kw, Ho, Wo)."""
    return engine_windows(x, (kh, kw), (stride, stride), (1, 1))


def engine_conv2d(x, w):
    return F.conv2d(x, w)


def engine_max_pool_backward(x, grad_out):
    """The gradient max_pool2d(x, 2) sends back to x for ``grad_out``."""
    leaf = x.detach().requires_grad_()
    F.max_pool2d(leaf, 2).backward(grad_out)
    return leaf.grad


# -- 8.1 the windows as a view ----------------------------------------------------------------

def _images():
    """(description, image): contiguous, a slice (strides not those of its shape) and a
    channels-last view (a permuted layout)."""
    base = arange(2 * 3 * 6 * 7, dtype="float32").reshape(2, 3, 6, 7)
    big = arange(2 * 3 * 6 * 9, dtype="float32").reshape(2, 3, 6, 9)
    last = arange(2 * 5 * 6 * 3, dtype="float32").reshape(2, 5, 6, 3).permute(0, 3, 1, 2)
    return [("a contiguous (2, 3, 6, 7) image", base),
            ("x[:, :, :, 1:8], a slice of a wider image", big[:, :, :, 1:8]),
            ("a channels-last image (2, 3, 5, 6) (permuted: C has stride 1)", last)]


def _window_pictures(x, shape, want, got):
    pe = element_positions(shape, want, x.offset)
    pg = element_positions(shape, got, x.offset)
    diff = np.argwhere(pe != pg)
    sel = tuple(int(i) for i in diff[0]) if len(diff) else None
    size = x.storage.size
    return [(f"the engine's windows: strides {want}",
             render_layout_svg(shape, want, x.offset, size, sel, name="win")),
            (f"your strides {got} over the same storage (red: outside it)",
             render_layout_svg(shape, got, x.offset, size, sel, name="yours"))]


@LAB.exercise("8.1", "The windows as a strided view", section="2. The windows as a view",
              fallback=lambda: engine_window_view)
def windows(answer, fb):
    for desc, x in _images():
        for kh, kw, stride in ((3, 2, 1), (2, 2, 2)):
            call = f"window_view(x, {kh}, {kw}, stride={stride}) for {desc}"
            want = engine_window_view(x, kh, kw, stride)
            got = fb.call(answer, x, kh, kw, stride, shown=call)
            if not isinstance(got, Tensor):
                fb.fail(f"{call} should return a Tensor (a view of x), got {describe(got)}",
                        hint="return x.as_strided(shape, strides)")
            if got.shape != want.shape:
                swapped = got.shape == want.shape[:2] + want.shape[4:] + want.shape[2:4]
                fb.fail(f"{call}: the view has shape {got.shape}", expected=want.shape,
                        got=got.shape, hint=first_hint(
                            (swapped, "the kernel dims (kh, kw) come before the output "
                                      "positions (Ho, Wo): (N, C, kh, kw, Ho, Wo)"),
                            otherwise="Ho = (H - kh) // stride + 1 and Wo = (W - kw) // "
                                      "stride + 1; the shape is (N, C, kh, kw, Ho, Wo)"))
            if got.storage is not x.storage:
                fb.fail(f"{call}: the result is a copy, not a view of x's storage",
                        hint="no bytes move: x.as_strided(...) reads x's own memory "
                             "(np.lib.stride_tricks or .contiguous() copy)")
            if got.offset != want.offset or not _same(want.shape, want.strides, got.strides):
                plain = window_layout(x.shape, _contiguous(x.shape), (kh, kw),
                                      (stride, stride), (1, 1))[1]
                fb.fail(f"{call}: the window strides", expected=want.strides,
                        got=got.strides, hint=first_hint(
                            (got.strides == plain and plain != want.strides,
                             "these are the strides of a contiguous image of x's shape; "
                             "read x's own: x.stride(), which a slice or a permute "
                             "changes"),
                            (got.strides[2:4] == want.strides[4:] and
                             got.strides[4:] == want.strides[2:4],
                             "the kernel dims step by the image's strides (one pixel), "
                             "the output dims by stride times them (one window)"),
                            otherwise="(sN, sC, sH, sW, stride*sH, stride*sW) with "
                                      "(sN, sC, sH, sW) = x.stride()"),
                        pictures=_window_pictures(x, want.shape, want.strides,
                                                  got.strides))
    return "every window view reads the image's own memory, for strided images too"


def _contiguous(shape):
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def _same(shape, a, b) -> bool:
    return all(n <= 1 or sa == sb for n, sa, sb in zip(shape, a, b))


# -- 8.2 conv2d from the view and one product --------------------------------------------------

def _conv_cases():
    rng = np.random.default_rng(8)
    return [(f"x {s}, w {k}", tensor(rng.standard_normal(s).astype(np.float32)),
             tensor(rng.standard_normal(k).astype(np.float32)))
            for s, k in (((1, 1, 5, 5), (1, 1, 3, 3)), ((2, 3, 6, 7), (4, 3, 3, 2)),
                         ((1, 2, 4, 6), (3, 2, 2, 3)))]


@LAB.exercise("8.2", "conv2d from the view and one product",
              section="3. Convolution is one product", fallback=lambda: engine_conv2d)
def conv(answer, fb):
    for desc, x, w in _conv_cases():
        call = f"conv2d({desc})"
        want = F.conv2d(x, w).numpy()
        raw = fb.call(answer, x, w, shown=call)
        n, o, ho, wo = want.shape
        got, complaint = as_array(raw, want.shape, call)
        if complaint:
            channels_last = as_array(raw, (n, ho, wo, o), call)[1] is None
            fb.fail(complaint, expected=want.shape, got=describe(raw), hint=first_hint(
                (channels_last, "the product gives (N, Ho*Wo, O) laid out positions "
                                "first: the output is (N, O, Ho, Wo), channels first"),
                otherwise="y = w.reshape(O, C*kh*kw) @ windows.reshape(N, C*kh*kw, "
                          "Ho*Wo), then reshape to (N, O, Ho, Wo)"))
        where = first_difference(want, got, 1e-4, 1e-4)
        if where is None:
            continue
        flipped = F.conv2d(x, w.flip(2, 3)).numpy()
        swapped = w.shape[2] == w.shape[3] and np.allclose(
            got, F.conv2d(x, w.transpose(2, 3)).numpy(), atol=1e-4)
        fb.fail(f"{call}: differs from F.conv2d first at {where}", expected=want, got=got,
                hint=first_hint(
                    (np.allclose(got, flipped, atol=1e-4),
                     "that is the textbook convolution, with the kernel flipped; deep "
                     "learning's conv2d is a cross-correlation: no flip"),
                    (swapped, "the kernel's rows and columns are swapped: flatten the "
                              "weight in the order of the windows' dims (C, kh, kw)"),
                    otherwise="flatten the weight (O, C, kh, kw) as (O, C*kh*kw), the "
                              "windows (N, C, kh, kw, Ho, Wo) as (N, C*kh*kw, Ho*Wo): "
                              "the same (c, i, j) order on both sides of the product"))
    return "conv2d from the windows view and one product equals F.conv2d"


# -- 8.3 max-pool's backward -------------------------------------------------------------

def _pool_cases():
    rng = np.random.default_rng(3)
    ties = np.zeros((1, 1, 4, 4), np.float32)
    ties[0, 0, :2, :2] = 1.0  # a window of four tied maxima
    ties[0, 0, 2:, 2:] = [[5, 5], [1, 5]]
    return [("x of shape (1, 1, 4, 4)", tensor(rng.permutation(16).astype(np.float32)
                                               .reshape(1, 1, 4, 4))),
            ("x with tied maxima", tensor(ties)),
            ("x of shape (2, 3, 6, 4)", tensor(rng.standard_normal((2, 3, 6, 4))
                                               .astype(np.float32)))]


def _grid_svg(values, title) -> str:
    """A (H, W) grid of numbers, the non-zero cells shaded, 2x2 windows outlined."""
    h, w = values.shape
    s = 34
    cells = []
    for i in range(h):
        for j in range(w):
            v = values[i, j]
            fill = "#f6c177" if v else "#ffffff"
            cells.append(f'<rect x="{j * s}" y="{20 + i * s}" width="{s}" height="{s}" '
                         f'fill="{fill}" stroke="#9aa5b1"/><text x="{j * s + s / 2}" '
                         f'y="{20 + i * s + s / 2 + 4}" text-anchor="middle" '
                         f'font-size="11">{v:.2g}</text>')
    for i in range(0, h, 2):
        for j in range(0, w, 2):
            cells.append(f'<rect x="{j * s}" y="{20 + i * s}" width="{2 * s}" '
                         f'height="{2 * s}" fill="none" stroke="#1f4e8c" '
                         f'stroke-width="2"/>')
    return (f'<svg class="hx-pool" xmlns="http://www.w3.org/2000/svg" width="{w * s + 2}" '
            f'height="{h * s + 24}"><text x="0" y="13" font-size="12">{title}</text>'
            + "".join(cells) + "</svg>")


@LAB.exercise("8.3", "Max-pool's backward: where each gradient goes",
              section="4. Max-pooling", fallback=lambda: engine_max_pool_backward)
def pool_backward(answer, fb):
    for desc, x in _pool_cases():
        g = tensor(np.arange(1, 1 + x.numel() // 4, dtype=np.float32)
                   .reshape(x.shape[0], x.shape[1], x.shape[2] // 2, x.shape[3] // 2))
        call = f"max_pool_backward({desc}, grad_out)"
        want = engine_max_pool_backward(x, g).numpy()
        raw = fb.call(answer, x, g, shown=call)
        got, complaint = as_array(raw, want.shape, call)
        if complaint:
            fb.fail(complaint, expected=want.shape, got=describe(raw),
                    hint="the gradient of x has x's shape (N, C, H, W)")
        where = first_difference(want, got, 1e-5, 1e-5)
        if where is None:
            continue
        spread = np.repeat(np.repeat(g.numpy(), 2, 2), 2, 3)
        xs = x.numpy()
        top = np.repeat(np.repeat(F.max_pool2d(x, 2).numpy(), 2, 2), 2, 3)
        every_tie = np.where(xs == top, spread, 0.0)
        n, c = where[:2]
        pictures = [("where each window's gradient goes (max-pool: to the first of its "
                     "largest cells)", _grid_svg(want[n, c], "expected")),
                    ("where yours sent it", _grid_svg(got[n, c], "yours"))]
        fb.fail(f"{call}: the gradient of x differs first at {where}", expected=want[n, c],
                got=got[n, c], pictures=pictures, hint=first_hint(
                    (np.allclose(got, spread / 4), "that spreads each gradient evenly over "
                                                   "its window: average pooling's backward; "
                                                   "max-pool sends it all to the one cell "
                                                   "that was the maximum"),
                    (np.allclose(got, every_tie),
                     "where several cells tie for the maximum, only the first (argmax) "
                     "gets the gradient, as PyTorch's max_pool2d"),
                    otherwise="each window's gradient goes to the cell argmax picked: "
                              "window (y, x)'s cell (i, j) is pixel (2y + i, 2x + j); "
                              "every other cell gets 0"))
    return "every window's gradient reaches the one cell that was its maximum"
