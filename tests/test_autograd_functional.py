"""hx.autograd.functional (torch.autograd.functional): jacobian, hessian, vjp, jvp, hvp,
vhp against PyTorch's in float64, in each of PyTorch's input/output shapes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.autograd.functional as TF

import haelixe as hx
from haelixe.autograd import functional as AF

RNG = np.random.default_rng(0)
X, Y = RNG.standard_normal((2, 3)), RNG.standard_normal(3)
V_OUT2 = RNG.standard_normal((2, 3))


def both(*arrays):
    return (tuple(hx.tensor(a) for a in arrays), tuple(torch.tensor(a) for a in arrays))


def same(h, t):
    """Equal values in the same nesting (tuple where PyTorch has a tuple)."""
    if isinstance(t, torch.Tensor):
        assert isinstance(h, hx.Tensor), type(h)
        assert tuple(h.shape) == tuple(t.shape)
        np.testing.assert_allclose(h.detach().numpy(), t.detach().numpy(), rtol=1e-12,
                                   atol=1e-12)
        return
    assert isinstance(h, tuple) and len(h) == len(t), (type(h), len(t))
    for a, b in zip(h, t):
        same(a, b)


def f_tensor(lib):
    return lambda x: (x.sin() * x).exp()          # (2, 3) -> (2, 3)


def f_two_in(lib):
    return lambda x, y: (x * y).tanh().sum(0)     # (2, 3), (3,) -> (3,)


def f_two_out(lib):
    return lambda x: (x.cos(), (x ** 2).sum())    # (2, 3) -> ((2, 3), ())


def f_scalar(lib):
    return lambda x, y: (x.sin() * y).sum() + (x ** 3).sum() * (y ** 2).sum()


@pytest.mark.parametrize("make,args,as_tuple", [
    (f_tensor, (X,), False), (f_tensor, (X,), True), (f_two_in, (X, Y), True),
    (f_two_out, (X,), False), (f_two_out, (X,), True)])
@pytest.mark.parametrize("vectorize", [False, True])
def test_jacobian_matches_torch(make, args, as_tuple, vectorize):
    h, t = both(*args)
    if not as_tuple:
        h, t = h[0], t[0]
    same(AF.jacobian(make(hx), h, vectorize=vectorize),
         TF.jacobian(make(torch), t, vectorize=vectorize))


def test_jacobian_of_a_0d_input_and_a_constant_output():
    h, t = both(np.array(0.7))
    same(AF.jacobian(lambda x: x * x.exp(), h[0]), TF.jacobian(lambda x: x * x.exp(), t[0]))
    # an output that does not depend on the input: zeros, with PyTorch's shape
    same(AF.jacobian(lambda x: (x * 0 + 1, hx.ones(2, dtype=hx.float64)), h),
         TF.jacobian(lambda x: (x * 0 + 1, torch.ones(2, dtype=torch.float64)), t))


@pytest.mark.parametrize("as_tuple", [False, True])
def test_hessian_matches_torch(as_tuple):
    if as_tuple:
        h, t = both(X, Y)
        same(AF.hessian(f_scalar(hx), h), TF.hessian(f_scalar(torch), t))
    else:
        h, t = both(X)
        fun = lambda x: (x.sin() * x ** 2).sum()  # noqa: E731
        res = AF.hessian(fun, h[0])
        assert tuple(res.shape) == (2, 3, 2, 3)
        same(res, TF.hessian(fun, t[0]))


def test_vjp_jvp_match_torch_with_tuples():
    h, t = both(X, Y)
    hv, tv = both(V_OUT2[0])
    same(AF.vjp(f_two_in(hx), h, hv[0]), TF.vjp(f_two_in(torch), t, tv[0]))
    hv, tv = both(V_OUT2, Y[::-1].copy())
    same(AF.jvp(f_two_in(hx), h, hv), TF.jvp(f_two_in(torch), t, tv))
    # tuple outputs take a tuple v
    h, t = both(X)
    hv, tv = both(V_OUT2, np.array(1.5))
    same(AF.vjp(f_two_out(hx), h[0], hv), TF.vjp(f_two_out(torch), t[0], tv))
    hv, tv = both(V_OUT2)
    same(AF.jvp(f_two_out(hx), h[0], hv[0]), TF.jvp(f_two_out(torch), t[0], tv[0]))


def test_v_may_be_none_only_for_one_element():
    h, t = both(np.array([0.3]))
    fun = lambda x: (x.exp() * 2).sum()  # noqa: E731
    same(AF.vjp(fun, h[0]), TF.vjp(fun, t[0]))
    same(AF.jvp(fun, h[0]), TF.jvp(fun, t[0]))
    same(AF.hvp(fun, h[0]), TF.hvp(fun, t[0]))
    h, _ = both(X)
    with pytest.raises(RuntimeError, match="v can only be None"):
        AF.vjp(lambda x: x * 2, h[0])
    with pytest.raises(RuntimeError, match="v can only be None"):
        AF.jvp(lambda x: x.sum(), h[0])


@pytest.mark.parametrize("op", ["hvp", "vhp"])
def test_hvp_vhp_match_torch(op):
    h, t = both(X, Y)
    hv, tv = both(V_OUT2, Y * 3)
    same(getattr(AF, op)(f_scalar(hx), h, hv), getattr(TF, op)(f_scalar(torch), t, tv))
    h, t = both(X)
    hv, tv = both(V_OUT2)
    fun = lambda x: (x.sin() * x ** 2).sum()  # noqa: E731
    same(getattr(AF, op)(fun, h[0], hv[0]), getattr(TF, op)(fun, t[0], tv[0]))


def test_create_graph_results_can_be_differentiated_again():
    hx_x = hx.tensor(X, requires_grad=True)
    t_x = torch.tensor(X, requires_grad=True)
    fun = lambda x: (x ** 3).sin()  # noqa: E731
    hj = AF.jacobian(fun, hx_x, create_graph=True)
    tj = TF.jacobian(fun, t_x, create_graph=True)
    assert hj.requires_grad and tj.requires_grad
    (hj ** 2).sum().backward()
    (tj ** 2).sum().backward()
    np.testing.assert_allclose(hx_x.grad.numpy(), t_x.grad.numpy(), rtol=1e-12, atol=1e-12)
    # without create_graph nothing keeps history
    assert not AF.jacobian(fun, hx_x).requires_grad
    out, prod = AF.vjp(fun, hx_x, hx.tensor(V_OUT2))
    assert not out.requires_grad and not prod.requires_grad
    # hvp with create_graph: its gradient with respect to x
    hx_x.grad = None
    t_x.grad = None
    hv, tv = hx.tensor(V_OUT2), torch.tensor(V_OUT2)
    g = lambda x: (x.sin() * x ** 2).sum()  # noqa: E731
    AF.hvp(g, hx_x, hv, create_graph=True)[1].sum().backward()
    TF.hvp(g, t_x, tv, create_graph=True)[1].sum().backward()
    np.testing.assert_allclose(hx_x.grad.numpy(), t_x.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_unused_inputs_give_zeros_and_strict_raises():
    h, t = both(X, Y)
    fun = lambda x, y: x * 2  # noqa: E731
    same(AF.jacobian(fun, h), TF.jacobian(fun, t))
    hv, tv = both(V_OUT2)
    same(AF.vjp(fun, h, hv[0]), TF.vjp(fun, t, tv[0]))
    for fn, tfn, args in [(AF.jacobian, TF.jacobian, ()), (AF.vjp, TF.vjp, (hv[0],))]:
        with pytest.raises(RuntimeError, match="independent of input 1") as ours:
            fn(fun, h, *args, strict=True)
        with pytest.raises(RuntimeError, match="independent of input 1"):
            tfn(fun, t, *((tv[0],) if args else ()), strict=True)
        assert "strict mode" in str(ours.value)
    const = lambda x: hx.ones(3, dtype=hx.float64)  # noqa: E731
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not "
                                           "require gradients"):
        AF.vjp(const, h[0], hx.ones(3, dtype=hx.float64), strict=True)
    # linear functions have a zero Hessian: strict rejects it, as PyTorch does
    lin = lambda x: (x * 2).sum()  # noqa: E731
    with pytest.raises(RuntimeError, match="jacobian of the user-provided function with "
                                           "respect to input 0 is independent"):
        AF.hessian(lin, h[0], strict=True)
    with pytest.raises(RuntimeError, match="jacobian of the user-provided function with "
                                           "respect to input 0 is independent"):
        TF.hessian(lambda x: (x * 2).sum(), t[0], strict=True)
    same(AF.hessian(lin, h[0]), TF.hessian(lambda x: (x * 2).sum(), t[0]))


def test_argument_errors_as_torch():
    h, _ = both(X)
    with pytest.raises(TypeError, match="inputs given to jacobian must be either a Tensor or "
                                        "a tuple of Tensors"):
        AF.jacobian(lambda x: x, [h[0], 3])
    with pytest.raises(TypeError, match="outputs of the user-provided function given to vjp"):
        AF.vjp(lambda x: 3, h[0], h[0])
    with pytest.raises(RuntimeError, match=r"v has invalid size: should be \(2, 3\) but got "
                                           r"\(3,\)"):
        AF.vjp(lambda x: x * 2, h[0], hx.tensor(Y))
    with pytest.raises(RuntimeError, match="v is a tuple of invalid length: should be 2 but "
                                           "got 1"):
        AF.jvp(lambda x, y: x * y, (h[0], h[0]), (h[0],))
    with pytest.raises(RuntimeError, match="should contain a single element"):
        AF.hessian(lambda x: x * 2, h[0])
    with pytest.raises(RuntimeError, match="should return a single Tensor"):
        AF.vhp(lambda x: (x.sum(), x.sum()), h[0], h[0])
    with pytest.raises(RuntimeError, match="`strict=True` and `vectorized=True`"):
        AF.jacobian(lambda x: x, h[0], strict=True, vectorize=True)
    with pytest.raises(ValueError, match="Expected strategy"):
        AF.jacobian(lambda x: x, h[0], strategy="sideways")
    with pytest.raises(NotImplementedError, match="only implemented for `vectorize=True`"):
        AF.jacobian(lambda x: x, h[0], strategy="forward-mode")
    same(AF.jacobian(lambda x: x.exp(), h[0], strategy="forward-mode", vectorize=True),
         TF.jacobian(lambda x: x.exp(), torch.tensor(X), strategy="forward-mode",
                     vectorize=True))


def test_inputs_that_do_not_require_grad_are_left_alone():
    x = hx.tensor(X)
    AF.jacobian(lambda a: a * 2, x)
    AF.hessian(lambda a: (a ** 3).sum(), x)
    assert not x.requires_grad and x.grad is None


def test_import_torch_autograd_functional_through_the_alias(tmp_path):
    from test_torch_alias import run_program

    r = run_program(tmp_path, """
        import torch
        import torch.autograd.functional as AF
        from torch.autograd.functional import hessian
        x = torch.tensor([1.0, 2.0], dtype=torch.float64)
        print(AF.jacobian(lambda a: a ** 2, x).tolist(), hessian(lambda a: (a ** 3).sum(),
              x).tolist(), torch.autograd.functional is AF)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[0] == "[[2.0, 0.0], [0.0, 4.0]] [[6.0, 0.0], [0.0, 12.0]] True"


@pytest.mark.gpu
def test_on_the_gpu_equals_the_cpu(be):
    x = X.astype(np.float32)
    fun = lambda a: (a.sin() * a ** 2).sum()  # noqa: E731
    cpu, gpu = hx.tensor(x), hx.tensor(x, device="gpu")
    hg = AF.hessian(fun, gpu)
    assert hg.device.type == "gpu"
    np.testing.assert_allclose(hg.cpu().numpy(), AF.hessian(fun, cpu).numpy(), rtol=1e-5,
                               atol=1e-5)
    v = hx.tensor(V_OUT2.astype(np.float32))
    np.testing.assert_allclose(AF.jvp(lambda a: a.exp() * a, gpu, v.to("gpu"))[1].cpu().numpy(),
                               AF.jvp(lambda a: a.exp() * a, cpu, v)[1].numpy(), rtol=1e-5,
                               atol=1e-5)
