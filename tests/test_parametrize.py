"""torch.nn.utils.parametrize and weight norm on Haelixe: the parametrized tensor, its
gradients into the originals, state_dict keys, assignment, removal, against PyTorch."""

import numpy as np
import pytest

import haelixe as hx
from haelixe import nn
from haelixe.nn.utils import parametrizations, parametrize

torch = pytest.importorskip("torch")
from torch.nn.utils import parametrizations as t_parametrizations  # noqa: E402
from torch.nn.utils import parametrize as t_parametrize  # noqa: E402

W = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5], [0.3, 0.8, -1.2]])
B = np.array([0.1, -0.2, 0.3])
X = np.array([[1.0, 2.0, -1.0], [0.5, -0.5, 3.0]])


def _pair():
    ours = nn.Linear(3, 3).double()
    theirs = torch.nn.Linear(3, 3).double()
    ours.weight.data, ours.bias.data = hx.tensor(W), hx.tensor(B)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(W))
        theirs.bias.copy_(torch.tensor(B))
    return ours, theirs


class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).mT

    def right_inverse(self, A):
        return A.triu()


class TSymmetric(torch.nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).mT

    def right_inverse(self, A):
        return A.triu()


def _train_step(module, lib):
    x = lib.tensor(X)
    (module(x) ** 2).sum().backward()
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}, \
        {n: p.grad.numpy().copy() for n, p in module.named_parameters()}


def _same_dicts(a, b):
    assert sorted(a) == sorted(b)
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-12, err_msg=k)


def test_a_parametrization_reads_and_trains_as_pytorchs():
    ours, theirs = _pair()
    parametrize.register_parametrization(ours, "weight", Symmetric())
    t_parametrize.register_parametrization(theirs, "weight", TSymmetric())
    assert type(ours).__name__ == type(theirs).__name__ == "ParametrizedLinear"
    assert isinstance(ours, nn.Linear)
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy())
    np.testing.assert_allclose(ours.weight.detach().numpy(), ours.weight.detach().numpy().T)
    s1, g1 = _train_step(ours, hx)
    s2, g2 = _train_step(theirs, torch)
    _same_dicts(s1, s2)
    _same_dicts(g1, g2)
    assert parametrize.is_parametrized(ours) and parametrize.is_parametrized(ours, "weight")
    assert not parametrize.is_parametrized(ours, "bias")
    assert parametrize.type_before_parametrizations(ours) is nn.Linear


def test_assignment_goes_through_right_inverse():
    ours, theirs = _pair()
    parametrize.register_parametrization(ours, "weight", Symmetric())
    t_parametrize.register_parametrization(theirs, "weight", TSymmetric())
    A = np.arange(9.0).reshape(3, 3)
    ours.weight = hx.tensor(A + A.T)
    theirs.weight = torch.tensor(A + A.T)
    np.testing.assert_allclose(ours.parametrizations.weight.original.detach().numpy(),
                               theirs.parametrizations.weight.original.detach().numpy())
    np.testing.assert_allclose(ours.weight.detach().numpy(), A + A.T)


def test_weight_norm_parametrization_matches_pytorch():
    for dim in (0, 1, None):
        ours, theirs = _pair()
        parametrizations.weight_norm(ours, dim=dim)
        t_parametrizations.weight_norm(theirs, dim=dim)
        assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
        np.testing.assert_allclose(ours.weight.detach().numpy(), W, rtol=1e-12)
        s1, g1 = _train_step(ours, hx)
        s2, g2 = _train_step(theirs, torch)
        _same_dicts(s1, s2)
        _same_dicts(g1, g2)


