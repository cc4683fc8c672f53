"""Every elementwise op of the registry against PyTorch, found by name: forward values and
result dtypes over seven dtypes, edge shapes (0-d, 0-size, size-1, broadcast) and five
layouts, float64 gradients (and gradcheck), in-place variants, and the GPU against the CPU.

An op declared in haelixe/ops is picked up here with no edit, provided PyTorch has a
function of the same name (or TORCH_NAME says which). hypothesis drives shapes and
layouts with a fixed seed; HAELIXE_OPINFO_EXAMPLES raises the example count locally.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import haelixe as hx
import haelixe.nn  # noqa: F401 (its fused declarations are in OPS once it is imported)
from haelixe.ops.registry import OPS, Elementwise

torch = pytest.importorskip("torch")
F = torch.nn.functional

EXAMPLES = int(os.environ.get("HAELIXE_OPINFO_EXAMPLES", "12"))
SETTINGS = settings(max_examples=EXAMPLES, derandomize=True, deadline=None,
                    suppress_health_check=list(HealthCheck))

#: registry name -> the PyTorch callable (when it is not torch.<name>)
TORCH_NAME = {
    "gelu_erf": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "softplus": F.softplus, "hardtanh": F.hardtanh, "leaky_relu": F.leaky_relu,
    "silu": F.silu, "clamp3": torch.clamp, "where": torch.where,
    "hardsigmoid": F.hardsigmoid, "elu": F.elu, "hardswish": F.hardswish, "mish": F.mish,
    "softsign": F.softsign, "tanhshrink": F.tanhshrink, "softshrink": F.softshrink,
    # (hx.polygamma's kernel: its n is 1 when the input comes alone)
    "polygamma_n": lambda x: torch.polygamma(1, x),
}
#: inputs that keep the op in its domain (positive for logs and roots, nonzero divisors
#: for the integer divisions PyTorch refuses by zero)
POSITIVE = {"log", "log2", "log10", "log1p", "sqrt", "rsqrt", "pow", "floor_divide",
            "remainder", "fmod", "xlogy", "entr", "xlog1py", "zeta", "igamma", "igammac"}
#: float inputs inside (-1, 1) for the inverse sine, cosine, tanh and erf, above 1 for acosh
#: (outside, both sides give NaN: the forward checks compare those too, the gradients
#: would compare nothing)
UNIT, ABOVE_ONE = {"asin", "acos", "atanh", "erfinv"}, {"acosh"}
#: float inputs inside (0, 1) (ndtri, a quantile), above 1 for the first (zeta's exponent)
PROBABILITY, FIRST_ABOVE_ONE = {"ndtri"}, {"zeta"}
#: the inputs PyTorch has no derivative for (its backward raises): held without grad
NO_GRAD_INPUTS = {"zeta": {0}, "igamma": {0}, "igammac": {0}}
ELEMENTWISE = {n: d for n, d in OPS.items() if isinstance(d, Elementwise)}
DTYPES = ["float32", "float64", "bfloat16", "float16", "int32", "int64", "bool", "uint8",
          "int8", "int16"]
FLOATS = ("float32", "float64", "bfloat16", "float16")


#: the arguments an op requires beyond its inputs, passed on both sides (PyTorch's
#: threshold has no defaults)
PARAMS = {"threshold": (0.25, -3.0)}


def _with_params(fn, name):
    params = PARAMS.get(name)
    return fn if params is None else lambda *inputs: fn(*inputs, *params)


def torch_fn(name):
    # (torch.special's functions that have no torch.<name>: ndtr, zeta...)
    fn = TORCH_NAME.get(name) or getattr(torch, name, None) or getattr(torch.special, name)
    return _with_params(fn, name)


def hx_fn(name):
    return _with_params(ELEMENTWISE[name].apply, name)


def values(shape, dtype, seed, positive=False):
    r = np.random.default_rng(seed)
    if dtype == "bool":
        return r.random(shape) > 0.5
    if dtype.startswith(("int", "uint")):
        v = r.integers(1 if positive else 0 if dtype.startswith("u") else -4, 5, shape)
        return v.astype(dtype)
    v = r.standard_normal(shape) * 1.5
    if positive:
        v = np.abs(v) + 0.2
    return v.astype(np.float32).astype(np.float64)  # exactly representable in f32


def to_hx(a, dtype, device="cpu"):
    return hx.tensor(a, dtype=dtype, device=device)


def to_torch(a, dtype):
    return torch.tensor(np.asarray(a), dtype=getattr(torch, dtype))


def tensor_only(e) -> bool:
    """PyTorch refused a Python number where its signature asks for a Tensor (maximum,
    logaddexp...): a signature restriction, not a semantic one; Haelixe accepts it."""
    return isinstance(e, TypeError) and "must be Tensor" in str(e)


def compare(got, want, dtype, what):
    if isinstance(want, Exception):
        assert isinstance(got, Exception), f"{what}: PyTorch raises {want!r}, Haelixe gave {got}"
        return
    assert not isinstance(got, Exception), f"{what}: Haelixe raised {got!r}"
    assert got.dtype.name == str(want.dtype).replace("torch.", ""), \
        f"{what}: dtype {got.dtype.name}, PyTorch {want.dtype}"
    g = got.detach().cpu().float().numpy() if got.dtype.is_floating_point else \
        got.detach().cpu().numpy()
    w = want.detach().float().numpy() if want.dtype.is_floating_point else want.numpy()
    tol = {"bfloat16": 2e-2, "float16": 2e-3, "float32": 2e-5}.get(got.dtype.name, 1e-9)
    np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol,
                               atol=tol, err_msg=what, equal_nan=True)


def run(f, *args):
    try:
        return f(*args)
    except Exception as e:  # noqa: BLE001 (both sides' errors are compared, not raised)
        return e


def in_domain(name, a):
    if a.dtype.kind != "f":
        return a
    if name in UNIT:
        a = np.tanh(a) * 0.95
    elif name in PROBABILITY:
        a = 0.5 + np.tanh(a) * 0.45
    elif name in ABOVE_ONE:
        a = np.abs(a) + 1.1
    return a.astype(np.float32).astype(np.float64)


def inputs(name, dtype, shapes, seed=0):
    positive = name in POSITIVE
    if name == "where":
        return [values(shapes[0], "bool", seed)] + [
            values(s, dtype, seed + i + 1) for i, s in enumerate(shapes[1:])]
    arrays = [in_domain(name, values(s, dtype, seed + i, positive))
              for i, s in enumerate(shapes)]
    if name in FIRST_ABOVE_ONE and arrays[0].dtype.kind == "f":
        arrays[0] = np.abs(arrays[0]) + 1.25
    return arrays


def dtypes_of(name, dtype, n):
    return ["bool" if name == "where" and i == 0 else dtype for i in range(n)]


# -- forward over dtypes and edge shapes ------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_forward_matches_pytorch_on_every_dtype(name, dtype):
    decl = ELEMENTWISE[name]
    for shapes in ([(3, 4)] * decl.arity, [()] * decl.arity, [(0, 3)] * decl.arity,
                   [(4, 1)] + [(3,)] * (decl.arity - 1)):
        arrays = inputs(name, dtype, shapes)
        dts = dtypes_of(name, dtype, len(arrays))
        want = run(torch_fn(name), *(to_torch(a, d) for a, d in zip(arrays, dts)))
        ins = [to_hx(a, d) for a, d in zip(arrays, dts)]
        got = run(hx_fn(name), *ins)
        compare(got, want, dtype, f"{name} {dtype} {shapes}")
        if not isinstance(got, Exception):  # out of place: a buffer of its own
            assert all(got.storage is not t.storage for t in ins), name


# -- mixed dtypes, 0-d tensors and Python numbers: PyTorch's result types --------------------
#: where Haelixe differs on purpose, with why
KNOWN = {
    # PyTorch's pow of two bool tensors raises, as Haelixe's does; a bool tensor to the
    # power of Python's True slips through PyTorch's scalar path
    ("pow", ("bool", True)),
    # clamping a bool tensor by a Python bool: PyTorch's scalar kernels lack bool, its
    # tensor-bound ones have it; Haelixe takes both
    ("clamp_min", ("bool", True)), ("clamp_max", ("bool", True)),
}
MIXED = [("int32", "float32"), ("bool", "int64"), ("float16", "float64-0d"),
         ("int32", "float64-0d"), ("bfloat16", "float16"), ("float32", 2.5), ("int64", 3),
         ("int32", 1.5), ("bool", True), ("float32-0d", "int64"), ("uint8", "int8"),
         ("uint8", 300), ("int16", "float16"), ("int8", "uint8-0d"), ("uint8", -1.5)]


@pytest.mark.parametrize("pair", MIXED, ids=str)
@pytest.mark.parametrize("name", sorted(n for n, d in ELEMENTWISE.items()
                                        if d.arity == 2 and n != "where"))
def test_mixed_operands_promote_as_pytorch(name, pair):
    def operand(spec, seed, lib):
        if not isinstance(spec, str):
            return spec
        dtype, _, zero = spec.partition("-")
        a = values(() if zero else (2, 3), dtype, seed, name in POSITIVE)
        return to_torch(a, dtype) if lib == "torch" else to_hx(a, dtype)

    want = run(torch_fn(name), *(operand(s, i, "torch") for i, s in enumerate(pair)))
    if tensor_only(want) or (name, pair) in KNOWN:
        return
    got = run(hx_fn(name), *(operand(s, i, "hx") for i, s in enumerate(pair)))
    ref = [p for p in pair if isinstance(p, str)][0].partition("-")[0]
    compare(got, want, ref if isinstance(want, Exception) else
            str(want.dtype).replace("torch.", ""), f"{name}{pair}")


# -- layouts (hypothesis) ---------------------------------------------------------------------
LAYOUTS = {
    "contiguous": lambda t: t,
    "transposed": lambda t: t.transpose(0, 1),
    "stepped": lambda t: t[::2],
    "flipped": lambda t: t.flip(0),
    "expanded": lambda t: t[:1].expand(t.shape[0], *t.shape[1:]),
}


def _base_shape(layout, shape):
    return (shape[1], shape[0]) if layout == "transposed" else \
        (2 * shape[0],) + shape[1:] if layout == "stepped" else shape


@SETTINGS
@given(name=st.sampled_from(sorted(ELEMENTWISE)), layout=st.sampled_from(sorted(LAYOUTS)),
       rows=st.integers(1, 5), cols=st.integers(1, 4), seed=st.integers(0, 100))
def test_forward_on_strided_layouts(name, layout, rows, cols, seed):
    decl = ELEMENTWISE[name]
    dtype = "float32" if decl.dtypes != "integral" else "int32"
    base = _base_shape(layout, (rows, cols))
    arrays = inputs(name, dtype, [base] * decl.arity, seed)
    dts = dtypes_of(name, dtype, len(arrays))
    view = LAYOUTS[layout]
    want = run(torch_fn(name), *(view(to_torch(a, d)) for a, d in zip(arrays, dts)))
    got = run(hx_fn(name), *(view(to_hx(a, d)) for a, d in zip(arrays, dts)))
    compare(got, want, dtype, f"{name} {layout}")


# -- gradients ----------------------------------------------------------------------------------
DIFFERENTIABLE = sorted(n for n, d in ELEMENTWISE.items() if d.differentiable)
#: where PyTorch's float64 gradient itself is less exact than 1e-10: digamma's is its
#: trigamma, whose asymptotic series stops early (5e-10 off; Haelixe's is within 1e-15
#: of mpmath's, tests/test_special_functions.py)
GRADIENT_RTOL = {"digamma": 1e-9}


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_float64_gradients_match_pytorch(name):
    decl = ELEMENTWISE[name]
    shapes = [(3, 4)] + [(4,)] * (decl.arity - 1)  # broadcast: gradients sum back
    arrays = inputs(name, "float64", shapes, seed=3)
    dts = dtypes_of(name, "float64", len(arrays))
    frozen = NO_GRAD_INPUTS.get(name, ())
    tt = [to_torch(a, d).requires_grad_(d != "bool" and i not in frozen)
          for i, (a, d) in enumerate(zip(arrays, dts))]
    ht = [to_hx(a, d).requires_grad_(d != "bool" and i not in frozen)
          for i, (a, d) in enumerate(zip(arrays, dts))]
    gy = np.random.default_rng(9).standard_normal((3, 4))
    torch_fn(name)(*tt).backward(torch.tensor(gy))
    hx_fn(name)(*ht).backward(hx.tensor(gy))
    for i, (a, b) in enumerate(zip(ht, tt)):
        if b.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(),
                                       rtol=GRADIENT_RTOL.get(name, 1e-10), atol=1e-12,
                                       err_msg=f"{name} input {i}")


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_gradcheck_and_second_derivatives(name):
    decl = ELEMENTWISE[name]
    arrays = inputs(name, "float64", [(2, 3)] * decl.arity, seed=5)
    dts = dtypes_of(name, "float64", len(arrays))
    xs = [to_hx(a, d) for a, d in zip(arrays, dts)]
    fixed = {i: x for i, x in enumerate(xs)
             if dts[i] == "bool" or i in NO_GRAD_INPUTS.get(name, ())}
    free = [x.requires_grad_() for i, x in enumerate(xs) if i not in fixed]

    def f(*args):  # the bool inputs (where's condition) held fixed
        it = iter(args)
        return hx_fn(name)(*(fixed[i] if i in fixed else next(it) for i in range(len(xs))))

    assert hx.autograd.gradcheck(f, free, name=name)
    assert hx.autograd.gradgradcheck(f, free, name=name)


# -- in-place variants ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
@pytest.mark.parametrize("name", sorted(n for n, d in ELEMENTWISE.items()
                                        if hasattr(hx.Tensor, n + "_") and n != "clamp3"))
def test_in_place_variants_match_pytorch(name, dtype):
    decl = ELEMENTWISE[name]
    arrays = inputs(name, dtype, [(3, 4)] + [(4,)] * (decl.arity - 1))
    for other in ("same", 1.5):  # a float operand into an int tensor must be refused
        ta = [to_torch(a, dtype) for a in arrays]
        ha = [to_hx(a, dtype) for a in arrays]
        if other != "same" and decl.arity == 2:
            ta[1], ha[1] = other, other
        t_alias, h_alias = ta[0], ha[0]
        if not hasattr(torch.Tensor, name + "_"):
            continue  # an in-place form PyTorch does not have
        want = run(getattr(torch.Tensor, name + "_"), *ta)
        got = run(getattr(hx.Tensor, name + "_"), *ha)
        if tensor_only(want):
            continue  # (Haelixe takes the number PyTorch's signature refuses)
        if isinstance(want, Exception):
            assert isinstance(got, Exception), f"{name}_ {dtype}: PyTorch raises {want!r}"
            continue
        assert got is ha[0]
        compare(h_alias, t_alias, dtype, f"{name}_ {dtype} (alias sees the write)")


# -- the GPU (software adapter in CI) against the CPU ---------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_gpu_equals_cpu(be, name):
    decl = ELEMENTWISE[name]
    dtype = "float32" if decl.dtypes != "integral" else "int32"
    arrays = inputs(name, dtype, [(5, 7)] + [(7,)] * (decl.arity - 1), seed=2)
    dts = dtypes_of(name, dtype, len(arrays))
    cpu = hx_fn(name)(*(to_hx(a, d) for a, d in zip(arrays, dts)))
    gpu = hx_fn(name)(*(to_hx(a, d, "gpu") for a, d in zip(arrays, dts)))
    assert gpu.device.type == "gpu" and gpu.dtype is cpu.dtype
    np.testing.assert_allclose(gpu.cpu().numpy().astype(np.float64),
                               cpu.numpy().astype(np.float64), rtol=3e-6, atol=3e-6,
                               err_msg=name)
    if decl.differentiable:
        frozen = NO_GRAD_INPUTS.get(name, ())
        xs_c = [to_hx(a, d).requires_grad_(d != "bool" and i not in frozen)
                for i, (a, d) in enumerate(zip(arrays, dts))]
        xs_g = [to_hx(a, d, "gpu").requires_grad_(d != "bool" and i not in frozen)
                for i, (a, d) in enumerate(zip(arrays, dts))]
        hx_fn(name)(*xs_c).sum().backward()
        hx_fn(name)(*xs_g).sum().backward()
        for c, g in zip(xs_c, xs_g):
            if c.grad is not None:
                np.testing.assert_allclose(g.grad.cpu().numpy(), c.grad.numpy(), rtol=3e-5,
                                           atol=3e-5, err_msg=f"{name} gradient")


# -- every other op of the registry, by name -----------------------------------------------------
def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


#: name -> (haelixe, PyTorch) callables over one input tensor of shape (4, 6); an op the
#: registry lists without an entry here fails test_every_registered_op_has_a_spec
OTHER = {
    "sum": (lambda x: x.sum(1), lambda x: x.sum(1)),
    "mean": (lambda x: x.mean(0, keepdim=True), lambda x: x.mean(0, keepdim=True)),
    "var": (lambda x: x.var(1), lambda x: x.var(1)),
    "std": (lambda x: x.std(), lambda x: x.std()),
    "amax": (lambda x: x.amax(1), lambda x: x.amax(1)),
    "amin": (lambda x: x.amin((0, 1)), lambda x: x.amin((0, 1))),
    "max": (lambda x: x.max(1).values, lambda x: x.max(1).values),
    "min": (lambda x: x.min(0, keepdim=True).values, lambda x: x.min(0, keepdim=True).values),
    "argmax": (lambda x: x.argmax(1), lambda x: x.argmax(1)),
    "argmin": (lambda x: x.argmin(), lambda x: x.argmin()),
    "all": (lambda x: x.all(1), lambda x: x.all(1)),
    "any": (lambda x: x.any(0), lambda x: x.any(0)),
    "softmax": (lambda x: x.softmax(1), lambda x: x.softmax(1)),
    "log_softmax": (lambda x: x.log_softmax(0), lambda x: x.log_softmax(0)),
    "softmin": (lambda x: hx.nn.functional.softmin(x, 1), lambda x: F.softmin(x, 1)),
    "gelu": (lambda x: hx.nn.functional.gelu(x, approximate="tanh"),
             lambda x: F.gelu(x, approximate="tanh")),
    "relu6": (lambda x: hx.nn.functional.relu6(x * 4.0), lambda x: F.relu6(x * 4.0)),
    # random: tests/test_nn.py, test_normalization.py and test_op_surfaces.py check them
    "dropout": (None, None),
    "dropout2d": (None, None),
    "dropout1d": (None, None),
    "dropout3d": (None, None),
    "alpha_dropout": (None, None),
    "feature_alpha_dropout": (None, None),  # (these four: tests/test_random_layers.py)
    # (eval mode: the mean slope; training's random slopes: tests/test_random_layers.py)
    "rrelu": (lambda x: hx.nn.functional.rrelu(x, 0.1, 0.6),
              lambda x: F.rrelu(x, 0.1, 0.6)),
    "logsumexp": (lambda x: x.logsumexp(1), lambda x: x.logsumexp(1)),
    "norm": (lambda x: x.norm(dim=1), lambda x: x.norm(dim=1)),
    "cumsum": (lambda x: x.cumsum(1), lambda x: x.cumsum(1)),
    "cumprod": (lambda x: x.cumprod(0), lambda x: x.cumprod(0)),
    "sort": (lambda x: x.sort(1).values, lambda x: x.sort(1).values),
    "argsort": (lambda x: x.argsort(dim=0, stable=True),
                lambda x: x.argsort(dim=0, stable=True)),
    "topk": (lambda x: x.topk(2).values, lambda x: x.topk(2).values),
    "view": (lambda x: x.view(6, 4), lambda x: x.view(6, 4)),
    "reshape": (lambda x: x.reshape(3, -1), lambda x: x.reshape(3, -1)),
    "permute": (lambda x: x.permute(1, 0), lambda x: x.permute(1, 0)),
    "movedim": (lambda x: x.movedim(-1, 0), lambda x: x.movedim(-1, 0)),
    "transpose": (lambda x: x.transpose(0, 1), lambda x: x.transpose(0, 1)),
    "expand": (lambda x: x[:1].expand(3, 6), lambda x: x[:1].expand(3, 6)),
    "squeeze": (lambda x: x[:1].squeeze(0), lambda x: x[:1].squeeze(0)),
    "unsqueeze": (lambda x: x.unsqueeze(1), lambda x: x.unsqueeze(1)),
    "flip": (lambda x: x.flip(0, 1), lambda x: x.flip(0, 1)),
    "repeat": (lambda x: x.repeat(2, 1, 3), lambda x: x.repeat(2, 1, 3)),
    "narrow": (lambda x: x.narrow(1, 2, 3), lambda x: x.narrow(1, 2, 3)),
    "split": (lambda x: x.split(4, 1)[1], lambda x: x.split(4, 1)[1]),
    "chunk": (lambda x: x.chunk(3, 1)[2], lambda x: x.chunk(3, 1)[2]),
    "select": (lambda x: x.select(1, 2), lambda x: x.select(1, 2)),
    "unbind": (lambda x: x.unbind(0)[3], lambda x: x.unbind(0)[3]),
    "as_strided": (lambda x: x.as_strided((3, 2), (2, 1), 1),
                   lambda x: x.as_strided((3, 2), (2, 1), 1)),
    "getitem": (lambda x: x[1:, ::2], lambda x: x[1:, ::2]),
    "gather": (lambda x: x.gather(1, _idx(x, [[0, 5], [1, 1], [2, 0], [3, 4]])),
               lambda x: x.gather(1, torch.tensor([[0, 5], [1, 1], [2, 0], [3, 4]]))),
    "scatter": (lambda x: x.scatter(0, _idx(x, [[1, 0, 3, 2, 0, 1]]), 7),
                lambda x: x.scatter(0, torch.tensor([[1, 0, 3, 2, 0, 1]]), 7)),
    "scatter_add": (lambda x: x.scatter_add(1, _idx(x, [[0, 0]] * 4), x[:, :2]),
                    lambda x: x.scatter_add(1, torch.tensor([[0, 0]] * 4), x[:, :2])),
    "scatter_reduce": (
        lambda x: x.scatter_reduce(1, _idx(x, [[0, 0, 2]] * 4), x[:, 1:4] * 2, "amax",
                                   include_self=False),
        lambda x: x.scatter_reduce(1, torch.tensor([[0, 0, 2]] * 4), x[:, 1:4] * 2, "amax",
                                   include_self=False)),
    "index_reduce": (
        lambda x: x.index_reduce(1, _idx(x, [0, 5, 0]), x[:, 1:4] * 2, "prod"),
        lambda x: x.index_reduce(1, torch.tensor([0, 5, 0]), x[:, 1:4] * 2, "prod")),
    "index_select": (lambda x: x.index_select(0, _idx(x, [3, 1])),
                     lambda x: x.index_select(0, torch.tensor([3, 1]))),
    "index_add": (lambda x: x.index_add(1, _idx(x, [0, 0, 5]), x[:, :3]),
                  lambda x: x.index_add(1, torch.tensor([0, 0, 5]), x[:, :3])),
    "tril": (lambda x: x.tril(1), lambda x: x.tril(1)),
    "triu": (lambda x: x.triu(-1), lambda x: x.triu(-1)),
    "cat": (lambda x: hx.cat([x, x[:1]]), lambda x: torch.cat([x, x[:1]])),
    "stack": (lambda x: hx.stack([x, x], 1), lambda x: torch.stack([x, x], 1)),
    "clone": (lambda x: x.clone(), lambda x: x.clone()),
    "to": (lambda x: x.to(hx.bfloat16), lambda x: x.to(torch.bfloat16)),
    "matmul": (lambda x: x @ x.mT, lambda x: x @ x.mT),
    "bmm": (lambda x: hx.bmm(x[None], x.mT[None]), lambda x: torch.bmm(x[None], x.mT[None])),
    "einsum": (lambda x: hx.einsum("ij,kj->ik", x, x), lambda x: torch.einsum("ij,kj->ik", x, x)),
    "linear": (lambda x: hx.nn.functional.linear(x, x[:3]), lambda x: F.linear(x, x[:3])),
    "layer_norm": (lambda x: hx.nn.functional.layer_norm(x, (6,)),
                   lambda x: F.layer_norm(x, (6,))),
    "rms_norm": (lambda x: hx.nn.functional.rms_norm(x, (6,), eps=1e-6),
                 lambda x: F.rms_norm(x, (6,), eps=1e-6)),
    "mse_loss": (lambda x: hx.nn.functional.mse_loss(x, x.flip(0)),
                 lambda x: F.mse_loss(x, x.flip(0))),
    "cross_entropy": (lambda x: hx.nn.functional.cross_entropy(
                          x, hx.tensor([0, 2, 5, 1], device=x.device)),
                      lambda x: F.cross_entropy(x, torch.tensor([0, 2, 5, 1]))),
    "scaled_dot_product_attention": (
        lambda x: hx.nn.functional.scaled_dot_product_attention(x[None], x[None], x[None]),
        lambda x: F.scaled_dot_product_attention(x[None], x[None], x[None])),
    "rope": (lambda x: hx.nn.functional.apply_rope(x, *hx.nn.functional.rope_tables(
        4, 6, dtype=x.dtype, device=x.device)), None),
    "prod": (lambda x: x.prod(1), lambda x: x.prod(1)),
    "diagonal": (lambda x: x.diagonal(1), lambda x: x.diagonal(1)),
    "nonzero": (lambda x: (x > 0).nonzero(), lambda x: (x > 0).nonzero()),
    "multinomial": (None, None),  # random: tests/test_ops_api.py checks its distribution
    "mm": (lambda x: x.mm(x.mT), lambda x: x.mm(x.mT)),
    "logcumsumexp": (lambda x: x.logcumsumexp(1), lambda x: x.logcumsumexp(1)),
    "cummax": (lambda x: x.cummax(1), lambda x: x.cummax(1)),
    "std_mean": (lambda x: hx.std_mean(x, 1)[0] + hx.std_mean(x, 1)[1],
                 lambda x: torch.std_mean(x, 1)[0] + torch.std_mean(x, 1)[1]),
    "roll": (lambda x: x.roll((1, -2), (0, 1)), lambda x: x.roll((1, -2), (0, 1))),
    "outer": (lambda x: hx.outer(x[0], x[:, 1]), lambda x: torch.outer(x[0], x[:, 1])),
    "count_nonzero": (lambda x: hx.count_nonzero(x > 0, 1),
                      lambda x: torch.count_nonzero(x > 0, 1)),
    "diff": (lambda x: hx.diff(x, 2, 1, prepend=x[:, :1]),
             lambda x: torch.diff(x, 2, 1, prepend=x[:, :1])),
    "unique": (lambda x: (x > 0).int().unique(return_counts=True)[1],
               lambda x: (x > 0).int().unique(return_counts=True)[1]),
    "conv1d": (lambda x: hx.nn.functional.conv1d(x[None], x[None, :, :3]),
               lambda x: F.conv1d(x[None], x[None, :, :3])),
    "conv2d": (lambda x: hx.nn.functional.conv2d(x[None, None], x[None, None, :2, :3]),
               lambda x: F.conv2d(x[None, None], x[None, None, :2, :3])),
    "conv_transpose1d": (lambda x: hx.nn.functional.conv_transpose1d(x[None], x[:, None, :3]),
                         lambda x: F.conv_transpose1d(x[None], x[:, None, :3])),
    "conv_transpose2d": (
        lambda x: hx.nn.functional.conv_transpose2d(x[None, None], x[None, None, :2, :2]),
        lambda x: F.conv_transpose2d(x[None, None], x[None, None, :2, :2])),
    "conv3d": (lambda x: hx.nn.functional.conv3d(x[None, None, None], x[None, None, None, :2, :3]),
               lambda x: F.conv3d(x[None, None, None], x[None, None, None, :2, :3])),
    "conv_transpose3d": (
        lambda x: hx.nn.functional.conv_transpose3d(x[None, None, None],
                                                    x[None, None, None, :2, :2]),
        lambda x: F.conv_transpose3d(x[None, None, None], x[None, None, None, :2, :2])),
}

def _avg_pool3d_ref(x):
    """PyTorch's avg_pool3d; for bfloat16 and float16, which its CPU kernel refuses, its
    float32 result rounded to the dtype (what its CUDA kernel, accumulating in float32,
    computes)."""
    half = x.dtype in (torch.bfloat16, torch.float16)
    x = x[None, None, None]
    y = F.avg_pool3d(x.float() if half else x, (1, 2, 2), 1, (0, 1, 1),
                     count_include_pad=False)
    return y.to(x.dtype) if half else y


def _fraction_samples(lib, x, d):
    """fractional_max_pool's samples of one plane, in x's dtype and on its device."""
    where = {"device": x.device} if lib is hx else {}
    return lib.tensor([[[0.3, 0.8, 0.55][:d]]], dtype=x.dtype, **where)


def _unpooled(functional, x, d):
    """max_unpool{d}d of x's max pool (windows of 2 along the last two dims): each
    window's largest cell keeps its value, the others are zeros."""
    kernel = (1,) * (d - 2) + (2,) * min(d, 2)
    y, indices = getattr(functional, f"max_pool{d}d")(x[(None,) * d], kernel,
                                                      return_indices=True)
    return getattr(functional, f"max_unpool{d}d")(y, indices, kernel)


