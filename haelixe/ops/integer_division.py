"""PyTorch's refusal of an integer division by zero (floor_divide, remainder, fmod and
their operators and in-place forms): ``RuntimeError: ZeroDivisionError`` on the CPU.
Those ops declare ``check=check_divisor`` (elementwise.py): their forward and in-place
form run it, through every surface.

Only operands that give an integer result pay for the check (one pass over the divisor).
A Python zero divisor is refused on every device. A zero inside a GPU divisor is not
looked for: finding it would need a read-back that stalls the queue (PyTorch's CUDA
backend does not check either, and leaves the result unspecified); Haelixe's kernels
give 0 there, for every dtype. Nor is one looked for while a step is captured (its
replays run none of the op's Python, so a check could not run again): the CPU's kernels
then give what numpy gives, 0.
"""

from __future__ import annotations

import numbers

from ..errors import OpZeroDivisionError
from ..tensor import Tensor


def _integer_kind(x) -> bool:
    if isinstance(x, Tensor):
        return not x.dtype.is_floating_point
    return isinstance(x, numbers.Integral)  # (a bool too, as PyTorch reads one)


def check_divisor(op, dividend, divisor):
    """Raise where ``dividend`` and ``divisor`` (a tensor or a Python number) give an
    integer result and a divisor entry is zero."""
    if dividend.__class__ is Tensor and dividend.dtype.is_floating_point:
        return  # (a float tensor's quotient is a float: nothing to look for)
    if not (_integer_kind(divisor) and _integer_kind(dividend)):
        return
    if isinstance(divisor, Tensor):
        if divisor.device.type != "cpu" or divisor.numel() == 0 or (
                isinstance(dividend, Tensor) and dividend.numel() == 0) or \
                divisor._be.checks_on_device():
            return
        if divisor._be.to_numpy(divisor._data).all():
            return
        where = f"the {divisor.dtype.name} divisor of shape {divisor.shape} holds a zero"
    else:
        if divisor != 0 or not isinstance(dividend, Tensor) or dividend.numel() == 0:
            return
        where = "the divisor is 0"
    raise OpZeroDivisionError(
        f"{op}: ZeroDivisionError: integer division by zero ({where}); PyTorch refuses it "
        f"too. Mask the zeros first (torch.where(b == 0, 1, b)) or divide float tensors "
        f"(a.double()), which give inf or nan there")