def test_removing_leaves_the_value_and_the_class():
    ours, _ = _pair()
    weight = ours.weight
    parametrize.register_parametrization(ours, "weight", Symmetric())
    original = ours.parametrizations.weight.original
    value = ours.weight.detach().numpy().copy()
    parametrize.remove_parametrizations(ours, "weight")
    assert type(ours) is nn.Linear and "parametrizations" not in ours._modules
    assert ours.weight is original and ours.weight is not weight
    np.testing.assert_allclose(ours.weight.detach().numpy(), value)
    assert sorted(ours.state_dict()) == ["bias", "weight"]
    wn, _ = _pair()
    parametrizations.weight_norm(wn)
    parametrize.remove_parametrizations(wn, "weight")
    np.testing.assert_allclose(wn.weight.detach().numpy(), W, rtol=1e-12)
    assert isinstance(wn.weight, nn.Parameter)


def test_cached_computes_once():
    calls = []

    class Counted(nn.Module):
        def forward(self, X):
            calls.append(1)
            return X * 2

    m = nn.Linear(3, 3)
    parametrize.register_parametrization(m, "weight", Counted())
    calls.clear()
    with parametrize.cached():
        a, b = m.weight, m.weight
    assert len(calls) == 1 and a is b
    _ = m.weight
    assert len(calls) == 2


def test_chained_parametrizations_and_errors():
    class Double(nn.Module):
        def forward(self, X):
            return X * 2

    m = nn.Linear(3, 3).double()
    m.weight.data = hx.tensor(W)
    parametrize.register_parametrization(m, "weight", Symmetric())
    parametrize.register_parametrization(m, "weight", Double())
    np.testing.assert_allclose(m.weight.detach().numpy(),
                               2 * (np.triu(W) + np.triu(W, 1).T))

    class Shrink(nn.Module):
        def forward(self, X):
            return X[:1]

    with pytest.raises(ValueError, match="unsafe=True"):
        parametrize.register_parametrization(nn.Linear(3, 3), "weight", Shrink())
    with pytest.raises(ValueError, match="no parameter or buffer named 'nope'"):
        parametrize.register_parametrization(nn.Linear(3, 3), "nope", Double())
    with pytest.raises(ValueError, match="no parametrization"):
        parametrize.remove_parametrizations(nn.Linear(3, 3), "weight")


def test_the_older_weight_norm_matches_pytorch():
    ours, theirs = _pair()
    with pytest.warns(FutureWarning):
        nn.utils.weight_norm(ours)
    with pytest.warns(FutureWarning):
        torch.nn.utils.weight_norm(theirs)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict()) == \
        ["bias", "weight_g", "weight_v"]
    s1, g1 = _train_step(ours, hx)
    s2, g2 = _train_step(theirs, torch)
    _same_dicts(s1, s2)
    _same_dicts(g1, g2)
    with pytest.raises(RuntimeError, match="two weight_norm hooks"), \
            pytest.warns(FutureWarning):
        nn.utils.weight_norm(ours)
    nn.utils.remove_weight_norm(ours)
    torch.nn.utils.remove_weight_norm(theirs)
    _same_dicts({k: v.detach().numpy() for k, v in ours.state_dict().items()},
                {k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    with pytest.raises(ValueError, match="not found"):
        nn.utils.remove_weight_norm(ours)


def test_import_torch_finds_them(tmp_path):
    from tests.test_torch_alias import run_program

    r = run_program(tmp_path, """
        import torch
        from torch.nn.utils import parametrize
        from torch.nn.utils.parametrizations import weight_norm
        m = weight_norm(torch.nn.Linear(2, 2))
        print(sorted(m.state_dict()), parametrize.is_parametrized(m))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ("['bias', 'parametrizations.weight.original0', "
                                "'parametrizations.weight.original1'] True")


def test_assignment_needs_every_right_inverse():
    class Double(nn.Module):
        def forward(self, X):
            return X * 2

    m = nn.Linear(2, 2)
    parametrize.register_parametrization(m, "weight", Double())
    with pytest.raises(RuntimeError, match="Double does not implement right_inverse"):
        m.weight = hx.ones(2, 2)
