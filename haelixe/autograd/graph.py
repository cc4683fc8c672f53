"""Introspection of the autograd graph, for pictures and for debugging.

``graph(t)`` walks the DAG behind ``t`` (iteratively) and returns plain records: one per
node (op name, output shape, dtype, device, whether it is a leaf or a parameter, the bytes
of the tensors it saved for backward) and the edges between them in data-flow direction
(input -> op). Nothing here draws; haelixe.viz does.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class NodeInfo:
    id: int
    op: str
    kind: str  # "op", "leaf", "parameter", "output"
    shape: tuple
    dtype: str
    device: str
    requires_grad: bool = True
    is_leaf: bool = False
    saved: list = field(default_factory=list)  # [(shape, dtype, nbytes)]
    saved_bytes: int = 0
    grad_norm: float | None = None
    name: str | None = None
    node: object = field(default=None, repr=False, compare=False)
    #: the innermost Module whose forward made this node (None outside any module)
    module: object = field(default=None, repr=False, compare=False)


@dataclass
class Graph:
    nodes: list
    edges: list  # (src id, dst id): src's output feeds dst

    def by_id(self) -> dict:
        return {n.id: n for n in self.nodes}

    def generations(self) -> list[list[int]]:
        """Node ids in topological layers: leaves first, the output last."""
        indeg = {n.id: 0 for n in self.nodes}
        succ = {n.id: [] for n in self.nodes}
        for s, d in self.edges:
            indeg[d] += 1
            succ[s].append(d)
        layer = [i for i, k in indeg.items() if k == 0]
        out = []
        while layer:
            out.append(layer)
            nxt = []
            for i in layer:
                for j in succ[i]:
                    indeg[j] -= 1
                    if indeg[j] == 0:
                        nxt.append(j)
            layer = nxt
        return out


def _leaf_info(acc) -> NodeInfo:
    import numpy as np

    leaf = acc.leaf
    if leaf is None:
        return NodeInfo(id(acc), "leaf (freed)", "leaf", (), "?", "?", is_leaf=True, node=acc)
    gn = None
    if leaf.grad is not None:
        g = leaf.grad._be.to_numpy(leaf.grad._data)
        gn = float(np.sqrt(np.sum(np.square(g, dtype=np.float64))))
    kind = "parameter" if leaf._is_param else "leaf"
    return NodeInfo(id(acc), leaf.name or kind, kind, leaf.shape, leaf.dtype.name,
                    leaf.device.type, True, True, [], 0, gn, leaf.name, acc)


def _op_info(fn) -> NodeInfo:
    shape, dtype, device = fn.out_shape or (), fn.out_dtype, fn.out_device
    saved = []
    if fn.saved:
        saved = [(t.shape, t.dtype.name, t.numel() * t.dtype.itemsize)
                 for t in fn.saved if t is not None]
    return NodeInfo(id(fn), fn.name, "op", shape, dtype.name if dtype else "?",
                    device.type if device else "?", True, False, saved,
                    sum(s[2] for s in saved), None, None, fn, fn.module)


def graph(*tensors) -> Graph:
    """The autograd DAG behind ``tensors``: nodes and input->op edges."""
    from .function import edge_of

    roots = [edge_of(t) for t in tensors if t._requires_grad]
    infos, edges = {}, []
    stack = list(roots)
    seen = set(map(id, roots))
    while stack:
        node = stack.pop()
        infos[id(node)] = _leaf_info(node) if node.is_accumulate else _op_info(node)
        for nxt in node.next:
            if nxt is None:
                continue
            edges.append((id(nxt), id(node)))
            if id(nxt) not in seen:
                seen.add(id(nxt))
                stack.append(nxt)
    for r in roots:
        if not r.is_accumulate:
            infos[id(r)].kind = "output"
    return Graph(list(infos.values()), edges)