OTHER.update({
    "batch_norm": (lambda x: hx.nn.functional.batch_norm(x, None, None, x[0], x[1],
                                                         training=True),
                   lambda x: F.batch_norm(x, None, None, x[0], x[1], training=True)),
    "max_pool1d": (lambda x: hx.nn.functional.max_pool1d(x[None], 3, 2, 1),
                   lambda x: F.max_pool1d(x[None], 3, 2, 1)),
    "max_pool2d": (lambda x: hx.nn.functional.max_pool2d(x[None, None], 2, ceil_mode=True),
                   lambda x: F.max_pool2d(x[None, None], 2, ceil_mode=True)),
    "max_pool3d": (lambda x: hx.nn.functional.max_pool3d(x[None, None, None], (1, 3, 2), 1),
                   lambda x: F.max_pool3d(x[None, None, None], (1, 3, 2), 1)),
    "avg_pool1d": (lambda x: hx.nn.functional.avg_pool1d(x[None], 3, 2, 1),
                   lambda x: F.avg_pool1d(x[None], 3, 2, 1)),
    "avg_pool2d": (lambda x: hx.nn.functional.avg_pool2d(x[None, None], 2, 1, 1,
                                                          count_include_pad=False),
                   lambda x: F.avg_pool2d(x[None, None], 2, 1, 1, count_include_pad=False)),
    "avg_pool3d": (lambda x: hx.nn.functional.avg_pool3d(x[None, None, None], (1, 2, 2), 1,
                                                          (0, 1, 1), count_include_pad=False),
                   _avg_pool3d_ref),
    # (windows of unequal, overlapping sizes: 6 -> 4 along the last dim)
    "adaptive_avg_pool1d": (lambda x: hx.nn.functional.adaptive_avg_pool1d(x[None], 4),
                            lambda x: F.adaptive_avg_pool1d(x[None], 4)),
    "adaptive_avg_pool2d": (
        lambda x: hx.nn.functional.adaptive_avg_pool2d(x[None, None], (3, 4)),
        lambda x: F.adaptive_avg_pool2d(x[None, None], (3, 4))),
    "adaptive_avg_pool3d": (
        lambda x: hx.nn.functional.adaptive_avg_pool3d(x[None, None, None], (1, 3, 4)),
        lambda x: F.adaptive_avg_pool3d(x[None, None, None], (1, 3, 4))),
    "adaptive_max_pool1d": (lambda x: hx.nn.functional.adaptive_max_pool1d(x[None], 4),
                            lambda x: F.adaptive_max_pool1d(x[None], 4)),
    "adaptive_max_pool2d": (
        lambda x: hx.nn.functional.adaptive_max_pool2d(x[None, None], (3, 4)),
        lambda x: F.adaptive_max_pool2d(x[None, None], (3, 4))),
    "adaptive_max_pool3d": (
        lambda x: hx.nn.functional.adaptive_max_pool3d(x[None, None, None], (1, 3, 4)),
        lambda x: F.adaptive_max_pool3d(x[None, None, None], (1, 3, 4))),
    **{f"max_unpool{d}d": (lambda x, d=d: _unpooled(hx.nn.functional, x, d),
                           lambda x, d=d: _unpooled(F, x, d)) for d in (1, 2, 3)},
    # (fixed samples: the windows are PyTorch's; overlapping ones, 6 -> 4 with kernel 3)
    "fractional_max_pool2d": (
        lambda x: hx.nn.functional.fractional_max_pool2d(
            x[None, None], (2, 3), (3, 4), _random_samples=_fraction_samples(hx, x, 2)),
        lambda x: F.fractional_max_pool2d(
            x[None, None], (2, 3), (3, 4), _random_samples=_fraction_samples(torch, x, 2))),
    "fractional_max_pool3d": (
        lambda x: hx.nn.functional.fractional_max_pool3d(
            x.reshape(1, 1, 2, 2, 6), (1, 1, 2), (1, 1, 4),
            _random_samples=_fraction_samples(hx, x, 3)),
        lambda x: F.fractional_max_pool3d(
            x.reshape(1, 1, 2, 2, 6), (1, 1, 2), (1, 1, 4),
            _random_samples=_fraction_samples(torch, x, 3))),
})

