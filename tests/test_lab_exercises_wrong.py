"""Typical wrong answers, at least two per exercise: each fails, and the feedback names
what went wrong (the expected text is part of the message or of the hint).

A new exercise (lab 07 included) adds its wrong answers to WRONG; a test checks that
every declared exercise has at least two.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import haelixe as hx
from haelixe.autograd import Function
from haelixe.exercises import FAILED, LABS, lab01, lab02, lab03, lab04, lab05, lab06

# -- lab 01 ---------------------------------------------------------------------------------


def permute_unchanged(strides, dims):
    return strides


def permute_contiguous(strides, dims):
    # the strides of a fresh tensor of the permuted shape (a copy)
    shape = {(12, 4, 1): (2, 3, 4)}[tuple(strides)]
    new = [shape[d] for d in dims]
    return (new[1] * new[2], new[2], 1)


def permute_inverse(strides, dims):
    out = [0] * len(dims)
    for i, d in enumerate(dims):
        out[d] = strides[i]
    return tuple(out)


def flip_ignored(shape, strides, offset, dim, index):
    return offset + sum(s * i for s, i in zip(strides, index))


def flip_offset_kept(shape, strides, offset, dim, index):
    strides = list(strides)
    strides[dim] = -strides[dim]
    return offset + sum(s * i for s, i in zip(strides, index))


def expand_contiguous(shape, strides, new_shape):
    out, step = [], 1
    for n in reversed(new_shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def expand_keeps_strides(shape, strides, new_shape):
    lead = len(new_shape) - len(shape)
    return (0,) * lead + tuple(strides)


def view_possible(x):
    return x[:, ::2], (6,)       # rows one step apart: view can merge them


def view_of_a_copy(x):
    return x.T.contiguous(), (12,)


def view_wrong_size(x):
    return x.T, (10,)


# -- lab 02 ---------------------------------------------------------------------------------


def sum_to_without_keepdim(grad, shape):
    for _ in range(grad.ndim - len(shape)):
        grad = grad.sum(0)
    dims = tuple(d for d, n in enumerate(shape) if n == 1 and grad.shape[d] != 1)
    return grad.sum(dims) if dims else grad


def sum_to_everything(grad, shape):
    return grad.sum()


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


class SoftmaxDiagonal(_SoftmaxForward):
    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y * (1 - y)


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


class SoftmaxWrongDim(_SoftmaxForward):
    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return y * (g - (g * y).sum(0, keepdim=True))


def second_without_create_graph(f, x):
    (g1,) = hx.autograd.grad(f(x).sum(), x)
    (g2,) = hx.autograd.grad(g1.sum(), x)
    return g2


def second_is_first(f, x):
    (g1,) = hx.autograd.grad(f(x).sum(), x, create_graph=True)
    return g1


# -- lab 03 ---------------------------------------------------------------------------------


def round_truncates(values):
    return (values.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)


def round_half_up(values):
    return ((values.view(np.uint32) + np.uint32(0x8000)) & np.uint32(0xFFFF0000)).view(
        np.float32)


def autocast_all_low(family, input_dtype):
    return hx.bfloat16


def autocast_f32_keeps_input(family, input_dtype):
    return "bf16" if family in ("matmul", "linear", "attention") else input_dtype


def master_plain_bf16(master, weight, update):
    return master, (weight.float() - update).to(hx.bfloat16)


def master_never_written(master, weight, update):
    return master - update, weight


# -- lab 04 ---------------------------------------------------------------------------------


def bins_power_of_two(nbytes):
    return max(512, 1 << (nbytes - 1).bit_length()), 0


def bins_exact_fit_missed(nbytes):
    if nbytes <= 512:
        return 512, 0
    p = 1 << (nbytes.bit_length() - 1)
    size = (nbytes // (p // 4) + 1) * (p // 4)     # always one step up, even on a fit
    q = 1 << ((size - 1).bit_length() - 1)
    return size, 4 * ((q // 512).bit_length() - 1) + (size - q) // (q // 4)


def bins_index_from_one(nbytes):
    from haelixe.memory import bin_of, round_size
    return round_size(nbytes), bin_of(nbytes) + 1


# -- lab 05 ---------------------------------------------------------------------------------


class _RMSForward(Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        x, weight = x.detach(), weight.detach()
        r = ((x * x).mean(-1, keepdim=True) + eps).rsqrt()
        ctx.save_for_backward(x, weight, r)
        return x * r * weight


class RMSNormDirectOnly(_RMSForward):
    @staticmethod
    def backward(ctx, g):
        x, weight, r = ctx.saved_tensors
        return g * weight * r, (g * x * r).sum_to(weight.shape), None


class RMSNormWeightUnsummed(_RMSForward):
    @staticmethod
    def backward(ctx, g):
        x, weight, r = ctx.saved_tensors
        gw = g * weight
        return r * (gw - x * r * r * (gw * x).mean(-1, keepdim=True)), g * x * r, None


class RMSNormSum(Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        x, weight = x.detach(), weight.detach()
        return x * ((x * x).sum(-1, keepdim=True) + eps).rsqrt() * weight


def mask_upper(T):
    return hx.arange(T).reshape(T, 1) <= hx.arange(T)


def mask_strict(T):
    return hx.arange(T).reshape(T, 1) > hx.arange(T)


def mask_inverted(T):
    return hx.arange(T).reshape(T, 1) < hx.arange(T)


def _attention(q, k, v, causal, scale=True, fill=float("-inf"), dim=-1):
    s = q @ k.mT
    if scale:
        s = s * (1 / math.sqrt(q.shape[-1]))
    if causal:
        s = s.masked_fill(~lab05.engine_causal_mask(q.shape[-2]), fill)
    return s.softmax(dim) @ v


def attention_unscaled(q, k, v, causal=False):
    return _attention(q, k, v, causal, scale=False)


def attention_zero_fill(q, k, v, causal=False):
    return _attention(q, k, v, causal, fill=0.0)


def attention_ignores_causal(q, k, v, causal=False):
    return _attention(q, k, v, False)


def attention_softmax_over_queries(q, k, v, causal=False):
    return _attention(q, k, v, causal, dim=-2)


# -- lab 06 ---------------------------------------------------------------------------------


def batch_copied(t, start, stop):
    return hx.tensor(t.numpy()[start:stop])


def batch_offset_in_samples(t, start, stop):
    return t.as_strided((stop - start,) + t.shape[1:], t.strides, t.offset + start)


def batch_stop_inclusive(t, start, stop):
    return t[start:stop + 1]


def pages_without_header(start, stop, sample_bytes, header_bytes, page=4096):
    return (stop * sample_bytes - 1) // page - (start * sample_bytes) // page + 1


def pages_by_size(start, stop, sample_bytes, header_bytes, page=4096):
    return -(-(stop - start) * sample_bytes // page)


def write_in_place(path, chunks):
    with open(path, "wb") as f:
        for c in chunks:
            f.write(c)


def write_temp_left_behind(path, chunks):
    tmp = path + ".partial"
    with open(tmp, "wb") as f:
        for c in chunks:
            f.write(c)
    os.replace(tmp, path)


# exercise -> [(wrong answer, text the feedback must contain)]
WRONG = {
    "1.1": [(permute_unchanged, "the strides before the permute"),
            (permute_contiguous, "fresh contiguous tensor"),
            (permute_inverse, "position i gets old dim dims[i]")],
    "1.2": [(flip_ignored, "before the flip"),
            (flip_offset_kept, "the offset must move too")],
    "1.3": [(expand_contiguous, "an expand copies nothing"),
            (expand_keeps_strides, "must step 0, not its old stride")],
    "1.4": [(view_possible, "so this view is possible"),
            (view_of_a_copy, "a copy of x's values"),
            (view_wrong_size, "for the sizes, not for the layout")],
    "2.1": [(sum_to_without_keepdim, "keepdim=True"),
            (sum_to_everything, "you summed over every dim"),
            (sum_to_mean, "these are means")],
    "2.2": [(SoftmaxDiagonal, "only the diagonal of the Jacobian"),
            (SoftmaxOverflows, "subtract each row's max first"),
            (SoftmaxWrongDim, "Jacobian mismatch")],
    "2.3": [(second_without_create_graph, "create_graph=True"),
            (second_is_first, "that is the first derivative")],
    "3.1": [(round_truncates, "you cut the low 16 bits off"),
            (round_half_up, "a tie must go to the even neighbour")],
    "3.2": [(autocast_all_low, "9 of 16 predictions differ"),
            (autocast_f32_keeps_input, "cast their inputs to F32 and return F32")],
    "3.3": [(master_plain_bf16, "nothing moved"),
            (master_never_written, "the master moved but the weight never did")],
    "4.1": [(bins_power_of_two, "that is the next power of two"),
            (bins_exact_fit_missed, "is itself a bin size"),
            (bins_index_from_one, "the index counts bins from 0")],
    "4.2": [(lambda: (1, 3), "a view keeps its base's Storage"),
            (lambda: (4, 0), "the moment its last reference dies"),
            (lambda: (2, 0), "stays reserved, cached in its bin")],
    "5.1": [(RMSNormDirectOnly, "depends on x too"),
            (RMSNormWeightUnsummed, "every dim but the last"),
            (RMSNormSum, "a mean over the last dim, not a sum")],
    "5.2": [(mask_upper, "on and below the diagonal"),
            (mask_strict, "attend to itself"),
            (mask_inverted, "True = may attend")],
    "5.3": [(attention_unscaled, "scale the scores by 1/√d"),
            (attention_zero_fill, "fill it with -inf"),
            (attention_ignores_causal, "mask the scores"),
            (attention_softmax_over_queries, "softmax over the last dim")],
    "6.1": [(batch_copied, "in a storage of its own"),
            (batch_offset_in_samples, "offsets count elements, not samples"),
            (batch_stop_inclusive, "the first dim is stop - start")],
    "6.2": [(pages_without_header, "the file starts with the .npy header"),
            (pages_by_size, "straddles a boundary")],
    "6.3": [(write_in_place, "left b'half-written' at path"),
            (write_temp_left_behind, "left ['model.bin.partial'] behind")],
}

MODULES = {1: lab01, 2: lab02, 3: lab03, 4: lab04, 5: lab05, 6: lab06}


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
    hx.empty_cache("gpu")
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
    r = _exercise(number).check(answer)
    assert r.status == FAILED, r.text()
    assert not r.checker_error, r.text()
    assert text in r.text(), r.text()
    assert r.expected is not None or r.detail or r.hint, "feedback says what was expected"


def test_the_reclamation_answer_is_read_from_the_allocator(reclamation_scene):
    assert lab04.reclamation.check(lambda: (2, 2)).passed


def test_every_exercise_has_at_least_two_typical_wrong_answers():
    declared = {n for lab in LABS.values() for n in lab.exercises}
    missing = {n for n in declared if len(WRONG.get(n, ())) < 2}
    assert not missing, f"add typical wrong answers to WRONG for {sorted(missing)}"
