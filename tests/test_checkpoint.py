"""torch.utils.checkpoint on Haelixe: gradients equal to the un-checkpointed part's and to
PyTorch's, activations not kept until backward, dropout's mask drawn again the same."""

import numpy as np
import pytest

import haelixe as hx
from haelixe import nn
from haelixe.utils.checkpoint import Checkpoint, checkpoint, checkpoint_sequential

torch = pytest.importorskip("torch")
from torch.utils import checkpoint as torch_checkpoint  # noqa: E402


def _block_pair(seed=0):
    rng = np.random.default_rng(seed)
    w1, w2 = rng.standard_normal((2, 6, 6)) * 0.5
    ours = nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 6)).double()
    theirs = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.Tanh(),
                                 torch.nn.Linear(6, 6)).double()
    with torch.no_grad():
        for (_, p), (_, q), w in zip(ours.named_parameters(), theirs.named_parameters(),
                                     [w1, np.zeros(6), w2, np.ones(6) * 0.1]):
            p.data = hx.tensor(w)
            q.copy_(torch.from_numpy(np.asarray(w)))
    return ours, theirs


@pytest.mark.parametrize("reentrant", [True, False])
def test_gradients_match_pytorch_and_the_plain_part(reentrant):
    ours, theirs = _block_pair()
    x = np.random.default_rng(1).standard_normal((4, 6))
    xh = hx.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    y = checkpoint(ours, xh.sin(), use_reentrant=reentrant)
    assert isinstance(y.grad_fn, Checkpoint)
    (y * y).sum().backward()
    yt = torch_checkpoint.checkpoint(theirs, xt.sin(), use_reentrant=reentrant)
    (yt * yt).sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(xh.grad.numpy(), xt.grad.numpy(), rtol=1e-10)
    for p, q in zip(ours.parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10)
    # and the same as the part run plainly
    grads = [p.grad.numpy().copy() for p in ours.parameters()]
    ours.zero_grad()
    x2 = hx.tensor(x, requires_grad=True)
    (ours(x2.sin()) ** 2).sum().backward()
    np.testing.assert_allclose(x2.grad.numpy(), xh.grad.numpy(), rtol=1e-12)
    for p, g in zip(ours.parameters(), grads):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-12)


def test_the_part_runs_again_in_backward_and_keeps_only_its_inputs():
    calls = []

    def part(a, b, scale):
        calls.append(hx.is_grad_enabled())
        return (a * b).exp() * scale

    a = hx.tensor(np.linspace(-1, 1, 5), requires_grad=True)
    b = hx.tensor(np.linspace(0, 2, 5), requires_grad=True)
    y = checkpoint(part, a, b, 3.0, use_reentrant=False)
    assert calls == [False]
    node = y.grad_fn
    assert len(node.saved_tensors) == 2  # a and b, nothing the part made
    y.sum().backward()
    assert calls == [False, True]
    at, bt = (torch.tensor(np.linspace(-1, 1, 5), requires_grad=True),
              torch.tensor(np.linspace(0, 2, 5), requires_grad=True))
    ((at * bt).exp() * 3.0).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), at.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), bt.grad.numpy(), rtol=1e-12)


def test_several_outputs_and_keyword_arguments():
    def part(a, *, power):
        return a ** power, a.sum(0), a.cos()

    x = np.random.default_rng(2).standard_normal((3, 4))
    xh = hx.tensor(x, requires_grad=True)
    outs = checkpoint(part, xh, power=3, use_reentrant=False)
    assert [o.shape for o in outs] == [(3, 4), (4,), (3, 4)]
    (outs[0].sum() + (outs[1] * 2).sum() - outs[2].mean()).backward()
    xt = torch.tensor(x, requires_grad=True)
    ot = torch_checkpoint.checkpoint(lambda a: (a ** 3, a.sum(0), a.cos()), xt,
                                     use_reentrant=False)
    (ot[0].sum() + (ot[1] * 2).sum() - ot[2].mean()).backward()
    for o, t in zip(outs, ot):
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(xh.grad.numpy(), xt.grad.numpy(), rtol=1e-12)


