"""Run one computation in Haelixe and in PyTorch from the same arrays and compare the
outputs and the gradients of every floating input (the differential tests' harness)."""

from __future__ import annotations

import numpy as np

import haelixe as hx


def _numpy(t):
    a = t.detach().numpy()
    return a.astype(np.float64) if a.dtype.kind in "fV" or a.dtype.name == "bfloat16" else a


def _leaves(arrays, lib, device):
    import torch

    out = []
    for a in arrays:
        if not isinstance(a, np.ndarray):
            out.append(a)  # a Python value passed through
            continue
        grad = a.dtype.kind == "f"
        if lib == "torch":
            out.append(torch.tensor(a, requires_grad=grad))
        else:
            out.append(hx.tensor(a, device=device, requires_grad=grad))
    return out


def _run(fn, arrays, lib, device, seed):
    import torch

    leaves = _leaves(arrays, lib, device)
    out = fn(*leaves)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    rng = np.random.default_rng(seed)
    roots, grads = [], []
    for o in outs:
        if o.requires_grad:
            g = rng.standard_normal(tuple(o.shape)).astype(np.float32)
            roots.append(o)
            grads.append(torch.tensor(g, dtype=o.dtype) if lib == "torch" else
                         hx.tensor(g, device=device).to(o.dtype))
    if roots:
        if lib == "torch":
            torch.autograd.backward(roots, grads)
        else:
            hx.autograd.backward(roots, grads)
    got = [o.detach().cpu().numpy() if lib == "torch" else _numpy(o) for o in outs]
    got_grads = []
    for t in leaves:
        if not hasattr(t, "requires_grad") or not t.requires_grad:
            continue
        g = t.grad
        got_grads.append(None if g is None else
                         (g.numpy() if lib == "torch" else _numpy(g)))
    return got, got_grads


def against_torch(hx_fn, torch_fn, *arrays, device="cpu", rtol=1e-5, atol=1e-6, seed=0,
                  what=""):
    """Outputs and input gradients of ``hx_fn`` (on ``device``) equal ``torch_fn``'s."""
    want, want_grads = _run(torch_fn, arrays, "torch", None, seed)
    got, got_grads = _run(hx_fn, arrays, "hx", device, seed)
    assert len(got) == len(want), f"{what}: {len(got)} outputs, torch {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"{what}: output {i} shape {g.shape}, torch {w.shape}"
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"{what}: output {i}")
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol,
                                       err_msg=f"{what}: output {i}")
    for i, (g, w) in enumerate(zip(got_grads, want_grads)):
        if w is None or g is None:
            # torch leaves unused inputs' grad None; a zero gradient is the same answer
            other = g if w is None else w
            assert other is None or not np.any(other), f"{what}: gradient {i}"
            continue
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol,
                                   err_msg=f"{what}: gradient of input {i}")
