"""Edge cases where a wrong answer would be silent, against PyTorch: saved tensors
changed through any alias, integer division's dtype, the gradient of an additive
attention mask, label smoothing with ignored targets, variance without degrees of
freedom, PyTorch's placement of advanced indices, and the error class of bad arguments."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import haelixe as hx
from haelixe.autograd import SavedTensorError
from haelixe.errors import OpError
from haelixe.nn import functional as F

torch = pytest.importorskip("torch")

def values(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# -- a saved tensor changed in place through any alias raises at backward -------------------
#: (name, forward from the leaf w, the in-place edit after it), each as PyTorch runs it
ALIAS_EDITS = {
    "the base of a saved view": (lambda w: (w[1:4] * w[1:4]).sum(), lambda w, y: w.add_(1)),
    "a saved tensor through detach()": (lambda w: (w * w).sum(),
                                        lambda w, y: w.detach().mul_(2)),
    "a view of a saved tensor's detach()": (lambda w: (w * w).sum(),
                                            lambda w, y: w.detach()[2:].zero_()),
    "the output exp saved": (lambda w: w.exp(), lambda w, y: y.add_(1)),
    "exp's output through detach()": (lambda w: w.exp(), lambda w, y: y.detach().mul_(2)),
    "a view of exp's output": (lambda w: w.exp(), lambda w, y: y[1:].mul_(2)),
    "the output tanh saved": (lambda w: w.tanh(), lambda w, y: y.mul_(2)),
    "a saved view through the base's detach()": (
        lambda w: (w.view(2, 3) * w.view(2, 3)).sum(), lambda w, y: w.detach().add_(1)),
}


@pytest.mark.parametrize("case", sorted(ALIAS_EDITS))
def test_a_saved_tensor_changed_through_any_alias_raises_as_in_pytorch(device, case):
    build, edit = ALIAS_EDITS[case]
    x0 = values(6)

    def run(lib, dev):
        x = lib.tensor(x0, requires_grad=True, **({"device": dev} if dev else {}))
        w = x * 1.0
        y = build(w)
        with lib.no_grad():
            edit(w, y)
        y.sum().backward()

    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        run(torch, None)
    with pytest.raises(SavedTensorError, match="modified by an inplace operation"):
        run(hx, device)


def test_views_and_detach_share_the_base_version_counter():
    w = hx.zeros(6)
    aliases = [w, w[1:3], w.detach(), w.view(2, 3).t(), w.detach()[::2]]
    for alias in aliases:
        before = w._version
        alias.add_(0)
        assert [a._version for a in aliases] == [before + 1] * len(aliases)


# -- div(int, float, rounding_mode='trunc') ------------------------------------------------
@pytest.mark.parametrize("a_dtype, b_dtype", [("int32", "float32"), ("int32", "int32"),
                                              ("int64", "int32"), ("int32", "int64"),
                                              ("int64", "float32")])
def test_trunc_division_takes_pytorchs_result_dtype_and_is_exact_on_ints(device, a_dtype,
                                                                        b_dtype):
    a = [7, -7, 2**24 + 1, -9, 0, 2**30 + 3]
    b = [2, 2, 1, -4, 5, 3]
    ours = hx.div(hx.tensor(a, dtype=getattr(hx, a_dtype), device=device),
                  hx.tensor(b, dtype=getattr(hx, b_dtype), device=device),
                  rounding_mode="trunc")
    theirs = torch.div(torch.tensor(a, dtype=getattr(torch, a_dtype)),
                       torch.tensor(b, dtype=getattr(torch, b_dtype)), rounding_mode="trunc")
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
    assert ours.to("cpu").tolist() == theirs.tolist()
    for scalar in (-2, 2.5):
        ours = hx.div(hx.tensor(a[:4], dtype=hx.int32, device=device), scalar,
                      rounding_mode="trunc")
        theirs = torch.div(torch.tensor(a[:4], dtype=torch.int32), scalar, rounding_mode="trunc")
        assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
        assert ours.to("cpu").tolist() == theirs.tolist()


# -- an additive float attention mask gets its gradient ------------------------------------
@pytest.mark.parametrize("mask_shape", [(3, 3), (2, 1, 3, 3)])
def test_a_float_attention_mask_that_requires_grad_gets_pytorchs_gradient(device, mask_shape):
    q, k, v = (values(2, 2, 3, 4, seed=s) for s in (1, 2, 3))
    m = values(*mask_shape, seed=4)
    hq, hk, hv = (hx.tensor(a, device=device, requires_grad=True) for a in (q, k, v))
    hm = hx.tensor(m, device=device, requires_grad=True)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    tm = torch.tensor(m, requires_grad=True)
    out = F.scaled_dot_product_attention(hq, hk, hv, attn_mask=hm)
    (out * out).sum().backward()
    ref = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm)
    (ref * ref).sum().backward()
    np.testing.assert_allclose(out.detach().to("cpu").numpy(), ref.detach().numpy(),
                               atol=1e-5)
    assert hm.grad is not None
    for ours, theirs in ((hm, tm), (hq, tq), (hv, tv)):
        np.testing.assert_allclose(ours.grad.to("cpu").numpy(), theirs.grad.numpy(),
                                   atol=2e-5)


def test_cross_entropy_with_ignored_targets_and_label_smoothing_averages_over_the_kept():
    x = values(5, 4)
    t = np.array([0, 1, 2, 1, 3])
    ours = F.cross_entropy(hx.tensor(x), hx.tensor(t), ignore_index=1, label_smoothing=0.3)
    theirs = torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(t),
                                               ignore_index=1, label_smoothing=0.3)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-6)


@pytest.mark.parametrize("data, correction", [([1.0, 2.0], 2), ([1.0, 2.0], 5), ([3.0, 3.0], 2),
                                              ([1.0], 1), ([1.0, 4.0, 2.0], 0)])
def test_var_and_std_without_degrees_of_freedom_divide_by_zero_as_pytorch(device, data,
                                                                          correction):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch warns about the degrees of freedom
        want_var = torch.tensor(data).var(correction=correction).item()
        want_std = torch.tensor(data).std(correction=correction).item()
    x = hx.tensor(data, device=device)
    np.testing.assert_equal(x.var(correction=correction).item(), np.float32(want_var))
    np.testing.assert_equal(x.std(correction=correction).item(), np.float32(want_std))


# -- advanced indices placed where PyTorch puts them ---------------------------------------
I, J = [0, 1], [[1], [2]]
MASK = np.array([True, False, True])
INDEX_KEYS = [(0, slice(None), I), (I, slice(None), 0), (slice(None), 0, slice(None), I),
              (Ellipsis, I, 0), (0, Ellipsis, I), (I, 0, J), (None, 0, slice(None), I),
              (I, None, 0, I), (0, MASK, slice(None), I), (I, Ellipsis, I), (1, MASK),
              (-1, slice(None), J, I), (I, 1, slice(None), 2)]


@pytest.mark.parametrize("key", INDEX_KEYS, ids=repr)
def test_advanced_indices_with_ints_go_where_pytorch_puts_them(device, key):
    a = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    ours_key = tuple(hx.tensor(k, device=device) if isinstance(k, (list, np.ndarray)) else k
                     for k in key)
    their_key = tuple(torch.tensor(k) if isinstance(k, (list, np.ndarray)) else k for k in key)
    x = hx.tensor(a, device=device, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    got, want = x[ours_key], t[their_key]
    assert got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.detach().to("cpu").numpy(), want.detach().numpy())
    g = values(*want.shape, seed=5)
    got.backward(hx.tensor(g, device=device))
    want.backward(torch.tensor(g))
    np.testing.assert_array_equal(x.grad.to("cpu").numpy(), t.grad.numpy())
    # setitem takes a value of the same (PyTorch's) shape
    y, u = hx.zeros(a.shape, device=device), torch.zeros(a.shape)
    y[ours_key] = hx.tensor(g, device=device)
    u[their_key] = torch.tensor(g)
    np.testing.assert_array_equal(y.to("cpu").numpy(), u.numpy())


# -- bad arguments raise an error that is a RuntimeError (PyTorch) and a ValueError ---------
BAD_ARGUMENTS = {
    "matmul shapes": lambda: hx.ones(2, 3) @ hx.ones(2, 3),
    "permute dims": lambda: hx.ones(2, 3).permute(0),
    "reshape size": lambda: hx.ones(2, 3).reshape(4),
    "flip repeated dim": lambda: hx.ones(2, 3).flip((0, 0)),
    "unknown rounding mode": lambda: hx.div(hx.ones(2), 2, rounding_mode="round"),
}


@pytest.mark.parametrize("case", sorted(BAD_ARGUMENTS))
def test_bad_arguments_raise_a_runtime_error_that_is_also_a_value_error(case):
    with pytest.raises(RuntimeError) as err:
        BAD_ARGUMENTS[case]()
    assert isinstance(err.value, ValueError) and isinstance(err.value, OpError)


# -- GPU kernels past the software adapter's loop limit ------------------------------------
#: past 65535 / 3 * 256 elements: one workgroup per row would stop early on llvmpipe
LONG = 5_700_000


@pytest.mark.gpu
def test_reductions_of_rows_past_the_adapters_loop_limit_are_exact(be):
    ones = hx.ones(LONG, device="gpu")
    assert ones.sum().item() == LONG
    assert ones.mean().item() == pytest.approx(1.0, rel=1e-6)
    assert ones.norm().item() == pytest.approx(LONG ** 0.5, rel=1e-6)
    assert hx.ones(LONG, dtype=hx.int32, device="gpu").sum().item() == LONG
    sevens = hx.arange(LONG, device="gpu") % 7  # the first maximum is at 6
    assert sevens.argmax().item() == 6 and sevens.max().item() == 6
    assert sevens.min().item() == 0
    ramp = hx.arange(LONG, dtype=hx.float32, device="gpu")
    assert ramp.argmax().item() == LONG - 1 and ramp.max().item() == LONG - 1
    # two rows, and the reduced dim strided (columns of a transposed view)
    rows = hx.ones(2, LONG // 2, device="gpu")
    assert rows.sum(1).tolist() == [LONG // 2] * 2
    assert rows.t().sum(0).tolist() == [LONG // 2] * 2
    assert rows.t().argmax(0).tolist() == [0, 0]


@pytest.mark.gpu
def test_softmax_and_cross_entropy_of_rows_past_the_adapters_loop_limit(be):
    x = hx.zeros(1, LONG, device="gpu")
    assert x.softmax(-1).sum().item() == pytest.approx(1.0, rel=1e-4)
    assert x.log_softmax(-1)[0, -1].item() == pytest.approx(-np.log(LONG), rel=1e-6)
    target = hx.tensor([LONG - 1], device="gpu")
    assert F.cross_entropy(x, target).item() == pytest.approx(np.log(LONG), rel=1e-6)


@pytest.mark.gpu
def test_an_embedding_gradient_over_many_positions_matches_the_cpu(be):
    idx = np.random.default_rng(0).integers(0, 50, 70_000)
    g = values(70_000, 3)
    for device in ("cpu", "gpu"):
        w = hx.zeros(50, 3, device=device, requires_grad=True)
        w[hx.tensor(idx, device=device)].backward(hx.tensor(g, device=device))
        if device == "cpu":
            want = w.grad.numpy()
    np.testing.assert_allclose(w.grad.to("cpu").numpy(), want, rtol=1e-4, atol=1e-3)


# -- what crashed or reached the user as a raw error ---------------------------------------
EINSUMS = [("ij->j", [(2, 3)]), ("ii->i", [(3, 3)]), ("iij->ji", [(3, 3, 2)]), ("ii", [(3, 3)]),
           ("...ij,...jk->...ik", [(2, 2, 3), (2, 3, 4)]),
           ("...ij,...jk", [(5, 2, 2, 3), (2, 3, 4)]),
           ("i...->...", [(2, 3, 4)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
           ("i,i,i->", [(4,), (4,), (4,)]), ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
           ("ij,kj->ik", [(2, 3), (1, 3)]), ("ii,i->i", [(3, 3), (3,)]), (",->", [(), ()])]


@pytest.mark.parametrize("equation, shapes", EINSUMS, ids=[e for e, _ in EINSUMS])
def test_einsum_with_ellipsis_diagonals_and_many_operands_matches_pytorch(device, equation,
                                                                           shapes):
    arrays = [values(*s, seed=i) for i, s in enumerate(shapes)]
    ours = [hx.tensor(a, device=device, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    got, want = hx.einsum(equation, *ours), torch.einsum(equation, *theirs)
    assert got.shape == tuple(want.shape)
    np.testing.assert_allclose(got.detach().to("cpu").numpy(), want.detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    g = values(*want.shape, seed=9)
    got.backward(hx.tensor(g, device=device))
    want.backward(torch.tensor(g))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.to("cpu").numpy(), b.grad.numpy(), rtol=1e-5,
                                   atol=1e-5)


@pytest.mark.parametrize("equation, shapes", [("ij,jk->ik", [(2, 3), (4, 5)]),
                                              ("ij->k", [(2, 3)]), ("ij", [(2,)]),
                                              ("ij,jk", [(2, 3)]), ("ij->ii", [(2, 2)])])
def test_einsum_refuses_what_pytorch_refuses_with_a_runtime_error(equation, shapes):
    with pytest.raises(RuntimeError, match="einsum"):
        hx.einsum(equation, *[hx.ones(*s) for s in shapes])
    with pytest.raises(RuntimeError):
        torch.einsum(equation, *[torch.ones(*s) for s in shapes])


@pytest.mark.parametrize("value", [2.5, 0.0])
def test_nonzero_of_a_0d_tensor_as_pytorch(value):
    assert hx.tensor(value).nonzero().shape == tuple(torch.tensor(value).nonzero().shape)
    (ours,), (theirs,) = hx.tensor(value).nonzero(as_tuple=True), \
        torch.tensor(value).nonzero(as_tuple=True)
    assert ours.tolist() == theirs.tolist() and ours.dtype is hx.int64


def test_normalize_with_p_0_divides_by_the_count_of_nonzeros():
    a = np.array([[0.0, 1.0, 2.0], [3.0, 0.0, 5.0]], np.float32)
    x, t = hx.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, u = F.normalize(x, p=0), torch.nn.functional.normalize(t, p=0)
    np.testing.assert_allclose(y.detach().numpy(), u.detach().numpy(), rtol=1e-6)
    y.sum().backward()
    u.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-6)


def test_the_gradient_of_an_empty_cumprod_is_empty():
    x = hx.zeros(2, 0, requires_grad=True)
    x.cumprod(1).sum().backward()
    assert x.grad.shape == (2, 0)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "constant"])
def test_pad_with_negative_entries_crops_as_pytorch(mode):
    for shape, pad in [((2, 5), (-1, 2)), ((2, 5), (2, -1)), ((2, 5), (-2, -1)),
                       ((1, 1, 5, 5), (3, -3, 0, -3)), ((1, 1, 5, 5), (3, -5, 1, -5)),
                       ((1, 1, 5, 5), (0, 0, 0, -5)), ((3, 3, 3, 3), (-1, 2, 2, -1))]:
        a = values(*shape)
        got = F.pad(hx.tensor(a), pad, mode=mode)
        want = torch.nn.functional.pad(torch.tensor(a), pad, mode=mode)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_scatter_refuses_a_source_of_another_dtype_and_an_oversized_index():
    with pytest.raises(RuntimeError, match="dtype float32 and the input float16"):
        hx.zeros(3, dtype=hx.float16).scatter(0, hx.tensor([1]), hx.ones(1))
    with pytest.raises(RuntimeError, match="float16"):
        hx.zeros(3, dtype=hx.float16).scatter_add(0, hx.tensor([1]), hx.ones(1))
    with pytest.raises(IndexError, match="index 5 is out of bounds for dim 0 of size 3"):
        hx.zeros(3).scatter(0, hx.tensor([5]), hx.ones(1))


@pytest.mark.gpu
def test_gather_names_the_devices_of_an_index_on_another_device(be):
    with pytest.raises(RuntimeError, match="gather: index on gpu, input on cpu"):
        hx.ones(3).gather(0, hx.tensor([1], device="gpu"))


MORE_BAD_ARGUMENTS = {
    "gather dims": lambda: hx.ones(2, 3).gather(0, hx.tensor([0])),
    "diagonal dims": lambda: hx.ones(2, 3).diagonal(0, 0, 0),
    "cat of 0-d": lambda: hx.cat([hx.tensor(1.0), hx.tensor(2.0)]),
    "clamp without bounds": lambda: hx.ones(2).clamp(),
    "int to a negative power": lambda: hx.tensor([2]) ** -1,
    "linspace to bool": lambda: hx.linspace(0, 1, 3, dtype=hx.bool),
    "einsum shapes": lambda: hx.einsum("ij,jk->ik", hx.ones(2, 3), hx.ones(4, 5)),
}


@pytest.mark.parametrize("case", sorted(MORE_BAD_ARGUMENTS))
def test_more_bad_arguments_raise_pytorchs_runtime_error(case):
    with pytest.raises(OpError):
        MORE_BAD_ARGUMENTS[case]()


def test_empty_inputs_skip_dtype_checks_and_bool_powers_stay_bool_as_pytorch():
    empty = hx.zeros(0, dtype=hx.int64)
    assert empty.softmax(0).shape == (0,) and empty.log_softmax(0).dtype is hx.int64
    b = [True, False]
    for exponent in (True, False):
        got, want = hx.tensor(b) ** exponent, torch.tensor(b) ** exponent
        assert got.dtype is hx.bool and got.tolist() == want.tolist()
    assert (hx.tensor(b) ** 2).tolist() == (torch.tensor(b) ** 2).tolist()


def test_layer_norm_takes_its_weight_and_bias_positionally():
    a, w, b = values(2, 3), values(3, seed=1), values(3, seed=2)
    got = F.layer_norm(hx.tensor(a), (3,), hx.tensor(w), hx.tensor(b))
    want = torch.nn.functional.layer_norm(torch.tensor(a), (3,), torch.tensor(w),
                                          torch.tensor(b))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
def test_int64_past_int32_moved_to_a_gpu_without_shader_int64_is_refused(be):
    import subprocess
    import sys

    code = ("import haelixe as hx\n"
            "for move in (lambda: hx.tensor([2**40]).to('gpu'),\n"
            "             lambda: hx.tensor([1, -2**31 - 1]).gpu(),\n"
            "             lambda: hx.arange(2**31, 2**31 + 2, device='gpu'),\n"
            "             lambda: hx.zeros(2, dtype=hx.int64, device='gpu').fill_(2**40)):\n"
            "    try:\n"
            "        move()\n"
            "    except OverflowError as e:\n"
            "        assert 'shader-int64' in str(e), e\n"
            "    else:\n"
            "        raise AssertionError('no error')\n"
            "assert hx.tensor([2**31 - 1]).to('gpu').to('cpu').tolist() == [2**31 - 1]\n"
            "print('ok')\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env=dict(__import__("os").environ,
                                               HAELIXE_GPU_DISABLE="shader-int64"))
    assert res.returncode == 0 and "ok" in res.stdout, res.stderr[-2000:]


@pytest.mark.gpu
def test_attention_over_more_keys_than_the_flash_kernels_walk_matches_the_cpu(be):
    q, k, v = values(1, 1, 4, 16, seed=1), values(1, 1, 70_000, 16, seed=2), \
        values(1, 1, 70_000, 16, seed=3)
    grads = {}
    for device in ("cpu", "gpu"):
        ts = [hx.tensor(a, device=device, requires_grad=True) for a in (q, k, v)]
        out = F.scaled_dot_product_attention(*ts)
        (out * out).sum().backward()
        grads[device] = [out.detach().to("cpu").numpy()] + [t.grad.to("cpu").numpy()
                                                            for t in ts]
    for got, want in zip(grads["gpu"], grads["cpu"]):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-6)


def test_grouped_query_attention_repeats_each_key_head_as_pytorch(device):
    q, k, v = values(2, 6, 5, 8, seed=1), values(2, 2, 7, 8, seed=2), values(2, 2, 7, 8, seed=3)
    ours = [hx.tensor(a, device=device, requires_grad=True) for a in (q, k, v)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    got = F.scaled_dot_product_attention(*ours, enable_gqa=True)
    want = torch.nn.functional.scaled_dot_product_attention(*theirs, enable_gqa=True)
    np.testing.assert_allclose(got.detach().to("cpu").numpy(), want.detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    got.sum().backward()
    want.sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.to("cpu").numpy(), b.grad.numpy(), rtol=1e-4,
                                   atol=1e-5)


def test_gather_and_scatter_out_of_range_raise_a_runtime_error_on_each_device(device):
    for op in (lambda: hx.ones(3, device=device).gather(0, hx.tensor([5], device=device)),
               lambda: hx.zeros(3, device=device).scatter(0, hx.tensor([5], device=device),
                                                          hx.ones(1, device=device))):
        with pytest.raises(RuntimeError, match="index 5 is out of bounds for dim 0 of size 3"):
            op()
    with pytest.raises(IndexError):  # (an IndexError too, as numpy's)
        hx.ones(3, device=device).gather(0, hx.tensor([3], device=device))


@pytest.mark.parametrize("name", ["gather", "scatter_add", "index_select", "index_add"])
def test_index_ops_refuse_negative_indices_as_pytorch_does(device, name):
    calls = {
        "gather": lambda m, x, i: x.gather(1, i.reshape(1, 1).expand(2, 1)),
        "scatter_add": lambda m, x, i: x.scatter_add(1, i.reshape(1, 1).expand(2, 1),
                                                     x[:, :1]),
        "index_select": lambda m, x, i: x.index_select(1, i),
        "index_add": lambda m, x, i: x.index_add(1, i, x[:, :1]),
    }
    with pytest.raises(RuntimeError):
        calls[name](torch, torch.ones(2, 3), torch.tensor([-1]))
    with pytest.raises(RuntimeError, match="index -1 is out of bounds for dim 1 of size 3"):
        out = calls[name](hx, hx.ones(2, 3, device=device), hx.tensor([-1], device=device))
        out.to("cpu").numpy()  # (a device may check at the next read-back)


@pytest.mark.parametrize("data, correction, dim", [
    ([1.5, 2.5], 2, None), ([1.5, 2.5], 2, 0), ([1.5, 2.5], 3, 0), ([3.0], 1, None),
    ([3.0], 1, 0), ([3.0, 3.0], 2, None), ([1.0, 2.0, 6.0], 4, 0),
    ([[1.0, 2.0], [3.0, 3.0]], 2, 1), ([[1.0, 2.0], [3.0, 5.0]], 4, (0, 1))])
@pytest.mark.parametrize("fn", ["var", "std"])
def test_var_and_std_without_degrees_of_freedom_have_pytorchs_gradient(device, data,
                                                                      correction, dim, fn):
    kw = {} if dim is None else {"dim": dim}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch warns about the degrees of freedom
        t = torch.tensor(data, dtype=torch.float64, requires_grad=True)
        want = getattr(t, fn)(correction=correction, **kw)
        want.sum().backward()
    dtype = hx.float64 if device == "cpu" else hx.float32  # (WGSL has no f64)
    x = hx.tensor(data, dtype=dtype, device=device, requires_grad=True)
    got = getattr(x, fn)(correction=correction, **kw)
    got.sum().backward()
    np.testing.assert_array_equal(got.detach().to("cpu").numpy(), want.detach().numpy())
    np.testing.assert_array_equal(x.grad.to("cpu").numpy(), t.grad.numpy())


_SCALAR_MASK_KEYS = [(True, 1), (False, 1), (1, True), (True, [0, 2]), (True,), (True, 1, 2),
                     (slice(None), True, 2), (1, slice(None), False), (Ellipsis, True, 3)]


def _key(key, make):
    return tuple(make(k) if isinstance(k, (bool, list)) else k for k in key)


@pytest.mark.parametrize("key", _SCALAR_MASK_KEYS)
def test_a_0d_bool_mask_among_integer_indices_reads_and_writes_as_pytorch(device, key):
    data = values(3, 4).astype(np.float32)
    t = torch.tensor(data, requires_grad=True)
    want = t[_key(key, torch.tensor)]
    (want * torch.arange(want.numel()).reshape(want.shape)).sum().backward()
    x = hx.tensor(data, device=device, requires_grad=True)
    got = x[_key(key, lambda k: hx.tensor(k, device=device))]
    assert got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.detach().to("cpu").numpy(), want.detach().numpy())
    weights = hx.arange(got.numel(), dtype=hx.float32, device=device).reshape(got.shape)
    (got * weights).sum().backward()
    np.testing.assert_array_equal(x.grad.to("cpu").numpy(), t.grad.numpy())
    tw = torch.tensor(data)
    tw[_key(key, torch.tensor)] = -7.0
    w = hx.tensor(data, device=device)
    w[_key(key, lambda k: hx.tensor(k, device=device))] = -7.0
    np.testing.assert_array_equal(w.to("cpu").numpy(), tw.numpy())


_WRITES = {
    "fill_": lambda lib, dt, v: lib.zeros(3, 4, dtype=dt).fill_(v),
    "full": lambda lib, dt, v: lib.full((3, 4), v, dtype=dt),
    "setitem": lambda lib, dt, v: _set_columns(lib.zeros(3, 4, dtype=dt), v),
}


def _set_columns(t, v):
    t[:, 1::2] = v  # (a strided view: not the whole-tensor fill)
    return t


@pytest.mark.parametrize("how", sorted(_WRITES))
@pytest.mark.parametrize("dtype,value", [
    ("uint8", 300), ("uint8", -1), ("uint8", -300), ("int8", 200.0), ("int32", 3e9),
    ("int16", 7), ("bool", 5), ("float32", 1e40), ("float32", -1e40),
    ("float32", float("inf")), ("float32", float("nan")), ("float64", 1e300),
    ("float16", 70000.0), ("float16", 60000.0), ("bfloat16", 1e40), ("float32", 2**40)])
def test_a_number_written_into_a_tensor_is_range_checked_as_in_pytorch(how, dtype, value):
    """fill_, full and x[key] = v refuse a number the dtype cannot hold, as PyTorch's
    checked conversion does (a finite float beyond a float dtype's range included), and
    write what PyTorch writes otherwise."""
    write = _WRITES[how]
    try:
        expected = write(torch, getattr(torch, dtype), value).float().numpy()
    except RuntimeError as e:
        assert "overflow" in str(e)
        with pytest.raises(RuntimeError, match="without overflow"):
            write(hx, getattr(hx, dtype), value)
        return
    got = write(hx, getattr(hx, dtype), value).float().numpy()
    np.testing.assert_array_equal(got, expected)