def test_dropout_draws_the_same_mask_again():
    hx.manual_seed(5)
    drop = nn.Dropout(0.5)
    x = hx.tensor(np.ones((8, 8)), requires_grad=True)
    y = checkpoint(drop, x, use_reentrant=False)
    y.sum().backward()
    # the gradient of a dropout is its mask scaled: the forward's own mask
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())
    assert 0 < (y.detach().numpy() == 0).sum() < 64
    # without preserving the state the recomputation draws another mask
    hx.manual_seed(5)
    x2 = hx.tensor(np.ones((8, 8)), requires_grad=True)
    y2 = checkpoint(drop, x2, use_reentrant=False, preserve_rng_state=False)
    y2.sum().backward()
    assert not np.array_equal(x2.grad.numpy(), y2.detach().numpy())


def test_checkpoint_sequential_matches_pytorch():
    ours, theirs = _block_pair(3)
    x = np.random.default_rng(4).standard_normal((2, 6))
    xh, xt = hx.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y = checkpoint_sequential(ours, 2, xh, use_reentrant=True)
    yt = torch_checkpoint.checkpoint_sequential(theirs, 2, xt, use_reentrant=True)
    y.pow(2).sum().backward()
    yt.pow(2).sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(xh.grad.numpy(), xt.grad.numpy(), rtol=1e-10)
    for p, q in zip(ours.parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10)
    with pytest.raises(ValueError, match="unexpected keyword"):
        checkpoint_sequential(ours, 2, xh, use_reentrant=True, other=1)


def test_what_cannot_run_says_so():
    x = hx.tensor([1.0, 2.0], requires_grad=True)
    y = checkpoint(lambda a: a * 2, x, use_reentrant=True)
    with pytest.raises(RuntimeError, match="autograd.grad"):
        hx.autograd.grad(y.sum(), x)
    with pytest.raises(TypeError, match="Tensor or a tuple of Tensors"):
        checkpoint(lambda a: [a], x, use_reentrant=False)
    with pytest.raises(TypeError, match="one dtype"):
        checkpoint(lambda a: (a, a.long()), x, use_reentrant=False)
    with pytest.raises(NotImplementedError, match="context_fn"):
        checkpoint(lambda a: a, x, use_reentrant=False, context_fn=lambda: (None, None))
    with pytest.warns(UserWarning, match="none of the inputs requires grad"):
        out = checkpoint(lambda a: a * 2, hx.tensor([1.0]), use_reentrant=True)
    assert not out.requires_grad


def test_import_torch_finds_it(tmp_path):
    from tests.test_torch_alias import run_program

    r = run_program(tmp_path, """
        import torch
        from torch.utils.checkpoint import checkpoint
        x = torch.ones(3, requires_grad=True)
        checkpoint(torch.sin, x, use_reentrant=False).sum().backward()
        print(round(float(x.grad[0]), 6))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(round(float(np.cos(1.0)), 6))


@pytest.mark.gpu
def test_on_the_gpu_as_on_the_cpu():
    x = np.random.default_rng(6).standard_normal((4, 5)).astype(np.float32)
    grads = []
    for device in ("cpu", "gpu"):
        hx.manual_seed(0)
        lin = nn.Linear(5, 5).to(device)
        xh = hx.tensor(x, device=device, requires_grad=True)
        checkpoint(nn.Sequential(lin, nn.Tanh()), xh, use_reentrant=False).sum().backward()
        grads.append((xh.grad.cpu().numpy(), lin.weight.grad.cpu().numpy()))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_none_and_number_arguments_pass_through():
    def part(a, mask, b, scale):
        assert mask is None
        return a * b * scale

    a = hx.tensor([1.0, 2.0], requires_grad=True)
    b = hx.tensor([3.0, 4.0], requires_grad=True)
    checkpoint(part, a, None, b, 2.0, use_reentrant=False).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [6.0, 8.0])
    np.testing.assert_array_equal(b.grad.numpy(), [2.0, 4.0])
