"""Typical wrong answers, at least two per exercise: each fails, and the feedback names
what went wrong (the expected text is part of the message or of the hint).

Each wrong answer is marked ``@wrong(exercise, text its feedback must contain)``. A new
exercise (lab 07 included) adds its own; a test checks that every declared exercise has
at least two.
"""

from __future__ import annotations

import gc
import math
import os
import re

import numpy as np
import pytest

import haelixe as hx
from haelixe.autograd import Function
from haelixe.exercises import (
    FAILED,
    LABS,
    lab01,
    lab02,
    lab03,
    lab04,
    lab05,
    lab06,
    lab07,
    lab08,
)

WRONG: dict = {}  # exercise number -> [(wrong answer, text its feedback must contain)]


def wrong(number: str, text: str):
    def mark(answer):
        WRONG.setdefault(number, []).append((answer, text))
        return answer
    return mark


# -- lab 01 ---------------------------------------------------------------------------------


@wrong("1.1", "the strides before the permute")
def permute_unchanged(strides, dims):
    return strides


@wrong("1.1", "fresh contiguous tensor")
def permute_contiguous(strides, dims):
    # the strides of a fresh tensor of the permuted shape (a copy)
    shape = {(12, 4, 1): (2, 3, 4)}[tuple(strides)]
    new = [shape[d] for d in dims]
    return (new[1] * new[2], new[2], 1)


@wrong("1.1", "position i gets old dim dims[i]")
def permute_inverse(strides, dims):
    out = [0] * len(dims)
    for i, d in enumerate(dims):
        out[d] = strides[i]
    return tuple(out)


@wrong("1.2", "before the flip")
def flip_ignored(shape, strides, offset, dim, index):
    return offset + sum(s * i for s, i in zip(strides, index))


@wrong("1.2", "the offset must move too")
def flip_offset_kept(shape, strides, offset, dim, index):
    strides = list(strides)
    strides[dim] = -strides[dim]
    return offset + sum(s * i for s, i in zip(strides, index))


