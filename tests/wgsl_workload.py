"""A representative workload for the WGSL portability test (test_wgsl_portable.py): the
kernels that training and evaluating the labs' models generate on the GPU backend, run
with the optional features a browser's WebGPU lacks turned off (shader-f16, shader-int64).

    python tests/wgsl_workload.py OUT.json    # runs it, writes every compiled module

It runs in a process of its own (the dispatcher compiles each module once per process,
and the features are chosen when the device is made)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

BROWSER_FEATURES_OFF = "shader-f16,shader-int64"


def run_workload() -> None:
    import haelixe as hx
    from haelixe import nn
    from haelixe.nn import functional as F
    from haelixe.optim import SGD, AdamW

    rng = np.random.default_rng(0)

    def t(*shape, dtype=np.float32, grad=False):
        return hx.tensor(rng.standard_normal(shape).astype(dtype), device="gpu",
                         requires_grad=grad)

    hx.manual_seed(0)
    # a Transformer block's training step, fp32 and under bf16 autocast
    for causal in (False, True):
        block = nn.TransformerBlock(16, 2, causal=causal).to("gpu")
        opt = AdamW(block.parameters(), lr=1e-3)
        for autocast in (False, True):
            x, y = t(2, 8, 16), t(2, 8, 16)
            opt.zero_grad()
            if autocast:
                with hx.autocast(hx.bfloat16):
                    loss = F.mse_loss(block(x), y)
            else:
                loss = F.mse_loss(block(x), y)
            loss.backward()
            opt.step()
            loss.item()
    # attention: masked, causal, head dims of the tuned plans
    for d in (8, 64, 128):
        q, k, v = (t(1, 2, 5, d, grad=True) for _ in range(3))
        for kw in ({}, {"is_causal": True},
                   {"attn_mask": hx.tensor(rng.random((5, 5)) > 0.3, device="gpu")}):
            out = F.scaled_dot_product_attention(q, k, v, **kw)
            out.sum().backward()
    # a language model's step: embedding, cross_entropy, SGD
    emb, head = nn.Embedding(11, 8).to("gpu"), nn.Linear(8, 11).to("gpu")
    opt = SGD([*emb.parameters(), *head.parameters()], lr=0.1, momentum=0.9)
    idx = hx.tensor(rng.integers(0, 11, (3, 4)), device="gpu")
    loss = F.cross_entropy(head(emb(idx)).reshape(-1, 11), idx.reshape(-1))
    loss.backward()
    opt.step()
    loss.item()
    # scatter_reduce's combinations on the device (atomic products, maxima and minima)
    into = hx.tensor(rng.integers(0, 3, (5, 4)), device="gpu")
    for reduce in ("prod", "amax", "amin"):
        t(3, 4).scatter_reduce(0, into, t(5, 4), reduce).cpu()
        t(3, 4).int().scatter_reduce(0, into, t(5, 4).int(), reduce).cpu()
    # norms, activations, reductions, elementwise over dtypes and layouts
    x = t(4, 6, grad=True)
    parts = [F.layer_norm(x, (6,)), F.rms_norm(x, (6,), hx.ones(6, device="gpu")),
             F.softmax(x, -1), F.log_softmax(x, 0), F.gelu(x), F.gelu(x, "tanh"),
             F.silu(x), F.relu(x), F.sigmoid(x), F.tanh(x), F.softplus(x),
             x.exp(), x.abs().sqrt(), x.clamp(-0.5, 0.5), x * 2.0 + 1.0, x.T.T,
             x.flip(0), x.lgamma(), x.digamma(), hx.polygamma(2, x), x.tanh().erfinv(),
             x.erfc(), x.i0(), x.sinc(), hx.special.erfcx(x), hx.special.ndtr(x),
             hx.special.log_ndtr(x), hx.special.ndtri(x.sigmoid()), hx.special.i0e(x),
             hx.special.i1(x), hx.special.i1e(x), hx.special.entr(x.abs()),
             hx.special.xlog1py(x, x.abs()), hx.special.zeta(x.detach().abs() + 1.5, x.abs() + 0.5),
             hx.special.bessel_j0(x.detach()), hx.special.bessel_j1(x.detach())]
    sum(p.sum() for p in parts).backward()
    for dtype in (np.float32, np.float16, np.int32, np.int64):
        a = hx.tensor(rng.standard_normal((3, 5)).astype(dtype), device="gpu")
        b = a.T.contiguous().T
        r = [a + b, a * b, a - b, a.sum(), a.sum(1), a.max(1), a.argmax(1), a.min(),
             a == b, a < b, hx.where(a > b, a, b), a.flip(1), a[1:, ::2], a.mean(0)
             if dtype in (np.float32, np.float16) else a.sum(0)]
        for z in r:
            z = z[0] if isinstance(z, tuple) else z
            z.cpu()
    bf = t(4, 8).to(hx.bfloat16)
    for z in (bf + bf, bf * 3.0, bf.sum(), bf.float(), bf @ bf.T, F.softmax(bf, -1)):
        z.cpu()
    m = t(3, 7) @ t(7, 5)
    m.cpu()
    # a convolution, its windows read in the matmul kernel, forward and both gradients
    img, w = t(2, 3, 6, 5, grad=True), t(4, 3, 3, 3, grad=True)
    F.conv2d(img, w, padding=1).sum().backward()


def gpu_variants(be) -> None:
    """The variants a large GPU picks (matmul tiles for large products, attention plans
    for 64- and 128-wide heads, the flash backward at long sequences), made without
    running them: every dispatch only records its kernel (and naga compiles the module),
    and the adapter is taken for a hardware one, whose plans lavapipe would compile for
    minutes. Since no kernel runs, a read-back (an index check reads its index back)
    reads zeros, not whatever an unwritten buffer held before."""
    import haelixe as hx
    from haelixe import nn
    from haelixe.nn import functional as F

    specs, dispatcher, info = [], be.dispatcher, be.context.info
    real_dispatch, software = dispatcher.dispatch, info["software"]
    dispatcher.dispatch = lambda spec, buffers, meta, grid: specs.append(spec)
    dispatcher.download = lambda buffer, byte_offset, nbytes: memoryview(bytes(nbytes))
    info["software"] = False
    try:
        def g(*shape, dtype=None):
            x = hx.zeros(shape, device="gpu", requires_grad=True)
            return x if dtype is None else x.to(dtype).detach().requires_grad_()

        block = nn.TransformerBlock(512, 8, causal=True).to("gpu")
        x = g(4, 512, 512)
        F.mse_loss(block(x), x.detach()).backward()
        with hx.autocast(hx.bfloat16):
            F.mse_loss(block(x), x.detach()).backward()
        for a, b in ((g(4096, 4096), g(4096, 4096)), (g(64, 4096), g(4096, 64)),
                     (g(4096, 512).T, g(4096, 256)), (g(2048, 512), g(1024, 512).T)):
            (a @ b).sum().backward()
        # a ResNet layer's convolution (64 -> 64 channels, 3x3, over 32 x 56 x 56)
        F.conv2d(g(32, 64, 56, 56), g(64, 64, 3, 3), padding=1).sum().backward()
        for d in (64, 128):
            for dtype in (None, hx.bfloat16):
                q, k, v = (g(1, 4, 2048, d, dtype=dtype) for _ in range(3))
                for causal in (False, True):
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal).sum().backward()
                mask = hx.zeros((2048, 2048), device="gpu", dtype=hx.bool)
                F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum().backward()
                q, k, v = (g(16, 8, 512, d, dtype=dtype) for _ in range(3))
                F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
        # every tiled forward plan that fits this adapter, unmasked, causal and masked
        from haelixe.backends.wgpu import attention as at

        limit = be.context.limits.get("max-compute-workgroup-storage-size", 16384)
        for d in (64, 128):
            qa = be.from_numpy(np.zeros((1, 2, 64, d), np.float32))
            mask = be.from_numpy(np.ones((64, 64), bool))
            for pl in (*at.TILED_PLANS, at.TiledPlan(16, 32, 2, 1, True)):
                if at.tiled_fits(d, d, pl, limit):
                    for causal, m in ((False, None), (True, None), (False, mask)):
                        at.attention(be, qa, qa, qa, causal, 0.125, m,
                                     plans={"attention_forward": pl})
        # row kernels of an adapter without subgroups (a tree through workgroup memory)
        features, be.context.features = be.context.features, be.context.features - {"subgroup"}
        try:
            x, w = g(64, 600), hx.ones(600, device="gpu", requires_grad=True)
            rows = [F.softmax(x, -1), F.log_softmax(x, -1), F.layer_norm(x, (600,)),
                    F.rms_norm(x, (600,), w), F.mse_loss(x, x.detach() + 1),
                    F.cross_entropy(x, hx.tensor(np.zeros(64, np.int64), device="gpu"))]
            sum(r.sum() for r in rows).backward()
        finally:
            be.context.features = features
    finally:
        dispatcher.dispatch, info["software"] = real_dispatch, software
        del dispatcher.download  # (the method again)
        dispatcher.flush()
    for spec in specs:
        dispatcher.pipeline_module(spec)


# ops whose last kernel writes the result, replayed in the browser on the inputs that
# kernel saw and compared with the CPU backend's result of the same op
def _cases(hx, F, rng):
    x = rng.standard_normal((5, 37)).astype(np.float32)
    y = rng.standard_normal((37,)).astype(np.float32)
    a = rng.standard_normal((9, 37)).astype(np.float32)
    q, k, v = (rng.standard_normal((2, 3, 7, 16)).astype(np.float32) for _ in range(3))
    img = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    return [
        ("add broadcast", lambda t: t(x) + t(y)),
        ("exp of a transpose", lambda t: t(x).T.exp()),
        ("sum over a dim", lambda t: t(x).sum(0)),
        ("max over rows", lambda t: t(x).amax(1)),
        ("softmax", lambda t: F.softmax(t(x), -1)),
        ("layer_norm", lambda t: F.layer_norm(t(x), (37,))),
        ("matmul x a^T", lambda t: t(x) @ t(a).T),
        ("linear with bias", lambda t: F.linear(t(x), t(a), t(a[:, 0].copy()))),
        ("attention", lambda t: F.scaled_dot_product_attention(t(q), t(k), t(v))),
        ("conv2d, windows read in the matmul", lambda t: F.conv2d(t(img), t(w), padding=1)),
        ("causal attention", lambda t: F.scaled_dot_product_attention(
            t(q), t(k), t(v), is_causal=True)),
        # (the special functions' helpers: loops, reflection below 0, Halley steps)
        ("lgamma", lambda t: t(x).lgamma()),
        ("digamma", lambda t: t(x).digamma()),
        ("polygamma(1, x)", lambda t: hx.polygamma(1, t(x))),
        ("erfinv", lambda t: t(np.tanh(x)).erfinv()),
        ("log_ndtr", lambda t: hx.special.log_ndtr(t(x * 4))),
        ("ndtri", lambda t: hx.special.ndtri(t(0.5 + 0.49 * np.tanh(x)))),
        ("i1e", lambda t: hx.special.i1e(t(x * 8))),
        ("bessel_j0", lambda t: hx.special.bessel_j0(t(x * 20))),
        ("zeta", lambda t: hx.special.zeta(t(np.abs(x) + 1.5), t(np.abs(y) + 0.25))),
    ]


def _recorder(dispatcher, queue, real_dispatch, slots, initial, kernels):
    """A dispatch that notes each kernel and the bytes of each buffer it first binds."""
    import base64

    def recording(spec, buffers, meta, grid):
        dispatcher.flush()
        for b in buffers:
            if id(b) not in slots:
                slots[id(b)] = len(initial)
                initial.append(base64.b64encode(bytes(queue.read_buffer(b))).decode())
        kernels.append({"name": f"{spec.file}:{spec.entry}", "source": spec.source(),
                        "entry": spec.entry, "access": [b.access for b in spec.bindings],
                        "buffers": [slots[id(b)] for b in buffers],
                        "meta": [int(m) for m in np.asarray(meta, np.int32)],
                        "grid": [int(g) for g in grid]})
        real_dispatch(spec, buffers, meta, grid)

    return recording


def record_cases(be) -> list[dict]:
    """For each case, every kernel its op ran (WGSL, bindings, metadata, grid, which
    buffers), each buffer's bytes before the first of them, where the result lies in
    its buffer, and the CPU backend's result of the same op."""
    import haelixe as hx
    from haelixe.backends.wgpu.dispatch import META_WINDOW_INTS
    from haelixe.nn import functional as F

    dispatcher, queue = be.dispatcher, be.context.device.queue
    real_dispatch = dispatcher.dispatch
    out = []
    for label, op in _cases(hx, F, np.random.default_rng(1)):
        expected = op(lambda a: hx.tensor(a)).numpy()
        slots, initial, kernels = {}, [], []
        recording = _recorder(dispatcher, queue, real_dispatch, slots, initial, kernels)
        dispatcher.dispatch = recording
        try:
            result = op(lambda a: hx.tensor(a, device="gpu"))
            result.numpy()
        finally:
            dispatcher.dispatch = real_dispatch
        arr = result._data
        out.append({"label": label, "kernels": kernels, "buffers": initial,
                    "meta_ints": META_WINDOW_INTS, "result": slots[id(arr.buffer)],
                    "shape": list(arr.shape), "strides": list(arr.strides),
                    "offset": arr.offset, "expected": expected.astype(np.float32).tolist()})
    return out


def collect(out_path: str) -> None:
    os.environ["HAELIXE_GPU_DISABLE"] = BROWSER_FEATURES_OFF
    from haelixe.backends.wgpu.backend import get_backend

    be = get_backend()
    run_workload()
    gpu_variants(be)
    cases = record_cases(be)
    Path(out_path).write_text(json.dumps({"modules": be.dispatcher.module_sources(),
                                          "cases": cases}))


if __name__ == "__main__":
    collect(sys.argv[1])