OTHER.update({
    "cummin": (lambda x: x.cummin(1).values, lambda x: x.cummin(1).values),
    "unfold": (lambda x: x.unfold(1, 3, 2), lambda x: x.unfold(1, 3, 2)),
    "diag": (lambda x: hx.diag(x, 1) + hx.diag(x[0], -1)[:4, :6].sum(),
             lambda x: torch.diag(x, 1) + torch.diag(x[0], -1)[:4, :6].sum()),
    "masked_select": (lambda x: x.masked_select(x > 0.2), lambda x: x.masked_select(x > 0.2)),
    "repeat_interleave": (
        lambda x: x.repeat_interleave(_idx(x, [2, 0, 1, 3, 1, 1]), 1),
        lambda x: x.repeat_interleave(torch.tensor([2, 0, 1, 3, 1, 1]), 1)),
    "isclose": (lambda x: x.isclose(x + 1e-6), lambda x: x.isclose(x + 1e-6)),
    "meshgrid": (lambda x: hx.meshgrid(x[0], x[1, :4], indexing="xy")[1] * 1,
                 lambda x: torch.meshgrid(x[0], x[1, :4], indexing="xy")[1] * 1),
    # (values only: with the ties of integer inputs PyTorch's indices are its sort's)
    "median": (lambda x: x.median(1).values, lambda x: x.median(1).values),
    "nanmedian": (lambda x: x.nanmedian(0, keepdim=True).values,
                  lambda x: x.nanmedian(0, keepdim=True).values),
    "kthvalue": (lambda x: x.kthvalue(2, 1).values, lambda x: x.kthvalue(2, 1).values),
    "mode": (lambda x: x.mode(0).values, lambda x: x.mode(0).values),
    "quantile": (lambda x: x.quantile(0.3, 1), lambda x: x.quantile(0.3, 1)),
    "nanquantile": (lambda x: x.nanquantile(0.6, 0, interpolation="midpoint"),
                    lambda x: x.nanquantile(0.6, 0, interpolation="midpoint")),
})

