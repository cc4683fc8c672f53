"""GPU kernel timings on whatever adapter wgpu finds, side by side with PyTorch (CUDA, TF32
off) when it is installed: matmul 4096^2 in fp32 and f16, flash attention forward and
forward + backward against scaled_dot_product_attention, and the three matmuls of a
Linear layer (y = x W^T, dX = dY W, dW = dY^T X) over the shapes models use.

    python benchmarks/gpu_kernels.py                # full sizes (a real GPU)
    python benchmarks/gpu_kernels.py --small        # tiny sizes: a smoke test on lavapipe
    python benchmarks/gpu_kernels.py --skip matmul attention --linear transformer
                                                    # the Transformer's Linear GEMMs only
    python benchmarks/gpu_kernels.py --sweep --out sweep.json
                                                    # every kernel variant per shape

Each number is the median over ``--repeats`` timed rounds (each round the mean of
``--iters`` calls after a warm-up), with the range of the rounds in brackets; ratios
are PyTorch's time over Haelixe's (above 1: Haelixe is faster).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

try:
    import haelixe  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# (M, in, out) of the Linear table: M = batch x sequence
LINEAR_SHAPES = [(m, k, n) for m in (2048, 8192)
                 for k, n in ((64, 64), (512, 512), (512, 1536), (512, 2048), (2048, 512),
                              (1024, 4096), (4096, 1024), (4096, 4096))]
SMALL_LINEAR_SHAPES = [(64, 32, 48), (96, 40, 8)]
# gpu_transformer.py's Linears (dim 512, MLP 2048, batch x sequence 16 x 512)
TRANSFORMER_LINEAR_SHAPES = [(8192, 512, 1536), (8192, 512, 512), (8192, 512, 2048),
                             (8192, 2048, 512)]
QUICK_LINEAR_SHAPES = [(4096, 4096, 4096), (8192, 512, 1536), (8192, 2048, 512),
                       (8192, 512, 512)]
ATTENTION_SHAPES = [(8, 16, 4096, 64), (8, 16, 1024, 64), (4, 16, 4096, 128),
                    (16, 8, 512, 64)]
SMALL_ATTENTION_SHAPES = [(1, 2, 40, 16)]


# -- timing ------------------------------------------------------------------------------
def timed(run, sync, iters: int, repeats: int, warm_s: float = 0.3) -> dict:
    """Seconds per call of ``run``: median, min and max over ``repeats`` rounds of
    ``iters`` calls, after calling it for ``warm_s`` seconds (clocks up, caches warm)."""
    t0 = time.perf_counter()
    while True:
        run()
        sync()
        if time.perf_counter() - t0 > warm_s:
            break
    rounds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            run()
        sync()
        rounds.append((time.perf_counter() - t0) / iters)
    return {"median": statistics.median(rounds), "min": min(rounds), "max": max(rounds)}


def fmt_ms(t: dict) -> str:
    return f"{t['median'] * 1e3:.3f} [{t['min'] * 1e3:.3f}-{t['max'] * 1e3:.3f}] ms"


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


def rel_err(got, ref) -> float:
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))


class Bench:
    """Shared state: backend, torch (or None), timing settings, results."""

    def __init__(self, be, torch, iters, repeats, warm_s=0.3):
        self.be, self.torch, self.iters, self.repeats = be, torch, iters, repeats
        self.warm_s = warm_s
        self.rng = np.random.default_rng(0)

    def hx_time(self, run):
        return timed(run, self.be.synchronize, self.iters, self.repeats, self.warm_s)

    def torch_time(self, run):
        return timed(run, self.torch.cuda.synchronize, self.iters, self.repeats, self.warm_s)

    def randn(self, *shape):
        return self.rng.standard_normal(shape, dtype=np.float32)


# -- matmul ------------------------------------------------------------------------------
def bench_matmul(b: Bench, n: int, dtype: str) -> dict:
    be, torch = b.be, b.torch
    a, m = b.randn(n, n), b.randn(n, n)
    np_dt = np.float16 if dtype == "f16" else np.float32
    ga, gm = be.from_numpy(a.astype(np_dt)), be.from_numpy(m.astype(np_dt))
    flops = 2.0 * n ** 3
    res = {"n": n, "dtype": dtype}
    ref = a.astype(np_dt).astype(np.float64) @ m.astype(np_dt).astype(np.float64)
    res["rel_err"] = rel_err(be.to_numpy(be.matmul(ga, gm)), ref)
    t = b.hx_time(lambda: be.matmul(ga, gm))
    res["haelixe"] = t
    res["haelixe_tflops"] = flops / t["median"] / 1e12
    if torch is not None:
        tdt = torch.float16 if dtype == "f16" else torch.float32
        ta, tm = (torch.from_numpy(x).cuda().to(tdt) for x in (a, m))
        t = b.torch_time(lambda: ta @ tm)
        res["torch"] = t
        res["torch_tflops"] = flops / t["median"] / 1e12
        res["ratio"] = res["torch"]["median"] / res["haelixe"]["median"]
    return res


def linear_case(b: Bench, m, k, n):
    """The three matmuls of a Linear (in k, out n) on m rows, as Haelixe reads them
    (strided views, no copies): y = x W^T, dX = dY W, dW = dY^T X."""
    from haelixe.backends.wgpu.geometry import swap_last2

    be = b.be
    x, w, gy = b.randn(m, k), b.randn(n, k), b.randn(m, n)
    gx, gw, ggy = be.from_numpy(x), be.from_numpy(w), be.from_numpy(gy)
    return {
        "fwd": (lambda: be.matmul(gx, swap_last2(gw)), x, w.T),
        "dX": (lambda: be.matmul(ggy, gw), gy, w),
        "dW": (lambda: be.matmul(swap_last2(ggy), gx), gy.T, x),
    }


def bench_linear(b: Bench, shapes) -> list:
    torch = b.torch
    rows = []
    least = b.iters
    for m, k, n in shapes:
        for name, (run, a, c) in linear_case(b, m, k, n).items():
            flops = 2.0 * a.shape[0] * a.shape[1] * c.shape[1]
            row = {"M": m, "in": k, "out": n, "op": name}
            got = b.be.to_numpy(run())
            row["rel_err"] = rel_err(got, a.astype(np.float64) @ c.astype(np.float64))
            # calls a round: ROUND_S of work, so that the wait for the GPU that ends a
            # round (longer through wgpu than through CUDA) is a small part of it, the
            # same number for both sides
            b.iters = row["iters"] = calls_for(run, b.be.synchronize, least)
            row["haelixe"] = b.hx_time(run)
            row["haelixe_tflops"] = flops / row["haelixe"]["median"] / 1e12
            if torch is not None:
                ta, tc = (torch.from_numpy(np.ascontiguousarray(t)).cuda() for t in (a, c))
                if name == "fwd":  # torch reads W^T as a view too
                    tc = torch.from_numpy(c.T.copy()).cuda().T
                elif name == "dW":
                    ta = torch.from_numpy(a.T.copy()).cuda().T
                row["torch"] = b.torch_time(lambda ta=ta, tc=tc: ta @ tc)
                row["ratio"] = row["torch"]["median"] / row["haelixe"]["median"]
            rows.append(row)
    b.iters = least
    return rows


def warm_up(b: Bench, seconds: float) -> None:
    """Keep the GPU busy for ``seconds``: a GPU fresh from idle runs the first shapes
    timed slowly (on an H100 the first Linear row of a run without the sections before
    it, 8192 x 512 -> 1536 forward, timed 2.01 ms, 0.36 after this)."""
    x = b.be.from_numpy(b.randn(2048, 2048))
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        b.be.matmul(x, x)
        b.be.synchronize()


# -- attention ---------------------------------------------------------------------------
def attention_flops(shape, causal) -> float:
    """Forward flops: two matmuls over the (visible half of the) score matrix."""
    bsz, heads, seq, hd = shape
    return 4.0 * bsz * heads * seq * seq * hd * (0.5 if causal else 1.0)


def bench_attention(b: Bench, shape, causal: bool) -> dict:
    be, torch = b.be, b.torch
    bsz, heads, seq, hd = shape
    q, k, v, g = (b.randn(bsz, heads, seq, hd) for _ in range(4))
    scale = 1.0 / math.sqrt(hd)
    gq, gk, gv, gg = (be.from_numpy(t) for t in (q, k, v, g))
    res = {"shape": list(shape), "causal": causal}

    def fwd():
        return be.attention(gq, gk, gv, causal, scale)

    def fwd_bwd():
        out, lse = be.attention(gq, gk, gv, causal, scale)
        return be.attention_backward(gq, gk, gv, out, lse, gg, causal, scale)

    # calls a round: enough for ROUND_S of work where the call is short (a round of a few
    # calls of a short shape timed mostly the host's submit and the read-back), the same
    # number for both sides
    iters = b.iters
    b.iters = calls_for(fwd_bwd, be.synchronize, b.iters)
    res["iters"] = b.iters
    res["haelixe_fwd"] = b.hx_time(fwd)
    res["haelixe_fwd_bwd"] = b.hx_time(fwd_bwd)
    res["haelixe_fwd_tflops"] = attention_flops(shape, causal) / res["haelixe_fwd"]["median"] / 1e12
    if torch is not None:
        import torch.nn.functional as F

        tq, tk, tv, tg = (torch.from_numpy(x).cuda().requires_grad_() for x in (q, k, v, g))
        out, _ = fwd()
        ref = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, scale=scale)
        res["rel_err"] = rel_err(be.to_numpy(out), ref.detach().cpu().numpy())

        def tfwd():
            with torch.no_grad():
                return F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal,
                                                      scale=scale)

        def tfwd_bwd():
            o = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, scale=scale)
            return torch.autograd.grad(o, (tq, tk, tv), tg)

        res["torch_fwd"] = b.torch_time(tfwd)
        res["torch_fwd_bwd"] = b.torch_time(tfwd_bwd)
        res["ratio_fwd"] = res["torch_fwd"]["median"] / res["haelixe_fwd"]["median"]
        res["ratio_fwd_bwd"] = res["torch_fwd_bwd"]["median"] / res["haelixe_fwd_bwd"]["median"]
    b.iters = iters
    return res


ROUND_S = 0.05


def calls_for(run, sync, least: int) -> int:
    """Calls of ``run`` a timed round takes: ``least``, or as many as ROUND_S holds, by
    the fastest of three calls (a wait for the GPU now and then takes milliseconds: one
    such call made rounds of 9 calls on an H100, which timed 0.39 ms a call where
    longer rounds timed 0.12-0.14)."""
    run()
    sync()
    one = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        run()
        sync()
        one = min(one, time.perf_counter() - t0)
    return max(least, min(200, math.ceil(ROUND_S / max(one, 1e-6))))


# -- variant sweep -----------------------------------------------------------------------
def sweep_matmul(b: Bench, shapes, out: list, save=lambda: None, quick=False) -> list:
    """Every tile (and split-K factor where K is long) on each shape (``quick``: the
    chosen variant against the two largest tiles); rows are appended to ``out`` and
    ``save`` called after each (a run cut short keeps what it measured)."""
    from haelixe.backends.wgpu import matmul as mm

    tiles = dict(mm.TILES)
    tiles["128x128k32"] = mm.Tile(128, 128, 8, 8, 32)
    tiles["64x64k32"] = mm.Tile(64, 64, 4, 4, 32)
    tiles["128x64k32"] = mm.Tile(128, 64, 8, 4, 32)
    tiles["32x64"] = mm.Tile(32, 64, 4, 4, 16)
    for m, k, n in shapes:
        for name, (run0, a, _) in linear_case(b, m, k, n).items():
            big_k = a.shape[1]
            chosen = _chosen_variant(run0)
            row = {"M": m, "in": k, "out": n, "op": name, "chosen": _variant_name(chosen),
                   "times": {}}
            if quick:
                variants = [(row["chosen"], chosen)] + [
                    (tn, mm.Variant(tiles[tn])) for tn in ("128x128", "128x128k8")
                    if tn != row["chosen"]]
            else:
                variants = [(tn, mm.Variant(t)) for tn, t in tiles.items()]
                variants += [(f"64x64/s{s}", mm.Variant(tiles["64x64"], s))
                             for s in (2, 4, 8, 16) if big_k // s >= 128]
                variants += [(f"128x128/s{s}", mm.Variant(tiles["128x128"], s))
                             for s in (2, 4) if big_k // s >= 256]
            for vn, var in variants:
                run = _with_variant(run0, var)
                try:
                    row["times"][vn] = b.hx_time(run)["median"]
                except Exception as err:  # a variant the adapter refuses: note, go on
                    row["times"][vn] = repr(err)[:120]
            _finish(row, f"M={m} in={k} out={n} {name:3s}", out, save)
    return out


def _finish(row, label, out, save) -> None:
    """Note the fastest variant of a sweep row, print it beside the chosen one, keep it."""
    ok = {v: t for v, t in row["times"].items() if isinstance(t, float)}
    row["best"] = min(ok, key=ok.get) if ok else None
    print(f"  sweep {label}: best {row['best']} {ok.get(row['best'], 0) * 1e3:.3f} ms; "
          f"chosen {row['chosen']} {ok.get(row['chosen'], float('nan')) * 1e3:.3f} ms",
          flush=True)
    out.append(row)
    save()


def _chosen_variant(run):
    """The variant matmul.choose picks for the matmul ``run`` makes."""
    from haelixe.backends.wgpu import matmul as mm

    seen, orig = [], mm.choose
    mm.choose = lambda *args: seen.append(orig(*args)) or seen[-1]
    try:
        run()
    finally:
        mm.choose = orig
    return seen[0]


def sweep_f16(b: Bench, n: int, out: list, save=lambda: None) -> list:
    """float16 matmul n^2: f16 arithmetic summing 1, 2, 4 or 8 K tiles before the f32
    accumulators, against widening to f32 on load."""
    from haelixe.backends.wgpu import matmul as mm

    be = b.be
    x, y = (be.from_numpy(b.randn(n, n).astype(np.float16)) for _ in range(2))
    saved_flush, saved_features = mm.F16_FLUSH_TILES, be.context.features
    row = {"n": n, "times": {}}
    try:
        for flush in (1, 2, 4, 8, 0):
            mm.F16_FLUSH_TILES = flush or None
            if not flush:
                be.context.features = saved_features - {"shader-f16"}
            name = f"f16 math, flush {flush}" if flush else "f32 math"
            try:
                row["times"][name] = b.hx_time(lambda: be.matmul(x, y))["median"]
            except Exception as err:
                row["times"][name] = repr(err)[:120]
            print(f"  sweep f16 {n}^2 {name}: {row['times'][name]}", flush=True)
    finally:
        mm.F16_FLUSH_TILES, be.context.features = saved_flush, saved_features
    out.append(row)
    save()
    return out


def _variant_name(v) -> str:
    from haelixe.backends.wgpu import matmul as mm

    names = {t: n for n, t in mm.TILES.items()}
    base = names.get(v.tile, str(tuple(v.tile)))
    return base if v.splits == 1 else f"{base}/s{v.splits}"


def _with_variant(run, variant):
    """``run`` with every matmul it makes forced to ``variant``."""
    from haelixe.backends.wgpu import matmul as mm

    def choose(*args):  # (one chooser for every call: matmul plans with it once)
        return variant

    def forced():
        orig = mm.choose
        mm.choose = choose
        try:
            return run()
        finally:
            mm.choose = orig
    return forced


QUICK_PLANS = {  # (invocations per row, rows per workgroup, block, rows an invocation)
    64: {"attention_forward": [(2, 128, 8, 2), (1, 256, 16, 1), (4, 128, 8, 4)],
         "attention_dq": [(1, 128, 16, 1), (2, 128, 16, 1), (2, 64, 16, 1)],
         "attention_dkdv": [(1, 128, 16, 1), (2, 128, 16, 1), (2, 64, 16, 1)]},
    128: {"attention_forward": [(4, 128, 8, 2), (1, 256, 16, 1), (8, 128, 8, 4)],
          "attention_dq": [(1, 128, 16, 1), (2, 128, 16, 1), (4, 64, 16, 1)],
          "attention_dkdv": [(1, 64, 16, 1), (2, 128, 16, 1), (2, 64, 16, 1),
                             (4, 64, 16, 1)]},
}


def sweep_attention(b: Bench, shapes, out: list, save=lambda: None, quick=False) -> list:
    """Plans (invocations per row, rows per workgroup, block) of each attention kernel
    (``quick``: those of QUICK_PLANS)."""
    from haelixe.backends.wgpu import attention as at

    be = b.be
    limit = be.context.limits.get("max-compute-workgroup-storage-size", 16384)
    for shape in shapes:
        bsz, heads, seq, hd = shape
        q, k, v, g = (be.from_numpy(b.randn(bsz, heads, seq, hd)) for _ in range(4))
        scale = 1.0 / math.sqrt(hd)
        o, lse = be.attention(q, k, v, False, scale)
        for entry in ("attention_forward", "attention_dq", "attention_dkdv"):
            chosen = at.plan(entry, hd, hd, limit, seq, be.context.software,
                             be.context.has("subgroup") and entry in at.SHUFFLE_ENTRIES)
            row = {"shape": list(shape), "entry": entry, "times": {},
                   "chosen": f"{chosen.p},{chosen.bq},{chosen.bk},{chosen.r}"}
            rows = (1, 2, 4) if entry == "attention_forward" else (1,)
            candidates = QUICK_PLANS[hd][entry] if quick else [
                (p, bq, bk, r) for p in (1, 2, 4) for bq in (64, 128) for bk in (8, 16)
                for r in rows]
            for p, bq, bk, r in candidates:
                if bq // r * p > 256 or (hd // 4) % p or \
                        at._shared_bytes(entry, hd // 4, hd // 4, p, bq, bk, rows=r) > limit:
                    continue
                run = _attention_runner(be, entry, (q, k, v, o, lse, g), scale,
                                        {entry: at.Plan(p, bq, bk, 0, r)})
                try:
                    row["times"][f"{p},{bq},{bk},{r}"] = b.hx_time(run)["median"]
                except Exception as err:
                    row["times"][f"{p},{bq},{bk},{r}"] = repr(err)[:120]
            if entry == "attention_forward":
                _sweep_tiled(b, row, (q, k, v, o, lse, g), scale, limit)
            _finish(row, f"attention {shape} {entry}", out, save)
    return out


def _sweep_tiled(b: Bench, row, arrays, scale, limit) -> None:
    """Every plan of the register-tiled forward that fits, timed into ``row`` beside the
    one-row plans; the chosen plan becomes the tiled one where it applies."""
    from haelixe.backends.wgpu import attention as at

    hd = row["shape"][-1]
    chosen = at.tiled_plan(hd, hd, limit)
    if chosen is not None:
        row["chosen"] = _tiled_name(chosen)
    for pl in (at.TiledPlan(bq, bk, rg, kh, shared) for bq in (16, 32, 64, 128)
               for bk in (16, 32, 64) for rg in (1, 2) for kh in (1, 2)
               for shared in (False, True)):
        tx, ty, _ = pl.shape(hd // 4)
        # a warp at least; k and v in one tile only where two do not fit
        if (not at.tiled_fits(hd, hd, pl, limit) or tx * ty < 32 or
                (pl.shared_kv and at.tiled_fits(hd, hd, pl._replace(shared_kv=False),
                                                limit))):
            continue
        run = _attention_runner(b.be, "attention_forward", arrays, scale,
                                {"attention_forward": pl})
        try:
            row["times"][_tiled_name(pl)] = b.hx_time(run)["median"]
        except Exception as err:
            row["times"][_tiled_name(pl)] = repr(err)[:120]


def _tiled_name(pl) -> str:
    return f"tiled {pl.bq}x{pl.bk} r{pl.rg}k{pl.kh}{' kv' if pl.shared_kv else ''}"


def _attention_runner(be, entry, arrays, scale, plans):
    from haelixe.backends.wgpu import attention as at

    q, k, v, o, lse, g = arrays
    if entry == "attention_forward":
        return lambda: at.attention(be, q, k, v, False, scale, plans=plans)
    return lambda: at.attention_backward(be, q, k, v, o, lse, g, False, scale, plans=plans)


# -- report ------------------------------------------------------------------------------
def print_linear_table(rows):
    print("\nLinear matmuls (fp32): time per call, median [range]; ratio = torch / haelixe")
    print(f"{'M':>5} {'in':>5} {'out':>5} {'op':>3} | {'haelixe':>30} {'TFLOP/s':>7} | "
          f"{'torch':>30} | {'ratio':>5} | rel err")
    for r in rows:
        t = fmt_ms(r["torch"]) if "torch" in r else "-"
        ratio = f"{r['ratio']:.2f}" if "ratio" in r else "-"
        print(f"{r['M']:>5} {r['in']:>5} {r['out']:>5} {r['op']:>3} | {fmt_ms(r['haelixe']):>30}"
              f" {r['haelixe_tflops']:>7.2f} | {t:>30} | {ratio:>5} | {r['rel_err']:.1e}")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="tiny sizes (software adapters)")
    ap.add_argument("--sweep", action="store_true", help="time every kernel variant")
    ap.add_argument("--quick", action="store_true",
                    help="with --sweep: the chosen variants against a few others")
    ap.add_argument("--skip", nargs="*", default=(),
                    choices=("matmul", "attention", "linear"), help="sections to leave out")
    ap.add_argument("--linear", choices=("all", "transformer"), default="all",
                    help="the Linear table's shapes: all, or the Transformer's alone")
    ap.add_argument("--iters", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    args = ap.parse_args(argv)

    from haelixe.backends.wgpu.backend import get_backend

    be = get_backend()
    info = be.info
    print(f"adapter: {info['device']} | backend {info['backend']} | type "
          f"{info['adapter_type']}{' (software)' if info['software'] else ''} | features "
          f"{sorted(be.context.features)}", flush=True)
    torch = torch_cuda()
    if torch is not None:
        print(f"torch {torch.__version__} on {torch.cuda.get_device_name()} (TF32 off)")
    else:
        print("torch with CUDA not available: Haelixe only")
    small = args.small
    b = Bench(be, torch, args.iters or (2 if small else 10), 2 if small else args.repeats)
    report = {"adapter": {k: info[k] for k in ("device", "backend", "adapter_type",
                                               "software")},
              "features": sorted(be.context.features)}
    def save():
        if args.out:
            Path(args.out).write_text(json.dumps(report, indent=1, default=str))

    if args.sweep:  # many variants: short rounds on a GPU that is already warm
        b.iters, b.repeats, b.warm_s = (1, 1, 0.0) if small else (3, 2, 0.0)
        if "matmul" not in args.skip:
            sweep_f16(b, 96 if small else 4096, report.setdefault("sweep_f16", []), save)
            shapes = QUICK_LINEAR_SHAPES if args.quick else LINEAR_SHAPES
            sweep_matmul(b, SMALL_LINEAR_SHAPES if small else shapes,
                         report.setdefault("sweep_matmul", []), save, args.quick)
        if "attention" not in args.skip:
            sweep_attention(b, [(1, 2, 40, 64)] if small else
                            [ATTENTION_SHAPES[0], (4, 16, 2048, 128), ATTENTION_SHAPES[3]],
                            report.setdefault("sweep_attention", []), save, args.quick)
    else:
        if "matmul" not in args.skip:
            n = 96 if small else 4096
            report["matmul"] = []
            for dt in ("f32", "f16", "f16 (f16 math)"):
                if dt == "f16 (f16 math)":  # products in f16, summed over 4 K tiles
                    from haelixe.backends.wgpu import matmul as mm

                    if not be.context.has("shader-f16"):
                        continue
                    saved, mm.F16_FLUSH_TILES = mm.F16_FLUSH_TILES, 4
                    r = bench_matmul(b, n, "f16")
                    mm.F16_FLUSH_TILES = saved
                    r["dtype"] = dt
                else:
                    r = bench_matmul(b, n, dt)
                report["matmul"].append(r)
                line = (f"matmul {n}^2 {dt}: haelixe {fmt_ms(r['haelixe'])} "
                        f"({r['haelixe_tflops']:.1f} TFLOP/s, rel err {r['rel_err']:.1e})")
                if "torch" in r:
                    line += (f" | torch {fmt_ms(r['torch'])} ({r['torch_tflops']:.1f} "
                             f"TFLOP/s) | ratio {r['ratio']:.2f}")
                print(line, flush=True)
            f32, f16 = report["matmul"][:2]
            print(f"matmul f16 / f32 speed (haelixe): "
                  f"{f32['haelixe']['median'] / f16['haelixe']['median']:.2f}x")
        if "attention" not in args.skip:
            if not small:  # 10-300 ms a call: fewer calls a round
                b.iters, b.repeats = max(2, b.iters // 3), 3
            report["attention"] = []
            for shape in SMALL_ATTENTION_SHAPES if small else ATTENTION_SHAPES:
                for causal in (False, True):
                    r = bench_attention(b, shape, causal)
                    report["attention"].append(r)
                    line = (f"attention {tuple(shape)} causal={causal}: haelixe fwd "
                            f"{fmt_ms(r['haelixe_fwd'])} ({r['haelixe_fwd_tflops']:.1f} "
                            f"TFLOP/s), fwd+bwd {fmt_ms(r['haelixe_fwd_bwd'])}")
                    if "torch_fwd" in r:
                        line += (f" | torch fwd {fmt_ms(r['torch_fwd'])}, fwd+bwd "
                                 f"{fmt_ms(r['torch_fwd_bwd'])} | ratio fwd "
                                 f"{r['ratio_fwd']:.2f}, fwd+bwd {r['ratio_fwd_bwd']:.2f}, "
                                 f"rel err {r['rel_err']:.1e}")
                    print(line, flush=True)
        if "linear" not in args.skip:
            if not small:
                b.iters, b.repeats = 5, 3
                if "matmul" in args.skip and "attention" in args.skip:
                    warm_up(b, 1.0)
            b.warm_s = 0.05  # the GPU is warm by now
            shapes = TRANSFORMER_LINEAR_SHAPES if args.linear == "transformer" else LINEAR_SHAPES
            report["linear"] = bench_linear(b, SMALL_LINEAR_SHAPES if small else shapes)
            print_linear_table(report["linear"])
    report["dispatch_stats"] = be.stats()
    save()
    return report


if __name__ == "__main__":
    main()
