"""Errors name the operation, the shapes / dtypes / devices involved and the fix."""

from __future__ import annotations

import numpy as np
import pytest

import haelixe as hx


def test_incompatible_broadcast_names_both_shapes():
    with pytest.raises(ValueError) as e:
        hx.ones(2, 3) + hx.ones(4)
    msg = str(e.value)
    assert "add" in msg and "(2, 3)" in msg and "(4,)" in msg and "broadcast" in msg
    with pytest.raises(ValueError, match=r"mul: shapes \(5, 1, 3\) and \(2, 4\)"):
        hx.ones(5, 1, 3) * hx.ones(2, 4)
    with pytest.raises(ValueError, match=r"\(3,\) and \(2,\)"):
        hx.where(hx.ones(3) > 0, hx.ones(3), hx.ones(2))


def test_impossible_view_says_why_and_suggests_fixes():
    t = hx.ones(3, 4).T
    with pytest.raises(RuntimeError) as e:
        t.view(12)
    msg = str(e.value)
    assert "(12,)" in msg and "(4, 3)" in msg and "strides (1, 4)" in msg
    assert ".reshape(" in msg and ".contiguous()" in msg
    assert t.reshape(12).shape == (12,)  # the suggested fixes work
    assert t.contiguous().view(12).shape == (12,)


def test_view_with_wrong_element_count():
    with pytest.raises(ValueError, match=r"shape \(5, 3\) is invalid for input of 12"):
        hx.ones(3, 4).view(5, 3)


def test_out_of_bounds_as_strided_is_refused():
    t = hx.zeros(10)
    with pytest.raises(ValueError) as e:
        t.as_strided((4, 4), (3, 1))
    msg = str(e.value)
    assert "as_strided" in msg and "storage holds 10" in msg and "0..12" in msg
    with pytest.raises(ValueError, match="negative"):
        t.as_strided((2,), (1,), -1)
    with pytest.raises(ValueError, match="reach storage elements -1"):
        t.as_strided((3,), (-1,), 1)
    # a view of a slice still sees the whole storage, as in PyTorch
    assert t[8:].as_strided((2, 5), (5, 1), 0).shape == (2, 5)


def test_matmul_shape_mismatch():
    with pytest.raises(ValueError) as e:
        hx.ones(2, 3) @ hx.ones(4, 5)
    msg = str(e.value)
    assert "matmul" in msg and "(2, 3)" in msg and "(4, 5)" in msg and "(3)" in msg
    with pytest.raises(ValueError, match="batch dims"):
        hx.ones(2, 3, 4) @ hx.ones(3, 4, 5)
    with pytest.raises(ValueError, match="at least 1 dim"):
        hx.ones(()) @ hx.ones(3)


def _gpu_tensor():
    try:
        return hx.zeros(2, device="gpu")
    except Exception as exc:  # no adapter on this machine
        pytest.skip(f"no GPU adapter: {exc}")


def test_device_mismatch_message():
    g = _gpu_tensor()
    c = hx.ones(2)
    for fn in (lambda: c + g, lambda: c * g, lambda: c.reshape(1, 2) @ g.reshape(2, 1),
               lambda: hx.cat([c, g]), lambda: hx.where(c > 0, c, g), lambda: c.add_(g)):
        with pytest.raises(RuntimeError) as e:
            fn()
        msg = str(e.value)
        assert "cpu" in msg and "gpu" in msg and ".to(" in msg, msg


@pytest.mark.parametrize("op", ["cross_entropy", "nll_loss"])
def test_a_class_target_on_another_device_is_named(op):
    logits = _gpu_tensor().reshape(1, 2).expand(4, 2)
    target = hx.tensor([0, 1, 1, 0])
    with pytest.raises(RuntimeError, match=rf"{op}: target on cpu, input on gpu; move the "
                                           r"target with \.to\('gpu'\)"):
        getattr(hx.nn.functional, op)(logits, target)


def test_index_errors():
    t = hx.ones(2, 3)
    with pytest.raises(IndexError, match="out of bounds for dim 1 with size 3"):
        t[0, 3]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0]
    with pytest.raises(IndexError, match="dim 2 is out of range"):
        t.sum(2)
    with pytest.raises(IndexError, match="narrow"):
        t.narrow(1, 2, 2)


def test_expand_and_permute_errors():
    with pytest.raises(ValueError, match=r"cannot expand shape \(2, 3\) to \(4, 3\)"):
        hx.ones(2, 3).expand(4, 3)
    with pytest.raises(ValueError, match="fewer dims"):
        hx.ones(2, 3).expand(3)
    with pytest.raises(ValueError, match="one entry per dim"):
        hx.ones(2, 3, 4).permute(0, 1)
    with pytest.raises(ValueError, match="repeat"):
        hx.ones(2, 3).permute(0, 0)


def test_join_errors():
    with pytest.raises(ValueError, match=r"cat: shapes \(2, 3\) and \(2, 4\) differ outside"):
        hx.cat([hx.ones(2, 3), hx.ones(2, 4)], 0)
    with pytest.raises(ValueError, match="non-empty"):
        hx.cat([])
    with pytest.raises(ValueError, match="zero-dimensional tensors cannot be concatenated"):
        hx.cat([hx.tensor(1.0), hx.tensor(2.0)])
    with pytest.raises(ValueError, match=r"stack: .*\(2,\) and \(3,\)"):
        hx.stack([hx.ones(2), hx.ones(3)])
    with pytest.raises(ValueError, match="sum to 4"):
        hx.ones(5).split([1, 3])


