"""frexp: each float split into a mantissa in [0.5, 1) (signed) and an int32 exponent,
input = mantissa * 2 ** exponent; ldexp (elementwise.py) puts them back together.

The split is made on the host (numpy's frexp, exact), for every device. The mantissa's
gradient is g / 2 ** exponent, as PyTorch's: the exponent is a step function of the
input, held fixed, and has no gradient.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..autograd.function import Function
from ..tensor import Tensor
from .registry import declare, tensor_method

FrexpResult = namedtuple("FrexpResult", ["mantissa", "exponent"])


class Mantissa(Function):
    """frexp's mantissa (computed beforehand), whose gradient is g / 2 ** exponent."""

    @staticmethod
    def forward(ctx, x, mantissa, exponent):
        ctx.save_for_backward(exponent)
        return mantissa

    @staticmethod
    def backward(ctx, g):
        (exponent,) = ctx.saved_tensors
        # (2 ** exponent in the default float, as PyTorch's exponent.exp2())
        return g / exponent.exp2(), None, None


@tensor_method(function=True)
def frexp(input):  # noqa: A002 (PyTorch's name)
    """frexp(input) -> (Tensor mantissa, Tensor exponent)

    input = mantissa * 2 ** exponent, elementwise: the mantissa in input's dtype with
    0.5 <= |mantissa| < 1 (0, inf and NaN stay as they are, with exponent 0), the
    exponent int32. Floating-point inputs only."""
    x = input
    if not x.dtype.is_floating_point:
        raise TypeError(f"frexp: only supports floating-point dtypes, got {x.dtype.name} "
                        f"(as in PyTorch); convert with .float() first")
    host = x.detach().cpu().numpy()
    # (16-bit floats split exactly in float32, which holds each of their values)
    wide = host if host.dtype == np.float64 else host.astype(np.float32)
    mantissa, exponent = np.frexp(wide)
    be = x._be
    e = Tensor._wrap(be.from_numpy(np.asarray(exponent.astype(np.int32), order="C")))
    # (np.asarray keeps a 0-d result 0-d, where np.ascontiguousarray makes it 1-d)
    m = be.from_numpy(np.asarray(mantissa.astype(x.dtype.np), order="C"))
    return FrexpResult(Mantissa.apply(x, m, e), e)


declare("frexp", dtypes="float")