def _beyond_pytorch(reference, extension):
    """``reference``; on an integer or bool input its CPU kernel refuses ("... not
    implemented for 'Int'") and Haelixe computes, ``extension``: PyTorch's ops computing
    what Haelixe does."""
    def ref(x):
        if x.dtype.is_floating_point:
            return reference(x)
        try:
            return reference(x)
        except NotImplementedError:
            return extension(x)
    return ref


def _of_difference(loss, **options):
    """PyTorch's ``loss`` of x against x.flip(0), where Haelixe takes integer inputs: the
    difference in their dtype (as PyTorch's subtraction takes it), its loss in the
    default float."""
    def ref(x):
        d = (x - x.flip(0)).double()
        return loss(d, torch.zeros_like(d), **options).float()
    return _beyond_pytorch(lambda x: loss(x, x.flip(0), **options), ref)


def _nll_ref(x):
    """PyTorch's nll_loss; where Haelixe takes integer log-probabilities: the picked ones
    negated in their dtype (uint8 wraps, as PyTorch's negation does), their mean in the
    default float."""
    t = torch.tensor([0, 2, 5, 1])
    return _beyond_pytorch(lambda x: F.nll_loss(x, t),
                           lambda x: F.nll_loss(-(-x).double(), t).float())(x)


def _in_its_dtype(op):
    """PyTorch's ``op``; where Haelixe takes integer or bool inputs, ``op`` of the values
    in float64 in the input's dtype (exact: fold's sums here are small, interpolate's
    nearest picks cells)."""
    return _beyond_pytorch(op, lambda x: op(x.double()).to(x.dtype))


OTHER.update({
    "l1_loss": (lambda x: hx.nn.functional.l1_loss(x, x.flip(0)),
                lambda x: F.l1_loss(x, x.flip(0))),
    "smooth_l1_loss": (lambda x: hx.nn.functional.smooth_l1_loss(x, x.flip(0), beta=0.5),
                       _of_difference(F.smooth_l1_loss, beta=0.5)),
    "huber_loss": (lambda x: hx.nn.functional.huber_loss(x, x.flip(0), delta=0.5),
                   _of_difference(F.huber_loss, delta=0.5)),
    "nll_loss": (lambda x: hx.nn.functional.nll_loss(x, hx.tensor([0, 2, 5, 1],
                                                                  device=x.device)),
                 _nll_ref),
    "group_norm": (lambda x: hx.nn.functional.group_norm(x[None], 2, x[:, 0], x[:, 1]),
                   lambda x: F.group_norm(x[None], 2, x[:, 0], x[:, 1])),
    # (windows of 2 x 2 over a 3 x 4 output: 6 of them, overlapping)
    "fold": (lambda x: hx.nn.functional.fold(x[None], (3, 4), 2),
             _in_its_dtype(lambda x: F.fold(x[None], (3, 4), 2))),
    "interpolate": (lambda x: hx.nn.functional.interpolate(x[None], scale_factor=2),
                    _in_its_dtype(lambda x: F.interpolate(x[None], scale_factor=2))),
})
# (x of shape (4, 6) against its flips: targets, second inputs, negatives of one shape)
OTHER.update({
    name: (lambda x, name=name, dims=dims, kw=kw: getattr(hx.nn.functional, name)(
        x, *[x.flip(d) for d in dims], **kw),
           lambda x, name=name, dims=dims, kw=kw: getattr(F, name)(
        x, *[x.flip(d) for d in dims], **kw))
    for name, dims, kw in (
        ("kl_div", (0,), {"reduction": "batchmean"}),
        ("margin_ranking_loss", (0, 1), {"margin": 0.5}),
        ("triplet_margin_loss", (0, 1), {"swap": True}),
        ("cosine_similarity", (0,), {}),
        ("pairwise_distance", (0,), {"keepdim": True}))})
