"""einsum as torch.einsum: any number of operands, '...', repeated letters (diagonals)
and size-1 dims broadcast. Composed from views, sums and one batched matmul per pair
of operands (contracted left to right), so autograd needs nothing of its own."""

from __future__ import annotations

import math

from ..errors import OpError
from .linalg import matmul
from .registry import declare, function

#: letters for the dims '...' stands for (outside a-zA-Z, so they meet no user letter)
_ELLIPSIS_LETTERS = [chr(0x3B1 + i) for i in range(24)]


def einsum(equation, *operands):
    """Einstein summation, as torch.einsum (the implicit output too)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(operands):
        raise OpError(f"einsum: {equation!r} names {len(ins)} operands, got "
                      f"{len(operands)}")
    ins, out = _expand_ellipsis(equation, ins, out if arrow else None, operands)
    ts, specs = [], []
    for spec, t in zip(ins, operands):
        t, spec = _diagonals(t, spec)
        ts.append(t)
        specs.append(spec)
    ts = _broadcast(equation, ts, specs)
    for c in out:
        if out.count(c) > 1 or not any(c in s for s in specs):
            raise OpError(f"einsum: output letter {c!r} of {equation!r} "
                          f"{'repeats' if out.count(c) > 1 else 'names no input dim'}")
    t, spec = ts[0], specs[0]
    for k in range(1, len(ts)):
        later = "".join(specs[k + 1:]) + out
        t, spec = _sum_unused(t, spec, specs[k] + later)
        t2, spec2 = _sum_unused(ts[k], specs[k], spec + later)
        t, spec = _contract(t, spec, t2, spec2, later)
    t, spec = _sum_unused(t, spec, out)
    return t.permute([spec.index(c) for c in out])


def _expand_ellipsis(equation, ins, out, operands):
    """Each '...' as letters of its own (right-aligned across operands); the implicit
    output: the '...' dims, then the letters named once, in order."""
    n_ell = 0
    for spec, t in zip(ins, operands):
        named = len(spec.replace("...", ""))
        if "..." in spec:
            if spec.count("...") > 1 or "." in spec.replace("...", ""):
                raise OpError(f"einsum: {spec!r} in {equation!r} has a stray '.'; use "
                              f"'...' once per operand")
            if t.ndim < named:
                raise OpError(f"einsum: {spec!r} names {named} dims besides '...', "
                              f"operand has shape {t.shape}")
            n_ell = max(n_ell, t.ndim - named)
        elif "." in spec:
            raise OpError(f"einsum: {spec!r} in {equation!r} has a stray '.'; use "
                          f"'...' once per operand")
        elif named != t.ndim:
            raise OpError(f"einsum: {spec!r} names {named} dims, operand has shape "
                          f"{t.shape}")
    if n_ell > len(_ELLIPSIS_LETTERS):
        raise OpError(f"einsum: '...' stands for {n_ell} dims (at most "
                      f"{len(_ELLIPSIS_LETTERS)})")
    ell = "".join(_ELLIPSIS_LETTERS[:n_ell])
    new_ins = []
    for spec, t in zip(ins, operands):
        if "..." in spec:
            k = t.ndim - len(spec.replace("...", ""))
            spec = spec.replace("...", ell[n_ell - k:])
        new_ins.append(spec)
    if out is None:
        letters = "".join(new_ins)
        out = ell + "".join(sorted(c for c in set(letters)
                                   if letters.count(c) == 1 and c not in ell))
    elif "..." in out:
        out = out.replace("...", ell)
    return new_ins, out  # ('...' dims the output leaves out are summed, as torch does)


def _diagonals(t, spec):
    """A letter named twice in one operand takes the diagonal of its two dims."""
    while len(set(spec)) != len(spec):
        c = next(c for c in spec if spec.count(c) > 1)
        i = spec.index(c)
        j = spec.index(c, i + 1)
        if t.shape[i] != t.shape[j]:
            raise OpError(f"einsum: letter {c!r} repeats in {spec!r} over dims of sizes "
                          f"{t.shape[i]} and {t.shape[j]}; a diagonal needs equal sizes")
        t = t.diagonal(0, i, j)  # (the diagonal becomes the last dim)
        spec = spec[:i] + spec[i + 1:j] + spec[j + 1:] + c
    return t, spec


def _broadcast(equation, ts, specs):
    """Every letter at one size: dims of size 1 expand to the others' size."""
    size = {}
    for spec, t in zip(specs, ts):
        for c, n in zip(spec, t.shape):
            if size.get(c, 1) == 1:
                size[c] = n
            elif n not in (1, size[c]):
                raise OpError(f"einsum: dim {c!r} of {equation!r} has size {size[c]} "
                              f"and {n}")
    return [t if all(n == size[c] for c, n in zip(spec, t.shape)) else
            t.expand([size[c] for c in spec]) for spec, t in zip(specs, ts)]


def _sum_unused(t, spec, keep):
    """Sum away the letters of ``spec`` that ``keep`` lacks."""
    gone = tuple(k for k, c in enumerate(spec) if c not in keep)
    if not gone:
        return t, spec
    return t.sum(gone), "".join(c for c in spec if c in keep)


def _contract(a, sa, b, sb, keep):
    """a and b as one batched matmul: batch letters (both, kept), contracted letters
    (both, not kept) and each side's own, permuted and flattened into place."""
    batch = [c for c in sa if c in sb and c in keep]
    contract = [c for c in sa if c in sb and c not in keep]
    left = [c for c in sa if c not in sb]
    right = [c for c in sb if c not in sa]
    size = dict(zip(sa, a.shape)) | dict(zip(sb, b.shape))

    def prod(letters):
        return math.prod(size[c] for c in letters)

    a2 = a.permute([sa.index(c) for c in batch + left + contract]).reshape(
        prod(batch), prod(left), prod(contract))
    b2 = b.permute([sb.index(c) for c in batch + contract + right]).reshape(
        prod(batch), prod(contract), prod(right))
    y = matmul(a2, b2).reshape([size[c] for c in batch + left + right])
    return y, "".join(batch + left + right)


declare("einsum", arity=2)
function(einsum)
