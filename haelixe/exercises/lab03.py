"""Lab 03 · Mixed precision: the exercises and their checkers.

The truth is the engine: its float32 -> bfloat16 cast (ml_dtypes' round to nearest
even), the dtypes its ops return inside ``hx.autocast``, and AdamW's master weights.
"""

from __future__ import annotations

import numpy as np

from ..amp import autocast
from ..creation import from_numpy, full, ones, randn
from ..dtype import bfloat16, float32
from ..nn import functional as F
from .core import Lab, first_hint
from .values import as_array, as_dtype, describe

LAB = Lab(3, "Mixed precision")


# -- 3.1 rounding to bfloat16 by hand -----------------------------------------------------

def _bf16(values: np.ndarray) -> np.ndarray:
    return from_numpy(values).to(bfloat16).float().numpy()


def _bits(v) -> str:
    return f"0x{int(np.float32(v).view(np.uint32)):08x}"


def _round_cases() -> np.ndarray:
    special = [1.0, 1 + 2**-9, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-7, 3.14159265, -1 - 2**-8,
               -1 - 3 * 2**-8, 1e-3, 65504.0, 2.0**-130, 0.0]
    rng = np.random.default_rng(3)
    return np.concatenate([np.array(special, np.float32),
                           rng.standard_normal(2000).astype(np.float32) * 10.0])


def _truncate(v):
    return (v.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)


def _half_up(v):
    return ((v.view(np.uint32) + np.uint32(0x8000)) & np.uint32(0xFFFF0000)).view(np.float32)


@LAB.exercise("3.1", "Rounding to bfloat16 by hand", section="1. What a BF16 number is")
def round_bf16(answer, fb):
    values = _round_cases()
    want = _bf16(values)
    raw = fb.call(answer, values.copy(), shown="round_bf16(values)")
    got, complaint = as_array(raw, values.shape, "round_bf16(values)", np.float32)
    if complaint:
        fb.fail(complaint, hint="take a float32 array, return a float32 array of the same "
                                "shape holding the rounded values")
    bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    if not len(bad):
        return (f"all {len(values)} values round exactly as the engine's cast does, ties "
                f"to even included")
    k = int(bad[0])
    hint = first_hint(
        (np.array_equal(got, _truncate(values)),
         "you cut the low 16 bits off, which rounds toward zero; the cast rounds to the "
         "nearest BF16 value (ties to the even one): add 0x7FFF plus the lowest kept bit "
         "before cutting"),
        (np.array_equal(got, _half_up(values)),
         "a tie must go to the even neighbour (last kept bit 0): 1 + 2⁻⁸ is half-way between "
         "1.0 and 1.0078125 and rounds down to 1.0; add 0x7FFF plus the last kept bit "
         "before cutting"),
        otherwise="in the float32 bits, add 0x7FFF plus the lowest kept bit "
                  "((bits >> 16) & 1), then clear the low 16 bits")
    fb.fail(f"{len(bad)} of {len(values)} values round differently; the first is "
            f"{float(values[k])!r} (bits {_bits(values[k])})",
            expected=f"{float(want[k])!r} (bits {_bits(want[k])})",
            got=f"{float(got[k])!r} (bits {_bits(got[k])})", hint=hint)


# -- 3.2 the autocast decision ------------------------------------------------------------

FAMILIES = ("matmul", "linear", "attention", "norm", "softmax", "reduction", "loss",
            "elementwise")


def _run_family(family, x):
    """One op of ``family`` on ``x`` (2-D): its output, under the caller's autocast."""
    if family == "matmul":
        return x @ x.T
    if family == "linear":
        return F.linear(x, x)
    if family == "attention":
        q = x.reshape(1, 1, *x.shape)
        return F.scaled_dot_product_attention(q, q, q)
    if family == "norm":
        return F.rms_norm(x, x.shape[-1:], ones(x.shape[-1], dtype=x.dtype))
    if family == "softmax":
        return x.softmax(-1)
    if family == "reduction":
        return x.sum(-1)
    if family == "loss":
        return F.mse_loss(x, x * 0.5)
    return x * 2.0 + x


def engine_decision(family, input_dtype):
    x = randn(4, 4).to(input_dtype)
    with autocast(dtype=bfloat16):
        return _run_family(family, x).dtype


