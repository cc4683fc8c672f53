"""A Module's forward and backward hooks, against PyTorch's: what each hook sees, what
its result replaces, the order, removal, and the cases Haelixe refuses."""

import numpy as np
import pytest

import haelixe as hx
from haelixe import nn

torch = pytest.importorskip("torch")

W = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]])
B = np.array([0.1, -0.2])
X = np.array([[1.0, 2.0, -1.0], [0.5, -0.5, 3.0]])


def _pair():
    ours = nn.Linear(3, 2).double()
    theirs = torch.nn.Linear(3, 2).double()
    ours.weight.data = hx.tensor(W)
    ours.bias.data = hx.tensor(B)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(W))
        theirs.bias.copy_(torch.tensor(B))
    return ours, theirs


def _np(t):
    if t is None:
        return None
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _run_both(register):
    """Register the same hooks (built by ``register(module, lib, seen)``) on both, run a
    forward and backward, and return what the hooks saw and the gradients."""
    out = []
    for lib, module in zip((hx, torch), _pair()):
        seen = []
        register(module, lib, seen)
        x = lib.tensor(X, requires_grad=True)
        y = module(x)
        (y * lib.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=y.dtype)).sum().backward()
        out.append((seen, _np(y), _np(x.grad), _np(module.weight.grad)))
    return out


def _same(a, b):
    if isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b), (a, b)
        for u, v in zip(a, b):
            _same(u, v)
    elif a is None or b is None:
        assert a is None and b is None, (a, b)
    elif isinstance(a, str):
        assert a == b
    else:
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-12)


def test_forward_hooks_see_and_replace_what_pytorch_does():
    def register(m, lib, seen):
        m.register_forward_pre_hook(lambda mod, args: seen.append(("pre", _np(args[0]))))
        m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
        m.register_forward_hook(lambda mod, args, out: seen.append(("fwd", _np(args[0]),
                                                                    _np(out))))
        m.register_forward_hook(lambda mod, args, out: out + 1)
        m.register_forward_hook(lambda mod, args, out: seen.append(("after", _np(out))),
                                prepend=False)

    ours, theirs = _run_both(register)
    _same(ours, theirs)
    assert [s[0] for s in ours[0]] == ["pre", "fwd", "after"]


def test_pre_hook_returning_one_value_and_keyword_hooks():
    def register(m, lib, seen):
        m.register_forward_pre_hook(lambda mod, args: args[0] - 1)  # (not a tuple)
        m.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] * 3,), kwargs),
                                    with_kwargs=True)
        m.register_forward_hook(lambda mod, args, kwargs, out: seen.append(sorted(kwargs)),
                                with_kwargs=True)
        h = m.register_forward_hook(lambda mod, args, out: seen.append("removed"))
        h.remove()
        m.register_forward_hook(lambda mod, args, out: seen.append("first"), prepend=True)

    ours, theirs = _run_both(register)
    _same(ours, theirs)
    assert ours[0] == ["first", []]


def test_full_backward_hooks_see_pytorchs_gradients_and_replace_them():
    def register(m, lib, seen):
        m.register_full_backward_pre_hook(
            lambda mod, go: seen.append(("pre", [_np(g) for g in go])))
        m.register_full_backward_hook(
            lambda mod, gi, go: seen.append(("full", [_np(g) for g in gi],
                                             [_np(g) for g in go])))
        m.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 10,))

    ours, theirs = _run_both(register)
    _same(ours, theirs)
    assert [s[0] for s in ours[0]] == ["pre", "full"]


def test_backward_pre_hook_replaces_the_output_gradient():
    def register(m, lib, seen):
        m.register_full_backward_pre_hook(lambda mod, go: (go[0] * 0.5,))
        m.register_full_backward_hook(
            lambda mod, gi, go: seen.append([_np(g) for g in go]))

    ours, theirs = _run_both(register)
    _same(ours, theirs)


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")  # (PyTorch's note)
def test_backward_hook_of_a_module_whose_input_needs_no_grad():
    for lib, module in zip((hx, torch), _pair()):
        seen = []
        module.register_full_backward_hook(lambda mod, gi, go, seen=seen: seen.append(
            (gi, _np(go[0]))))
        module(lib.tensor(X)).sum().backward()
        assert len(seen) == 1 and seen[0][0] == (None,)
        np.testing.assert_array_equal(seen[0][1], np.ones((2, 2)))


def test_always_call_runs_when_forward_raises():
    class Bad(nn.Module):
        def forward(self, x):
            raise ValueError("bad input")

    seen = []
    m = Bad()
    m.register_forward_hook(lambda mod, args, out: seen.append(("always", out)),
                            always_call=True)
    m.register_forward_hook(lambda mod, args, out: seen.append("never"))
    with pytest.raises(ValueError, match="bad input"):
        m(hx.tensor([1.0]))
    assert seen == [("always", None)]


def test_handles_remove_and_work_as_context_managers():
    m = nn.Linear(3, 2)
    seen = []
    with m.register_forward_hook(lambda mod, args, out: seen.append(1)):
        m(hx.ones(1, 3))
    m(hx.ones(1, 3))
    assert seen == [1]


def test_hooks_on_submodules_of_a_model():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    shapes = {}
    for name, sub in model.named_children():
        sub.register_forward_hook(lambda mod, args, out, name=name: shapes.update(
            {name: out.shape}))
    model(hx.ones(5, 3))
    assert shapes == {"0": (5, 4), "1": (5, 4), "2": (5, 2)}


def test_what_haelixe_refuses_says_so():
    class Two(nn.Module):
        def forward(self, a, b):
            return a * b

    m = Two()
    m.register_full_backward_hook(lambda *a: None)
    with pytest.raises(NotImplementedError, match="one\\s+tensor input"):
        m(hx.ones(2, requires_grad=True), hx.ones(2, requires_grad=True))
    with pytest.raises(NotImplementedError, match="register_full_backward_hook"):
        nn.Linear(2, 2).register_backward_hook(lambda *a: None)
    with pytest.raises(TypeError, match="callable"):
        nn.Linear(2, 2).register_forward_hook(3)
    bad = nn.Linear(3, 2)
    bad.register_forward_pre_hook(lambda mod, args, kwargs: args, with_kwargs=True)
    with pytest.raises(RuntimeError, match="new_args, new_kwargs"):
        bad(hx.ones(1, 3))