def _pads(lib, functional, x):
    """x padded in every mode, over one, two and three dims, crops among them, the
    results flattened and joined."""
    y = x[None]
    parts = [functional.pad(x, (1, 2), value=3), functional.pad(x, (-1, 2, 1, -2)),
             functional.pad(y, (2, -1, 1, 3), mode="reflect"),
             functional.pad(y, (-2, 3), mode="replicate"),
             functional.pad(y[None], (1, 2, -1, 2, 0, 0), mode="circular")]
    return lib.cat([p.flatten() for p in parts])


def _bags(functional, x, index):
    """embedding_bag of x's rows in each mode: bags of two, none, three and one."""
    i, offsets = index(x, [0, 2, 3, 3, 1, 0]), index(x, [0, 2, 2, 5])
    return sum(functional.embedding_bag(i, x, offsets, mode=mode, padding_idx=pad)
               for mode, pad in (("sum", None), ("mean", 1), ("max", None)))


def _ctc(lib, x):
    """ctc_loss of x as (T, N, C) = (4, 2, 3), padded targets (a repeated label) and a
    shorter input, plus x's first columns as an unbatched (4, 4) input."""
    functional = lib.nn.functional
    on = {"device": x.device} if lib is hx else {}
    return functional.ctc_loss(x.reshape(4, 2, 3), lib.tensor([[1, 2], [1, 1]], **on),
                               [4, 3], [2, 2], reduction="sum") + \
        functional.ctc_loss(x[:, :4], lib.tensor([3, 1], **on), [4], [2])


def _bilinear(lib, x):
    """bilinear of x and its flip through two (6, 6) forms made from x, with a bias."""
    form = x.mT @ x
    return lib.nn.functional.bilinear(x, x.flip(0), lib.stack([form, form.flip(0)]), x[0, :2])


def _lp_pools(functional, x):
    """x's windows' 2-norms in one, two and three dims, joined."""
    parts = [functional.lp_pool1d(x[None], 2, 2), functional.lp_pool1d(x[None], 2, 4, 1),
             functional.lp_pool2d(x[None], 2, 2, 1)]
    return sum(p.sum() for p in parts)


def _lp_pool3d_ref(x):
    """PyTorch's lp_pool3d; for bfloat16 and float16 in float32, rounded to the dtype (as
    _avg_pool3d_ref: its CPU kernel refuses them)."""
    half = x.dtype in (torch.bfloat16, torch.float16)
    y = F.lp_pool3d((x.float() if half else x)[None, None, None], 2, (1, 2, 2))
    return y.to(x.dtype) if half else y


OTHER.update({
    "bilinear": (lambda x: _bilinear(hx, x), lambda x: _bilinear(torch, x)),
    "lp_pool1d": (lambda x: _lp_pools(hx.nn.functional, x), lambda x: _lp_pools(F, x)),
    "lp_pool2d": (lambda x: hx.nn.functional.lp_pool2d(x[None], 2, (2, 3)),
                  lambda x: F.lp_pool2d(x[None], 2, (2, 3))),
    "lp_pool3d": (lambda x: hx.nn.functional.lp_pool3d(x[None, None, None], 2, (1, 2, 2)),
                  _lp_pool3d_ref),
    "ctc_loss": (lambda x: _ctc(hx, x), lambda x: _ctc(torch, x)),
    "embedding_bag": (lambda x: _bags(hx.nn.functional, x, _idx),
                      lambda x: _bags(F, x, lambda _, v: torch.tensor(v))),
    "glu": (lambda x: hx.nn.functional.glu(x, 0), lambda x: F.glu(x, 0)),
    "prelu": (lambda x: hx.prelu(x, x[0]), lambda x: torch.prelu(x, x[0])),
    "pad": (lambda x: _pads(hx, hx.nn.functional, x),
            _in_its_dtype(lambda x: _pads(torch, F, x))),  # (bool: PyTorch's reflect lacks it)
    "poisson_nll_loss": (
        lambda x: hx.nn.functional.poisson_nll_loss(x, x.flip(0) * x.flip(0), full=True)
        + hx.nn.functional.poisson_nll_loss(x * x, x.flip(1), False, True, reduction="sum"),
        lambda x: F.poisson_nll_loss(x, x.flip(0) * x.flip(0), full=True)
        + F.poisson_nll_loss(x * x, x.flip(1), False, True, reduction="sum")),
    "gaussian_nll_loss": (
        lambda x: hx.nn.functional.gaussian_nll_loss(x, x.flip(0), x.flip(1) * x.flip(1), full=True)
        + hx.nn.functional.gaussian_nll_loss(x, x.flip(1), (x * x).sum(1), reduction="sum"),
        lambda x: F.gaussian_nll_loss(x, x.flip(0), x.flip(1) * x.flip(1), full=True)
        + F.gaussian_nll_loss(x, x.flip(1), (x * x).sum(1), reduction="sum")),
})
def _in_float32_where_refused(op):
    """PyTorch's ``op``; where its CPU kernel refuses a 16-bit float ("... not
    implemented for 'BFloat16'") and Haelixe computes, ``op`` in float32, rounded back."""
    def ref(x):
        try:
            return op(x)
        except NotImplementedError:
            if x.dtype not in (torch.bfloat16, torch.float16):
                raise
            return op(x.float()).to(x.dtype)
    return ref


def _margin_specs(lib, x):
    """The margin losses of x as (4, 6) class scores, by name: labels, label lists ended
    by -1, yes/no targets, +-1 pair labels."""
    functional = lib.nn.functional
    on = {"device": x.device} if lib is hx else {}
    labels = lib.tensor([0, 2, 5, 1], **on)
    lists = lib.tensor([[3, 0, -1, 1, 2, 2], [5, 4, 3, 2, 1, 0], [-1, 0, 0, 0, 0, 0],
                        [1, 1, 4, -1, 0, 0]], **on)
    signs = lib.tensor([[1, -1, 1, 1, -1, -1]] * 4, **on)
    return {
        "multi_margin_loss": lambda: functional.multi_margin_loss(
            x, labels, 2, 0.5, reduction="sum") + functional.multi_margin_loss(x[1], labels[1]),
        "multilabel_margin_loss": lambda: functional.multilabel_margin_loss(x, lists),
        "multilabel_soft_margin_loss": lambda: functional.multilabel_soft_margin_loss(
            x, x.flip(0).sigmoid(), reduction="none"),
        "hinge_embedding_loss": lambda: functional.hinge_embedding_loss(x, signs, 0.5,
                                                                        reduction="none"),
        "triplet_margin_with_distance_loss": lambda: functional.
        triplet_margin_with_distance_loss(x, x.flip(0), x.flip(1), swap=True,
                                          distance_function=lambda a, b: (a - b).abs().sum(-1)),
    }


OTHER.update({
    name: (lambda x, name=name: _margin_specs(hx, x)[name](),
           _in_float32_where_refused(lambda x, name=name: _margin_specs(torch, x)[name]()))
    for name in ("multi_margin_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss",
                 "hinge_embedding_loss", "triplet_margin_with_distance_loss")})
OTHER.update({
    "pixel_shuffle": (lambda x: hx.nn.functional.pixel_shuffle(x.reshape(4, 2, 3), 2),
                      lambda x: F.pixel_shuffle(x.reshape(4, 2, 3), 2)),
    "pixel_unshuffle": (lambda x: hx.nn.functional.pixel_unshuffle(x.reshape(1, 4, 6), 2),
                        lambda x: F.pixel_unshuffle(x.reshape(1, 4, 6), 2)),
    "channel_shuffle": (lambda x: hx.nn.functional.channel_shuffle(x.reshape(2, 6, 2), 3),
                        lambda x: F.channel_shuffle(x.reshape(2, 6, 2), 3)),
})


OTHER.update({
    # (the samples' own values as coordinates: any x is a valid one)
    "trapezoid": (lambda x: hx.trapezoid(x) + hx.trapezoid(x, x.flip(0), dim=0).sum(),
                  lambda x: torch.trapezoid(x) + torch.trapezoid(x, x.flip(0), dim=0).sum()),
    "cumulative_trapezoid": (
        lambda x: hx.cumulative_trapezoid(x, dx=0.5) + hx.cumulative_trapezoid(x, x[1]),
        lambda x: torch.cumulative_trapezoid(x, dx=0.5) + torch.cumulative_trapezoid(x, x[1])),
    "gradient": (lambda x: hx.gradient(x, spacing=2.0, edge_order=2)[0] + hx.gradient(x)[1],
                 lambda x: torch.gradient(x, spacing=2.0, edge_order=2)[0]
                 + torch.gradient(x)[1]),
})