@LAB.exercise("3.2", "The autocast decision for an op",
              section="3. The compute boundary: `hx.autocast`")
def autocast_decision(answer, fb):
    wrong = []
    for family in FAMILIES:
        for dt in (float32, bfloat16):
            want = engine_decision(family, dt)
            call = f"autocast_result_dtype({family!r}, hx.{dt.name})"
            raw = fb.call(answer, family, dt, shown=call)
            got, complaint = as_dtype(raw, call)
            if complaint:
                fb.fail(complaint, hint="return hx.bfloat16 or hx.float32 (or their names)")
            if got is not want:
                wrong.append((family, dt.name, want.name, got.name))
    if not wrong:
        return "every op family returns the dtype you predicted, from F32 and BF16 inputs"
    families = {w[0] for w in wrong}
    low = {"matmul", "linear", "attention"}
    hint = first_hint(
        (families <= low,
         "the matmul family (matmul, linear, attention) reads BF16, accumulates in F32 "
         "inside the kernel and returns BF16, whatever its input"),
        (families <= {"norm", "softmax", "reduction", "loss"},
         "norms, softmax, reductions and losses cast their inputs to F32 and return F32: "
         "they sum many terms, which BF16 would lose"),
        (families == {"elementwise"},
         "autocast leaves elementwise ops alone: they return their input's dtype (promoted "
         "if the inputs differ)"),
        otherwise="read the policy table: 'low' families return BF16, 'f32' families "
                  "return F32, elementwise ops keep their input's dtype")
    rows = "\n".join(f"{f:11s} from {d:8s}: the engine returns {e}, you said {g}"
                     for f, d, e, g in wrong)
    fb.fail(f"{len(wrong)} of {2 * len(FAMILIES)} predictions differ from the engine",
            detail=rows, hint=hint)


# -- 3.3 a master-weight step -------------------------------------------------------------

def _master_run(step, fb, steps: int, update: float):
    master = ones(4)
    weight = ones(4, dtype=bfloat16)
    delta = full((4,), update)
    for k in range(steps):
        call = "master_weight_step(master, weight, update)"
        raw = fb.call(step, master, weight, delta, shown=call)
        if not (isinstance(raw, (tuple, list)) and len(raw) == 2):
            fb.fail(f"{call} should return the pair (new master, new weight)", got=raw)
        master, weight = raw
        for name, t, dt in (("master", master, float32), ("weight", weight, bfloat16)):
            if getattr(t, "dtype", None) is not dt:
                fb.fail(f"after step {k + 1} the {name} is {describe(t, 60)}; it must stay "
                        f"{dt.name}", hint="the master is float32, the weight bfloat16: "
                        "round with .to(hx.bfloat16)")
    return master, weight


@LAB.exercise("3.3", "A master-weight step", section="4. Why master weights")
def master_step(answer, fb):
    steps, update = 100, 1e-3
    master, weight = _master_run(answer, fb, steps, update)
    want_master = np.float32(1.0)
    for _ in range(steps):
        want_master = np.float32(want_master - np.float32(update))
    want_weight = _bf16(np.full(4, want_master, np.float32))
    got_m, complaint = as_array(master, (4,), "the master")
    if complaint:
        fb.fail(complaint)
    got_w = as_array(weight, (4,), "the weight")[0]
    if np.allclose(got_m, want_master, atol=1e-6) and np.array_equal(got_w, want_weight):
        return (f"after {steps} steps of {update} the master is {float(got_m[0]):.6f} and the "
                f"BF16 weight {float(got_w[0])}, as it should be")
    hint = first_hint(
        (np.all(got_w == 1.0) and np.allclose(got_m, 1.0),
         "nothing moved: a step of 1e-3 is a quarter of a BF16 ulp at 1.0, so weight - "
         "update rounds back to 1.0 every time; subtract from the F32 master and round the "
         "master into the weight"),
        (np.all(got_w == 1.0),
         "the master moved but the weight never did: after updating the master, write the "
         "rounded master into the weight (master.to(hx.bfloat16))"),
        otherwise="new master = master - update (in F32); new weight = the master rounded "
                  "to BF16")
    fb.fail(f"after {steps} steps of {update} from 1.0", expected=f"master {want_master:.6f}, "
            f"weight {want_weight[0]}", got=f"master {float(got_m[0]):.6f}, weight "
            f"{float(got_w[0])}", hint=hint)
