"""The graph as it is drawn: node labels, names from the user's variables, and modules
collapsed into single boxes.

Everything here works on :class:`haelixe.autograd.graph.Graph` records (no drawing, no
widgets). :func:`collapse_graph` folds the nodes a module's forward made into one node of
kind "group"; :func:`collapse_choices` lists the depths whose folding changes the
picture; :func:`resolve_names` turns tensors, modules and variable names into labels
keyed by node id.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import svg

__all__ = ["node_label", "detail", "is_cast", "Group", "Collapsed", "qualified_modules",
           "collapse_graph", "collapse_choices", "resolve_names", "scope_of_caller"]


def node_label(info, names=None) -> str:
    """The first text line of a node: its op, or for a leaf its (qualified) name;
    ``names`` ({node id: label}) overrides both."""
    if names and info.id in names:
        return names[info.id]
    if info.kind in ("leaf", "parameter"):
        return info.name or info.kind
    return info.op


def detail(info) -> str:
    """The second text line: what a box holds (shape, dtype, device; for a module box
    how many ops and parameters it folds)."""
    if info.kind == "group":
        g = info.node
        inside = f"{g.ops} ops" + (f" · {g.params} params" if g.params else "")
        return f"{inside} · {svg.fmt_shape(info.shape)}"
    return f"{svg.fmt_shape(info.shape)} · {info.dtype} · {info.device}"


def is_cast(info) -> bool:
    """A Cast node, or an op that casts an input inside its kernel (autocast's Linear
    reading a float32 input rounded to bfloat16: its name says from->to)."""
    return info.op.startswith("Cast") or "->" in info.op


# -- names from the user's variables -----------------------------------------------------

def _is_tensor(value) -> bool:
    from ...tensor import Tensor

    return isinstance(value, Tensor)


def _is_module(value) -> bool:
    from ...nn import Module

    return isinstance(value, Module)


def _pairs(names):
    """(tensor or module, name) pairs from {tensor: name} or {name: tensor} (the order
    torchviz's ``params`` uses)."""
    for k, v in names.items():
        yield (v, k) if isinstance(k, str) else (k, v)


def scope_of_caller(depth: int = 2) -> list:
    """The variables of the code ``depth`` frames up (its locals, then its globals): in a
    notebook, the user's namespace. Names starting with "_" (IPython's output history
    among them) are left out."""
    import sys

    frame = sys._getframe(depth)
    seen, out = set(), []
    for space in (frame.f_locals, frame.f_globals):
        for name, value in list(space.items()):
            if name.startswith("_") or name in seen or not isinstance(name, str):
                continue
            if _is_tensor(value) or _is_module(value):
                seen.add(name)
                out.append((value, name))
    return out


def resolve_names(graph, names=None, model=None, scope=()) -> dict:
    """{node id: label} for the nodes the caller can name.

    ``names``: {tensor: "name"} (or {"name": tensor}); a Module in it names its
    parameters "name.path". ``model``: its parameters are named by their qualified
    path ("block.attn.qkv.weight"). ``scope``: (value, variable name) pairs, such as
    :func:`scope_of_caller` returns, used the same way as ``names`` where those say
    nothing. A leaf's label is its name; an op's is ``"name = Op"``.
    """
    leaf_node = {}
    for n in graph.nodes:
        leaf = getattr(n.node, "leaf", None) if n.kind in ("leaf", "parameter") else None
        if leaf is not None:
            leaf_node[id(leaf)] = n.id
    op_nodes = {n.id for n in graph.nodes if n.kind not in ("leaf", "parameter")}

    found = {}  # node id -> bare name, first claim wins

    def claim(value, name):
        if _is_module(value):
            for path, p in value.named_parameters():
                claim(p, f"{name}.{path}" if name else path)
            return
        if not _is_tensor(value):
            return
        node = leaf_node.get(id(value))
        if node is None and value.grad_fn is not None and id(value.grad_fn) in op_nodes:
            node = id(value.grad_fn)
        if node is not None:
            found.setdefault(node, name)

    for value, name in _pairs(names or {}):
        claim(value, str(name))
    if model is not None:
        claim(model, "")
    for value, name in scope:
        claim(value, name)
    by_id = graph.by_id()
    return {i: name if i not in op_nodes else f"{name} = {by_id[i].op}"
            for i, name in found.items()}


# -- collapsing by module ----------------------------------------------------------------

@dataclass
class Group:
    """One collapsed module instance: the nodes its forward made (and the parameters only
    it consumes), drawn as one box."""

    id: int
    name: str
    cls: str
    members: list
    ops: int = 0
    params: int = 0

    @property
    def label(self) -> str:
        return f"{self.name} · {self.cls}"


@dataclass
class Collapsed:
    """A graph with some modules folded into boxes: ``graph`` is what gets drawn (groups
    are nodes of kind "group"), ``member_of`` maps each folded node id to its group id."""

    graph: object
    groups: dict
    member_of: dict
    original: object


def qualified_modules(graph, model=None) -> dict:
    """{qualified name: module} for the modules that may make nodes of ``graph``.

    With ``model`` the names are its ``named_modules()``. Without, the outermost modules
    that made nodes are named by class and index (``TransformerBlock0``) and their insides
    relative to that.
    """
    if model is not None:
        roots = [("", model)]
    else:
        seen, by_id = {}, graph.by_id()
        for i in (i for layer in graph.generations() for i in layer):  # number in flow order
            if by_id[i].module is not None:
                seen.setdefault(id(by_id[i].module), by_id[i].module)
        inner = {id(m) for root in seen.values() for name, m in root.named_modules()
                 if name}
        roots = [(f"{type(m).__name__}{k}", m)
                 for k, m in enumerate(m for i, m in seen.items() if i not in inner)]
    out, done = {}, set()
    for prefix, root in roots:
        for name, m in root.named_modules(prefix):
            if id(m) not in done:  # a shared module keeps its first name
                done.add(id(m))
                out[name] = m
    return out


def _group_key(qualname, collapse):
    """The collapsed module a node made in ``qualname`` belongs to (None: not collapsed).
    ``collapse`` is a depth (keep the first parts of the name; 0 folds nothing) or a list
    of names (the outermost listed name containing ``qualname`` wins)."""
    if not qualname or collapse is None:
        return None
    if isinstance(collapse, int):
        return ".".join(qualname.split(".")[:collapse]) if collapse > 0 else None
    for name in sorted(collapse, key=lambda s: s.count(".")):
        if qualname == name or qualname.startswith(name + "."):
            return name
    return None


def _cyclic_groups(graph, member_of) -> list:
    """The groups on (or between) cycles of the graph collapsed by ``member_of``.

    Kahn from the sources, then from the sinks of what is left: what survives both lies
    on a cycle or between two."""
    rep = lambda i: member_of.get(i, i)  # noqa: E731
    edges = {(rep(s), rep(d)) for s, d in graph.edges if rep(s) != rep(d)}
    alive = {rep(n.id) for n in graph.nodes}
    for forward in (True, False):
        indeg = dict.fromkeys(alive, 0)
        nbrs = {}
        for s, d in edges:
            a, b = (s, d) if forward else (d, s)
            if a in alive and b in alive:
                indeg[b] += 1
                nbrs.setdefault(a, []).append(b)
        todo = [i for i, k in indeg.items() if k == 0]
        while todo:
            i = todo.pop()
            alive.discard(i)
            for j in nbrs.get(i, ()):
                indeg[j] -= 1
                if indeg[j] == 0:
                    todo.append(j)
    return sorted(i for i in alive if i in set(member_of.values()))


def _without_cycles(graph, member_of) -> dict:
    """``member_of`` less the groups whose folding would close a cycle (the data flow
    leaves the group and comes back: a module called twice with other work between)."""
    while cyclic := _cyclic_groups(graph, member_of):
        # open a group that is cyclic on its own first; else any group on the cycle
        alone = [g for g in cyclic
                 if _cyclic_groups(graph, {i: h for i, h in member_of.items() if h == g})]
        drop = (alone or cyclic)[0]
        member_of = {i: g for i, g in member_of.items() if g != drop}
    return member_of


def _fold_parameters(graph, member_of) -> None:
    """Parameters whose consumers all sit in one group join that group."""
    consumers = {}
    for s, d in graph.edges:
        consumers.setdefault(s, set()).add(member_of.get(d, d))
    for n in graph.nodes:
        owners = consumers.get(n.id, ())
        if n.kind == "parameter" and len(owners) == 1:
            (owner,) = owners
            if owner in member_of.values():
                member_of[n.id] = owner


def collapse_graph(graph, collapse, model=None) -> Collapsed:
    """``graph`` with the modules picked by ``collapse`` (a depth, or a list of qualified
    names) folded into one box each. A group that would close a cycle stays unfolded."""
    from ...autograd.graph import Graph, NodeInfo

    modules = qualified_modules(graph, model)
    names = {id(m): q for q, m in modules.items()}
    by_name = {}
    for n in graph.nodes:
        key = _group_key(names.get(id(n.module)), collapse)
        if key is not None:
            by_name.setdefault(key, []).append(n.id)
    # A module whose children are boxes of their own stays open (its own ops, like a
    # residual add, are drawn between them), so boxes never nest.
    by_name = {k: v for k, v in by_name.items()
               if not any(o.startswith(k + ".") for o in by_name)}
    group_ids = {key: -(k + 1) for k, key in enumerate(sorted(by_name))}  # never an id()
    member_of = {i: group_ids[key] for key, ids in by_name.items() for i in ids}
    member_of = _without_cycles(graph, member_of)
    _fold_parameters(graph, member_of)

    by_id = graph.by_id()
    order = [i for layer in graph.generations() for i in layer]
    groups = {}
    for key, gid in group_ids.items():
        members = [i for i in order if member_of.get(i) == gid]
        if not members:
            continue
        module = modules.get(key)
        params = sum(by_id[i].kind == "parameter" for i in members)
        groups[gid] = Group(gid, key, type(module).__name__ if module else "Module", members,
                            len(members) - params, params)
    nodes = [n for n in graph.nodes if n.id not in member_of]
    nodes += [_group_info(g, by_id, NodeInfo) for g in groups.values()]
    rep = lambda i: member_of.get(i, i)  # noqa: E731
    edges = list(dict.fromkeys((rep(s), rep(d)) for s, d in graph.edges if rep(s) != rep(d)))
    return Collapsed(Graph(nodes, edges), groups, member_of, graph)


def _group_info(group, by_id, NodeInfo):
    members = [by_id[i] for i in group.members]
    last = next(n for n in reversed(members) if n.kind != "parameter")
    saved = [s for n in members for s in n.saved]
    return NodeInfo(group.id, group.label, "group", last.shape, last.dtype, last.device,
                    saved=saved, saved_bytes=sum(n.saved_bytes for n in members),
                    name=group.label, node=group)


def collapse_choices(graph, model=None) -> list:
    """[(label, depth)] for the collapse menu: "none" (depth 0), then each module depth
    that folds the nodes differently from every shallower choice (a module that only
    wraps one child draws the same boxes at both depths: one entry)."""
    choices = [("none", 0)]
    modules = qualified_modules(graph, model)
    used = {id(n.module) for n in graph.nodes if n.module is not None}
    deepest = max((q.count(".") + 1 for q, m in modules.items() if q and id(m) in used),
                  default=0)
    seen = {frozenset()}
    for depth in range(1, deepest + 1):
        folded = frozenset(frozenset(g.members)
                           for g in collapse_graph(graph, depth, model).groups.values())
        if folded not in seen:
            seen.add(folded)
            choices.append((f"depth {depth}", depth))
    return choices
