"""A Python int beyond an int tensor's range: PyTorch's arithmetic, bitwise ops and
comparisons wrap it into the tensor's dtype; pow, clamp, fills, full, tensor and where
refuse it with "cannot be converted ... without overflow"; beyond 64 bits everything
refuses. Never numpy's raw OverflowError."""

from __future__ import annotations

import pytest

import haelixe as hx

BIG = 2**40 + 3  # 3 once wrapped into int32

WRAPS = {
    "add": lambda t: t + BIG, "rsub": lambda t: BIG - t, "mul": lambda t: t * BIG,
    "floor_divide": lambda t: t // BIG, "remainder": lambda t: t % BIG,
    "bitwise_and": lambda t: t & BIG, "lt": lambda t: t < BIG, "eq": lambda t: t == BIG,
    "add_": lambda t: t.clone().add_(BIG), "mul_": lambda t: t.clone().mul_(BIG),
}
AS_THREE = {  # the same ops with the wrapped value written out
    "add": lambda t: t + 3, "rsub": lambda t: 3 - t, "mul": lambda t: t * 3,
    "floor_divide": lambda t: t // 3, "remainder": lambda t: t % 3,
    "bitwise_and": lambda t: t & 3, "lt": lambda t: t < 3, "eq": lambda t: t == 3,
    "add_": lambda t: t.clone().add_(3), "mul_": lambda t: t.clone().mul_(3),
}
REFUSES = {
    "pow": lambda t: t ** BIG, "clamp": lambda t: t.clamp(max=BIG),
    "fill_": lambda t: t.clone().fill_(BIG), "masked_fill": lambda t: t.masked_fill(t > 0, BIG),
    "where": lambda t: hx.where(t > 0, t, BIG),
    "scatter": lambda t: t.scatter(0, hx.tensor([0], device=t.device), BIG),
    "full": lambda t: hx.full((2,), BIG, dtype=hx.int32, device=t.device),
    "tensor": lambda t: hx.tensor([1, BIG], dtype=hx.int32, device=t.device),
    "beyond_64_bits": lambda t: t.long() + 2**70,
    "beyond_64_bits_negative": lambda t: t.long() - 2**64,
}


def _int32(device, request):
    if device == "gpu":
        request.getfixturevalue("be")
    return hx.tensor([5, -7, 0], dtype=hx.int32, device=device)


DEVICES = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", sorted(WRAPS))
def test_arithmetic_wraps_the_number(request, device, op):
    t = _int32(device, request)
    got, want = WRAPS[op](t), AS_THREE[op](t)
    assert got.dtype is want.dtype
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", sorted(REFUSES))
def test_other_ops_refuse_it(request, device, op):
    t = _int32(device, request)
    with pytest.raises(RuntimeError, match="without overflow"):
        REFUSES[op](t)


def test_int64_wraps_the_top_of_64_bits_as_pytorch():
    torch = pytest.importorskip("torch")
    for f in (lambda t: t - 2**63, lambda t: t + 2**63, lambda t: t * 2**63):
        assert f(hx.tensor([5, -7, 0])).tolist() == f(torch.tensor([5, -7, 0])).tolist()


@pytest.mark.parametrize("op", sorted(WRAPS))
def test_wrapping_equals_pytorch(op):
    torch = pytest.importorskip("torch")
    ours = WRAPS[op](hx.tensor([5, -7, 0], dtype=hx.int32))
    theirs = WRAPS[op](torch.tensor([5, -7, 0], dtype=torch.int32))
    assert ours.tolist() == theirs.tolist()


@pytest.mark.parametrize("op", sorted(REFUSES))
def test_pytorch_refuses_too(op):
    torch = pytest.importorskip("torch")
    t = torch.tensor([5, -7, 0], dtype=torch.int32)
    theirs = {"full": lambda: torch.full((2,), BIG, dtype=torch.int32),
              "tensor": lambda: torch.tensor([1, BIG], dtype=torch.int32),
              "where": lambda: torch.where(t > 0, t, BIG),
              "scatter": lambda: t.scatter(0, torch.tensor([0]), BIG)}.get(
        op, lambda: REFUSES[op](t))
    with pytest.raises((RuntimeError, OverflowError, ValueError)):
        theirs()
