"""The error class of a bad argument to an op.

PyTorch reports a wrong shape, dim or option as a RuntimeError, numpy and Python's own
functions as a ValueError; code written for either catches its own. OpError is both, so
``except RuntimeError`` (code ported from PyTorch) and ``except ValueError`` catch it.
"""

from __future__ import annotations


class OpError(RuntimeError, ValueError):
    """A bad argument to an op: a shape, dim, dtype or option it cannot take."""


class OpIndexError(OpError, IndexError):
    """An index out of range in an op PyTorch reports it from as a RuntimeError (gather,
    scatter); an IndexError too, as numpy and Python report one."""


class OpNotImplementedError(OpError, NotImplementedError):
    """An option an op does not know (a padding mode) where PyTorch raises
    NotImplementedError; an OpError too."""


class OpZeroDivisionError(OpError, ZeroDivisionError):
    """An integer division by zero, which PyTorch reports on the CPU as
    ``RuntimeError: ZeroDivisionError``; a ZeroDivisionError too, as Python's ``5 // 0``."""


class OpTypeError(OpError, TypeError):
    """A dtype an op cannot take where PyTorch raises RuntimeError (a promotion of uint16
    with int32); a TypeError too, as Haelixe reports other dtype errors."""
