"""ModuleDict, ParameterList, ParameterDict, the inplace activation flags and
load_state_dict's result and errors, against PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest

import haelixe as hx
from haelixe import nn

torch = pytest.importorskip("torch")


def build(lib):
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = lib.nn.ModuleDict({"a": lib.nn.Linear(3, 4), "b": lib.nn.Linear(4, 2)})
            self.blocks["act"] = lib.nn.ReLU(inplace=True)
            self.scales = lib.nn.ParameterList([lib.nn.Parameter(lib.ones(2)),
                                                lib.nn.Parameter(lib.ones(2) * 2)])
            self.extra = lib.nn.ParameterDict({"shift": lib.nn.Parameter(lib.zeros(2))})

        def forward(self, x):
            h = self.blocks["act"](self.blocks.a(x))
            y = self.blocks["b"](h)
            for s in self.scales:
                y = y * s
            return y + self.extra["shift"]

    return Net()


def test_containers_name_and_train_their_members_as_pytorch():
    ours, theirs = build(hx), build(torch)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    y, ty = ours(hx.tensor(x)), theirs(torch.tensor(x))
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-6)
    y.sum().backward()
    ty.sum().backward()
    for (n, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-5, err_msg=n)
    assert len(ours.blocks) == 3 and list(ours.blocks) == ["a", "b", "act"]
    assert "a" in ours.blocks and ours.blocks.pop("act") is not None and len(ours.blocks) == 2
    assert isinstance(ours.scales[-1], nn.Parameter) and len(ours.scales[:1]) == 1
    with pytest.raises(IndexError):
        ours.scales[2]


def test_a_plain_tensor_becomes_a_parameter_and_bad_members_are_refused():
    pl = nn.ParameterList([hx.ones(2)])
    pl.append(hx.zeros(3))
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in pl)
    pd = nn.ParameterDict()
    pd["w"] = hx.ones(1)
    pd.update([("v", hx.ones(2))])
    assert isinstance(pd["w"], nn.Parameter) and list(pd.keys()) == ["w", "v"]
    with pytest.raises(TypeError, match="ModuleDict"):
        nn.ModuleDict([nn.Linear(1, 1)])
    with pytest.raises(TypeError):
        nn.ModuleDict({"x": 3})
    with pytest.raises(TypeError, match="Parameter or a tensor"):
        nn.ParameterList([3.0])
    ml = nn.ModuleList([nn.ReLU()]).extend([nn.Tanh()])
    ml[0] = nn.SiLU()
    assert [type(m).__name__ for m in ml] == ["SiLU", "Tanh"]


@pytest.mark.parametrize("name,args", [("ReLU", ()), ("SiLU", ()), ("LeakyReLU", (0.2,)),
                                       ("Hardtanh", (-0.5, 0.5)), ("ReLU6", ()),
                                       ("Dropout", (0.0,))])
def test_inplace_activations_write_into_their_input_with_pytorchs_gradient(name, args):
    a = np.array([-2.0, -0.3, 0.4, 7.0])
    x = hx.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    h, th = x * 1.5, t * 1.5
    out = getattr(nn, name)(*args, inplace=True)(h)
    tout = getattr(torch.nn, name)(*args, inplace=True)(th)
    assert out is h and tout is th
    np.testing.assert_allclose(h.detach().numpy(), th.detach().numpy())
    out.sum().backward()
    tout.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy())
    assert repr(getattr(nn, name)(*args, inplace=True)) == \
        repr(getattr(torch.nn, name)(*args, inplace=True))


def test_an_inplace_activation_on_a_leaf_is_refused_as_in_pytorch():
    with pytest.raises(RuntimeError):
        torch.nn.ReLU(inplace=True)(torch.ones(2, requires_grad=True))
    with pytest.raises(RuntimeError):
        nn.ReLU(inplace=True)(hx.ones(2, requires_grad=True))


def test_load_state_dict_returns_the_named_tuple_and_raises_runtimeerror_when_strict():
    ours, theirs = nn.Linear(2, 2), torch.nn.Linear(2, 2)
    state = {"weight": np.ones((2, 2), np.float32), "extra": np.ones(1, np.float32)}
    got = ours.load_state_dict(state, strict=False)
    want = theirs.load_state_dict({k: torch.tensor(v) for k, v in state.items()}, strict=False)
    assert got.missing_keys == want.missing_keys == ["bias"]
    assert got.unexpected_keys == want.unexpected_keys == ["extra"]
    assert tuple(got) == (["bias"], ["extra"])
    before = ours.weight.detach().numpy().copy()
    for bad in ({"weight": np.zeros((2, 2), np.float32)},
                {"weight": np.zeros((3, 2), np.float32), "bias": np.zeros(2, np.float32)}):
        with pytest.raises(RuntimeError) as ours_err:
            ours.load_state_dict(bad)
        with pytest.raises(RuntimeError) as theirs_err:
            theirs.load_state_dict({k: torch.tensor(v) for k, v in bad.items()})
        first = lambda e: str(e.value).split("\n\t")[1].split(":")[0]  # noqa: E731
        assert first(ours_err) == first(theirs_err)
        np.testing.assert_array_equal(ours.weight.detach().numpy(), before)
    with pytest.raises(RuntimeError, match="size mismatch for weight"):
        ours.load_state_dict({"weight": np.zeros((3, 2), np.float32)}, strict=False)
