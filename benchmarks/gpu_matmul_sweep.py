"""Matmul and attention variants on the GPU, timed side by side in one run, to choose the
defaults of haelixe/backends/wgpu/matmul.py (TILES, choose) and attention.py (when
attention goes through matmuls):

1. raw arithmetic rates through this toolchain: f32, f16 and packed f16 FMAs, and f16 ->
   f32 conversions (what f16 matmul math can gain);
2. matmul 4096^2 fp32 over tile shapes, K steps, one or two stages of workgroup memory,
   unrolled or looped steps, with and without wgpu's runtime checks;
3. matmul 4096^2 float16: f16 arithmetic (flushed into f32 every few K tiles) against
   widening to f32;
4. the three matmuls of the Transformer's Linear layers (M = 8192) over the best
   variants, split-K and the small tiles, against PyTorch;
5. attention: the flash kernels against the matmul way, forward and forward + backward,
   against PyTorch's scaled_dot_product_attention;
6. the Linear forward with 16-bit operands (bf16, f16, or f32 rounded to bf16 as read)
   and its fused epilogue (bias; bias, GELU and pre-activation) over tiles, fp32 beside
   it: the evidence for choose()'s tile for 16-bit operands.

    python benchmarks/gpu_matmul_sweep.py --out sweep.json     # a real GPU
    python benchmarks/gpu_matmul_sweep.py --small               # tiny: a smoke test

Times are medians of ``--repeats`` rounds of ``--iters`` calls (milliseconds); the
variant names read BMxBN/TMxTN/kBK/sSTAGES[/u unrolled][/nc no runtime checks].
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import haelixe  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_kernels import Bench, linear_case, rel_err, torch_cuda

TRANSFORMER_LINEARS = [(8192, 512, 1536), (8192, 512, 512), (8192, 512, 2048),
                       (8192, 2048, 512)]
ATTENTION_SHAPES = [(16, 8, 512, 64), (32, 8, 256, 64), (8, 16, 1024, 64)]


def vname(tile, splits=1, checks=False) -> str:
    s = (f"{tile.bm}x{tile.bn}/{tile.tm}x{tile.tn}/k{tile.bk}/s{tile.stages}"
         f"{'/u' if tile.unrolled else ''}{'' if checks else '/nc'}")
    return s if splits == 1 else f"{s}/split{splits}"


# -- 1. arithmetic rates -----------------------------------------------------------------
_ALU = """
enable f16;
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read> n_iter: array<u32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let seed = T(S(f32(gid.x % 7u) * 0.001));
    INIT
    let x = T(0.999);
    let y = T(0.0005);
    for (var i = 0u; i < n_iter[0]; i++) {
        BODY
    }
    out[gid.x] = RESULT;
}
"""
# name -> (type, lanes, one step of chain {c}, accumulator {a}, step {i} of the body)
_ALU_KINDS = {
    "f32": ("f32", 1, "{a} = fma({a}, x, y);"),
    "vec4<f32>": ("vec4<f32>", 4, "{a} = fma({a}, x, y);"),
    "f16": ("f16", 1, "{a} = fma({a}, x, y);"),
    "vec2<f16>": ("vec2<f16>", 2, "{a} = fma({a}, x, y);"),
    "vec4<f16>": ("vec4<f16>", 4, "{a} = fma({a}, x, y);"),
    # a scalar splat times a vector, as the f16 matmul's inner step
    "vec4<f16> splat": ("vec4<f16>", 4, "{a} = fma(vec4<f16>({a}[{i} % 4]), x, {a});"),
    "vec2<f16> splat": ("vec2<f16>", 2, "{a} = fma(vec2<f16>({a}[{i} % 2]), x, {a});"),
    # f16 -> f32 conversions, as a flush of f16 sums into f32 ones (one add each)
    "cvt vec4<f16> -> f32": ("vec4<f16>", 4, "f{c} += vec4<f32>({a}); {a} = {a} * x;"),
}
CHAINS, UNROLL = 8, 4


def alu_source(kind: str) -> str:
    t, _, body = _ALU_KINDS[kind]
    init = "\n".join(f"var a{c} = seed + T({c}.0 * 0.01);" for c in range(CHAINS))
    if kind.startswith("cvt"):
        init += "\n" + "\n".join(f"var f{c} = vec4<f32>();" for c in range(CHAINS))
        result = " + ".join(f"f{c}.x" for c in range(CHAINS))
    else:
        result = " + ".join(f"f32(a{c}{'' if t in ('f32', 'f16') else '.x'})"
                            for c in range(CHAINS))
    lines = [body.format(a=f"a{c}", c=c, i=u * CHAINS + c)
             for u in range(UNROLL) for c in range(CHAINS)]
    return (_ALU.replace("INIT", init).replace("BODY", "\n        ".join(lines))
            .replace("RESULT", result).replace("T(", f"{t}(")
            .replace("S(", "f16(" if "f16" in t else "f32("))


def sweep_alu(be, small: bool) -> dict:
    """Operations per second of each kind (lanes x FMAs, or conversions)."""
    import wgpu

    if not be.context.has("shader-f16"):
        print("  no shader-f16: arithmetic rates skipped")
        return {}
    dev = be.context.device
    threads = 256 * (4 if small else 132 * 16)
    iters = 16 if small else 2048
    out = dev.create_buffer(size=4 * threads, usage=wgpu.BufferUsage.STORAGE)
    n_buf = dev.create_buffer_with_data(data=np.array([iters], np.uint32).tobytes(),
                                        usage=wgpu.BufferUsage.STORAGE)
    res = {}
    for kind, (_, lanes, _) in _ALU_KINDS.items():
        try:
            t = _alu_time(be, dev, kind, out, n_buf, threads // 256)
            res[kind] = threads * iters * CHAINS * UNROLL * lanes / t / 1e12
            print(f"  {kind:>22}: {res[kind]:8.2f} T lane-ops/s ({t * 1e3:.3f} ms)",
                  flush=True)
        except Exception as err:
            res[kind] = repr(err)[:160]
            print(f"  {kind:>22}: failed {res[kind]}", flush=True)
    return res


def _alu_time(be, dev, kind, out, n_buf, groups) -> float:
    """Median seconds of one dispatch of the ``kind`` kernel over ``groups`` workgroups."""
    from haelixe.backends.wgpu.dispatch import _unchecked_module

    module = _unchecked_module(dev, alu_source(kind), kind)
    pipe = dev.create_compute_pipeline(layout="auto",
                                       compute={"module": module, "entry_point": "main"})
    group = dev.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
        {"binding": 0, "resource": {"buffer": out}},
        {"binding": 1, "resource": {"buffer": n_buf}}])

    def run():
        enc = dev.create_command_encoder()
        cp = enc.begin_compute_pass()
        cp.set_pipeline(pipe)
        cp.set_bind_group(0, group)
        cp.dispatch_workgroups(groups)
        cp.end()
        dev.queue.submit([enc.finish()])
        be.synchronize()

    run()
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        run()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[2]


# -- 2. / 3. matmul 4096^2 -----------------------------------------------------------------
def time_matmul(b: Bench, ga, gb, variant, checks: bool):
    from haelixe.backends.wgpu import matmul as mm

    saved, mm.RUNTIME_CHECKS = mm.RUNTIME_CHECKS, checks
    try:
        out = mm.matmul(b.be, ga, gb, variant=variant)
        t = b.hx_time(lambda: mm.matmul(b.be, ga, gb, variant=variant))["median"]
        return t, out
    finally:
        mm.RUNTIME_CHECKS = saved


def sweep_square(b: Bench, n: int, report: dict, small: bool):
    """fp32 n^2: stage A settles steps / stages / unrolling / checks on 128x128 tiles,
    stage B tries other tiles with the best of those."""
    from haelixe.backends.wgpu import matmul as mm

    a, c = b.randn(n, n), b.randn(n, n)
    ref = a.astype(np.float64) @ c.astype(np.float64)
    ga, gc = b.be.from_numpy(a), b.be.from_numpy(c)
    limit = b.be.context.limits.get("max-compute-workgroup-storage-size", 16384)
    rows = report.setdefault("square_f32", [])
    flops = 2.0 * n ** 3

    def trial(tile, checks):
        name = vname(tile, 1, checks)
        if not tile.valid() or tile.shared_bytes() > limit:
            return None
        try:
            t, out = time_matmul(b, ga, gc, mm.Variant(tile), checks)
            err = rel_err(b.be.to_numpy(out), ref)
        except Exception as e:
            rows.append({"variant": name, "error": repr(e)[:200]})
            print(f"  {name:>34}: failed {repr(e)[:160]}", flush=True)
            return None
        rows.append({"variant": name, "ms": t * 1e3, "tflops": flops / t / 1e12,
                     "rel_err": err, "tile": list(tile), "checks": checks})
        print(f"  {name:>34}: {t * 1e3:8.3f} ms {flops / t / 1e12:6.2f} TFLOP/s "
              f"err {err:.1e}", flush=True)
        return t

    base = mm.Tile(128, 128, 8, 8, 16) if not small else mm.Tile(32, 32, 4, 4, 8)
    results = {}
    combos = [(bk, st, un, ch) for bk in (16, 8) for st in (1, 2) for un in (False, True)
              for ch in (True, False) if bk == 16 or not ch]
    for bk, st, un, ch in combos:
        t = trial(base._replace(bk=bk if not small else 8, stages=st, unrolled=un), ch)
        if t is not None:
            results[(bk, st, un, ch)] = t
    (bk, st, un, ch) = min(results, key=results.get)
    print(f"  stage A best: k{bk} stages {st} unrolled {un} checks {ch}", flush=True)
    report["square_best_mode"] = {"bk": bk, "stages": st, "unrolled": un, "checks": ch}
    if small:
        tiles = [mm.Tile(32, 64, 4, 8, 8), mm.Tile(64, 32, 8, 4, 8)]
    else:
        tiles = [mm.Tile(*dims) for dims in (
            (128, 256, 8, 16, 16), (128, 256, 8, 16, 8), (256, 128, 16, 8, 16),
            (256, 128, 16, 8, 8), (128, 128, 8, 16, 16), (128, 128, 8, 16, 8),
            (128, 128, 16, 8, 16), (128, 128, 16, 8, 8), (128, 128, 8, 8, 32),
            (128, 64, 8, 8, 16), (64, 128, 8, 8, 16), (128, 64, 8, 4, 16),
            (64, 64, 4, 4, 16), (64, 64, 8, 8, 16))]
    timed = {}
    for tile in tiles:
        t = trial(tile._replace(stages=st, unrolled=un), ch)
        if t is not None:
            timed[tile] = t
    for tile in sorted(timed, key=timed.get)[:3]:  # the fastest with the other stages
        trial(tile._replace(stages=3 - st, unrolled=un), ch)
    best = min((r for r in rows if "ms" in r), key=lambda r: r["ms"])
    report["square_best"] = best
    print(f"  best: {best['variant']} {best['ms']:.3f} ms ({best['tflops']:.2f} TFLOP/s)",
          flush=True)
    if b.torch is not None:
        ta, tc = (b.torch.from_numpy(x).cuda() for x in (a, c))
        t = b.torch_time(lambda: ta @ tc)["median"]
        report["square_torch_ms"] = t * 1e3
        print(f"  torch: {t * 1e3:.3f} ms ({flops / t / 1e12:.2f} TFLOP/s); best / torch "
              f"{t * 1e3 / best['ms']:.2f}x", flush=True)
    return best, (st, un, ch)


def sweep_f16(b: Bench, n: int, best_tile, checks: bool, report: dict, small: bool):
    """float16 n^2 on a few tiles and K steps: f32 math (widened on load) against f16
    math flushed into the f32 sums every 16, 64 or 128 k (its error grows with it)."""
    from haelixe.backends.wgpu import matmul as mm

    be = b.be
    if not be.context.has("shader-f16"):
        return
    a, c = (b.randn(n, n).astype(np.float16) for _ in range(2))
    ref = a.astype(np.float64) @ c.astype(np.float64)
    ga, gc = be.from_numpy(a), be.from_numpy(c)
    rows = report.setdefault("square_f16", [])
    saved_flush, saved_features = mm.F16_FLUSH_TILES, be.context.features
    limit = be.context.limits.get("max-compute-workgroup-storage-size", 16384)
    shapes = [(32, 32, 4, 4)] if small else [(64, 128, 4, 8), (128, 128, 8, 8),
                                             (128, 256, 8, 16), (256, 128, 16, 8)]
    try:
        for bm, bn, tm, tn in shapes:
            for bk in ((8,) if small else (16, 32)):
                tile = best_tile._replace(bm=bm, bn=bn, tm=tm, tn=tn, bk=bk)
                for k_flush in (0, 16, 64, 128):
                    flush = k_flush // bk
                    if k_flush and not flush:
                        continue
                    shared = (tile.shared_bytes(2, paired_a=True) if flush
                              else tile.shared_bytes())
                    if not tile.valid() or shared > limit:
                        continue
                    _f16_trial(b, ga, gc, ref, tile, flush, checks, rows, saved_features)
    finally:
        mm.F16_FLUSH_TILES, be.context.features = saved_flush, saved_features


def _f16_trial(b, ga, gc, ref, tile, flush, checks, rows, features):
    from haelixe.backends.wgpu import matmul as mm

    be, n = b.be, ga.shape[0]
    mm.F16_FLUSH_TILES = flush or None
    be.context.features = features if flush else features - {"shader-f16"}
    name = f"{vname(tile, 1, checks)} {f'f16 flush {flush}' if flush else 'f32 math'}"
    try:
        t, out = time_matmul(b, ga, gc, mm.Variant(tile), checks)
        err = rel_err(be.to_numpy(out), ref)
        rows.append({"variant": name, "ms": t * 1e3, "rel_err": err})
        print(f"  {name:>48}: {t * 1e3:8.3f} ms {2.0 * n ** 3 / t / 1e12:6.2f} TFLOP/s "
              f"err {err:.1e}", flush=True)
    except Exception as e:
        rows.append({"variant": name, "error": repr(e)[:200]})
        print(f"  {name:>48}: failed {repr(e)[:160]}", flush=True)


# -- 4. Linear shapes ---------------------------------------------------------------------
def sweep_linears(b: Bench, shapes, candidates, checks: bool, report: dict):
    """Each op of each shape over the candidates (and the variant choose() picks)."""
    from haelixe.backends.wgpu import matmul as mm

    rows = report.setdefault("linears", [])
    for m, k, n in shapes:
        for op, (run0, a, c) in linear_case(b, m, k, n).items():
            flops = 2.0 * a.shape[0] * a.shape[1] * c.shape[1]
            row = {"M": m, "in": k, "out": n, "op": op, "times": {}}
            big_k = a.shape[1]
            variants = [(vname(t, s, checks), mm.Variant(t, s)) for t, s in candidates
                        if s == 1 or (op == "dW" and big_k // s >= 256)]
            variants += [("choose()", None), ("choose() s2", "s2")]
            for name, var in variants:
                saved_choose, saved_checks = mm.choose, mm.RUNTIME_CHECKS
                if var == "s2":  # the chosen tile with two stages
                    mm.choose = lambda *args, f=saved_choose: f(*args)._replace(
                        tile=f(*args).tile._replace(stages=2))
                elif var is not None:
                    mm.choose = lambda *args, var=var: var
                mm.RUNTIME_CHECKS = checks
                try:
                    run0()
                    row["times"][name] = b.hx_time(run0)["median"] * 1e3
                except Exception as e:
                    row["times"][name] = repr(e)[:120]
                finally:
                    mm.choose, mm.RUNTIME_CHECKS = saved_choose, saved_checks
            if b.torch is not None:
                ta, tc = (b.torch.from_numpy(np.ascontiguousarray(t)).cuda() for t in (a, c))
                row["torch"] = b.torch_time(lambda ta=ta, tc=tc: ta @ tc)["median"] * 1e3
            ok = {v: t for v, t in row["times"].items() if isinstance(t, float)}
            row["best"] = min(ok, key=ok.get)
            tb = ok[row["best"]]
            torch_ms = row.get("torch")
            print(f"  M={m} in={k} out={n} {op:3s}: best {row['best']} {tb:.3f} ms "
                  f"({flops / tb * 1e-9:.1f} TFLOP/s); choose() {ok.get('choose()', 0):.3f}"
                  + (f"; torch {torch_ms:.3f} ms ({torch_ms / tb:.2f}x)" if torch_ms else ""),
                  flush=True)
            rows.append(row)


# -- 6. 16-bit Linear forward ------------------------------------------------------------
# the Transformer's Linear forwards (M = batch x sequence, in, out); the first is timed
# twice, its first pass discarded (the GPU's clocks ramp up on the first kernels)
SIXTEEN_BIT_LINEARS = [(8192, 512, 512), (8192, 512, 512), (8192, 512, 1536),
                       (8192, 512, 2048), (8192, 2048, 512)]


def sweep_sixteen_bit(b: Bench, shapes, report: dict):
    """y = x W^T + bias (and GELU with its pre-activation kept) for fp32, bf16 and f16
    operands and for an fp32 x rounded to bf16 as read (autocast's Linear), over the
    tiles choose() picks from; each time a median of rounds of back-to-back calls."""
    import ml_dtypes

    from haelixe.backends.wgpu import matmul as mm
    from haelixe.backends.wgpu.geometry import swap_last2
    from haelixe.ops.elementwise import ACTIVATIONS

    be, gelu = b.be, ACTIVATIONS["gelu"]
    bf16 = np.dtype(ml_dtypes.bfloat16)
    tiles = {"choose()": None, **{name: mm.Variant(mm.TILES[name]) for name in
                                  ("128x256", "128x128", "128x128k8")},
             "256x128": mm.Variant(mm.Tile(256, 128, 16, 8, 16))}
    rows = report.setdefault("sixteen_bit", [])
    for i, (m, k, n) in enumerate(shapes):
        x, w, bias = b.randn(m, k), b.randn(n, k), b.randn(n)
        for kind, (xt, wt, out, rnd) in {
                "f32": (np.float32, np.float32, None, None),
                "bf16": (bf16, bf16, None, None),
                "f16": (np.float16, np.float16, None, None),
                "f32 read as bf16": (np.float32, bf16, bf16, bf16)}.items():
            gx, gw = be.from_numpy(x.astype(xt)), swap_last2(be.from_numpy(w.astype(wt)))
            gb = be.from_numpy(bias.astype(wt))
            for epilogue in ("bias", "bias+gelu+pre"):
                act = dict(activation=gelu, want_pre=True) if epilogue != "bias" else {}
                row = {"M": m, "in": k, "out": n, "operands": kind, "epilogue": epilogue,
                       "warm-up": i == 0 and len(shapes) > 1, "times": {}}
                for name, var in tiles.items():
                    run = functools.partial(mm.matmul, be, gx, gw, bias=gb, out_dtype=out,
                                            variant=var, round_to=(rnd, None, None), **act)
                    try:
                        row["times"][name] = b.hx_time(run)["median"] * 1e3
                    except ValueError as e:  # a tile the adapter cannot hold
                        row["times"][name] = repr(e)[:120]
                rows.append(row)
                if not row["warm-up"]:
                    print(f"  {m}x{k}x{n} {kind:>16} {epilogue:>13}: " + " ".join(
                        f"{t} {v:.3f}" if isinstance(v, float) else f"{t} -"
                        for t, v in row["times"].items()) + " ms", flush=True)


# -- 5. attention -------------------------------------------------------------------------
def sweep_attention(b: Bench, shapes, report: dict):
    from haelixe.backends.wgpu import attention as at

    rows = report.setdefault("attention", [])
    for shape in shapes:
        row = _attention_row(b, at, shape)
        rows.append(row)
        print(f"  attention {tuple(shape)}: " + ", ".join(
            f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
            for k, v in row.items() if k != "shape"), flush=True)


def _attention_row(b: Bench, at, shape) -> dict:
    be, torch = b.be, b.torch
    q, k, v, g = (b.randn(*shape) for _ in range(4))
    gq, gk, gv, gg = (be.from_numpy(t) for t in (q, k, v, g))
    scale = 1.0 / math.sqrt(shape[-1])
    row = {"shape": list(shape)}

    def fwd():
        return at.attention(be, gq, gk, gv, False, scale)

    def fwd_bwd():
        out, lse = fwd()
        return at.attention_backward(be, gq, gk, gv, out, lse, gg, False, scale)

    outs = {}
    for way in ("flash", "matmuls"):
        saved, at.MATMUL_PATH = at.MATMUL_PATH, way == "matmuls"
        try:
            outs[way] = be.to_numpy(fwd()[0])
            row[f"{way}_fwd"] = b.hx_time(fwd)["median"] * 1e3
            row[f"{way}_fwd_bwd"] = b.hx_time(fwd_bwd)["median"] * 1e3
        except Exception as e:
            row[f"{way}_error"] = repr(e)[:200]
        finally:
            at.MATMUL_PATH = saved
    if len(outs) == 2:
        row["rel_diff"] = rel_err(outs["matmuls"], outs["flash"])
    if torch is not None:
        import torch.nn.functional as tF

        tq, tk, tv, tg = (torch.from_numpy(x).cuda().requires_grad_() for x in (q, k, v, g))

        def tfwd():
            with torch.no_grad():
                return tF.scaled_dot_product_attention(tq, tk, tv, scale=scale)

        def tfwd_bwd():
            o = tF.scaled_dot_product_attention(tq, tk, tv, scale=scale)
            return torch.autograd.grad(o, (tq, tk, tv), tg)

        row["torch_fwd"] = b.torch_time(tfwd)["median"] * 1e3
        row["torch_fwd_bwd"] = b.torch_time(tfwd_bwd)["median"] * 1e3
    return row


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="tiny sizes (software adapters)")
    ap.add_argument("--iters", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true",
                    help="Linear shapes: choose() against the TILES only")
    ap.add_argument("--skip", nargs="*", default=(),
                    choices=("alu", "square", "f16", "linears", "attention", "sixteen"))
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    args = ap.parse_args(argv)

    from haelixe.backends.wgpu import matmul as mm
    from haelixe.backends.wgpu.backend import get_backend

    be = get_backend()
    print(f"adapter: {be.info['device']} | features {sorted(be.context.features)}",
          flush=True)
    torch = torch_cuda()
    small = args.small
    b = Bench(be, torch, args.iters or (1 if small else 5), 1 if small else args.repeats,
              0.0 if small else 0.1)
    report = {"adapter": be.info["device"]}

    def save():
        if args.out:
            Path(args.out).write_text(json.dumps(report, indent=1, default=str))

    n = 64 if small else 4096
    if "alu" not in args.skip:
        print("1. arithmetic rates", flush=True)
        report["alu"] = sweep_alu(be, small)
        save()
    best_tile, mode = mm.TILES["128x128"], (1, True, False)
    if "square" not in args.skip:
        print(f"2. matmul {n}^2 fp32", flush=True)
        best, mode = sweep_square(b, n, report, small)
        best_tile = mm.Tile(*best["tile"])
        save()
    stages, unrolled, checks = mode
    if "f16" not in args.skip:
        print(f"3. matmul {n}^2 float16", flush=True)
        sweep_f16(b, n, best_tile, checks, report, small)
        save()
    if "linears" not in args.skip:
        print("4. Linear shapes", flush=True)
        cands = [best_tile] + [mm.Tile(*dims, stages=stages, unrolled=unrolled) for dims in (
            (128, 128, 8, 8, 16), (128, 128, 8, 8, 8), (128, 64, 8, 4, 16),
            (64, 128, 4, 8, 16), (64, 64, 4, 4, 16), (128, 128, 8, 16, 16))]
        cands = list(dict.fromkeys(t for t in cands if t.valid()))
        split_tiles = [mm.Tile(64, 64, 4, 4, 16, stages, unrolled),
                       mm.Tile(128, 128, 8, 8, 16, stages, unrolled)]
        candidates = [(t, 1) for t in cands] + [(t, s) for t in split_tiles for s in (2, 4, 8)]
        if args.quick:
            candidates = [(t, 1) for t in dict.fromkeys(mm.TILES.values())]
        shapes = [(128, 64, 96)] if small else TRANSFORMER_LINEARS
        sweep_linears(b, shapes, candidates, checks, report)
        save()
    if "attention" not in args.skip:
        print("5. attention", flush=True)
        sweep_attention(b, [(2, 2, 40, 16)] if small else ATTENTION_SHAPES, report)
        save()
    if "sixteen" not in args.skip:
        print("6. 16-bit Linear forward with its epilogue, over tiles", flush=True)
        sweep_sixteen_bit(b, [(64, 32, 48)] if small else SIXTEEN_BIT_LINEARS, report)
        save()
    return report


if __name__ == "__main__":
    main()
