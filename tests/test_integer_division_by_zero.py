"""Integer floor_divide / remainder / fmod by zero: PyTorch's RuntimeError on the CPU
(``RuntimeError: ZeroDivisionError``), through every surface; float division and
divisors without a zero are untouched."""

import numpy as np
import pytest
import torch

import haelixe as hx
from haelixe.errors import OpError

_FORMS = {
    "remainder": (lambda a, b: a.remainder(b), lambda a, b: a % b),
    "fmod": (lambda a, b: a.fmod(b),),
    "floor_divide": (lambda a, b: a.floor_divide(b), lambda a, b: a // b,
                     lambda a, b: hx.div(a, b, rounding_mode="floor")
                     if isinstance(a, hx.Tensor) else torch.div(a, b, rounding_mode="floor")),
}
_CASES = [(op, i) for op, forms in _FORMS.items() for i in range(len(forms))]


def _both(fn, a, b):
    """fn on haelixe and on torch: (haelixe's exception or result, torch's)."""
    out = []
    for conv in (hx.tensor, torch.tensor):
        aa = conv(a) if isinstance(a, np.ndarray) else a
        bb = conv(b) if isinstance(b, np.ndarray) else b
        try:
            out.append(fn(aa, bb))
        except Exception as err:  # noqa: BLE001 (the type is what is compared)
            out.append(err)
    return out


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
@pytest.mark.parametrize("op,i", _CASES)
def test_a_zero_in_an_integer_divisor_raises_as_in_pytorch(op, i, dtype):
    a = np.array([5, 3, 7], dtype)
    b = np.array([2, 0, 1], dtype)
    mine, theirs = _both(_FORMS[op][i], a, b)
    assert isinstance(theirs, RuntimeError) and str(theirs) == "ZeroDivisionError"
    assert isinstance(mine, RuntimeError) and isinstance(mine, ZeroDivisionError)
    assert isinstance(mine, OpError)
    assert f"{op}: ZeroDivisionError" in str(mine) and "torch.where(b == 0, 1, b)" in str(mine)


@pytest.mark.parametrize("op", list(_FORMS))
def test_the_other_surfaces_raise_too(op):
    a, z = hx.tensor([4, 6]), hx.tensor([1, 0])
    calls = [lambda: getattr(hx, op)(a, z), lambda: getattr(hx, op)(a, 0),
             lambda: getattr(a.clone(), op + "_")(z), lambda: getattr(a.clone(), op + "_")(0),
             lambda: getattr(hx, op)(input=a, other=z)]
    if op == "floor_divide":
        calls += [lambda: 9 // z, lambda: a.clone().__ifloordiv__(z),
                  lambda: hx.div(a, z, rounding_mode="trunc")]
    if op == "remainder":
        calls += [lambda: 9 % z, lambda: a.clone().__imod__(0)]
    for call in calls:
        with pytest.raises(ZeroDivisionError, match=f"{op}: ZeroDivisionError"):
            call()


def test_an_in_place_division_by_zero_leaves_the_tensor_unchanged():
    a = hx.tensor([4, 6])
    with pytest.raises(RuntimeError):
        a //= hx.tensor([1, 0])
    assert a.tolist() == [4, 6]


@pytest.mark.parametrize("op,i", _CASES)
def test_no_zero_and_float_divisions_match_pytorch(op, i):
    fn = _FORMS[op][i]
    for a, b in ((np.array([5, -3, 7]), np.array([2, -4, 1])),      # no zero: computed
                 (np.array([5, -3, 7]), np.array([2., 0., 1.])),     # float: inf / nan
                 (np.array([5., -3, 7]), 0),                         # float by a 0 scalar
                 (np.zeros(0, np.int64), np.zeros(0, np.int64)),     # 0-size: nothing to do
                 (np.zeros(0, np.int64), 0),
                 (np.arange(12).reshape(3, 4)[:, ::2], np.array([1, 3]))):  # strided
        mine, theirs = _both(fn, a, b)
        assert not isinstance(theirs, Exception), theirs
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
        assert str(mine.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]


@pytest.mark.gpu
@pytest.mark.parametrize("op", list(_FORMS))
def test_on_the_gpu_a_zero_tensor_divisor_gives_zero_and_a_zero_scalar_raises(be, op):
    a = hx.tensor([5, -3, 7], dtype=hx.int32, device="gpu")
    b = hx.tensor([2, 0, 1], dtype=hx.int32, device="gpu")
    out = getattr(hx, op)(a, b)  # (no read-back to look for a zero: the kernels give 0)
    expected = getattr(torch, op)(torch.tensor([5, -3, 7]), torch.tensor([2, 1, 1]))
    assert out.cpu().tolist() == [expected[0].item(), 0, expected[2].item()]
    with pytest.raises(ZeroDivisionError, match=op):
        getattr(hx, op)(a, 0)


def test_a_captured_step_divides_integers_without_a_read_back():
    step = hx.capture(lambda a, b: (a // b) + (a % b))
    a, b = hx.tensor([7, -9]), hx.tensor([2, 4])
    for _ in range(3):
        assert step(a, b).tolist() == [3 + 1, -3 + 3]


def test_the_check_is_part_of_the_declaration_and_float_divisions_skip_it():
    import sys

    from haelixe.ops.integer_division import check_divisor
    from haelixe.ops.registry import FUNCTIONS, OPS

    for op in _FORMS:
        assert OPS[op].check is check_divisor
        # the surfaces are the generated ones: no wrapper around them
        assert getattr(hx.Tensor, op) is FUNCTIONS[op] is OPS[op].apply
    called = []

    def profile(frame, event, arg):
        if event == "call":
            called.append(frame.f_code.co_name)

    a, b = hx.tensor([5.0, -3.0]), hx.tensor([2.0, 0.0])
    sys.setprofile(profile)
    try:
        a // b, a % b, hx.fmod(a, b)
    finally:
        sys.setprofile(None)
    assert "check_divisor" not in called
    sys.setprofile(profile)
    try:
        hx.tensor([5]) // hx.tensor([2])
    finally:
        sys.setprofile(None)
    assert "check_divisor" in called  # (the same spy sees an integer division's check)
