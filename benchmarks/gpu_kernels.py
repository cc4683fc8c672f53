"""GPU kernel timings: fp32 matmul and flash attention on whatever adapter wgpu finds,
side by side with PyTorch (CUDA, TF32 off) when it is installed, and numpy for matmul.

    python benchmarks/gpu_kernels.py                  # sizes picked for the adapter
    python benchmarks/gpu_kernels.py --n 2048 --attn 4 8 1024 64 --causal

Default sizes: 4096 x 4096 matmul and attention batch 8, heads 16, seq 4096, head_dim 64
on a real GPU; 256 and (1, 2, 256, 64) on a software adapter (llvmpipe / lavapipe).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

try:
    import haelixe  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def timed(run, sync, iters: int, warm_s: float = 0.5) -> float:
    """Seconds per call of ``run``, synchronised around, after calling it for at least
    ``warm_s`` seconds (an idle GPU needs that long to raise its clocks)."""
    t0 = time.perf_counter()
    while True:
        run()
        sync()
        if time.perf_counter() - t0 > warm_s:
            break
    t0 = time.perf_counter()
    for _ in range(iters):
        run()
    sync()
    return (time.perf_counter() - t0) / iters


def torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    return torch


def bench_matmul(be, torch, n: int, iters: int) -> dict:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    ga, gb = be.from_numpy(a), be.from_numpy(b)
    flops = 2.0 * n ** 3
    res = {"n": n}
    # correctness on the timed inputs, against float64
    got = be.to_numpy(be.matmul(ga, gb))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    res["max_rel_err"] = float(np.abs(got - ref).max() / np.abs(ref).max())
    t = timed(lambda: be.matmul(ga, gb), be.synchronize, iters)
    res["haelixe_ms"] = t * 1e3
    res["haelixe_tflops"] = flops / t / 1e12
    t = timed(lambda: a @ b, lambda: None, max(1, iters // 4), warm_s=0.0)
    res["numpy_ms"] = t * 1e3
    res["speedup_vs_numpy"] = res["numpy_ms"] / res["haelixe_ms"]
    if torch is not None:
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        t = timed(lambda: ta @ tb, torch.cuda.synchronize, iters)
        res["torch_ms"] = t * 1e3
        res["torch_tflops"] = flops / t / 1e12
        res["haelixe_over_torch_time"] = res["haelixe_ms"] / res["torch_ms"]
    return res


def bench_attention(be, torch, shape, causal: bool, iters: int) -> dict:
    bsz, heads, seq, hd = shape
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((bsz, heads, seq, hd), dtype=np.float32)
               for _ in range(3))
    scale = 1.0 / math.sqrt(hd)
    gq, gk, gv = (be.from_numpy(t) for t in (q, k, v))
    # causal attention does about half the work
    flops = 4.0 * bsz * heads * seq * seq * hd * (0.5 if causal else 1.0)
    res = {"shape": list(shape), "causal": causal}
    t = timed(lambda: be.attention(gq, gk, gv, causal, scale), be.synchronize, iters)
    res["haelixe_ms"] = t * 1e3
    res["haelixe_tflops"] = flops / t / 1e12
    if torch is not None:
        import torch.nn.functional as F

        tq, tk, tv = (torch.from_numpy(x).cuda() for x in (q, k, v))
        out = be.to_numpy(be.attention(gq, gk, gv, causal, scale)[0])
        ref = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, scale=scale)
        res["max_abs_err_vs_torch"] = float(np.abs(out - ref.cpu().numpy()).max())
        t = timed(lambda: F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal,
                                                         scale=scale),
                  torch.cuda.synchronize, iters)
        res["torch_ms"] = t * 1e3
        res["torch_tflops"] = flops / t / 1e12
        res["haelixe_over_torch_time"] = res["haelixe_ms"] / res["torch_ms"]
    return res


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=None, help="matmul size (n x n @ n x n)")
    ap.add_argument("--attn", type=int, nargs=4, metavar=("B", "H", "S", "D"), default=None)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--iters", type=int, default=None)
    ap.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = ap.parse_args(argv)

    from haelixe.backends.wgpu.backend import get_backend

    be = get_backend()
    info = be.info
    soft = info["software"]
    print(f"adapter: {info['device']} | backend {info['backend']} | type "
          f"{info['adapter_type']}{' (software)' if soft else ''} | vendor {info['vendor']}")
    torch = torch_cuda()
    if torch is not None:
        print(f"torch {torch.__version__} on {torch.cuda.get_device_name()} (TF32 off)")
    else:
        print("torch with CUDA not available: Haelixe (and numpy for matmul) only")
    n = args.n or (256 if soft else 4096)
    shape = tuple(args.attn) if args.attn else ((1, 2, 256, 64) if soft else (8, 16, 4096, 64))
    iters = args.iters or (3 if soft else 10)

    report = {"adapter": {k: info[k] for k in ("device", "backend", "adapter_type",
                                               "software")}}
    report["matmul"] = mm = bench_matmul(be, torch, n, iters)
    line = (f"matmul {n}x{n} fp32: haelixe {mm['haelixe_ms']:.2f} ms "
            f"({mm['haelixe_tflops']:.2f} TFLOP/s, rel err {mm['max_rel_err']:.1e}) | numpy "
            f"{mm['numpy_ms']:.2f} ms (x{mm['speedup_vs_numpy']:.2f})")
    if "torch_ms" in mm:
        line += (f" | torch {mm['torch_ms']:.2f} ms ({mm['torch_tflops']:.2f} TFLOP/s), "
                 f"haelixe/torch time = {mm['haelixe_over_torch_time']:.2f}")
    print(line)
    report["attention"] = at = bench_attention(be, torch, shape, args.causal, iters)
    line = (f"flash attention {shape} causal={args.causal} fp32: haelixe "
            f"{at['haelixe_ms']:.2f} ms ({at['haelixe_tflops']:.2f} TFLOP/s)")
    if "torch_ms" in at:
        line += (f" | torch sdpa {at['torch_ms']:.2f} ms ({at['torch_tflops']:.2f} TFLOP/s),"
                 f" haelixe/torch time = {at['haelixe_over_torch_time']:.2f}, max |diff| "
                 f"{at['max_abs_err_vs_torch']:.1e}")
    print(line)
    report["dispatch_stats"] = be.stats()
    if args.json:
        print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
