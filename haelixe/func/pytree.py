"""Nested tuples, lists and dicts of values ("pytrees", as torch.utils._pytree has them):
flattened into their leaves and a spec that rebuilds them.

A leaf is anything that is not a tuple, list or dict (None and numbers included). A
namedtuple rebuilds as its own class, an OrderedDict as an OrderedDict; a dict's leaves
come in its keys' order, and two dicts with the same keys in another order are two
structures, as PyTorch's specs compare them."""

from __future__ import annotations

from collections import OrderedDict


class Spec:
    """One node of a structure: its kind (the container's class), the keys of a dict,
    and the specs of its children; ``LEAF`` is a leaf."""

    __slots__ = ("kind", "keys", "children", "leaves")

    def __init__(self, kind, keys, children):
        self.kind, self.keys, self.children = kind, keys, children
        self.leaves = 1 if kind is None else sum(c.leaves for c in children)

    def is_leaf(self) -> bool:
        return self.kind is None

    def __eq__(self, other):
        return isinstance(other, Spec) and self.kind is other.kind and \
            self.keys == other.keys and self.children == other.children

    def __hash__(self):
        return hash((self.kind, self.keys, len(self.children)))

    def __repr__(self) -> str:
        if self.kind is None:
            return "*"
        inner = ", ".join(repr(c) for c in self.children)
        if self.keys is not None:
            inner = ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.keys, self.children))
            return f"{self.kind.__name__}({{{inner}}})"
        return f"{self.kind.__name__}([{inner}])"


LEAF = Spec(None, None, ())


def _is_node(obj) -> bool:
    return isinstance(obj, (tuple, list, dict))


def flatten(tree):
    """(list of leaves, Spec)."""
    leaves = []
    return leaves, _flatten_into(tree, leaves)


def _flatten_into(tree, leaves) -> Spec:
    if not _is_node(tree):
        leaves.append(tree)
        return LEAF
    if isinstance(tree, dict):
        keys = tuple(tree)
        return Spec(type(tree), keys, tuple(_flatten_into(tree[k], leaves) for k in keys))
    return Spec(type(tree), None, tuple(_flatten_into(v, leaves) for v in tree))


def unflatten(leaves, spec: Spec):
    """The structure ``spec`` describes, holding ``leaves`` in order."""
    return _build(iter(leaves), spec)


def _build(it, spec: Spec):
    if spec.kind is None:
        return next(it)
    values = [_build(it, c) for c in spec.children]
    kind = spec.kind
    if spec.keys is not None:
        pairs = zip(spec.keys, values)
        return OrderedDict(pairs) if issubclass(kind, OrderedDict) else dict(pairs)
    if issubclass(kind, tuple) and hasattr(kind, "_fields"):  # a namedtuple
        return kind(*values)
    return kind(values)


def tree_map(fn, tree):
    leaves, spec = flatten(tree)
    return unflatten([fn(x) for x in leaves], spec)


def broadcast_prefix(prefix, spec: Spec):
    """``prefix`` (a structure whose leaves stand for whole subtrees of ``spec``: vmap's
    in_dims, out_dims) flattened to one value per leaf of ``spec``; None when it is not
    a prefix of it."""
    out = []
    return out if _broadcast_into(prefix, spec, out) else None


def _broadcast_into(prefix, spec: Spec, out) -> bool:
    if not _is_node(prefix):
        out.extend([prefix] * spec.leaves)
        return True
    if type(prefix) is not spec.kind:  # a list is not a tuple here, as in PyTorch
        return False
    if isinstance(prefix, dict):
        if set(prefix) != set(spec.keys):
            return False
        return all(_broadcast_into(prefix[k], c, out) for k, c in zip(spec.keys, spec.children))
    if len(prefix) != len(spec.children):
        return False
    return all(_broadcast_into(p, c, out) for p, c in zip(prefix, spec.children))