def test_dtype_errors():
    with pytest.raises(RuntimeError, match="only floating point"):
        hx.arange(3).requires_grad_()
    with pytest.raises(TypeError, match="unknown dtype name"):
        hx.zeros(2, dtype="float8")
    with pytest.raises(TypeError, match="no Haelixe equivalent"):
        hx.from_numpy(np.zeros(2, np.complex64))
    with pytest.raises(TypeError, match="must be bool"):
        hx.where(hx.ones(2), hx.ones(2), hx.ones(2))
    with pytest.raises(TypeError, match="integer tensor"):
        hx.ones(2, 2).gather(0, hx.ones(2, 2))
    with pytest.raises(TypeError, match="not floating point"):
        hx.arange(3).mean()


def test_argument_errors():
    with pytest.raises(ValueError, match="approximate must be"):
        hx.ones(2).gelu(approximate="fast")
    with pytest.raises(ValueError, match="at least one of min and max"):
        hx.ones(2).clamp()
    with pytest.raises(ValueError, match="gather: index has 1 dims but input has 2"):
        hx.ones(2, 2).gather(0, hx.tensor([0]))
    with pytest.raises(ValueError, match="larger than the input"):
        hx.ones(2, 2).gather(0, hx.tensor([[0, 0, 0]]))
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(hx.ones(2))


def test_float_edge_cases_are_silent_like_pytorch():
    """log(0), 0/0, overflow: inf and NaN with no numpy RuntimeWarning naming Haelixe's
    files, even where warnings are errors; a user's own numpy code still warns."""
    import subprocess
    import sys

    code = ("import haelixe as hx, numpy as np\n"
            "x = hx.tensor([0.0, -1.0, 1e30])\n"
            "y = (x.log(), x / 0.0, x * x * x, x.sqrt(), hx.tensor([0.0]).log().exp())\n"
            "try:\n"
            "    np.log(np.zeros(1))  # the user's own numpy: still an error here\n"
            "    raise SystemExit('no warning for user code')\n"
            "except RuntimeWarning:\n"
            "    pass\n")
    r = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c", code],
                       capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr, r.stderr


def test_missing_names_point_at_the_closest_thing():
    x = hx.zeros(2)
    with pytest.raises(AttributeError, match=r"hx.Tensor has no sofmax; the closest is "
                                             r"hx.Tensor.softmax"):
        _ = x.sofmax
    with pytest.raises(AttributeError, match=r"the closest is hx.Tensor.clone \(Haelixe has "
                                             r"no page-locked memory"):
        x.pin_memory()
    with pytest.raises(AttributeError, match=r"hx has no sofmax; the closest is hx.softmax"):
        _ = hx.sofmax


@pytest.mark.parametrize("call", [
    # an index larger than the input outside the scatter dim, or than src anywhere
    lambda: hx.randn(2, 3, 10).scatter(1, hx.zeros(3, 4, 5).long(), hx.randn(10, 10, 10)),
    lambda: hx.randn(10, 3, 10).scatter(1, hx.zeros(3, 4, 5).long(), hx.randn(10, 3, 10)),
    lambda: hx.randn(4, 5).scatter_add(0, hx.zeros(4, 5).long(), hx.randn(2, 5)),
    lambda: hx.randn(4, 5).scatter(0, hx.zeros(4).long(), hx.randn(4, 5)),
    # a class-index target of the wrong shape, a weight of the wrong length
    lambda: hx.nn.functional.cross_entropy(hx.randn(32, 10), hx.zeros(32, 1).long()),
    lambda: hx.nn.functional.cross_entropy(hx.randn(4, 3), hx.zeros(4).long(),
                                           weight=hx.ones(2)),
])
def test_scatter_and_class_target_shapes_raise_pytorchs_runtime_error(call):
    # (PyTorch raises a RuntimeError for each; numpy-style callers still see a ValueError)
    with pytest.raises(RuntimeError, match="scatter|cross_entropy") as e:
        call()
    assert isinstance(e.value, ValueError)


def test_scatter_takes_an_index_smaller_than_input_and_src_as_pytorch():
    torch = pytest.importorskip("torch")
    g = np.random.default_rng(0)
    x, src = g.standard_normal((4, 5, 6)), g.standard_normal((4, 5, 6))
    index = g.integers(0, 3, (3, 4, 5))
    for dim in (0, 1, 2, -1):
        got = hx.tensor(x).scatter(dim, hx.tensor(index), hx.tensor(src))
        want = torch.tensor(x).scatter(dim, torch.tensor(index), torch.tensor(src))
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert hx.zeros(3).scatter(0, hx.zeros(0).long(), hx.ones(0)).shape == (3,)


def test_an_unknown_padding_mode_raises_pytorchs_not_implemented_error():
    with pytest.raises(NotImplementedError, match="pad: mode must be one of"):
        hx.nn.functional.pad(hx.zeros(3, 3, 3), (3, 0), mode="typo")
    with pytest.raises(ValueError):  # (an OpError too)
        hx.nn.functional.pad(hx.zeros(3, 3, 3), (3, 0), mode="typo")
