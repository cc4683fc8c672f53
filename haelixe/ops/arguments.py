"""An op's signature, PyTorch's, as one object: what ``inspect.signature`` shows, what
the docstring starts with, and the binder that turns a call's positional and keyword
arguments into the values in declaration order.

The binder is a plain loop (no ``inspect.Signature.bind``: it runs on every call with a
keyword), and its errors read as Python's own for a function of that signature.
"""

from __future__ import annotations

import functools
import inspect

_POS = inspect.Parameter.POSITIONAL_OR_KEYWORD
_KW = inspect.Parameter.KEYWORD_ONLY
_REQUIRED = inspect.Parameter.empty


class Arguments:
    """The parameters of one op's surface: ``positional`` names (required first, then
    those with defaults), then keyword-only ones. ``params`` maps a name to its default
    (required names are absent from it)."""

    def __init__(self, op: str, positional, params: dict, kwonly=()):
        self.op = op
        self.names = tuple(positional) + tuple(kwonly)
        self.npositional = len(positional)
        self.defaults = tuple(params.get(n, _REQUIRED) for n in self.names)
        self.index = {n: i for i, n in enumerate(self.names)}
        self.signature = inspect.Signature(
            [inspect.Parameter(n, _POS if i < self.npositional else _KW,
                               default=params.get(n, _REQUIRED))
             for i, n in enumerate(self.names)])

    def bind(self, args, kwargs) -> list:
        """The values of every parameter, in order, for ``op(*args, **kwargs)``."""
        op, n = self.op, len(args)
        if n > self.npositional:
            raise TypeError(f"{op}() takes {self.npositional} positional arguments but {n} "
                            f"were given; signature: {op}{self.signature}")
        values = list(args) + list(self.defaults[n:])
        for key, value in kwargs.items():
            i = self.index.get(key)
            if i is None:
                raise TypeError(f"{op}() got an unexpected keyword argument {key!r}; "
                                f"signature: {op}{self.signature}")
            if i < n:
                raise TypeError(f"{op}() got multiple values for argument {key!r}")
            values[i] = value
        for name, value in zip(self.names, values):
            if value is _REQUIRED:
                raise TypeError(f"{op}() missing required argument {name!r}; signature: "
                                f"{op}{self.signature}")
        return values

    def without_first(self) -> inspect.Signature:
        """The method's signature (``self`` is the first parameter)."""
        params = list(self.signature.parameters.values())
        return self.signature.replace(parameters=[
            inspect.Parameter("self", _POS)] + params[1:])

    def __str__(self) -> str:
        return f"{self.op}{self.signature}"


#: numpy's keyword names that PyTorch's argument parser binds to its own, on every op
#: (``x.sum(1, keepdims=True)``, ``x.argmax(axis=0)``)
NUMPY_NAMES = {"keepdims": "keepdim", "axis": "dim"}


def with_numpy_names(f):
    """``f``, or where it has PyTorch's ``keepdim``/``dim`` and not numpy's name for it,
    a wrapper that binds numpy's name too (what ``inspect.signature`` shows is ``f``'s)."""
    try:
        params = inspect.signature(f).parameters
    except (TypeError, ValueError):  # (a property, a builtin)
        return f
    aliases = tuple((alias, name) for alias, name in NUMPY_NAMES.items()
                    if name in params and alias not in params)
    if not aliases:
        return f

    @functools.wraps(f)
    def call(*args, **kwargs):
        if kwargs:
            for alias, name in aliases:
                if alias in kwargs:
                    if name in kwargs:
                        raise TypeError(f"{f.__name__}() got both {name!r} and numpy's "
                                        f"name for it, {alias!r}: pass one")
                    kwargs[name] = kwargs.pop(alias)
        return f(*args, **kwargs)

    return call