OTHER.update({
    "hstack": (lambda x: hx.hstack([x, x[:, :2]]), lambda x: torch.hstack([x, x[:, :2]])),
    "vstack": (lambda x: hx.vstack([x, x[0]]), lambda x: torch.vstack([x, x[0]])),
    "row_stack": (lambda x: hx.row_stack([x[1], x]), lambda x: torch.row_stack([x[1], x])),
    "dstack": (lambda x: hx.dstack([x, x]), lambda x: torch.dstack([x, x])),
    "column_stack": (lambda x: hx.column_stack([x[0], x.mT]),
                     lambda x: torch.column_stack([x[0], x.mT])),
    "atleast_1d": (lambda x: hx.atleast_1d(x[0, 0]) * 1, lambda x: torch.atleast_1d(x[0, 0]) * 1),
    "atleast_2d": (lambda x: hx.atleast_2d(x[0]) * 1, lambda x: torch.atleast_2d(x[0]) * 1),
    "atleast_3d": (lambda x: hx.atleast_3d(x) * 1, lambda x: torch.atleast_3d(x) * 1),
    "tensordot": (lambda x: hx.tensordot(x, x, ([0], [0])),
                  lambda x: torch.tensordot(x, x, ([0], [0]))),
    "kron": (lambda x: hx.kron(x[:2, :3], x[2:, 3:]), lambda x: torch.kron(x[:2, :3], x[2:, 3:])),
    "cross": (lambda x: hx.cross(x[:, :3], x[:, 3:], dim=1),
              lambda x: torch.cross(x[:, :3], x[:, 3:], dim=1)),
    "trace": (lambda x: hx.trace(x), lambda x: torch.trace(x)),
    "diag_embed": (lambda x: hx.diag_embed(x, 1, 0, 2), lambda x: torch.diag_embed(x, 1, 0, 2)),
    "logit": (lambda x: hx.logit(x, 0.25), lambda x: torch.logit(x, 0.25)),
    "nan_to_num": (lambda x: hx.nan_to_num(x / 0.0 * x), lambda x: torch.nan_to_num(x / 0.0 * x)),
    "mvlgamma": (lambda x: hx.mvlgamma(x * x + 1.25, 3), lambda x: torch.mvlgamma(x * x + 1.25, 3)),
    "polygamma": (lambda x: hx.polygamma(2, x) + x.polygamma(3),
                  lambda x: torch.polygamma(2, x) + x.polygamma(3)),
})
# (host ops without a gradient: indices, counts and masks; bool and the dtypes each
# refuses raise on both sides)
OTHER.update({
    "searchsorted": (lambda x: hx.searchsorted(x.sort(1).values, x.flip(0)),
                     lambda x: torch.searchsorted(x.sort(1).values, x.flip(0))),
    "bucketize": (lambda x: hx.bucketize(x, x[0].sort().values, right=True),
                  lambda x: torch.bucketize(x, x[0].sort().values, right=True)),
    "bincount": (lambda x: hx.bincount((x * x).long().flatten(), x.flatten(), minlength=30),
                 lambda x: torch.bincount((x * x).long().flatten(), x.flatten(),
                                          minlength=30)),
    "histc": (lambda x: x.histc(7), lambda x: x.histc(7)),
    "histogram": (lambda x: x.histogram(5).hist + hx.histogram(x, x[0].sort().values,
                                                             density=True).hist.sum(),
                  lambda x: x.histogram(5).hist + torch.histogram(x, x[0].sort().values,
                                                                  density=True).hist.sum()),
    "histogramdd": (lambda x: hx.histogramdd(x.reshape(8, 3), [3, 2, 4]).hist
                    + hx.histogramdd(x.reshape(12, 2), 2, weight=x[0, :1].expand(12),
                                     density=True).hist.sum(),
                    lambda x: torch.histogramdd(x.reshape(8, 3), [3, 2, 4]).hist
                    + torch.histogramdd(x.reshape(12, 2), 2, weight=x[0, :1].expand(12),
                                        density=True).hist.sum()),
    # (PyTorch's isin views its operands flat, and raises on expanded ones: its reference
    # reads contiguous copies, the same values)
    "isin": (lambda x: hx.isin(x, x[1:3, ::2]),
             lambda x: torch.isin(x.contiguous(), x[1:3, ::2].contiguous())),
})
OTHER.update({
    # random: tests/test_sampling.py checks their distributions, seeds and errors
    "normal": (None, None),
    "poisson": (None, None),
    # (tests/test_gamma_family.py: the draws' law, and the gradient against a 40-digit
    # reference; PyTorch's is a fit, within about 1e-3 of it)
    "_standard_gamma": (None, None),
    "_standard_gamma_grad": (None, None),
    "bernoulli": (None, None),
    "true_divide": (lambda x: hx.true_divide(x, x.flip(0)),
                    lambda x: torch.true_divide(x, x.flip(0))),
    "fix": (lambda x: x.fix(), lambda x: x.fix()),
    "float_power": (lambda x: hx.float_power(x, 3) + hx.float_power(1.5, x),
                    lambda x: torch.float_power(x, 3) + torch.float_power(1.5, x)),
    "frexp": (lambda x: (lambda r: r.mantissa * r.exponent)(hx.frexp(x)),
              lambda x: (lambda r: r.mantissa * r.exponent)(torch.frexp(x))),
})
# (tests/test_nn_and_tensor_odds.py: their other values, errors and layers)
OTHER.update({
    "logsigmoid": (lambda x: hx.nn.functional.logsigmoid(x * 9), lambda x: F.logsigmoid(x * 9)),
    "soft_margin_loss": (lambda x: hx.nn.functional.soft_margin_loss(x, x.flip(0).detach()),
                         lambda x: F.soft_margin_loss(x, x.flip(0).detach())),
    # (labels 1, -1, and 0, which counts for nothing; integer inputs compute in float32)
    "cosine_embedding_loss": (
        lambda x: hx.nn.functional.cosine_embedding_loss(
            x, x.flip(0), _idx(x, [1, -1, 0, -1]), 0.1, reduction="none"),
        lambda x: F.cosine_embedding_loss(x, x.flip(0), torch.tensor([1, -1, 0, -1]), 0.1,
                                          reduction="none")),
    # (PyTorch's int64 kernel truncates the windows' means; it refuses the other integers,
    # which Haelixe reads as int64)
    "local_response_norm": (
        lambda x: hx.nn.functional.local_response_norm(x[None], 3, 0.5, 0.75, 2.0),
        _beyond_pytorch(lambda x: F.local_response_norm(x[None], 3, 0.5, 0.75, 2.0),
                        lambda x: F.local_response_norm(x[None].long(), 3, 0.5, 0.75, 2.0))),
    "pdist": (lambda x: hx.pdist(x) + hx.pdist(x, 1.5).sum() + hx.pdist(x, float("inf")),
              _in_float32_where_refused(lambda x: torch.pdist(x) + torch.pdist(x, 1.5).sum()
                                        + torch.pdist(x, float("inf")))),
})
# (ops/blas.py: products composed of matmul; integers truncate beta and alpha, bool
# refused but by addr, as PyTorch's)
OTHER.update({
    "addmm": (lambda x: hx.addmm(x[0, :4], x, x.mT, beta=2, alpha=3),
              lambda x: torch.addmm(x[0, :4], x, x.mT, beta=2, alpha=3)),
    "addmv": (lambda x: hx.addmv(x[:, 0], x, x[1], alpha=2),
              lambda x: torch.addmv(x[:, 0], x, x[1], alpha=2)),
    "addr": (lambda x: hx.addr(x.mT, x[0], x[:, 1], beta=2),
             lambda x: torch.addr(x.mT, x[0], x[:, 1], beta=2)),
    "baddbmm": (lambda x: hx.baddbmm(x[0, :2], x.reshape(2, 2, 6), x.flip(0).reshape(2, 6, 2),
                                     alpha=-1),
                lambda x: torch.baddbmm(x[0, :2], x.reshape(2, 2, 6),
                                        x.flip(0).reshape(2, 6, 2), alpha=-1)),
    "addbmm": (lambda x: hx.addbmm(x[:2, :2], x.reshape(2, 2, 6), x.flip(0).reshape(2, 6, 2),
                                   beta=3),
               lambda x: torch.addbmm(x[:2, :2], x.reshape(2, 2, 6),
                                      x.flip(0).reshape(2, 6, 2), beta=3)),
    "addcmul": (lambda x: hx.addcmul(x, x.flip(0), x[0], value=2),
                lambda x: torch.addcmul(x, x.flip(0), x[0], value=2)),
    "addcdiv": (lambda x: hx.addcdiv(x, x.flip(0), x[0] * x[0] + 1, value=-2),
                lambda x: torch.addcdiv(x, x.flip(0), x[0] * x[0] + 1, value=-2)),
    "dot": (lambda x: hx.dot(x[0], x[1]), lambda x: torch.dot(x[0], x[1])),
    "vdot": (lambda x: hx.vdot(x[:, 0], x[:, 2]), lambda x: torch.vdot(x[:, 0], x[:, 2])),
    "mv": (lambda x: hx.mv(x, x[1]), lambda x: torch.mv(x, x[1])),
    "inner": (lambda x: hx.inner(x, x[:3]), lambda x: torch.inner(x, x[:3])),
    "ger": (lambda x: hx.ger(x[0], x[:, 1]), lambda x: torch.ger(x[0], x[:, 1])),
    "dist": (lambda x: hx.dist(x, x[0], 3) + hx.dist(x, x.flip(0)),
             lambda x: torch.dist(x, x[0], 3) + torch.dist(x, x.flip(0))),
    "renorm": (lambda x: hx.renorm(x, 2, 0, 1.5) + hx.renorm(x, 1, 1, 2.0),
               lambda x: torch.renorm(x, 2, 0, 1.5) + torch.renorm(x, 1, 1, 2.0)),
    "sgn": (lambda x: hx.sgn(x) * x + x.sgn(), lambda x: torch.sgn(x) * x + x.sgn()),
})
# (ops/scatter_views.py and ops/shape_compose.py: host positions, then index_copy or
# index_add; unique_consecutive's runs on the host)
OTHER.update({
    "take": (lambda x: hx.take(x, _idx(x, [[0, -1, 7], [23, 5, 5]])),
             lambda x: torch.take(x, torch.tensor([[0, -1, 7], [23, 5, 5]]))),
    "put": (lambda x: x.put(_idx(x, [1, -1, 1]), x[0, :3], accumulate=True)
            + hx.put(x, _idx(x, [4, 0]), x[1, 2:4]),
            lambda x: x.put(torch.tensor([1, -1, 1]), x[0, :3], accumulate=True)
            + torch.put(x, torch.tensor([4, 0]), x[1, 2:4])),
    "index_put": (lambda x: hx.index_put(x, (_idx(x, [0, 3, 0]), _idx(x, [1])), x[1, :3],
                                         accumulate=True)
                  + x.index_put((_idx(x, [2, 1]),), x[0]),
                  lambda x: torch.index_put(x, (torch.tensor([0, 3, 0]), torch.tensor([1])),
                                            x[1, :3], accumulate=True)
                  + x.index_put((torch.tensor([2, 1]),), x[0])),
    "masked_scatter": (lambda x: hx.masked_scatter(x, x[0] > 0, x.flip(1)),
                       lambda x: torch.masked_scatter(x, x[0] > 0, x.flip(1))),
    "slice_scatter": (lambda x: hx.slice_scatter(x, x[:, :2].flip(0), 1, 1, None, 3),
                      lambda x: torch.slice_scatter(x, x[:, :2].flip(0), 1, 1, None, 3)),
    "select_scatter": (lambda x: hx.select_scatter(x, x[0] * 2, 0, -1),
                       lambda x: torch.select_scatter(x, x[0] * 2, 0, -1)),
    "diagonal_scatter": (lambda x: hx.diagonal_scatter(x, x[0, :4], 1),
                         lambda x: torch.diagonal_scatter(x, x[0, :4], 1)),
    "fliplr": (lambda x: hx.fliplr(x), lambda x: torch.fliplr(x)),
    "flipud": (lambda x: x.flipud(), lambda x: x.flipud()),
    "diagflat": (lambda x: hx.diagflat(x[:2], -1), lambda x: torch.diagflat(x[:2], -1)),
    "split_with_sizes": (lambda x: x.split_with_sizes([1, 0, 5], 1)[2],
                         lambda x: x.split_with_sizes([1, 0, 5], 1)[2]),
    "sum_to_size": (lambda x: x.sum_to_size(1, 6) + x[:1].sum_to_size(6),
                    lambda x: x.sum_to_size(1, 6) + x[:1].sum_to_size(6)),
    "unique_consecutive": (lambda x: hx.cat([
        hx.unique_consecutive((x > 0).int(), return_counts=True)[1],
        hx.unique_consecutive((x > 0).int(), return_inverse=True, dim=1)[1]]),
        lambda x: torch.cat([
            torch.unique_consecutive((x > 0).int(), return_counts=True)[1],
            torch.unique_consecutive((x > 0).int(), return_inverse=True, dim=1)[1]])),
})
#: ops whose result is float64, which the GPU does not hold (it refuses, naming the op)
FLOAT64_RESULTS = {"float_power"}


