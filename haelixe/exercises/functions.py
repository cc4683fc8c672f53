"""Checking a Function the learner wrote: its forward against the engine's, its
backward by finite differences, and where a backward goes wrong.

To locate a wrong backward the same small graph is built twice, once with the learner's
op and once with the engine's; backward runs on both while the engine's observer records
what each node sends to its inputs, and the first node (from the loss back) whose
gradients disagree is drawn ringed in the graph picture.
"""

from __future__ import annotations

import numpy as np

from ..autograd import add_backward_observer
from ..autograd import graph as build_graph
from ..autograd.function import edge_of
from ..autograd.gradcheck import GradcheckError, gradcheck
from .values import as_array, first_difference


def require_function(fb, answer, name: str):
    """``answer.apply``, or the end of the check when the answer is not a Function class."""
    apply = getattr(answer, "apply", None)
    if apply is None:
        fb.fail(f"expected the class {name} (class {name}(Function) with a forward and a "
                f"backward)", got=answer)
    return apply


def check_forward(fb, apply, cases, reference, name, hints) -> None:
    """Run ``apply`` on each input of ``cases`` [(description, inputs)] and compare with
    ``reference(*inputs)``; ``hints(inputs, want, got)`` words a mismatch."""
    for desc, inputs in cases:
        want = reference(*inputs).detach().numpy()
        raw = fb.call(apply, *inputs, shown=f"{name}.apply({desc})")
        got, complaint = as_array(raw, want.shape, f"{name}.apply({desc})")
        if complaint:
            fb.fail(complaint, expected=want, got=raw,
                    hint="forward returns one Tensor of the input's shape")
        where = first_difference(want, got, 1e-6, 1e-6)
        if where is not None:
            fb.fail(f"{name}.apply({desc}): forward differs from the engine's, first at "
                    f"element {where}: expected {want[where]:.6g}, got {got[where]:.6g}",
                    expected=want, got=got, hint=hints(inputs, want, got))


def gradcheck_message(fn, inputs, name: str):
    """gradcheck's own message (function, input, element, both values), or None."""
    try:
        gradcheck(fn, tuple(inputs), name=name)
    except GradcheckError as e:
        return str(e)
    return None


def _paired_nodes(root_a, root_b):
    """Walk two graphs from their roots along ``next`` edges in argument order, pairing
    nodes; stops descending where the two disagree in arity."""
    pairs, seen, stack = [], set(), [(root_a, root_b)]
    while stack:
        a, b = stack.pop()
        if id(a) in seen:
            continue
        seen.add(id(a))
        pairs.append((a, b))
        if len(a.next) != len(b.next):
            continue
        for na, nb in zip(a.next, b.next):
            if na is not None and nb is not None:
                stack.append((na, nb))
    return pairs


def _run(build, op, inputs):
    """Fresh float64 leaves from ``inputs``; loss = build(op, *leaves); backward with the
    observer on. Returns (graph records, {node id: grad norms it sent}, root node,
    leaves)."""
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    loss = build(op, *leaves)
    records = build_graph(loss)
    root = edge_of(loss)
    sent = {}

    def observe(event, node, norms):
        if event == "finish":
            sent[id(node)] = norms

    remove = add_backward_observer(observe)
    try:
        loss.backward()
    finally:
        remove()
    return records, sent, root, leaves


def _close(a, b, rtol=1e-5, atol=1e-7) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return len(a) == len(b) and all(
        (x is None and y is None) or (x is not None and y is not None
                                      and abs(x - y) <= atol + rtol * abs(y))
        for x, y in zip(a, b))


def locate_difference(build, op, reference, inputs, names=()):
    """Build ``build(op, *leaves)`` and ``build(reference, *leaves)``, backward both, and
    find the first node (in backward order) whose outgoing gradients differ.

    Returns ``(svg picture, caption)`` or None when every gradient agrees. The learner's
    ``op`` is called here: its errors propagate to the caller (the checker's
    ``fb.call``), NotImplementedError included.
    """
    from ..viz import render_graph_svg

    mine, mine_sent, mine_root, mine_leaves = _run(build, op, inputs)
    _, ref_sent, ref_root, ref_leaves = _run(build, reference, inputs)
    bad = None
    partner = {id(a): (a, b) for a, b in _paired_nodes(mine_root, ref_root)}
    for layer in reversed(mine.generations()):  # the loss first: backward order
        for i in layer:
            if i in partner and not _close(mine_sent.get(i), ref_sent.get(id(partner[i][1]))):
                bad = partner[i][0]
                break
        if bad is not None:
            break
    if bad is None:  # the norms agree; compare the leaves' gradients element by element
        for la, lb in zip(mine_leaves, ref_leaves):
            ga = None if la.grad is None else la.grad.numpy()
            gb = None if lb.grad is None else lb.grad.numpy()
            if (ga is None) != (gb is None) or (ga is not None and not np.allclose(ga, gb)):
                bad = la._accumulator
                break
    if bad is None:
        return None
    labels = {id(leaf._accumulator): n for leaf, n in zip(mine_leaves, names)
              if leaf._accumulator is not None}
    by_id = mine.by_id()
    info = by_id.get(id(bad))
    what = labels.get(id(bad)) or (info.op if info else type(bad).__name__)
    mine_norms = mine_sent.get(id(bad))
    ref_norms = ref_sent.get(id(partner[id(bad)][1])) if id(bad) in partner else None
    picture = render_graph_svg(mine, selected=id(bad), names=labels)
    sent = ""
    if mine_norms:
        sent = f" (it sent gradients of norm {_fmt_norms(mine_norms)}"
        sent += (f"; the engine's: {_fmt_norms(ref_norms)})" if ref_norms else ")")
    caption = (f"ringed: {what}, the first node from the loss back whose gradient differs "
               f"from the engine's" + sent)
    return picture, caption


def _fmt_norms(norms) -> str:
    return ", ".join("none" if n is None else f"{n:.4g}" for n in norms)
