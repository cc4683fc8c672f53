"""hx.func (torch.func) and nn.utils.stateless against PyTorch's: grad, grad_and_value,
vjp, jvp, jacrev, jacfwd, hessian, vmap, functional_call and stack_module_state on
small cases (values, structures, nesting, errors), float64 throughout."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.func as tf

import haelixe as hx
import haelixe.nn as hnn
import haelixe.nn.functional as HF
from haelixe import func as hf

RNG = np.random.default_rng(0)


def arr(*shape):
    return RNG.standard_normal(shape)


def H(a, grad=False):
    return hx.tensor(np.asarray(a, dtype=np.float64)).requires_grad_(grad)


def T(a, grad=False):
    t = torch.tensor(np.asarray(a, dtype=np.float64))
    return t.requires_grad_() if grad else t


def N(t):
    return t.detach().cpu().numpy()


def close(h, t, tol=1e-10):
    """Two results of one structure (tensors in tuples, lists, dicts) equal."""
    if isinstance(t, torch.Tensor):
        assert isinstance(h, hx.Tensor), type(h)
        assert tuple(h.shape) == tuple(t.shape)
        np.testing.assert_allclose(N(h), t.detach().numpy(), rtol=tol, atol=tol)
    elif isinstance(t, dict):
        assert isinstance(h, dict) and list(h) == list(t)
        for k in t:
            close(h[k], t[k], tol)
    elif isinstance(t, (tuple, list)):
        assert type(h) is type(t) and len(h) == len(t), (type(h), type(t))
        for a, b in zip(h, t):
            close(a, b, tol)
    else:
        assert h == t


# -- grad -------------------------------------------------------------------------------
def f_sin(x):
    return (x.sin() * x).sum()


def f_two(x, y):
    return (x * y.exp()).sum() + (x ** 2).sum()


def test_grad_values_match_pytorch():
    x, y = arr(3, 2), arr(3, 2)
    close(hf.grad(f_sin)(H(x)), tf.grad(f_sin)(T(x)))
    for argnums in (0, 1, -1, (0, 1), (1, 0)):
        close(hf.grad(f_two, argnums)(H(x), H(y)), tf.grad(f_two, argnums)(T(x), T(y)))


def test_grad_of_a_dict_and_a_nested_tuple_has_their_structure():
    a, b, c = arr(2), arr(2, 2), arr(2)

    def f(p, q):
        return (p["w"] @ p["v"] * q[0][1]).sum() + q[1].prod()

    hx_args = ({"w": H(b), "v": H(a)}, ((H(c), H(c)), H(a)))
    t_args = ({"w": T(b), "v": T(a)}, ((T(c), T(c)), T(a)))
    close(hf.grad(f)(*hx_args), tf.grad(f)(*t_args))
    close(hf.grad(f, argnums=(0, 1))(*hx_args), tf.grad(f, argnums=(0, 1))(*t_args))


def test_grad_and_value_and_has_aux():
    x = arr(4)

    def f(x, scale=1.0):
        return (x.tanh() * scale).sum(), {"sq": x * x}

    h = hf.grad_and_value(f, has_aux=True)(H(x), scale=3.0)
    t = tf.grad_and_value(f, has_aux=True)(T(x), scale=3.0)
    close(h, t)
    assert not h[1][0].requires_grad and not h[1][1]["sq"].requires_grad
    g, aux = hf.grad(f, has_aux=True)(H(x))
    close((g, aux), tf.grad(f, has_aux=True)(T(x)))
    close(hf.grad_and_value(f_sin)(H(x)), tf.grad_and_value(f_sin)(T(x)))


def test_an_unused_input_gets_a_zero_gradient():
    x, y = arr(3), arr(2)
    h = hf.grad(lambda a, b: (a * 2).sum(), argnums=(0, 1))(H(x), H(y))
    np.testing.assert_array_equal(N(h[1]), np.zeros(2))
    np.testing.assert_array_equal(N(h[0]), np.full(3, 2.0))


def test_grad_of_grad_and_a_closure_over_the_outer_input():
    x = arr(3)
    close(hf.grad(lambda a: hf.grad(f_sin)(a).sum())(H(x)),
          tf.grad(lambda a: tf.grad(f_sin)(a).sum())(T(x)))

    def outer(lib):
        return lambda a: lib.grad(lambda b: (a * b * b).sum())(a * 1.5).pow(2).sum()

    close(hf.grad(outer(hf))(H(x)), tf.grad(outer(tf))(T(x)))
    third = hf.grad(lambda a: hf.grad(lambda b: hf.grad(f_sin)(b).sum())(a).sum())(H(x))
    close(third, tf.grad(lambda a: tf.grad(lambda b: tf.grad(f_sin)(b).sum())(a).sum())(T(x)))


def test_grad_keeps_the_callers_graph_where_the_input_requires_grad():
    x = arr(3)
    hx_x, t_x = H(x, True), T(x, True)
    g = hf.grad(lambda a: (a ** 3).sum())(hx_x)
    assert g.requires_grad
    g.sum().backward()
    tf.grad(lambda a: (a ** 3).sum())(t_x).sum().backward()
    close(hx_x.grad, t_x.grad)
    assert not hf.grad(f_sin)(H(x)).requires_grad


def test_grad_through_a_first_order_kernel_gives_the_values_without_history():
    x, w = arr(2, 3), arr(4, 3)
    hx_x, t_x = H(x), T(x)

    def loss(lib, F, x):
        return lambda w: (F.layer_norm(F.linear(x, w), (4,)) ** 3).sum()

    h = hf.grad(loss(hx, HF, hx_x))(H(w, True))
    close(h, tf.grad(loss(torch, torch.nn.functional, t_x))(T(w, True)))
    assert not h.requires_grad
    close(hf.jvp(loss(hx, HF, hx_x), (H(w, True),), (H(w),)),
          tf.jvp(loss(torch, torch.nn.functional, t_x), (T(w),), (T(w),)))
    with pytest.raises(RuntimeError, match="LayerNorm is a fused kernel with a first "
                                           "derivative only"):
        hf.hessian(loss(hx, HF, hx_x))(H(w))


def test_second_derivatives_through_linear():
    m = hnn.Sequential(hnn.Linear(3, 4), hnn.Tanh(), hnn.Linear(4, 1)).double()
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(),
                             torch.nn.Linear(4, 1)).double()
    _copy_weights(m, tm)
    x = arr(3)
    close(hf.hessian(lambda a: m(a).sum())(H(x)), tf.hessian(lambda a: tm(a).sum())(T(x)))
    params = {k: v.detach() for k, v in m.named_parameters()}
    tparams = {k: v.detach() for k, v in tm.named_parameters()}
    xs = arr(2, 3)
    hxs, txs = H(xs), T(xs)
    close(hf.hessian(lambda p: hf.functional_call(m, p, hxs).pow(2).sum())(params),
          tf.hessian(lambda p: tf.functional_call(tm, p, txs).pow(2).sum())(tparams))
    w, b = H(arr(2, 3), True), H(arr(2), True)
    tw, tb = T(N(w), True), T(N(b), True)
    for a, ta in ((H(x), T(x)), (H(xs), T(xs))):
        g = hx.autograd.grad(HF.linear(a, w, b).pow(3).sum(), (w, b), create_graph=True)
        tg = torch.autograd.grad(torch.nn.functional.linear(ta, tw, tb).pow(3).sum(), (tw, tb),
                                 create_graph=True)
        close(hx.autograd.grad((g[0] * g[0]).sum() + g[1].sum(), (w, b)),
              torch.autograd.grad((tg[0] * tg[0]).sum() + tg[1].sum(), (tw, tb)))
    with pytest.raises(RuntimeError, match="first derivative only"):
        g = hx.autograd.grad(HF.linear(H(x), w, b, activation="gelu").sum(), w,
                             create_graph=True)


def test_grad_errors_as_pytorchs():
    x = H(arr(3))
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor, "
                                           "got tensor with 1 dims"):
        hf.grad(lambda a: a)(x)
    with pytest.raises(RuntimeError, match="to return a Tensor, got <class 'float'>"):
        hf.grad(lambda a: 1.0)(x)
    with pytest.raises(RuntimeError, match="Got argnum=2, but only 1 positional inputs"):
        hf.grad(f_sin, argnums=2)(x)
    with pytest.raises(RuntimeError, match="argnums elements must be unique, got \\(0, 0\\)"):
        hf.grad(f_two, argnums=(0, -2))(x, x)
    with pytest.raises(RuntimeError, match="argnums must be non-empty"):
        hf.grad(f_two, argnums=())(x, x)
    with pytest.raises(RuntimeError, match="argnums must be int or Tuple"):
        hf.grad(f_two, argnums=[0])(x, x)
    with pytest.raises(ValueError, match="Thing passed to transform API must be Tensor, got "
                                         "<class 'float'>"):
        hf.grad(lambda a: a)(2.0)
    with pytest.raises(RuntimeError, match="should be a tuple: \\(output, aux\\) if has_aux"):
        hf.grad(f_sin, has_aux=True)(x)


# -- vjp ------------------------------------------------------------------------------
def test_vjp_values_structures_and_repeated_calls():
    x, y, v = arr(3), arr(3), arr(3)

    def f(a, b):
        return {"p": a * b.sin(), "q": (a.exp(), b * 2)}

    ho, hfn = hf.vjp(f, H(x), H(y))
    to, tfn = tf.vjp(f, T(x), T(y))
    close(ho, to)
    assert not ho["p"].requires_grad
    hcot = {"p": H(v), "q": (H(y), H(x))}
    tcot = {"p": T(v), "q": (T(y), T(x))}
    close(hfn(hcot), tfn(tcot))
    close(hfn(hcot), tfn(tcot))  # the graph is kept for another call
    out, fn, aux = hf.vjp(lambda a: (a.cos(), a.sum()), H(x), has_aux=True)
    tout, tfn2, taux = tf.vjp(lambda a: (a.cos(), a.sum()), T(x), has_aux=True)
    close((out, fn(H(v)), aux), (tout, tfn2(T(v)), taux))


def test_a_vjp_function_differentiated_by_an_outer_transform():
    x, v = arr(3), arr(3)

    def f(a):
        return a.sin() * a

    _, hfn = hf.vjp(f, H(x))
    _, tfn = tf.vjp(f, T(x))
    close(hf.grad(lambda c: (hfn(c)[0] ** 2).sum())(H(v)),
          tf.grad(lambda c: (tfn(c)[0] ** 2).sum())(T(v)))
    close(hf.grad(lambda a: hf.vjp(f, a)[1](H(v))[0].sum())(H(x)),
          tf.grad(lambda a: tf.vjp(f, a)[1](T(v))[0].sum())(T(x)))


def test_vjp_errors():
    x = H(arr(2, 3))
    _, fn = hf.vjp(lambda a: (a, a), x)
    with pytest.raises(RuntimeError, match="Expected pytree structure of cotangents to be the "
                                           "same as pytree structure of outputs"):
        fn(hx.ones(2, 3, dtype=hx.float64))
    _, fn = hf.vjp(lambda a: a, x)
    with pytest.raises(RuntimeError, match="Mismatch in shape: grad_output\\[0\\]"):
        fn(hx.ones(2, dtype=hx.float64))
    with pytest.raises(RuntimeError, match="expected f\\(\\*primals\\) to return only tensors"):
        hf.vjp(lambda a: 3, x)
    with pytest.raises(RuntimeError, match="must be floating-point"):
        hf.vjp(lambda a: (a > 0), x)
    with pytest.raises(RuntimeError, match="vjp\\(f, \\*primals\\): output of function f should "
                                           "be a tuple"):
        hf.vjp(lambda a: a, x, has_aux=True)


# -- jvp ------------------------------------------------------------------------------
def test_jvp_values_match_pytorch():
    x, y, u, v = arr(3), arr(3), arr(3), arr(3)

    def f(a, b):
        return (a * b.sin(), {"e": (a * b).exp().sum()})

    close(hf.jvp(f, (H(x), H(y)), (H(u), H(v))), tf.jvp(f, (T(x), T(y)), (T(u), T(v))))
    close(hf.jvp(lambda a: (a.tanh(), a), (H(x),), (H(u),), has_aux=True),
          tf.jvp(lambda a: (a.tanh(), a), (T(x),), (T(u),), has_aux=True))
    close(hf.jvp(lambda p: p["a"] * p["b"], ({"a": H(x), "b": H(y)},),
                 ({"a": H(u), "b": H(v)},)),
          tf.jvp(lambda p: p["a"] * p["b"], ({"a": T(x), "b": T(y)},),
                 ({"a": T(u), "b": T(v)},)))


JVP_CASES = {
    "softmax": lambda lib, a: (a.softmax(-1) * a).sum(0),
    "matmul_relu": lambda lib, a: (a @ a.T).relu(),
    "cumsum_logsumexp": lambda lib, a: a.cumsum(1).logsumexp(0),
    "index_where": lambda lib, a: lib.where(a > 0, a[:, [2, 0, 1]], a * a),
    "views": lambda lib, a: a.T.reshape(3, 2).permute(1, 0)[:, 1:] / (a.abs() + 1).sum(),
    "norm_max": lambda lib, a: a.norm(dim=1) * a.amax(1) + a.sigmoid().prod(),
}


@pytest.mark.parametrize("name", sorted(JVP_CASES))
def test_jvp_and_jacfwd_through_common_ops(name):
    x, u = arr(2, 3), arr(2, 3)
    f = JVP_CASES[name]
    close(hf.jvp(lambda a: f(hx, a), (H(x),), (H(u),)),
          tf.jvp(lambda a: f(torch, a), (T(x),), (T(u),)))
    close(hf.jacfwd(lambda a: f(hx, a))(H(x)), tf.jacfwd(lambda a: f(torch, a))(T(x)))
    close(hf.hessian(lambda a: f(hx, a).sum())(H(x)),
          tf.hessian(lambda a: f(torch, a).sum())(T(x)))


def test_jvp_through_a_fused_kernel_and_of_a_constant_output():
    x, w, u = arr(2, 3), arr(4, 3), arr(2, 3)
    close(hf.jvp(lambda a: HF.linear(a, H(w)), (H(x),), (H(u),)),
          tf.jvp(lambda a: torch.nn.functional.linear(a, T(w)), (T(x),), (T(u),)))
    c = arr(2)
    close(hf.jvp(lambda a: H(c), (H(x),), (H(u),)), tf.jvp(lambda a: T(c), (T(x),), (T(u),)))
    with pytest.raises(RuntimeError, match="independent of the inputs. This is not allowed "
                                           "with strict=True"):
        hf.jvp(lambda a: H(c), (H(x),), (H(u),), strict=True)


def test_jvp_errors():
    x = H(arr(3))
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        hf.jvp(f_sin, x, x)
    with pytest.raises(RuntimeError, match="Expected primals and tangents to have the same "
                                           "python structure"):
        hf.jvp(f_two, (x, x), (x,))
    with pytest.raises(RuntimeError, match="Expected primals to only contain Tensors"):
        hf.jvp(f_sin, (1.0,), (1.0,))
    with pytest.raises(RuntimeError, match="tangent of shape \\(2,\\)"):
        hf.jvp(f_sin, (x,), (hx.ones(2, dtype=hx.float64),))


# -- Jacobians and the Hessian --------------------------------------------------------
def f_vec(x, y):
    return {"a": x.sin() * y[0], "b": (x[:, None] * y[None, :]).tanh()}


@pytest.mark.parametrize("kind", ["jacrev", "jacfwd"])
def test_jacobians_match_pytorch(kind):
    x, y = arr(3), arr(2)
    hj, tj = getattr(hf, kind), getattr(tf, kind)
    close(hj(f_sin)(H(x)), tj(f_sin)(T(x)))
    for argnums in (0, 1, (0, 1), (1,)):
        close(hj(f_vec, argnums)(H(x), H(y)), tj(f_vec, argnums)(T(x), T(y)))
    close(hj(lambda p: (p["u"] * p["v"], p["u"].sum()))({"u": H(x), "v": H(x)}),
          tj(lambda p: (p["u"] * p["v"], p["u"].sum()))({"u": T(x), "v": T(x)}))
    close(hj(lambda a: (a.exp(), a * 2), has_aux=True)(H(x)),
          tj(lambda a: (a.exp(), a * 2), has_aux=True)(T(x)))
    zero = arr(0)
    close(hj(lambda a: a * 2)(H(zero)), tj(lambda a: a * 2)(T(zero)))


def test_jacobian_of_a_module_with_fused_kernels():
    m = hnn.Sequential(hnn.Linear(3, 4), hnn.Tanh(), hnn.Linear(4, 2)).double()
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(),
                             torch.nn.Linear(4, 2)).double()
    tm.load_state_dict({k: torch.tensor(N(v)) for k, v in m.state_dict().items()})
    x = arr(3)
    close(hf.jacrev(m)(H(x)), tf.jacrev(tm)(T(x)))
    close(hf.jacfwd(m)(H(x)), tf.jacfwd(tm)(T(x)))


def test_hessian_matches_pytorch():
    x, y = arr(3), arr(2)
    close(hf.hessian(f_sin)(H(x)), tf.hessian(f_sin)(T(x)))

    def g(a, b):
        return (a.sin()[:, None] * b.exp()[None, :]).sum() + (a ** 3).sum()

    close(hf.hessian(g, argnums=(0, 1))(H(x), H(y)), tf.hessian(g, argnums=(0, 1))(T(x), T(y)))
    close(hf.jacrev(hf.jacrev(g))(H(x), H(y)), tf.jacrev(tf.jacrev(g))(T(x), T(y)))


def test_jacobian_errors_and_randomness():
    with pytest.raises(ValueError, match="`chunk_size` should be greater than 0"):
        hf.jacrev(f_sin, chunk_size=0)
    with pytest.raises(RuntimeError, match="Only allowed values for randomness"):
        hf.jacfwd(f_sin, randomness="often")(H(arr(2)))
    with pytest.raises(RuntimeError, match="called random operation while in randomness "
                                           "error mode"):
        hf.jacfwd(lambda a: a * hx.rand(3, dtype=hx.float64))(H(arr(3)))
    j = hf.jacfwd(lambda a: a * hx.rand(3, dtype=hx.float64), randomness="same")(H(arr(3)))
    assert j.shape == (3, 3) and np.count_nonzero(N(j) - np.diag(np.diag(N(j)))) == 0
    with pytest.raises(RuntimeError, match="expected f\\(\\*primals\\) to return only tensors"):
        hf.jacrev(lambda a: [a, 1])(H(arr(2)))


# -- vmap -----------------------------------------------------------------------------
def test_vmap_in_dims_out_dims_and_kwargs():
    x, y, z = arr(2, 3), arr(3, 4), arr(4, 2)

    def f(a, b, scale=1.0):
        return (a * b.sum() * scale, a.sum())

    close(hf.vmap(f)(H(x), H(y[:2, :3])), tf.vmap(f)(T(x), T(y[:2, :3])))
    cases = [((1, None), 0), ((-1, 0), (1, 0)), ((None, -2), (-1, 0)), ((0, 1), (0, -1))]
    a_of = {(1, None): (x.T.copy(), z), (-1, 0): (x, arr(3, 5)),
            (None, -2): (x, arr(7, 3)), (0, 1): (x, arr(4, 2))}
    for in_dims, out_dims in cases:
        a, b = a_of[in_dims]
        close(hf.vmap(f, in_dims, out_dims)(H(a), H(b), scale=2.0),
              tf.vmap(f, in_dims, out_dims)(T(a), T(b), scale=2.0))


def test_vmap_of_nested_structures():
    x, y, w = arr(3, 2), arr(2, 3), arr(2)

    def f(p, q):
        return {"s": p["a"] * q[0] + p["b"], "t": [q[1] * 2, p["a"].sum()]}

    in_dims = ({"a": 0, "b": None}, (1, 0))
    hargs = ({"a": H(x), "b": H(w)}, (H(y), H(x)))
    targs = ({"a": T(x), "b": T(w)}, (T(y), T(x)))
    close(hf.vmap(f, in_dims)(*hargs), tf.vmap(f, in_dims)(*targs))
    out_dims = {"s": 1, "t": [0, 0]}
    close(hf.vmap(f, in_dims, out_dims)(*hargs), tf.vmap(f, in_dims, out_dims)(*targs))
    close(hf.vmap(lambda p: p["a"] @ p["b"], in_dims=({"a": 0, "b": None},))(
        {"a": H(x), "b": H(w)}),
        tf.vmap(lambda p: p["a"] @ p["b"], in_dims=({"a": 0, "b": None},))(
        {"a": T(x), "b": T(w)}))


def test_nested_vmap_and_an_unmapped_output():
    x, y = arr(2, 3), arr(4, 3)
    dot = lambda a, b: (a * b).sum()  # noqa: E731
    close(hf.vmap(hf.vmap(dot, (None, 0)), (0, None))(H(x), H(y)),
          tf.vmap(tf.vmap(dot, (None, 0)), (0, None))(T(x), T(y)))
    c = H(arr(5))
    out = hf.vmap(lambda a: (a * 2, c, 7), out_dims=(0, None, None))(H(x))
    assert out[1] is c and out[2] == 7 and out[0].shape == (2, 3)
    assert hf.vmap(lambda a: a.sum() * 0 + 1.0, out_dims=None)(H(x)).shape == ()
    tc = T(N(c))
    close(hf.vmap(lambda a: c)(H(x)), tf.vmap(lambda a: tc)(T(x)))
    close(hf.grad(lambda a: hf.vmap(f_sin)(a).pow(2).sum())(H(x)),
          tf.grad(lambda a: tf.vmap(f_sin)(a).pow(2).sum())(T(x)))
    close(hf.jacrev(hf.vmap(lambda a: a.sin() * a[0]))(H(x)),
          tf.jacrev(tf.vmap(lambda a: a.sin() * a[0]))(T(x)))


def test_vmap_over_an_empty_dim_and_a_strided_input():
    e = arr(0, 3)
    close(hf.vmap(lambda a: a * 2)(H(e)), tf.vmap(lambda a: a * 2)(T(e)))
    close(hf.vmap(lambda a: a.sum(), out_dims=0)(H(e)), tf.vmap(lambda a: a.sum())(T(e)))
    x = arr(4, 6)
    close(hf.vmap(lambda a: a.cumsum(0), in_dims=1)(H(x)[:, ::2]),
          tf.vmap(lambda a: a.cumsum(0), in_dims=1)(T(x)[:, ::2]))
    close(hf.vmap(lambda a: a * 3)(H(x).T), tf.vmap(lambda a: a * 3)(T(x).T))


def test_gradients_flow_through_vmap_to_its_inputs():
    x, y, g = arr(3, 4), arr(3), arr(3, 4)
    hx_x, hx_y, t_x, t_y = H(x, True), H(y, True), T(x, True), T(y, True)

    def f(a, b):
        return (a * b).sin()

    hout = hf.vmap(f, in_dims=(1, None), out_dims=1)(hx_x, hx_y)
    tout = tf.vmap(f, in_dims=(1, None), out_dims=1)(t_x, t_y)
    close(hout, tout)
    hout.backward(H(g))
    tout.backward(T(g))
    close((hx_x.grad, hx_y.grad), (t_x.grad, t_y.grad))


def _copy_weights(hmod, tmod):
    tmod.load_state_dict({k: torch.tensor(N(v)) for k, v in hmod.state_dict().items()})


def test_per_sample_gradients_equal_a_loop_and_pytorchs():
    model = hnn.Sequential(hnn.Linear(3, 5), hnn.ReLU(), hnn.Linear(5, 2)).double()
    tmodel = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(),
                                 torch.nn.Linear(5, 2)).double()
    _copy_weights(model, tmodel)
    xs, ys = arr(6, 3), RNG.integers(0, 2, 6)

    def loss_of(mod, fc, F, lib):
        def loss(params, x, y):
            out = fc(mod, params, (x.unsqueeze(0),))
            return F.cross_entropy(out, y.unsqueeze(0))
        return loss

    params = {k: v.detach() for k, v in model.named_parameters()}
    tparams = {k: v.detach() for k, v in tmodel.named_parameters()}
    hl = loss_of(model, hf.functional_call, HF, hx)
    tl = loss_of(tmodel, tf.functional_call, torch.nn.functional, torch)
    per = hf.vmap(hf.grad(hl), in_dims=(None, 0, 0))(params, H(xs), hx.tensor(ys))
    tper = tf.vmap(tf.grad(tl), in_dims=(None, 0, 0))(tparams, T(xs), torch.tensor(ys))
    close(per, tper)
    for i in range(len(xs)):
        model.zero_grad()
        HF.cross_entropy(model(H(xs[i:i + 1])), hx.tensor(ys[i:i + 1])).backward()
        for k, p in model.named_parameters():
            np.testing.assert_allclose(N(per[k][i]), N(p.grad), rtol=1e-10, atol=1e-12)
    for k, p in model.named_parameters():
        assert p.grad is not None and not per[k].requires_grad


def test_vmap_errors_as_pytorchs():
    x = H(arr(2, 3))
    with pytest.raises(ValueError, match="Expected all tensors to have the same size in the "
                                         "mapped dimension, got sizes \\[2, 3\\]"):
        hf.vmap(lambda a, b: a + b)(x, H(arr(3, 3)))
    with pytest.raises(ValueError, match="in_dims is not compatible with the structure of "
                                         "`inputs`"):
        hf.vmap(lambda a: a, in_dims=(0, 0))(x)
    with pytest.raises(ValueError, match="expected `in_dims` to be int or a \\(potentially "
                                         "nested\\) tuple"):
        hf.vmap(lambda a: a, in_dims=[0])(x)
    with pytest.raises(ValueError, match="We cannot vmap over non-Tensor arguments"):
        hf.vmap(lambda a, b: a * b)(x, 2.0)
    with pytest.raises(ValueError, match="expected in_dim to satisfy -2 <= in_dim < 2"):
        hf.vmap(lambda a: a, in_dims=2)(x)
    with pytest.raises(ValueError, match="got no inputs"):
        hf.vmap(lambda: x)()
    with pytest.raises(ValueError, match="Expected at least one Tensor to vmap over"):
        hf.vmap(lambda a: a, in_dims=(None,))(x)
    with pytest.raises(ValueError, match="can not return a BatchedTensor when out_dim is None"):
        hf.vmap(lambda a: a, out_dims=None)(x)
    with pytest.raises(ValueError, match="must only return Tensors, got type <class 'float'>"):
        hf.vmap(lambda a: 1.0)(x)
    with pytest.raises(ValueError, match="out_dims is not compatible with the structure of "
                                         "`outputs`"):
        hf.vmap(lambda a: (a, a), out_dims=(0, 0, 0))(x)
    with pytest.raises(ValueError, match="`out_dims` must be an int, None or a python "
                                         "collection of ints"):
        hf.vmap(lambda a: a, out_dims="0")(x)
    with pytest.raises(IndexError, match="Dimension out of range \\(expected to be in range of "
                                         "\\[-2, 1\\], but got 3\\)"):
        hf.vmap(lambda a: a, out_dims=3)(x)
    with pytest.raises(RuntimeError, match="Only allowed values for randomness are 'error', "
                                           "'different', or 'same'. Got x"):
        hf.vmap(lambda a: a, randomness="x")
    with pytest.raises(ValueError, match="chunk_size should be None or greater than 0"):
        hf.vmap(lambda a: a, chunk_size=0)


def test_vmap_randomness():
    x = H(arr(3, 4))
    with pytest.raises(RuntimeError, match="vmap: called random operation while in "
                                           "randomness error mode"):
        hf.vmap(lambda a: a + hx.rand(4, dtype=hx.float64))(x)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        hf.vmap(hf.vmap(lambda a: HF.dropout(a, 0.5), randomness="different"))(
            H(arr(2, 3, 4)))
    hx.rand(1)  # draws work again after vmap
    same = hf.vmap(lambda a: hx.rand(4, dtype=hx.float64), randomness="same")(x)
    assert np.all(N(same) == N(same)[0])
    hx.manual_seed(3)
    diff = hf.vmap(lambda a: hx.rand(4, dtype=hx.float64), randomness="different")(x)
    hx.manual_seed(3)
    loop = np.stack([N(hx.rand(4, dtype=hx.float64)) for _ in range(3)])
    np.testing.assert_array_equal(N(diff), loop)
    assert len({tuple(r) for r in N(diff)}) == 3


# -- functional_call and stateless --------------------------------------------------
class Scaled(hnn.Module):
    def __init__(self, lib_nn):
        super().__init__()
        self.lin = lib_nn.Linear(3, 2)
        self.register_buffer("shift", None)

    def forward(self, x, scale=1.0):
        y = self.lin(x) * scale
        return y if self.shift is None else y + self.shift


def test_functional_call_matches_pytorch_and_leaves_the_module_as_it_was():
    m = hnn.Linear(3, 2).double()
    tm = torch.nn.Linear(3, 2).double()
    w, b, x = arr(2, 3), arr(2), arr(4, 3)
    before = N(m.weight).copy()
    close(hf.functional_call(m, {"weight": H(w), "bias": H(b)}, H(x)),
          tf.functional_call(tm, {"weight": T(w), "bias": T(b)}, T(x)))
    close(hf.functional_call(m, ({"weight": H(w)}, {"bias": H(b)}), (H(x),)),
          tf.functional_call(tm, ({"weight": T(w)}, {"bias": T(b)}), (T(x),)))
    assert isinstance(m.weight, hnn.Parameter)
    np.testing.assert_array_equal(N(m.weight), before)
    hw = H(w, True)
    hf.functional_call(m, {"weight": hw}, H(x)).sum().backward()
    np.testing.assert_allclose(N(hw.grad), np.tile(x.sum(0), (2, 1)), rtol=1e-12)
    assert m.weight.grad is None and m.bias.grad is not None


def test_functional_call_of_a_nested_module_with_kwargs_and_new_names():
    m = Scaled(hnn).double()
    w, b, s, x = arr(2, 3), arr(2), arr(2), arr(3)
    out = hf.functional_call(m, {"lin.weight": H(w), "lin.bias": H(b), "shift": H(s)},
                             (H(x),), {"scale": 2.0})
    np.testing.assert_allclose(N(out), (w @ x + b) * 2 + s, rtol=1e-12)
    assert m.shift is None
    m2 = hnn.Linear(3, 2).double()
    hf.functional_call(m2, {"extra": H(s)}, H(x))
    assert not hasattr(m2, "extra")


def test_functional_call_tied_weights_and_strict():
    m = hnn.Sequential(hnn.Linear(2, 2, bias=False), hnn.Linear(2, 2, bias=False)).double()
    m[1].weight = m[0].weight
    tm = torch.nn.Sequential(torch.nn.Linear(2, 2, bias=False),
                             torch.nn.Linear(2, 2, bias=False)).double()
    tm[1].weight = tm[0].weight
    with torch.no_grad():
        tm[0].weight.copy_(T(N(m[0].weight)))
    w, x = arr(2, 2), arr(2)
    close(hf.functional_call(m, {"0.weight": H(w)}, H(x)),
          tf.functional_call(tm, {"0.weight": T(w)}, T(x)))
    close(hf.functional_call(m, {"0.weight": H(w)}, H(x), tie_weights=False),
          tf.functional_call(tm, {"0.weight": T(w)}, T(x), tie_weights=False))
    with pytest.raises(ValueError, match="functional_call got multiple values for keys "
                                         "\\['0.weight', '1.weight'\\], which are tied"):
        hf.functional_call(m, {"0.weight": H(w), "1.weight": H(w)}, H(x))
    with pytest.raises(RuntimeError, match="Error\\(s\\) in reparametrizing for Linear:\n\t"
                                           "Unexpected key\\(s\\): 'other'.\n\tMissing "
                                           "key\\(s\\): 'bias'."):
        hf.functional_call(hnn.Linear(2, 2), {"weight": H(w), "other": H(w)}, H(x), strict=True)
    with pytest.raises(ValueError, match="\\['weight'\\] appeared in multiple dictionaries"):
        hf.functional_call(hnn.Linear(2, 2), ({"weight": H(w)}, {"weight": H(w)}), H(x))
    with pytest.raises(ValueError, match="Expected parameter_and_buffer_dicts to be a dict"):
        hf.functional_call(hnn.Linear(2, 2), H(w), H(x))
    with pytest.raises(AttributeError, match="Linear has no attribute `nope`"):
        hf.functional_call(hnn.Linear(2, 2), {"nope.weight": H(w)}, H(x))


def test_functional_call_writes_a_reassigned_buffer_back_and_updates_in_place():
    bn = hnn.BatchNorm1d(3).double()
    tbn = torch.nn.BatchNorm1d(3).double()
    x = arr(5, 3)
    hv = {"running_mean": H(np.zeros(3)), "running_var": H(np.ones(3))}
    tv = {"running_mean": T(np.zeros(3)), "running_var": T(np.ones(3))}
    close(hf.functional_call(bn, hv, H(x)), tf.functional_call(tbn, tv, T(x)))
    close(hv, tv)
    np.testing.assert_array_equal(N(bn.running_mean), np.zeros(3))


def test_functional_call_through_a_parametrization_original():
    def symmetric(lib_nn):
        class Symmetric(lib_nn.Module):
            def forward(self, X):
                return X.triu() + X.triu(1).mT
        return Symmetric()

    m, tm = hnn.Linear(3, 3).double(), torch.nn.Linear(3, 3).double()
    hnn.utils.parametrize.register_parametrization(m, "weight", symmetric(hnn))
    torch.nn.utils.parametrize.register_parametrization(tm, "weight", symmetric(torch.nn))
    w, b, x = arr(3, 3), arr(3), arr(2, 3)
    before = N(m.parametrizations.weight.original).copy()
    hw = H(w, True)
    out = hf.functional_call(m, {"parametrizations.weight.original": hw, "bias": H(b)}, H(x))
    tw = T(w, True)
    tout = tf.functional_call(tm, {"parametrizations.weight.original": tw, "bias": T(b)}, T(x))
    close(out, tout)
    out.pow(2).sum().backward()
    tout.pow(2).sum().backward()
    close(hw.grad, tw.grad)
    np.testing.assert_array_equal(N(m.parametrizations.weight.original), before)


def test_stateless_functional_call_warns_as_pytorchs():
    m = hnn.Linear(2, 1).double()
    w, x = arr(1, 2), arr(2)
    with pytest.warns(FutureWarning, match="torch.func.functional_call"):
        out = hnn.utils.stateless.functional_call(m, {"weight": H(w)}, H(x))
    np.testing.assert_allclose(N(out), w @ x + N(m.bias), rtol=1e-12)


def test_stack_module_state_for_an_ensemble():
    models = [hnn.Linear(3, 2).double() for _ in range(4)]
    tmodels = [torch.nn.Linear(3, 2).double() for _ in range(4)]
    for m, t in zip(models, tmodels):
        _copy_weights(m, t)
    params, buffers = hf.stack_module_state(models)
    tparams, tbuffers = tf.stack_module_state(tmodels)
    close(params, tparams)
    assert buffers == {} and all(p.requires_grad and p.grad_fn is None for p in params.values())
    x = arr(5, 3)

    def run(lib, base):
        return lambda p, b, x: lib.functional_call(base, (p, b), (x,))

    close(hf.vmap(run(hf, models[0]), (0, 0, None))(params, buffers, H(x)),
          tf.vmap(run(tf, tmodels[0]), (0, 0, None))(tparams, tbuffers, T(x)))
    with pytest.raises(RuntimeError, match="Expected all models to be of the same class"):
        hf.stack_module_state([hnn.Linear(2, 2), hnn.ReLU()])


# -- surfaces ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", hf.__all__)
def test_signatures_are_pytorchs(name):
    import inspect

    mine, theirs = inspect.signature(getattr(hf, name)), inspect.signature(getattr(tf, name))
    assert [(p.name, p.kind, p.default) for p in mine.parameters.values()] == \
        [(p.name, p.kind, p.default) for p in theirs.parameters.values()]


def test_stateless_signature_is_pytorchs():
    import inspect

    import torch.nn.utils.stateless as ts

    mine = inspect.signature(hnn.utils.stateless.functional_call)
    theirs = inspect.signature(ts.functional_call)
    assert [(p.name, p.kind, p.default) for p in mine.parameters.values()] == \
        [(p.name, p.kind, p.default) for p in theirs.parameters.values()]


def test_top_level_vmap_is_the_func_one():
    assert hx.vmap is hf.vmap


def test_torch_func_through_the_alias_and_a_missing_name():
    code = ("import haelixe as hx; hx.install_as_torch()\n"
            "import torch, torch.func\n"
            "from torch.func import vmap, grad, functional_call\n"
            "from torch.nn.utils import stateless\n"
            "assert vmap is hx.func.vmap and torch.func.grad is hx.func.grad\n"
            "assert stateless.functional_call is hx.nn.utils.stateless.functional_call\n"
            "try:\n    torch.func.functionalize\nexcept AttributeError as e:\n"
            "    assert 'functionalize' in str(e) and 'eagerly' in str(e), e\n"
            "else:\n    raise SystemExit('no error')\n")
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    assert r.returncode == 0, r.stderr
    assert hx.func.grad is hf.grad


# -- the GPU --------------------------------------------------------------------------
@pytest.mark.gpu
def test_vmap_of_grad_on_the_gpu_equals_the_cpu(be):
    x, w = arr(3, 4).astype(np.float32), arr(4).astype(np.float32)

    def loss(w, x):
        return ((x * w).tanh() ** 2).sum()

    outs = []
    for dev in ("cpu", "gpu"):
        hw = hx.tensor(w, device=dev)
        hx_x = hx.tensor(x, device=dev).requires_grad_()
        per = hf.vmap(hf.grad(loss), in_dims=(None, 0))(hw, hx_x)
        assert per.device.type == dev
        val = hf.vmap(hf.jacrev(lambda a: a.sin() * w[0]))(hx_x)
        val.sum().backward()
        lin = hnn.Linear(4, 2).to(dev)
        with hx.no_grad():
            lin.weight.copy_(hx.tensor(np.outer([1.0, -0.5], w).astype(np.float32), device=dev))
            lin.bias.fill_(0.25)
        hess = hf.hessian(lambda a, lin=lin: lin(a).tanh().sum())(hx.tensor(x[0], device=dev))
        outs.append((N(per), N(val), N(hx_x.grad), N(hess)))
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_no_warning_from_the_transforms():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hf.vmap(hf.grad(f_sin))(H(arr(2, 3)))