def _cdist_ref(x):
    """PyTorch's cdist of x's rows against three others; on bfloat16 and float16, which
    its CPU kernel refuses, its float32 distances rounded to the dtype."""
    if x.dtype in (torch.bfloat16, torch.float16):
        return torch.cdist(x.float(), x.flip(0)[:3].float()).to(x.dtype)
    return torch.cdist(x, x.flip(0)[:3])


# (ops/statistics.py and ops/arranging.py: compositions; cdist a Function)
OTHER.update({
    "nansum": (lambda x: hx.nansum(x, 1), lambda x: torch.nansum(x, 1)),
    "nanmean": (lambda x: hx.nanmean(x, 0, keepdim=True),
                lambda x: torch.nanmean(x, 0, keepdim=True)),
    "var_mean": (lambda x: hx.var_mean(x, 1)[0] + hx.var_mean(x, 1)[1],
                 lambda x: torch.var_mean(x, 1)[0] + torch.var_mean(x, 1)[1]),
    "aminmax": (lambda x: hx.stack(list(hx.aminmax(x, dim=1))),
                lambda x: torch.stack(list(torch.aminmax(x, dim=1)))),
    "cov": (lambda x: hx.cov(x), lambda x: torch.cov(x)),
    "corrcoef": (lambda x: hx.corrcoef(x), lambda x: torch.corrcoef(x)),
    "cdist": (lambda x: hx.cdist(x, x.flip(0)[:3]), _cdist_ref),
    "argwhere": (lambda x: hx.argwhere(x), lambda x: torch.argwhere(x)),
    "take_along_dim": (lambda x: hx.take_along_dim(x, _idx(x, [[0, 5, 2]]), 1),
                       lambda x: torch.take_along_dim(x, torch.tensor([[0, 5, 2]]), 1)),
    "index_fill": (lambda x: x.index_fill(1, _idx(x, [0, 4, -1]), 2),
                   lambda x: x.index_fill(1, torch.tensor([0, 4, -1]), 2)),
    "index_copy": (lambda x: x.index_copy(1, _idx(x, [5, 0]), x[:, 1:3].flip(0)),
                   lambda x: x.index_copy(1, torch.tensor([5, 0]), x[:, 1:3].flip(0))),
    "tensor_split": (lambda x: x.tensor_split(4, 1)[1], lambda x: x.tensor_split(4, 1)[1]),
    "hsplit": (lambda x: x.hsplit([1, 4])[1], lambda x: x.hsplit([1, 4])[1]),
    "vsplit": (lambda x: x.vsplit(2)[1], lambda x: x.vsplit(2)[1]),
    "dsplit": (lambda x: x.reshape(2, 2, 6).dsplit(3)[2],
               lambda x: x.reshape(2, 2, 6).dsplit(3)[2]),
    "swapaxes": (lambda x: x.swapaxes(0, 1), lambda x: x.swapaxes(0, 1)),
    "swapdims": (lambda x: hx.swapdims(x, -1, 0), lambda x: torch.swapdims(x, -1, 0)),
    "msort": (lambda x: x.msort(), lambda x: x.msort()),
    "rot90": (lambda x: x.rot90(3, (1, 0)), lambda x: x.rot90(3, (1, 0))),
    "block_diag": (lambda x: hx.block_diag(x[:2], x[2:, 3:], x[0, 0]),
                   lambda x: torch.block_diag(x[:2], x[2:, 3:], x[0, 0])),
    "cartesian_prod": (lambda x: hx.cartesian_prod(x[0], x[1, :3]),
                       lambda x: torch.cartesian_prod(x[0], x[1, :3])),
    "combinations": (lambda x: hx.combinations(x[0], 3, with_replacement=True),
                     lambda x: torch.combinations(x[0], 3, with_replacement=True)),
    "vander": (lambda x: hx.vander(x[0], 4), lambda x: torch.vander(x[0], 4)),
})


