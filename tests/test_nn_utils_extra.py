"""torch.nn.utils.prune, spectral norm (both forms), parametrizations.orthogonal,
nn.utils.skip_init and torch.optim.swa_utils against PyTorch: masks (ties included),
state-dict keys, values and gradients over a few training steps, and errors."""

import copy
import math

import numpy as np
import pytest

import haelixe as hx
from haelixe import nn
from haelixe.nn.prune_select import topk_positions
from haelixe.nn.utils import parametrizations, prune
from haelixe.optim import swa_utils

torch = pytest.importorskip("torch")
import torch.nn.utils.prune as t_prune  # noqa: E402
from torch.nn.utils import parametrizations as t_parametrizations  # noqa: E402
from torch.optim import swa_utils as t_swa  # noqa: E402


def _np(t):
    return t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)


def _copy_into(ours, theirs):
    """Give ``ours`` the values of every parameter and buffer of ``theirs``."""
    with hx.no_grad():
        for (name, t), (tname, tt) in zip(ours.state_dict(keep_vars=True).items(),
                                          theirs.state_dict(keep_vars=True).items()):
            assert name == tname
            t.copy_(hx.tensor(_np(tt)))


def _linear_pair(i, o, values=None, dtype="float32"):
    theirs = torch.nn.Linear(i, o).to(getattr(torch, dtype))
    if values is not None:
        with torch.no_grad():
            theirs.weight.copy_(torch.tensor(values))
    ours = nn.Linear(i, o).to(dtype)
    _copy_into(ours, theirs)
    return ours, theirs


def _mlp_pair(dtype="float64"):
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(),
                                 torch.nn.Linear(6, 3)).to(getattr(torch, dtype))
    ours = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3)).to(dtype)
    _copy_into(ours, theirs)
    return ours, theirs


def _same_masks(ours, theirs, name="weight"):
    np.testing.assert_array_equal(_np(getattr(ours, name + "_mask")),
                                  _np(getattr(theirs, name + "_mask")))