@wrong("1.3", "an expand copies nothing")
def expand_contiguous(shape, strides, new_shape):
    out, step = [], 1
    for n in reversed(new_shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


@wrong("1.3", "must step 0, not its old stride")
def expand_keeps_strides(shape, strides, new_shape):
    lead = len(new_shape) - len(shape)
    return (0,) * lead + tuple(strides)


@wrong("1.4", "so this view is possible")
def view_possible(x):
    return x[:, ::2], (6,)       # rows one step apart: view can merge them


@wrong("1.4", "a copy of x's values")
def view_of_a_copy(x):
    return x.T.contiguous(), (12,)


@wrong("1.4", "for the sizes, not for the layout")
def view_wrong_size(x):
    return x.T, (10,)


# -- lab 02 ---------------------------------------------------------------------------------


@wrong("2.1", "keepdim=True")
def sum_to_without_keepdim(grad, shape):
    for _ in range(grad.ndim - len(shape)):
        grad = grad.sum(0)
    dims = tuple(d for d, n in enumerate(shape) if n == 1 and grad.shape[d] != 1)
    return grad.sum(dims) if dims else grad


@wrong("2.1", "you summed over every dim")
def sum_to_everything(grad, shape):
    return grad.sum()


@wrong("2.1", "these are means")
def sum_to_mean(grad, shape):
    for _ in range(grad.ndim - len(shape)):
        grad = grad.mean(0)
    for d, n in enumerate(shape):
        if n == 1 and grad.shape[d] != 1:
            grad = grad.mean(d, keepdim=True)
    return grad


class _SoftmaxForward(Function):
    @staticmethod
    def forward(ctx, x):
        x = x.detach()
        e = (x - x.amax(-1, keepdim=True)).exp()
        y = e / e.sum(-1, keepdim=True)
        ctx.save_for_backward(y)
        return y


@wrong("2.2", "only the diagonal of the Jacobian")
class SoftmaxDiagonal(_SoftmaxForward):
    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y * (1 - y)


@wrong("2.2", "subtract each row's max first")
class SoftmaxOverflows(Function):
    @staticmethod
    def forward(ctx, x):
        e = x.detach().exp()
        y = e / e.sum(-1, keepdim=True)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return y * (g - (g * y).sum(-1, keepdim=True))


@wrong("2.2", "Jacobian mismatch")
class SoftmaxWrongDim(_SoftmaxForward):
    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return y * (g - (g * y).sum(0, keepdim=True))


@wrong("2.3", "create_graph=True")
def second_without_create_graph(f, x):
    (g1,) = hx.autograd.grad(f(x).sum(), x)
    (g2,) = hx.autograd.grad(g1.sum(), x)
    return g2


@wrong("2.3", "that is the first derivative")
def second_is_first(f, x):
    (g1,) = hx.autograd.grad(f(x).sum(), x, create_graph=True)
    return g1


# -- lab 03 ---------------------------------------------------------------------------------


@wrong("3.1", "you cut the low 16 bits off")
def round_truncates(values):
    return (values.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)


@wrong("3.1", "a tie must go to the even neighbour")
def round_half_up(values):
    return ((values.view(np.uint32) + np.uint32(0x8000)) & np.uint32(0xFFFF0000)).view(
        np.float32)


@wrong("3.2", "9 of 16 predictions differ")
def autocast_all_low(family, input_dtype):
    return hx.bfloat16


@wrong("3.2", "cast their inputs to F32 and return F32")
def autocast_f32_keeps_input(family, input_dtype):
    return "bf16" if family in ("matmul", "linear", "attention") else input_dtype


@wrong("3.3", "nothing moved")
def master_plain_bf16(master, weight, update):
    return master, (weight.float() - update).to(hx.bfloat16)


@wrong("3.3", "the master moved but the weight never did")
def master_never_written(master, weight, update):
    return master - update, weight


# -- lab 04 ---------------------------------------------------------------------------------


@wrong("4.1", "that is the next power of two")
def bins_power_of_two(nbytes):
    return max(512, 1 << (nbytes - 1).bit_length()), 0


@wrong("4.1", "is itself a bin size")
def bins_exact_fit_missed(nbytes):
    if nbytes <= 512:
        return 512, 0
    p = 1 << (nbytes.bit_length() - 1)
    size = (nbytes // (p // 4) + 1) * (p // 4)     # always one step up, even on a fit
    q = 1 << ((size - 1).bit_length() - 1)
    return size, 4 * ((q // 512).bit_length() - 1) + (size - q) // (q // 4)


@wrong("4.1", "the index counts bins from 0")
def bins_index_from_one(nbytes):
    from haelixe.memory import bin_of, round_size
    return round_size(nbytes), bin_of(nbytes) + 1


@wrong("4.2", "a view keeps its base's Storage")
def reclamation_view_forgotten():
    return 1, 3          # as if deleting a freed its slab although top still reads it


@wrong("4.2", "the moment its last reference dies")
def reclamation_nothing_freed():
    return 4, 0          # as if del never gave a slab back


@wrong("4.2", "stays reserved, cached in its bin")
def reclamation_freed_to_driver():
    return 2, 0          # as if freed slabs went back to the driver


@wrong("4.3", "the longest single call")
def dominant_longest_call(prof):
    return max(prof.kernels(), key=lambda e: e.duration_ns).name


@wrong("4.3", "synchronize is a backend op, not a kernel")
def dominant_counting_ops(prof):
    total = {}
    for e in prof.events:  # ops too: their time holds their dispatches' and waits
        total[e.name] = total.get(e.name, 0) + e.duration_ns
    return max(total, key=total.get)


@wrong("4.3", "one kernel may have several bars")
def dominant_longest_bar(prof):
    total = {}
    for e in prof.kernels():  # per phase: KernelView's bars, not the kernel's whole time
        total[e.phase, e.name] = total.get((e.phase, e.name), 0) + e.duration_ns
    return max(total, key=total.get)[1]


@wrong("4.3", "a kernel's name (a str")
def dominant_event(prof):
    return max(prof.kernels(), key=lambda e: e.duration_ns)


# -- lab 05 ---------------------------------------------------------------------------------


class _RMSForward(Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        x, weight = x.detach(), weight.detach()
        r = ((x * x).mean(-1, keepdim=True) + eps).rsqrt()
        ctx.save_for_backward(x, weight, r)
        return x * r * weight


@wrong("5.1", "depends on x too")
class RMSNormDirectOnly(_RMSForward):
    @staticmethod
    def backward(ctx, g):
        x, weight, r = ctx.saved_tensors
        return g * weight * r, (g * x * r).sum_to(weight.shape), None


@wrong("5.1", "every dim but the last")
class RMSNormWeightUnsummed(_RMSForward):
    @staticmethod
    def backward(ctx, g):
        x, weight, r = ctx.saved_tensors
        gw = g * weight
        return r * (gw - x * r * r * (gw * x).mean(-1, keepdim=True)), g * x * r, None


@wrong("5.1", "a mean over the last dim, not a sum")
class RMSNormSum(Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        x, weight = x.detach(), weight.detach()
        return x * ((x * x).sum(-1, keepdim=True) + eps).rsqrt() * weight


@wrong("5.2", "on and below the diagonal")
def mask_upper(T):
    return hx.arange(T).reshape(T, 1) <= hx.arange(T)


@wrong("5.2", "attend to itself")
def mask_strict(T):
    return hx.arange(T).reshape(T, 1) > hx.arange(T)


@wrong("5.2", "True = may attend")
def mask_inverted(T):
    return hx.arange(T).reshape(T, 1) < hx.arange(T)


def _attention(q, k, v, causal, scale=True, fill=float("-inf"), dim=-1):
    s = q @ k.mT
    if scale:
        s = s * (1 / math.sqrt(q.shape[-1]))
    if causal:
        s = s.masked_fill(~lab05.engine_causal_mask(q.shape[-2]), fill)
    return s.softmax(dim) @ v


@wrong("5.3", "scale the scores by 1/√d")
def attention_unscaled(q, k, v, causal=False):
    return _attention(q, k, v, causal, scale=False)


@wrong("5.3", "fill it with -inf")
def attention_zero_fill(q, k, v, causal=False):
    return _attention(q, k, v, causal, fill=0.0)


@wrong("5.3", "mask the scores")
def attention_ignores_causal(q, k, v, causal=False):
    return _attention(q, k, v, False)


@wrong("5.3", "softmax over the last dim")
def attention_softmax_over_queries(q, k, v, causal=False):
    return _attention(q, k, v, causal, dim=-2)


# -- lab 06 ---------------------------------------------------------------------------------


@wrong("6.1", "in a storage of its own")
def batch_copied(t, start, stop):
    return hx.tensor(t.numpy()[start:stop])


@wrong("6.1", "offsets count elements, not samples")
def batch_offset_in_samples(t, start, stop):
    return t.as_strided((stop - start,) + t.shape[1:], t.strides, t.offset + start)


@wrong("6.1", "the first dim is stop - start")
def batch_stop_inclusive(t, start, stop):
    return t[start:stop + 1]


@wrong("6.2", "the file starts with the .npy header")
def pages_without_header(start, stop, sample_bytes, header_bytes, page=4096):
    return (stop * sample_bytes - 1) // page - (start * sample_bytes) // page + 1


@wrong("6.2", "straddles a boundary")
def pages_by_size(start, stop, sample_bytes, header_bytes, page=4096):
    return -(-(stop - start) * sample_bytes // page)


@wrong("6.3", "left b'half-written' at path")
def write_in_place(path, chunks):
    with open(path, "wb") as f:
        for c in chunks:
            f.write(c)


@wrong("6.3", "left ['model.bin.partial'] behind")
def write_temp_left_behind(path, chunks):
    tmp = path + ".partial"
    with open(tmp, "wb") as f:
        for c in chunks:
            f.write(c)
    os.replace(tmp, path)


# -- lab 07 ---------------------------------------------------------------------------------


@wrong("7.1", "the character that FOLLOWS x[b, t]")
def pairs_target_is_the_input(codes, starts, context):
    x = np.stack([codes[s:s + context] for s in starts])
    return x, x


@wrong("7.1", "the target comes after the input, not before")
def pairs_target_before(codes, starts, context):
    x = np.stack([codes[s:s + context] for s in starts])
    return x, np.stack([codes[s - 1:s + context - 1] if s else np.roll(codes, 1)[:context]
                        for s in starts])


@wrong("7.1", "shape (len(starts), context)")
def pairs_one_too_long(codes, starts, context):
    w = np.stack([codes[s:s + context + 1] for s in starts])
    return w, w


def _top_k(logits, top_k):
    if top_k is None:
        return logits
    kth = logits.topk(top_k, dim=-1).values[:, -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


@wrong("7.2", "yours multiplies")
def sample_times_temperature(logits, temperature=1.0, top_k=None):
    return hx.multinomial(_top_k(logits * temperature, top_k).softmax(-1), 1)


@wrong("7.2", "keep only the 3 largest logits")
def sample_without_top_k(logits, temperature=1.0, top_k=None):
    return hx.multinomial((logits / temperature).softmax(-1), 1)


@wrong("7.2", "greedy decoding")
def sample_greedy(logits, temperature=1.0, top_k=None):
    return logits.argmax(-1, keepdim=True)


@wrong("7.2", "shape (batch, 1)")
def sample_flat(logits, temperature=1.0, top_k=None):
    return hx.multinomial(_top_k(logits / temperature, top_k).softmax(-1), 1).reshape(-1)


# -- lab 08 ---------------------------------------------------------------------------------


def _view(x, shape, strides):
    return x.as_strided(shape, strides)


@wrong("8.1", "strides of a contiguous image")
def windows_assuming_contiguous(x, kh, kw, stride=1):
    n, c, h, w = x.shape
    sn, sc, sh, sw = c * h * w, h * w, w, 1
    return _view(x, (n, c, kh, kw, (h - kh) // stride + 1, (w - kw) // stride + 1),
                 (sn, sc, sh, sw, stride * sh, stride * sw))


@wrong("8.1", "the kernel dims (kh, kw) come before the output positions")
def windows_positions_first(x, kh, kw, stride=1):
    n, c, h, w = x.shape
    sn, sc, sh, sw = x.stride()
    return _view(x, (n, c, (h - kh) // stride + 1, (w - kw) // stride + 1, kh, kw),
                 (sn, sc, stride * sh, stride * sw, sh, sw))


@wrong("8.1", "a copy, not a view")
def windows_copied(x, kh, kw, stride=1):
    return lab08.engine_window_view(x, kh, kw, stride).contiguous()


@wrong("8.1", "the output dims by stride times them")
def windows_strides_swapped(x, kh, kw, stride=1):
    n, c, h, w = x.shape
    sn, sc, sh, sw = x.stride()
    return _view(x, (n, c, kh, kw, (h - kh) // stride + 1, (w - kw) // stride + 1),
                 (sn, sc, stride * sh, stride * sw, sh, sw))


def _conv_by_product(x, w):
    n, c, _, _ = x.shape
    o, _, kh, kw = w.shape
    win = lab08.engine_window_view(x, kh, kw)
    ho, wo = win.shape[4:]
    return (w.reshape(o, -1) @ win.reshape(n, c * kh * kw, ho * wo)).reshape(n, o, ho, wo)


@wrong("8.2", "the kernel flipped")
def conv_flipped(x, w):
    return _conv_by_product(x, w.flip(2, 3))


@wrong("8.2", "channels first")
def conv_channels_last(x, w):
    return _conv_by_product(x, w).permute(0, 2, 3, 1)


@wrong("8.2", "the same (c, i, j) order on both sides")
def conv_weight_order(x, w):
    o, c, kh, kw = w.shape
    return _conv_by_product(x, w.permute(0, 2, 3, 1).reshape(o, kh, kw, c)
                            .reshape(o, c, kh, kw))


def _pool_grad(x, g, pick):
    n, c, h, w = x.shape
    cells = lab08.engine_window_view(x, 2, 2, 2).reshape(n, c, 4, h // 2, w // 2)
    routed = (pick(cells) * g.unsqueeze(2)).reshape(n, c, 2, 2, h // 2, w // 2)
    return routed.permute(0, 1, 4, 2, 5, 3).reshape(n, c, h, w)


@wrong("8.3", "average pooling's backward")
def pool_grad_spread(x, g):
    return _pool_grad(x, g, lambda cells: cells * 0.0 + 0.25)


@wrong("8.3", "only the first (argmax) gets the gradient")
def pool_grad_every_tie(x, g):
    return _pool_grad(x, g, lambda cells: (cells == cells.amax(2, keepdim=True)).float())


@wrong("8.3", "window (y, x)'s cell (i, j) is pixel (2y + i, 2x + j)")
def pool_grad_misplaced(x, g):
    n, c, h, w = x.shape
    cells = lab08.engine_window_view(x, 2, 2, 2).reshape(n, c, 4, h // 2, w // 2)
    first = cells.argmax(2, keepdim=True)
    onehot = (hx.arange(4).reshape(1, 1, 4, 1, 1) == first).float()
    return (onehot * g.unsqueeze(2)).reshape(n, c, h, w)


MODULES = {1: lab01, 2: lab02, 3: lab03, 4: lab04, 5: lab05, 6: lab06, 7: lab07, 8: lab08}


def _exercise(number):
    return MODULES[int(number.split(".")[0])].LAB.exercises[number]


def _cases():
    return [pytest.param(number, answer, text,
                         id=f"{number}-{getattr(answer, '__name__', 'answer')}-{k}")
            for number, answers in WRONG.items() for k, (answer, text) in enumerate(answers)]


@pytest.fixture
def reclamation_scene(be):
    """Lab 04's scenario: three 4 MB tensors, a view of one, a new tensor from another,
    three names deleted (2 slabs in use, 2 cached in the 4 MiB bin)."""
    gc.collect()
    hx.empty_cache("gpu")
    assert lab04._bin_counts(hx.memory_stats("gpu")) == (0, 0), \
        "an earlier test left 4 MiB slabs in use"
    a = hx.zeros(1000, 1000, device="gpu")
    b = hx.zeros(1000, 1000, device="gpu")
    c = hx.zeros(1000, 1000, device="gpu")
    kept = (a[:500], b * 2)
    del a, b, c
    yield kept
    del kept
    hx.empty_cache("gpu")


@pytest.mark.parametrize("number, answer, text", _cases())
def test_a_typical_wrong_answer_fails_with_its_feedback(number, answer, text, request):
    if number == "4.2":
        request.getfixturevalue("reclamation_scene")
    ex = _exercise(number)
    ex.lab.reset()
    first = ex.check(answer)  # the first miss gets a nudge
    assert first.status == FAILED and not first.checker_error, first.text()
    r = ex.check(answer)  # a later miss the specific feedback
    assert r.status == FAILED, r.text()
    assert not r.checker_error, r.text()
    assert text in r.text(), r.text()
    assert r.expected is not None or r.detail or r.hint, "feedback says what was expected"


def test_the_reclamation_answer_is_read_from_the_allocator(reclamation_scene):
    assert lab04.reclamation.check(lambda: (2, 2)).passed


def test_a_wrong_backward_is_located_in_the_graph():
    lab02.LAB.reset()
    lab02.softmax.check(SoftmaxDiagonal)
    r = lab02.softmax.check(SoftmaxDiagonal)  # the specific hint comes at the second miss
    assert r.status == FAILED and "diagonal" in r.hint
    (caption, picture), = r.pictures
    assert 'class="hx-graph"' in picture and "ringed: SoftmaxDiagonal" in caption
    # the ringed node is the learner's Softmax, not MatMul, Mul or Sum
    nodes = picture.split('<g class="node"')[1:]
    ringed = [re.search(r'data-op="([^"]+)"', n).group(1) for n in nodes
              if 'stroke-width="2.5"' in n.split("</g>")[0]]
    assert ringed == ["SoftmaxDiagonal"], ringed


def test_every_exercise_has_at_least_two_typical_wrong_answers():
    declared = {n for lab in LABS.values() for n in lab.exercises}
    missing = {n for n in declared if len(WRONG.get(n, ())) < 2}
    assert not missing, f"add typical wrong answers to WRONG for {sorted(missing)}"