def _deprecated(f):
    """``f`` without the deprecation warning PyTorch's (and Haelixe's) torch.cholesky and
    torch.qr give."""
    def quiet(x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return f(x)
    return quiet


def _matrix_exp_ref(x):
    """PyTorch's matrix_exp; for bfloat16 and float16, where its CPU kernel overflows to
    inf even for a small matrix, its float32 result rounded to the dtype (what Haelixe
    computes)."""
    a = x[:, :4] * 0.25
    if a.dtype in (torch.bfloat16, torch.float16):
        return torch.matrix_exp(a.float()).to(a.dtype)
    return torch.matrix_exp(a)


# (square blocks of x, or x x^T where the op needs a positive-definite matrix; qr and svd
# through products their signs cancel from, Q's columns times R's diagonal, U^2 and V^2)
OTHER.update({
    "det": (lambda x: hx.det(x[:, :4]), lambda x: torch.det(x[:, :4])),
    "slogdet": (lambda x: hx.slogdet(x[:, 1:5]).logabsdet,
                lambda x: torch.slogdet(x[:, 1:5]).logabsdet),
    "logdet": (lambda x: hx.logdet(x @ x.mT), lambda x: torch.logdet(x @ x.mT)),
    "inverse": (lambda x: x[:, 2:].inverse(), lambda x: x[:, 2:].inverse()),
    "cholesky": (_deprecated(lambda x: hx.cholesky(x @ x.mT)),
                 _deprecated(lambda x: torch.cholesky(x @ x.mT))),
    "qr": (_deprecated(lambda x: (lambda q, r: q * r.diagonal())(*hx.qr(x.mT))),
           _deprecated(lambda x: (lambda q, r: q * r.diagonal())(*torch.qr(x.mT)))),
    "svd": (lambda x: (lambda u, s, v: hx.cat([u.square() * s, v.square() * s]))(*hx.svd(x)),
            lambda x: (lambda u, s, v: torch.cat([u.square() * s, v.square() * s]))(
                *torch.svd(x))),
    "pinverse": (lambda x: hx.pinverse(x), lambda x: torch.pinverse(x)),
    "matrix_power": (lambda x: hx.matrix_power(x[:, :4], 2),
                     lambda x: torch.matrix_power(x[:, :4], 2)),
    "matrix_exp": (lambda x: hx.matrix_exp(x[:, :4] * 0.25), _matrix_exp_ref),
    "triangular_solve": tuple(_deprecated(lambda x, m=m: m.triangular_solve(
        x, x[:, 1:5], upper=False, transpose=True, unitriangular=True).solution)
        for m in (hx, torch)),
})


# (the factor of x x^T + 4 I, lower or upper; torch's solve of it as the reference)
OTHER.update({
    "cholesky_solve": tuple(lambda x, m=m: m.cholesky_solve(
        x[:, :3], m.linalg.cholesky(x @ x.mT + 4 * m.eye(4, dtype=x.dtype, device=x.device)))
        + m.cholesky_solve(x[:, 3:], m.linalg.cholesky(
            x @ x.mT + 4 * m.eye(4, dtype=x.dtype, device=x.device), upper=True), True)
        for m in (hx, torch)),
    "cholesky_inverse": tuple(lambda x, m=m: m.cholesky_inverse(m.linalg.cholesky(
        x @ x.mT + 4 * m.eye(4, dtype=x.dtype, device=x.device))) for m in (hx, torch)),
})
OTHER["chain_matmul"] = (_deprecated(lambda x: hx.chain_matmul(x, x.mT, x)),
                        _deprecated(lambda x: torch.chain_matmul(x, x.mT, x)))


def _both(spec):
    """(spec(hx, x), spec(torch, x)): one spec written once over the library ``m``."""
    return (lambda x: spec(hx, x), lambda x: spec(torch, x))


def _as_strided_scatter_ref(x, src):
    """torch.as_strided_scatter(x, src, (3, 2), (2, 1), 1); where x requires grad (the
    float64 gradient test, a contiguous x) the same write into a view of x's clone:
    PyTorch's own backward of as_strided_scatter sends the input's gradient to the
    written cells rather than to the others (its gradcheck is an expected failure,
    pytorch/pytorch#88105)."""
    if not x.requires_grad:
        return torch.as_strided_scatter(x, src, (3, 2), (2, 1), 1)
    out = x.clone()
    out.as_strided((3, 2), (2, 1), 1).copy_(src)
    return out


def _ids(m, x, values):
    return m.tensor(values, **({"device": x.device} if m is hx else {}))


# (ops/view_copies.py: each view op, then a copy; the unsafe splits are split's)
OTHER.update({
    "alias_copy": _both(lambda m, x: m.alias_copy(x)),
    "as_strided_copy": _both(lambda m, x: m.as_strided_copy(x, (3, 2), (2, 1), 1)),
    "detach_copy": _both(lambda m, x: m.detach_copy(x)),
    "diagonal_copy": _both(lambda m, x: m.diagonal_copy(x, 1)),
    "expand_copy": _both(lambda m, x: m.expand_copy(x[:1], (3, 6))),
    "narrow_copy": _both(lambda m, x: x.narrow_copy(1, 2, 3)),
    "permute_copy": _both(lambda m, x: m.permute_copy(x, (1, 0))),
    "select_copy": _both(lambda m, x: m.select_copy(x, 1, -2)),
    "slice_copy": _both(lambda m, x: m.slice_copy(x, 1, 1, None, 2)),
    "split_copy": _both(lambda m, x: m.split_copy(x, 4, 1)[1]),
    "split_with_sizes_copy": _both(lambda m, x: m.split_with_sizes_copy(x, [1, 0, 5], 1)[2]),
    "squeeze_copy": _both(lambda m, x: m.squeeze_copy(x[:1], 0)),
    "t_copy": _both(lambda m, x: m.t_copy(x)),
    "transpose_copy": _both(lambda m, x: m.transpose_copy(x, 0, 1)),
    "unbind_copy": _both(lambda m, x: m.unbind_copy(x, 1)[3]),
    "unfold_copy": _both(lambda m, x: m.unfold_copy(x, 1, 3, 2)),
    "unsqueeze_copy": _both(lambda m, x: m.unsqueeze_copy(x, 1)),
    "view_copy": _both(lambda m, x: m.view_copy(x, (6, 4))),
    "unsafe_split": _both(lambda m, x: x.unsafe_split(4, 1)[1]),
    "unsafe_split_with_sizes": _both(lambda m, x: m.unsafe_split_with_sizes(x, [2, 4], 1)[0]),
    "unsafe_chunk": _both(lambda m, x: x.unsafe_chunk(3, 1)[2]),
    # (the positions are in x's storage: strided layouts read other cells)
    "as_strided_scatter": (lambda x: hx.as_strided_scatter(x, x.flip(0)[:3, :2], (3, 2),
                                                           (2, 1), 1),
                           lambda x: _as_strided_scatter_ref(x, x.flip(0)[:3, :2])),
    "isreal": _both(lambda m, x: m.isreal(x)),
    "nonzero_static": _both(lambda m, x: m.cat([
        (x > 0).nonzero_static(size=30, fill_value=-7).flatten(),
        m.nonzero_static(x > 0, size=3).flatten()])),
})


def _cells(m, x, cell):
    """A recurrent cell's step over x's columns as input (batch 4, 6 features), hidden
    sizes 1 (LSTM, GRU) and 4 (the plain cells), the weights and states cut from x."""
    if cell == "lstm_cell":
        h, c = m.lstm_cell(x, (x[:, 1:2], x[:, 2:3]), x, x[:, :1], x[:, 3], x[:, 4])
        return m.cat([h, c], 1)
    if cell == "gru_cell":
        return m.gru_cell(x, x[:, 1:2], x[:3], x[:3, :1], x[:3, 2], x[:3, 3])
    return getattr(m, cell)(x, x[:, 2:], x, x[:, :4], x[:, 4], x[:, 5])


def _flat(m, results):
    return m.cat([r.flatten() for r in results])


# (aten_native.py: the native norms with their statistics, the cells; linalg_lu_legacy.py;
# scatter_reduce.py's segment_reduce over lengths and offsets, an empty segment too)
OTHER.update({
    "native_layer_norm": _both(lambda m, x: _flat(m, m.native_layer_norm(
        x, (6,), x[0], x[1], 1e-5))),
    "native_batch_norm": _both(lambda m, x: _flat(m, m.native_batch_norm(
        x, x[0], x[1], None, None, True, 0.1, 1e-5))),
    # (contiguous weights: PyTorch's kernel reads a strided one as if it were contiguous)
    "native_group_norm": _both(lambda m, x: _flat(m, m.native_group_norm(
        x[None], x[:, 0].contiguous(), x[:, 1].contiguous(), 1, 4, 6, 4, 1e-5))),
    "native_dropout": (None, None),  # random: tests/test_everyday_names.py
    "binomial": (None, None),  # random: tests/test_everyday_names.py checks its moments
    **{cell: _both(lambda m, x, cell=cell: _cells(m, x, cell))
       for cell in ("lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell")},
    "lu": tuple(_deprecated(lambda x, m=m: m.lu(x[:, :4])[0]) for m in (hx, torch)),
    "lu_solve": tuple(_deprecated(lambda x, m=m: m.lu_solve(
        x[:, 4:], *m.linalg.lu_factor(x[:, :4]))) for m in (hx, torch)),
    "lu_unpack": _both(lambda m, x: (lambda P, L, U: _flat(m, (P @ L, U)))(
        *m.lu_unpack(*m.linalg.lu_factor(x[:, 2:])))),
    "segment_reduce": _both(lambda m, x: _flat(m, (
        m.segment_reduce(x, "sum", lengths=_ids(m, x, [[2, 0, 4]] * 4), axis=1),
        m.segment_reduce(x, "max", offsets=_ids(m, x, [0, 1, 1, 4])),
        m.segment_reduce(x, "mean", lengths=_ids(m, x, [3, 0, 1]), initial=0.5)))),
})


def _idx(x, values):
    return hx.tensor(values, device=x.device)


def test_every_registered_op_has_a_spec():
    missing = sorted(n for n in OPS if n not in ELEMENTWISE and n not in OTHER)
    assert not missing, f"ops with no differential spec (add them to OTHER): {missing}"


def _rope_ref(x):
    h = x.shape[-1] // 2
    inv = 10000.0 ** (-np.arange(0, 6, 2) / 6)
    ang = np.arange(4)[:, None] * inv[None, :]
    cos, sin = (torch.tensor(f(ang), dtype=x.dtype) for f in (np.cos, np.sin))
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


OTHER["rope"] = (OTHER["rope"][0], _rope_ref)
SPEC_OPS = sorted(n for n, (f, _) in OTHER.items() if f is not None)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", SPEC_OPS)
def test_other_ops_forward_on_every_dtype(name, dtype):
    fh, ft = OTHER[name]
    a = values((4, 6), dtype, 11)
    want = run(ft, to_torch(a, dtype))
    if tensor_only(want):
        return
    got = run(fh, to_hx(a, dtype))
    compare(_first(got), _first(want), dtype, f"{name} {dtype}")


@SETTINGS
@given(name=st.sampled_from(SPEC_OPS), layout=st.sampled_from(sorted(LAYOUTS)),
       seed=st.integers(0, 100))
def test_other_ops_on_strided_layouts(name, layout, seed):
    fh, ft = OTHER[name]
    a = values(_base_shape(layout, (4, 6)), "float64", seed)
    view = LAYOUTS[layout]
    want = run(ft, view(to_torch(a, "float64")))
    got = run(fh, view(to_hx(a, "float64")))
    compare(_first(got), _first(want), "float64", f"{name} {layout}")


# (not `to`: its spec rounds to bfloat16, whose gradient is rounded too; not vander:
# PyTorch's own backward of it fails, writing in place into what its cumprod saved, so
# tests/test_arranging_ops.py checks it against x ** k)
DIFF_OTHER = [n for n in SPEC_OPS
              if n not in ("argmax", "argmin", "all", "any", "argsort", "to", "nonzero",
                           "unique", "isclose", "count_nonzero", "argwhere", "vander",
                           "searchsorted", "bucketize", "bincount", "histc", "histogram",
                           "isin", "unique_consecutive", "histogramdd", "isreal",
                           "nonzero_static", "detach_copy")]


@pytest.mark.parametrize("name", DIFF_OTHER)
def test_other_ops_float64_gradients_match_pytorch(name):
    fh, ft = OTHER[name]
    a = values((4, 6), "float64", 13)
    t = to_torch(a, "float64").requires_grad_()
    h = to_hx(a, "float64").requires_grad_()
    tout, hout = _first(ft(t)), _first(fh(h))
    gy = np.random.default_rng(1).standard_normal(tuple(tout.shape))
    tout.backward(torch.tensor(gy))
    hout.backward(hx.tensor(gy))
    np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-12,
                               err_msg=name)


@pytest.mark.gpu
@pytest.mark.parametrize("name", [n for n in SPEC_OPS if n not in FLOAT64_RESULTS])
def test_other_ops_gpu_equals_cpu(be, name):
    fh, _ = OTHER[name]
    a = values((4, 6), "float32", 17)
    cpu = _first(fh(to_hx(a, "float32")))
    gpu = _first(fh(to_hx(a, "float32", "gpu")))
    assert gpu.device.type == "gpu" and gpu.shape == cpu.shape
    np.testing.assert_allclose(gpu.cpu().float().numpy(), cpu.float().numpy(), rtol=3e-5,
                               atol=3e-5, err_msg=name)