# -- the selection, ties included -------------------------------------------------------------
@pytest.mark.parametrize("n", [5, 64, 65, 130, 700, 5000])
def test_topk_positions_pick_the_tied_entries_pytorch_picks(n):
    rng = np.random.default_rng(n)
    for levels in (1, 2, 3, 7):
        v = rng.integers(0, levels, n).astype(np.float32)
        for k in sorted({1, 2, n // 70 + 1, n // 3, n // 2, n - 1}):
            for largest in (False, True):
                want = torch.topk(torch.from_numpy(v), k, largest=largest).indices.numpy()
                np.testing.assert_array_equal(topk_positions(v, k, largest), np.sort(want))


def test_topk_positions_with_nans_and_distinct_values():
    v = np.array([3.0, np.nan, 1.0, 1.0, np.nan, 0.5, 2.0, 1.0], np.float32)
    for k in range(9):
        for largest in (False, True):
            want = torch.topk(torch.from_numpy(v), k, largest=largest).indices.numpy()
            np.testing.assert_array_equal(topk_positions(v, k, largest), np.sort(want))


# -- prune ------------------------------------------------------------------------------------
def test_l1_unstructured_reparametrizes_as_pytorch():
    ours, theirs = _linear_pair(6, 5)
    assert prune.l1_unstructured(ours, "weight", amount=0.3) is ours
    t_prune.l1_unstructured(theirs, "weight", amount=0.3)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == \
        ["bias", "weight_orig", "weight_mask"]
    assert [n for n, _ in ours.named_parameters()] == ["bias", "weight_orig"]
    assert [n for n, _ in ours.named_buffers()] == ["weight_mask"]
    _same_masks(ours, theirs)
    assert int((_np(ours.weight_mask) == 0).sum()) == 9  # round(0.3 * 30)
    assert ours.weight_mask.dtype == hx.float32
    np.testing.assert_array_equal(_np(ours.weight), _np(theirs.weight))
    assert prune.is_pruned(ours) and not prune.is_pruned(nn.Linear(2, 2))
    hooks = list(ours._forward_pre_hooks.values())
    assert len(hooks) == 1 and isinstance(hooks[0], prune.L1Unstructured)
    assert hooks[0]._tensor_name == "weight" and hooks[0].amount == 0.3


def test_ties_are_broken_as_pytorch_breaks_them():
    rng = np.random.default_rng(3)
    for shape, amount in [((10, 20), 0.3), ((70, 100), 0.01), ((70, 100), 0.5),
                          ((8, 9), 7), ((8, 9), 0.99), ((1, 5), 0.5), ((1, 7), 0.5)]:
        values = rng.integers(-2, 3, shape).astype(np.float32)
        ours, theirs = _linear_pair(shape[1], shape[0], values)
        prune.l1_unstructured(ours, "weight", amount)
        t_prune.l1_unstructured(theirs, "weight", amount)
        _same_masks(ours, theirs)


def test_repeated_pruning_composes_through_a_container():
    rng = np.random.default_rng(4)
    values = rng.integers(-3, 4, (6, 8)).astype(np.float32)
    ours, theirs = _linear_pair(8, 6, values)
    steps = [("l1_unstructured", dict(amount=0.25)),
             ("ln_structured", dict(amount=2, n=2, dim=0)),
             ("l1_unstructured", dict(amount=5)),
             ("ln_structured", dict(amount=0.25, n=1, dim=1)),
             ("identity", {})]
    for fn, kwargs in steps:
        getattr(prune, fn)(ours, "weight", **kwargs)
        getattr(t_prune, fn)(theirs, "weight", **kwargs)
        _same_masks(ours, theirs)
    (hook,) = ours._forward_pre_hooks.values()
    assert isinstance(hook, prune.PruningContainer) and len(hook) == 5
    assert [type(m).__name__ for m in hook] == \
        [type(m).__name__ for m in next(iter(theirs._forward_pre_hooks.values()))]
    assert isinstance(hook[1], prune.LnStructured) and hook[1].dim == 0
    assert list(ours.state_dict()) == list(theirs.state_dict())
    x = rng.standard_normal((3, 8)).astype(np.float32)
    np.testing.assert_allclose(_np(ours(hx.tensor(x))), _np(theirs(torch.tensor(x))),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n", [1, 2, 3, math.inf, -math.inf, 0])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_ln_structured_orders_and_dims(n, dim):
    torch.manual_seed(5)
    theirs = torch.nn.Conv2d(3, 6, 3)
    ours = nn.Conv2d(3, 6, 3)
    _copy_into(ours, theirs)
    prune.ln_structured(ours, "weight", amount=0.5, n=n, dim=dim)
    t_prune.ln_structured(theirs, "weight", amount=0.5, n=n, dim=dim)
    _same_masks(ours, theirs)
    kept = _np(ours.weight_mask).sum(axis=tuple(d for d in range(4) if d != dim % 4))
    assert sorted(set(kept.tolist())) == [0.0, 162.0 / ours.weight.shape[dim]]
    assert int((kept == 0).sum()) == round(0.5 * ours.weight.shape[dim])


def test_ln_structured_frobenius_norm_takes_one_or_two_dims():
    torch.manual_seed(5)
    for make in (lambda lib: lib.nn.Linear(4, 6), lambda lib: lib.nn.Conv1d(2, 5, 3)):
        theirs, ours = make(torch), make(hx)
        _copy_into(ours, theirs)
        prune.ln_structured(ours, "weight", amount=2, n="fro", dim=0)
        t_prune.ln_structured(theirs, "weight", amount=2, n="fro", dim=0)
        _same_masks(ours, theirs)
    with pytest.raises(RuntimeError, match="'fro'"):
        prune.ln_structured(nn.Conv2d(1, 2, 2), "weight", 1, "fro", 0)
    with pytest.raises(RuntimeError):
        t_prune.ln_structured(torch.nn.Conv2d(1, 2, 2), "weight", 1, "fro", 0)


def test_ln_structured_nuclear_norm_of_matrix_slices():
    torch.manual_seed(6)
    theirs = torch.nn.Conv1d(3, 5, 4)
    ours = nn.Conv1d(3, 5, 4)
    _copy_into(ours, theirs)
    prune.ln_structured(ours, "weight", amount=2, n="nuc", dim=0)
    t_prune.ln_structured(theirs, "weight", amount=2, n="nuc", dim=0)
    _same_masks(ours, theirs)


def test_importance_scores_rank_instead_of_the_weight():
    ours, theirs = _linear_pair(5, 4)
    scores = np.arange(20, dtype=np.float32).reshape(4, 5)[:, ::-1].copy()
    prune.l1_unstructured(ours, "weight", 6, importance_scores=hx.tensor(scores))
    t_prune.l1_unstructured(theirs, "weight", 6, importance_scores=torch.tensor(scores))
    _same_masks(ours, theirs)
    prune.ln_structured(ours, "weight", 1, 2, 0, importance_scores=hx.tensor(scores))
    t_prune.ln_structured(theirs, "weight", 1, 2, 0, importance_scores=torch.tensor(scores))
    _same_masks(ours, theirs)
    with pytest.raises(ValueError, match="importance_scores should have the same shape"):
        prune.l1_unstructured(ours, "weight", 1, importance_scores=hx.ones(3))


def _convnet(lib):
    n = lib.nn
    return n.Sequential(n.Conv2d(1, 3, 3), n.ReLU(), n.Flatten(), n.Linear(12, 5),
                        n.ReLU(), n.Linear(5, 2))


def test_global_unstructured_ranks_all_tensors_together():
    torch.manual_seed(7)
    theirs, ours = _convnet(torch), _convnet(hx)
    _copy_into(ours, theirs)
    for amount in (0.3, 10):
        for model, lib in ((ours, prune), (theirs, t_prune)):
            pairs = [(model[0], "weight"), (model[3], "weight"), (model[5], "weight"),
                     (model[5], "bias")]
            lib.global_unstructured(pairs, pruning_method=lib.L1Unstructured, amount=amount)
        for i in (0, 3, 5):
            _same_masks(ours[i], theirs[i])
        _same_masks(ours[5], theirs[5], "bias")
    assert list(ours.state_dict()) == list(theirs.state_dict())
    zeros = sum(int((_np(m.weight) == 0).sum()) for m in (ours[0], ours[3], ours[5]))
    assert zeros + int((_np(ours[5].bias) == 0).sum()) == round(0.3 * 99) + 10


def test_global_unstructured_with_importance_scores_and_errors():
    torch.manual_seed(8)
    theirs, ours = _convnet(torch), _convnet(hx)
    _copy_into(ours, theirs)
    scores = np.linspace(-1, 1, 60, dtype=np.float32).reshape(5, 12)
    prune.global_unstructured([(ours[3], "weight"), (ours[5], "weight")],
                              prune.L1Unstructured,
                              importance_scores={(ours[3], "weight"): hx.tensor(scores)},
                              amount=20)
    t_prune.global_unstructured([(theirs[3], "weight"), (theirs[5], "weight")],
                                t_prune.L1Unstructured,
                                importance_scores={(theirs[3], "weight"):
                                                   torch.tensor(scores)}, amount=20)
    _same_masks(ours[3], theirs[3])
    _same_masks(ours[5], theirs[5])
    with pytest.raises(TypeError, match='Only "unstructured"'):
        prune.global_unstructured([(ours[0], "weight")], prune.LnStructured, amount=1, n=2,
                                  dim=0)
    with pytest.raises(TypeError, match="importance_scores must be of type dict"):
        prune.global_unstructured([(ours[0], "weight")], prune.L1Unstructured,
                                  importance_scores=[1], amount=1)
    with pytest.raises(TypeError, match="not an Iterable"):
        prune.global_unstructured(3, prune.L1Unstructured, amount=1)


def test_custom_mask_identity_and_a_method_of_ones_own():
    ours, theirs = _linear_pair(4, 3)
    mask = np.array([[1, 0, 1, 1], [0, 0, 1, 1], [1, 1, 1, 0]], np.float32)
    prune.identity(ours, "bias")
    t_prune.identity(theirs, "bias")
    np.testing.assert_array_equal(_np(ours.bias_mask), np.ones(3, np.float32))
    prune.custom_from_mask(ours, "weight", hx.tensor(mask))
    t_prune.custom_from_mask(theirs, "weight", torch.tensor(mask))
    _same_masks(ours, theirs)

    class EveryOther(prune.BasePruningMethod):
        PRUNING_TYPE = "unstructured"

        def compute_mask(self, t, default_mask):
            mask = default_mask.clone()
            mask.view(-1)[::2] = 0
            return mask

    class TEveryOther(t_prune.BasePruningMethod):
        PRUNING_TYPE = "unstructured"

        def compute_mask(self, t, default_mask):
            mask = default_mask.clone()
            mask.view(-1)[::2] = 0
            return mask

    EveryOther.apply(ours, "weight")
    TEveryOther.apply(theirs, "weight")
    _same_masks(ours, theirs)
    assert not _np(ours.weight_mask).all()
    pruned = prune.L1Unstructured(amount=2).prune(hx.tensor([3.0, -1.0, 0.5, 2.0]))
    np.testing.assert_array_equal(_np(pruned), [3.0, 0.0, 0.0, 2.0])


def test_remove_bakes_the_mask_into_one_parameter():
    ours, theirs = _linear_pair(5, 4)
    for model, lib in ((ours, prune), (theirs, t_prune)):
        lib.l1_unstructured(model, "weight", 0.5)
        lib.random_unstructured(model, "bias", 1)
    orig = ours.weight_orig
    assert prune.remove(ours, "weight") is ours
    t_prune.remove(theirs, "weight")
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert ours.weight is orig and isinstance(ours.weight, nn.Parameter)
    np.testing.assert_array_equal(_np(ours.weight), _np(theirs.weight))
    assert prune.is_pruned(ours)
    prune.remove(ours, "bias")
    assert not prune.is_pruned(ours) and list(ours.state_dict()) == ["weight", "bias"]
    with pytest.raises(ValueError, match="has to be pruned before pruning can be removed"):
        prune.remove(ours, "weight")
    with pytest.raises(ValueError, match="has to be pruned before pruning can be removed"):
        t_prune.remove(theirs, "weight")


def test_training_a_pruned_model_keeps_the_pruned_entries_at_zero():
    ours, theirs = _mlp_pair()
    for model, lib in ((ours, prune), (theirs, t_prune)):
        lib.l1_unstructured(model[0], "weight", 0.4)
        lib.ln_structured(model[2], "weight", 1, 2, 0)
    opt = hx.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(9)
    for _ in range(4):
        x, y = rng.standard_normal((8, 4)), rng.standard_normal((8, 3))
        loss = ((ours(hx.tensor(x)) - hx.tensor(y)) ** 2).mean()
        tloss = ((theirs(torch.tensor(x)) - torch.tensor(y)) ** 2).mean()
        opt.zero_grad()
        topt.zero_grad()
        loss.backward()
        tloss.backward()
        np.testing.assert_allclose(_np(ours[0].weight_orig.grad),
                                   _np(theirs[0].weight_orig.grad), rtol=1e-10, atol=1e-12)
        opt.step()
        topt.step()
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(_np(ours.state_dict()[key]), _np(value), rtol=1e-10,
                                   atol=1e-12)
    ours(hx.tensor(x))
    assert (_np(ours[0].weight)[_np(ours[0].weight_mask) == 0] == 0).all()


def test_pruning_a_recurrent_weight():
    torch.manual_seed(23)
    theirs = torch.nn.LSTM(3, 4, num_layers=2).double()
    ours = nn.LSTM(3, 4, num_layers=2).double()
    _copy_into(ours, theirs)
    for model, lib in ((ours, prune), (theirs, t_prune)):
        lib.l1_unstructured(model, "weight_hh_l0", 0.5)
        lib.ln_structured(model, "weight_ih_l1", 0.25, 2, 0)
    _same_masks(ours, theirs, "weight_hh_l0")
    _same_masks(ours, theirs, "weight_ih_l1")
    assert list(ours.state_dict()) == list(theirs.state_dict())
    x = np.random.default_rng(24).standard_normal((5, 2, 3))
    out, _ = ours(hx.tensor(x))
    tout, _ = theirs(torch.tensor(x))
    np.testing.assert_allclose(_np(out), _np(tout), rtol=1e-10, atol=1e-12)
    out.sum().backward()
    tout.sum().backward()
    np.testing.assert_allclose(_np(ours.weight_hh_l0_orig.grad),
                               _np(theirs.weight_hh_l0_orig.grad), rtol=1e-9, atol=1e-12)


def test_a_pruned_model_loads_pytorch_state_and_copies():
    ours, theirs = _linear_pair(4, 3)
    t_prune.l1_unstructured(theirs, "weight", 0.5)
    prune.l1_unstructured(ours, "weight", 0.25)
    ours.load_state_dict({k: _np(v) for k, v in theirs.state_dict().items()})
    ours(hx.ones(1, 4))  # (the hook recomputes weight from the loaded mask)
    np.testing.assert_array_equal(_np(ours.weight), _np(theirs.weight))
    twin = copy.deepcopy(ours)
    prune.l1_unstructured(twin, "weight", 2)
    assert isinstance(next(iter(twin._forward_pre_hooks.values())), prune.PruningContainer)
    assert isinstance(next(iter(ours._forward_pre_hooks.values())), prune.L1Unstructured)


def test_random_methods_zero_the_right_amount_and_follow_the_seed():
    hx.manual_seed(0)
    a = prune.random_unstructured(nn.Linear(10, 10), "weight", 0.35)
    hx.manual_seed(0)
    b = prune.random_unstructured(nn.Linear(10, 10), "weight", 0.35)
    np.testing.assert_array_equal(_np(a.weight_mask), _np(b.weight_mask))
    assert int((_np(a.weight_mask) == 0).sum()) == 35
    c = prune.random_structured(nn.Conv2d(2, 8, 3), "weight", 3, dim=0)
    per_channel = _np(c.weight_mask).sum(axis=(1, 2, 3))
    assert sorted(per_channel.tolist()) == [0.0] * 3 + [18.0] * 5
    d = prune.random_structured(nn.Linear(6, 4), "weight", 0.5, -1)
    assert sorted(_np(d.weight_mask).sum(axis=0).tolist()) == [0.0] * 3 + [4.0] * 3
    # the second structured method acts on the channels the first left
    prune.random_structured(c, "weight", 2, dim=0)
    assert int((_np(c.weight_mask).sum(axis=(1, 2, 3)) == 0).sum()) == 5


@pytest.mark.parametrize("call, error, match", [
    (lambda lib, m: lib.l1_unstructured(m, "weight", -1), ValueError, "amount=-1"),
    (lambda lib, m: lib.l1_unstructured(m, "weight", 1.5), ValueError, "amount=1.5"),
    (lambda lib, m: lib.l1_unstructured(m, "weight", "half"), TypeError,
     "Invalid type for amount"),
    (lambda lib, m: lib.l1_unstructured(m, "weight", 13), ValueError,
     "amount=13 should be smaller than the number of parameters to prune=12"),
    (lambda lib, m: lib.ln_structured(m, "bias", 1, 2, 0), ValueError,
     "Structured pruning can only be applied to multidimensional tensors"),
    (lambda lib, m: lib.ln_structured(m, "weight", 1, 2, 2), IndexError, "Invalid index 2"),
    (lambda lib, m: lib.random_structured(m, "weight", 5, 0), ValueError,
     "amount=5 should be smaller"),
    (lambda lib, m: lib.l1_unstructured(m, "nothing", 1), AttributeError, "nothing"),
])
def test_errors_match_pytorch(call, error, match):
    ours, theirs = _linear_pair(3, 4)
    with pytest.raises(error, match=match):
        call(prune, ours)
    with pytest.raises(error, match=match):
        call(t_prune, theirs)
    # nothing was half done: the parameter is where it was (PyTorch's roll back
    # registers it anew, after the bias)
    assert list(ours.state_dict()) == ["weight", "bias"]
    assert set(theirs.state_dict()) == {"weight", "bias"}
    assert not prune.is_pruned(ours) and not t_prune.is_pruned(theirs)


def test_container_errors():
    a = prune.L1Unstructured(0.5)
    a._tensor_name = "weight"
    b = prune.L1Unstructured(0.5)
    b._tensor_name = "bias"
    container = prune.PruningContainer(a)
    with pytest.raises(ValueError, match="acting on the parameter named 'weight'"):
        container.add_pruning_method(b)
    with pytest.raises(TypeError, match="is not a BasePruningMethod subclass"):
        container.add_pruning_method(3)
    assert len(prune.PruningContainer(a, copy.copy(a))) == 2


# -- spectral norm ----------------------------------------------------------------------------
def _sgd_steps(ours, theirs, steps, shape, lr=0.1):
    opt = hx.optim.SGD(ours.parameters(), lr=lr)
    topt = torch.optim.SGD(theirs.parameters(), lr=lr)
    rng = np.random.default_rng(11)
    for _ in range(steps):
        x = rng.standard_normal(shape)
        out, tout = ours(hx.tensor(x)), theirs(torch.tensor(x))
        np.testing.assert_allclose(_np(out), _np(tout), rtol=1e-9, atol=1e-11)
        opt.zero_grad()
        topt.zero_grad()
        (out ** 2).sum().backward()
        (tout ** 2).sum().backward()
        for (name, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
            np.testing.assert_allclose(_np(p.grad), _np(tp.grad), rtol=1e-8, atol=1e-10,
                                       err_msg=name)
        opt.step()
        topt.step()


@pytest.mark.parametrize("make", [
    lambda lib: lib.nn.Linear(4, 3),
    lambda lib: lib.nn.Conv2d(2, 3, 2),
    lambda lib: lib.nn.ConvTranspose2d(2, 3, 2),
])
def test_spectral_norm_hook_form_trains_as_pytorch(make):
    torch.manual_seed(12)
    theirs, ours = make(torch).double(), make(hx).double()
    _copy_into(ours, theirs)
    kwargs = dict(n_power_iterations=2)
    assert nn.utils.spectral_norm(ours, **kwargs) is ours
    torch.nn.utils.spectral_norm(theirs, **kwargs)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == \
        ["bias", "weight_orig", "weight_u", "weight_v"]
    assert ours.weight_u.shape == tuple(theirs.weight_u.shape)
    assert ours.weight_v.shape == tuple(theirs.weight_v.shape)
    _copy_into(ours, theirs)  # (their random u and v)
    shape = (2, 4) if isinstance(theirs, torch.nn.Linear) else (2, 2, 3, 3)
    _sgd_steps(ours, theirs, 3, shape)
    for key in ("weight_u", "weight_v", "weight_orig"):
        np.testing.assert_allclose(_np(getattr(ours, key)), _np(getattr(theirs, key)),
                                   rtol=1e-9, atol=1e-12)
    ours.eval()
    theirs.eval()
    u = _np(ours.weight_u).copy()
    x = np.ones(shape)
    np.testing.assert_allclose(_np(ours(hx.tensor(x))), _np(theirs(torch.tensor(x))),
                               rtol=1e-9, atol=1e-11)
    np.testing.assert_array_equal(_np(ours.weight_u), u)  # no iteration in eval mode
    assert nn.utils.remove_spectral_norm(ours) is ours
    torch.nn.utils.remove_spectral_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    np.testing.assert_allclose(_np(ours.weight), _np(theirs.weight), rtol=1e-10)


def test_spectral_norm_hook_errors():
    m = nn.Linear(3, 3)
    with pytest.raises(ValueError, match="n_power_iterations=0"):
        nn.utils.spectral_norm(m, n_power_iterations=0)
    with pytest.raises(ValueError):
        torch.nn.utils.spectral_norm(torch.nn.Linear(3, 3), n_power_iterations=0)
    nn.utils.spectral_norm(m)
    with pytest.raises(RuntimeError, match="Cannot register two spectral_norm hooks"):
        nn.utils.spectral_norm(m)
    with pytest.raises(ValueError, match="spectral_norm of 'bias' not found"):
        nn.utils.remove_spectral_norm(m, "bias")
    with pytest.raises(ValueError, match="no parameter 'kernel'"):
        nn.utils.spectral_norm(nn.Linear(2, 2), "kernel")


@pytest.mark.parametrize("make", [
    lambda lib: lib.nn.Linear(5, 3),
    lambda lib: lib.nn.Conv1d(2, 4, 3),
    lambda lib: lib.nn.ConvTranspose1d(2, 4, 3),
])
def test_spectral_norm_parametrization_trains_as_pytorch(make):
    torch.manual_seed(13)
    theirs, ours = make(torch).double(), make(hx).double()
    _copy_into(ours, theirs)
    parametrizations.spectral_norm(ours)
    t_parametrizations.spectral_norm(theirs)
    keys = ["bias", "parametrizations.weight.original", "parametrizations.weight.0._u",
            "parametrizations.weight.0._v"]
    assert list(ours.state_dict()) == list(theirs.state_dict()) == keys
    theirs_sn = theirs.parametrizations.weight[0]
    ours_sn = ours.parametrizations.weight[0]
    assert ours_sn.dim == theirs_sn.dim
    # from the same u and v, one more iteration agrees (their registration ran 16)
    with hx.no_grad():
        ours_sn._u.copy_(hx.tensor(_np(theirs_sn._u)))
        ours_sn._v.copy_(hx.tensor(_np(theirs_sn._v)))
    shape = (2, 5) if isinstance(theirs, torch.nn.Linear) else (2, 2, 6)
    _sgd_steps(ours, theirs, 3, shape)
    np.testing.assert_allclose(_np(ours_sn._u), _np(theirs_sn._u), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(_np(ours.weight), _np(theirs.weight), rtol=1e-9, atol=1e-12)
    ours.eval()
    theirs.eval()
    np.testing.assert_allclose(_np(ours.weight), _np(theirs.weight), rtol=1e-9, atol=1e-12)


def test_spectral_norm_parametrization_reaches_sigma_and_its_errors():
    torch.manual_seed(14)
    m = nn.Linear(6, 4).double()
    parametrizations.spectral_norm(m, n_power_iterations=3)
    # 15 iterations at registration converge: the weight's top singular value is ~1
    assert abs(np.linalg.svd(_np(m.weight), compute_uv=False)[0] - 1) < 1e-3
    v = nn.Linear(3, 3)
    parametrizations.spectral_norm(v, "bias")  # a vector: divided by its 2-norm
    assert abs(np.linalg.norm(_np(v.bias)) - 1) < 1e-6
    with pytest.raises(ValueError, match="has no parameter or buffer with name 'w'"):
        parametrizations.spectral_norm(nn.Linear(2, 2), "w")
    with pytest.raises(IndexError, match="Dimension out of range"):
        parametrizations.spectral_norm(nn.Linear(2, 2), dim=2)
    with pytest.raises(IndexError):
        t_parametrizations.spectral_norm(torch.nn.Linear(2, 2), dim=2)
    with pytest.raises(ValueError, match="n_power_iterations=0"):
        parametrizations.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)


# -- orthogonal -------------------------------------------------------------------------------
def _orth_pair(i, o, seed):
    torch.manual_seed(seed)
    theirs = torch.nn.Linear(i, o, bias=False).double()
    ours = nn.Linear(i, o, bias=False).double()
    _copy_into(ours, theirs)
    return ours, theirs


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
@pytest.mark.parametrize("orth_map", [None, "matrix_exp", "cayley", "householder"])
def test_orthogonal_trains_as_pytorch(shape, orth_map):
    ours, theirs = _orth_pair(*shape, seed=15)
    parametrizations.orthogonal(ours, orthogonal_map=orth_map)
    t_parametrizations.orthogonal(theirs, orthogonal_map=orth_map)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == \
        ["parametrizations.weight.original", "parametrizations.weight.0.base"]
    if shape[0] == shape[1]:  # (a square base is the weight's own QR: no draw)
        np.testing.assert_allclose(_np(ours.parametrizations.weight[0].base),
                                   _np(theirs.parametrizations.weight[0].base), atol=1e-12)
    _copy_into(ours, theirs)
    w = _np(ours.weight)
    gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
    np.testing.assert_allclose(gram, np.eye(min(w.shape)), atol=1e-12)
    _sgd_steps(ours, theirs, 3, (2, shape[0]), lr=0.2)
    w = _np(ours.weight)
    np.testing.assert_allclose(w, _np(theirs.weight), rtol=1e-9, atol=1e-11)
    gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
    np.testing.assert_allclose(gram, np.eye(min(w.shape)), atol=1e-10)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
def test_orthogonal_without_trivialization(shape):
    ours, theirs = _orth_pair(*shape, seed=16)
    parametrizations.orthogonal(ours, orthogonal_map="householder", use_trivialization=False)
    t_parametrizations.orthogonal(theirs, orthogonal_map="householder",
                                  use_trivialization=False)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == \
        ["parametrizations.weight.original"]
    np.testing.assert_allclose(_np(ours.parametrizations.weight.original),
                               _np(theirs.parametrizations.weight.original), atol=1e-12)
    _sgd_steps(ours, theirs, 2, (2, shape[0]))
    ours, theirs = _orth_pair(4, 4, seed=17)
    parametrizations.orthogonal(ours, orthogonal_map="cayley", use_trivialization=False)
    t_parametrizations.orthogonal(theirs, orthogonal_map="cayley", use_trivialization=False)
    np.testing.assert_allclose(_np(ours.weight), _np(theirs.weight), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape", [(2, 3, 3), (2, 4, 3), (3, 2, 4)])
@pytest.mark.parametrize("orth_map, trivial", [("matrix_exp", True), ("cayley", True),
                                               ("householder", True),
                                               ("householder", False)])
def test_orthogonal_batch_of_matrices(shape, orth_map, trivial):
    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(hx.zeros(*shape, dtype=hx.float64))

    class THolder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(*shape, dtype=torch.float64))

    rng = np.random.default_rng(26)
    ours, theirs = Holder(), THolder()
    start = rng.standard_normal(shape)
    with hx.no_grad(), torch.no_grad():
        ours.w.copy_(hx.tensor(start))
        theirs.w.copy_(torch.tensor(start))
    parametrizations.orthogonal(ours, "w", orth_map, use_trivialization=trivial)
    t_parametrizations.orthogonal(theirs, "w", orth_map, use_trivialization=trivial)
    _copy_into(ours, theirs)  # (a random base where the matrices are not square)
    moved = _np(theirs.parametrizations.w.original) + 0.3 * rng.standard_normal(shape)
    with hx.no_grad(), torch.no_grad():
        ours.parametrizations.w.original.copy_(hx.tensor(moved))
        theirs.parametrizations.w.original.copy_(torch.tensor(moved))
    np.testing.assert_allclose(_np(ours.w), _np(theirs.w), rtol=1e-10, atol=1e-12)
    (ours.w ** 3).sum().backward()
    (theirs.w ** 3).sum().backward()
    np.testing.assert_allclose(_np(ours.parametrizations.w.original.grad),
                               _np(theirs.parametrizations.w.original.grad), rtol=1e-9,
                               atol=1e-12)


def test_orthogonal_assignment_and_errors():
    ours, theirs = _orth_pair(3, 3, seed=18)
    parametrizations.orthogonal(ours)
    t_parametrizations.orthogonal(theirs)
    q = np.linalg.qr(np.random.default_rng(0).standard_normal((3, 3)))[0]
    ours.weight = hx.tensor(q)
    with torch.no_grad():
        theirs.weight = torch.tensor(q)
    np.testing.assert_allclose(_np(ours.weight), q, atol=1e-12)
    np.testing.assert_allclose(_np(ours.parametrizations.weight[0].base),
                               _np(theirs.parametrizations.weight[0].base), atol=1e-12)
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices"):
        parametrizations.orthogonal(nn.Linear(2, 2), "bias")
    with pytest.raises(ValueError, match='orthogonal_map has to be one of'):
        parametrizations.orthogonal(nn.Linear(2, 2), "weight", "qr")
    with pytest.raises(ValueError, match="has no parameter or buffer"):
        parametrizations.orthogonal(nn.Linear(2, 2), "kernel")
    with pytest.raises(ValueError, match="of shape \\(3, 3\\)"):
        ours.weight = hx.ones(2, 2, dtype=hx.float64)


# -- skip_init --------------------------------------------------------------------------------
def test_skip_init():
    m = nn.utils.skip_init(nn.Linear, 3, 4, bias=False)
    t = torch.nn.utils.skip_init(torch.nn.Linear, 3, 4, bias=False)
    assert type(m) is nn.Linear and m.weight.shape == tuple(t.weight.shape)
    assert m.bias is None and list(m.state_dict()) == list(t.state_dict())
    assert m.weight.requires_grad and m.weight.device.type == "cpu"

    class NoDevice(nn.Module):
        def __init__(self, n):
            super().__init__()

    class TNoDevice(torch.nn.Module):
        def __init__(self, n):
            super().__init__()

    with pytest.raises(RuntimeError, match="Module must support a 'device' arg"):
        nn.utils.skip_init(NoDevice, 2)
    with pytest.raises(RuntimeError, match="Module must support a 'device' arg"):
        torch.nn.utils.skip_init(TNoDevice, 2)
    with pytest.raises(RuntimeError, match="Expected a Module"):
        nn.utils.skip_init(int, 2)


# -- swa_utils --------------------------------------------------------------------------------
def _bn_pair():
    torch.manual_seed(19)
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4),
                                 torch.nn.ReLU(), torch.nn.Linear(4, 2))
    ours = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    _copy_into(ours, theirs)
    return ours, theirs


def _train_and_average(make_avg, steps=5):
    ours, theirs = _bn_pair()
    avg, tavg = make_avg(swa_utils, ours), make_avg(t_swa, theirs)
    opt = hx.optim.SGD(ours.parameters(), lr=0.1)
    topt = torch.optim.SGD(theirs.parameters(), lr=0.1)
    rng = np.random.default_rng(20)
    for _ in range(steps):
        x = rng.standard_normal((6, 3)).astype(np.float32)
        opt.zero_grad()
        topt.zero_grad()
        ours(hx.tensor(x)).square().mean().backward()
        theirs(torch.tensor(x)).square().mean().backward()
        opt.step()
        topt.step()
        avg.update_parameters(ours)
        tavg.update_parameters(theirs)
    assert list(avg.state_dict()) == list(tavg.state_dict())
    for key, value in tavg.state_dict().items():
        np.testing.assert_allclose(_np(avg.state_dict()[key]), _np(value), rtol=2e-6,
                                   atol=1e-7, err_msg=key)
    return avg, tavg


@pytest.mark.parametrize("make_avg", [
    lambda lib, m: lib.AveragedModel(m),
    lambda lib, m: lib.AveragedModel(m, use_buffers=True),
    lambda lib, m: lib.AveragedModel(m, multi_avg_fn=lib.get_ema_multi_avg_fn(0.8)),
    lambda lib, m: lib.AveragedModel(m, avg_fn=lib.get_ema_avg_fn(0.7)),
    lambda lib, m: lib.AveragedModel(m, multi_avg_fn=lib.get_swa_multi_avg_fn()),
    lambda lib, m: lib.AveragedModel(m, avg_fn=lib.get_swa_avg_fn(), device="cpu"),
])
def test_averaged_model_averages_as_pytorch(make_avg):
    avg, tavg = _train_and_average(make_avg)
    assert int(avg.n_averaged.item()) == 5 and avg.n_averaged.dtype == hx.int64
    x = np.ones((2, 3), np.float32)
    avg.eval()
    tavg.eval()
    np.testing.assert_allclose(_np(avg(hx.tensor(x))), _np(tavg(torch.tensor(x))),
                               rtol=1e-5, atol=1e-6)


def test_swa_multi_avg_fn_refuses_integer_buffers_as_pytorch():
    for lib, (model, _) in ((swa_utils, _bn_pair()), (t_swa, _bn_pair()[::-1])):
        avg = lib.AveragedModel(model, multi_avg_fn=lib.get_swa_multi_avg_fn(),
                                use_buffers=True)
        avg.update_parameters(model)
        with pytest.raises(RuntimeError):
            avg.update_parameters(model)


def test_averaged_model_is_a_copy_and_refuses_two_functions():
    ours, _ = _bn_pair()
    avg = swa_utils.AveragedModel(ours)
    assert avg.module is not ours and avg.module[0].weight is not ours[0].weight
    with pytest.raises(ValueError, match="only one of avg_fn and multi_avg_fn"):
        swa_utils.AveragedModel(ours, avg_fn=swa_utils.get_swa_avg_fn(),
                                multi_avg_fn=swa_utils.get_swa_multi_avg_fn())
    with pytest.raises(ValueError, match="Invalid decay value 1.5"):
        swa_utils.get_ema_avg_fn(1.5)
    with pytest.raises(ValueError, match="Invalid decay value -0.1"):
        swa_utils.get_ema_multi_avg_fn(-0.1)


def test_update_bn_recomputes_the_statistics():
    ours, theirs = _bn_pair()
    ours.eval()
    theirs.eval()
    rng = np.random.default_rng(21)
    batches = [rng.standard_normal((5, 3)).astype(np.float32) for _ in range(3)]
    swa_utils.update_bn([(hx.tensor(b), 0) for b in batches[:2]] + [hx.tensor(batches[2])],
                        ours)
    t_swa.update_bn([(torch.tensor(b), 0) for b in batches[:2]] + [torch.tensor(batches[2])],
                    theirs)
    for key in ("1.running_mean", "1.running_var", "1.num_batches_tracked"):
        np.testing.assert_allclose(_np(ours.state_dict()[key]),
                                   _np(theirs.state_dict()[key]), rtol=1e-5, atol=1e-6)
    assert not ours.training and ours[1].momentum == 0.1
    swa_utils.update_bn([hx.ones(2, 3)], nn.Linear(3, 3))  # no batch norm: nothing to do


@pytest.mark.parametrize("kwargs", [
    dict(swa_lr=0.05),
    dict(swa_lr=0.05, anneal_epochs=3, anneal_strategy="linear"),
    dict(swa_lr=[0.01, 0.2], anneal_epochs=4),
    dict(swa_lr=0.3, anneal_epochs=0),
])
def test_swalr_follows_pytorch(kwargs):
    ours_p, theirs_p = [hx.zeros(2, requires_grad=True)], [torch.zeros(2, requires_grad=True)]
    ours_q, theirs_q = [hx.zeros(1, requires_grad=True)], [torch.zeros(1, requires_grad=True)]
    opt = hx.optim.SGD([{"params": ours_p}, {"params": ours_q, "lr": 0.5}], lr=1.0)
    topt = torch.optim.SGD([{"params": theirs_p}, {"params": theirs_q, "lr": 0.5}], lr=1.0)
    sched, tsched = swa_utils.SWALR(opt, **kwargs), t_swa.SWALR(topt, **kwargs)
    for _ in range(14):
        assert sched.get_last_lr() == pytest.approx(tsched.get_last_lr(), rel=1e-14)
        assert [g["swa_lr"] for g in opt.param_groups] == \
            [g["swa_lr"] for g in topt.param_groups]
        opt.step()
        topt.step()
        sched.step()
        tsched.step()
    state = sched.state_dict()
    assert "anneal_func" not in state and "optimizer" not in state
    again = swa_utils.SWALR(opt, **kwargs)
    again.load_state_dict(state)
    assert again.anneal_func is sched.anneal_func and again.last_epoch == sched.last_epoch


def test_swalr_errors():
    opt = hx.optim.SGD([hx.zeros(2, requires_grad=True)], lr=1.0)
    with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear'"):
        swa_utils.SWALR(opt, 0.1, anneal_strategy="exp")
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0"):
        swa_utils.SWALR(opt, 0.1, anneal_epochs=-1)
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0"):
        swa_utils.SWALR(opt, 0.1, anneal_epochs=2.5)
    with pytest.raises(ValueError, match="swa_lr must have the same length"):
        swa_utils.SWALR(opt, [0.1, 0.2])


# -- under import torch, and on the GPU -------------------------------------------------------
def test_import_torch_finds_them(tmp_path):
    from tests.test_torch_alias import run_program

    r = run_program(tmp_path, """
        import torch
        import torch.nn.utils.prune as prune
        from torch.optim.swa_utils import AveragedModel, SWALR
        from torch.nn.utils.parametrizations import orthogonal, spectral_norm
        m = prune.l1_unstructured(torch.nn.Linear(2, 2), "weight", 0.5)
        avg = AveragedModel(torch.nn.utils.spectral_norm(torch.nn.Linear(2, 2)))
        print(sorted(m.state_dict()), sorted(avg.state_dict()))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (
        "['bias', 'weight_mask', 'weight_orig'] ['module.bias', 'module.weight_orig', "
        "'module.weight_u', 'module.weight_v', 'n_averaged']")


@pytest.mark.gpu
def test_on_the_gpu(be):
    torch.manual_seed(22)
    theirs = torch.nn.Linear(4, 3)
    ours = nn.Linear(4, 3)
    _copy_into(ours, theirs)
    ours.to("gpu")
    prune.l1_unstructured(ours, "weight", 0.5)
    t_prune.l1_unstructured(theirs, "weight", 0.5)
    assert ours.weight_mask.device.type == "gpu"
    _same_masks(ours, theirs)
    parametrizations.spectral_norm(ours, "weight_orig")
    t_parametrizations.spectral_norm(theirs, "weight_orig")
    with hx.no_grad():
        ours.parametrizations.weight_orig[0]._u.copy_(
            hx.tensor(_np(theirs.parametrizations.weight_orig[0]._u), device="gpu"))
        ours.parametrizations.weight_orig[0]._v.copy_(
            hx.tensor(_np(theirs.parametrizations.weight_orig[0]._v), device="gpu"))
    x = np.ones((2, 4), np.float32)
    out = ours(hx.tensor(x, device="gpu"))
    assert out.device.type == "gpu"
    np.testing.assert_allclose(_np(out), _np(theirs(torch.tensor(x))), rtol=1e-4, atol=1e-5)
    avg = swa_utils.AveragedModel(ours)
    avg.update_parameters(ours)
    avg.update_parameters(ours)
    assert int(avg.n_averaged.item()) == 2
    assert avg.module.weight_mask.device.type == "gpu"
    np.testing.assert_allclose(_np(avg(hx.tensor(x, device="gpu"))), _np(out), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.gpu
def test_spectral_norm_and_orthogonal_on_the_gpu(be):
    torch.manual_seed(25)
    theirs = torch.nn.Linear(4, 3)
    ours = nn.Linear(4, 3)
    _copy_into(ours, theirs)
    torch.nn.utils.spectral_norm(theirs)
    nn.utils.spectral_norm(ours)
    _copy_into(ours, theirs)
    ours.to("gpu")
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    out = ours(hx.tensor(x, device="gpu"))
    np.testing.assert_allclose(_np(out), _np(theirs(torch.tensor(x))), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_np(ours.weight_u), _np(theirs.weight_u), rtol=1e-4, atol=1e-5)
    square, tsquare = nn.Linear(3, 3), torch.nn.Linear(3, 3)
    _copy_into(square, tsquare)
    parametrizations.orthogonal(square.to("gpu"))
    t_parametrizations.orthogonal(tsquare)
    np.testing.assert_allclose(_np(square.weight), _np(tsquare.weight), rtol=1e-4, atol=1e-5)
    assert square.weight.device.type == "gpu"
