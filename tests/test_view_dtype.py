"""x.view(dtype): the same bytes read as another dtype, as PyTorch's: shapes, strides and
offsets, its errors, shared memory and version counter, and no gradient."""

from __future__ import annotations

import pytest
import torch

import haelixe as hx
from haelixe.autograd.function import SavedTensorError


def _z(m):
    return m.arange(12, dtype=m.float32).view(3, 4) - 5.5


_CASES = {
    "same size, transposed": lambda m, z: z.t().view(m.int32),
    "to half the size": lambda m, z: z.view(m.int16),
    "to bytes": lambda m, z: z[1:, 2:].view(m.uint8),
    "to twice the size": lambda m, z: z[1:, :2].view(m.float64),
    "16-bit floats": lambda m, z: z.half().view(m.bfloat16).float(),
    "bytes to float": lambda m, z: m.tensor([0, 0, 128, 63, 0, 0, 0, 64],
                                            dtype=m.uint8).view(m.float32),
    "uint8 as int8": lambda m, z: m.tensor([255, 1, 128], dtype=m.uint8).view(m.int8),
    "bool as uint8": lambda m, z: m.tensor([True, False]).view(m.uint8),
    "int64 as int32": lambda m, z: m.arange(3).view(m.int32),
    "0-d, same size": lambda m, z: m.tensor(1.0).view(m.int32),
    "0-size": lambda m, z: m.zeros(0, 4).view(m.float64),
    "size-1 dim strides": lambda m, z: m.zeros(2, 1, 4)[:, :, :2].view(m.float64),
    "round trip": lambda m, z: z.view(m.uint64).view(m.float32),
}


@pytest.mark.parametrize("case", list(_CASES))
def test_layout_and_values_are_pytorchs(case):
    h, t = _CASES[case](hx, _z(hx)), _CASES[case](torch, _z(torch))
    assert h.dtype.name == str(t.dtype).removeprefix("torch.")
    assert h.shape == tuple(t.shape) and h.strides == t.stride()
    assert h.tolist() == t.tolist()


_ERRORS = {
    "self.stride(-1) must be 1 to view float32 as int16": lambda m, z: z.t().view(m.int16),
    "self.size(-1) must be divisible by 2 to view float32 as float64":
        lambda m, z: z[:, 1:].view(m.float64),
    "self.storage_offset() must be divisible by 2": lambda m, z: z[:, 1:3].view(m.float64),
    "self.stride(0) must be divisible by 2": lambda m, z: m.zeros(4, 3)[:, :2].view(m.float64),
    "self.dim() cannot be 0 to view float32 as int16": lambda m, z: m.tensor(1.0).view(m.int16),
}


@pytest.mark.parametrize("message", list(_ERRORS))
def test_errors_are_pytorchs(message):
    with pytest.raises(RuntimeError, match=message.replace("float32", "Float")
                       .replace("int16", "Short").replace("float64", "Double")
                       .replace("(", r"\(").replace(")", r"\)")):
        _ERRORS[message](torch, _z(torch))
    with pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _ERRORS[message](hx, _z(hx))


def test_memory_and_version_counter_are_shared():
    w = hx.zeros(4)
    v = w.view(hx.int32)
    v.add_(1)
    assert w.tolist()[0] == torch.tensor(1, dtype=torch.int32).view(torch.float32).item()
    assert w._version == v._version == 1
    w[1] = 2.0
    assert v._version == 2 and v[1].item() == torch.tensor(2.0).view(torch.int32).item()
    assert hx.zeros(4)[2:].view(hx.float64).view(hx.int8).offset == 8


def test_not_differentiable_and_an_edit_through_it_is_caught():
    x = hx.randn(3, requires_grad=True)
    for dtype in (hx.float32, hx.int32, hx.float16):
        y = x.view(dtype)
        assert not y.requires_grad and y.is_leaf and y.grad_fn is None
    b = x.exp()  # (exp saves its output)
    b.view(hx.int32).add_(1)
    with pytest.raises(SavedTensorError, match="modified by an inplace operation"):
        b.sum().backward()


@pytest.mark.gpu
def test_gpu_reads_words_as_words_and_refuses_other_layouts(be):
    z = _z(hx).to("gpu")
    v = z.view(hx.int32)
    assert v.cpu().tolist() == _z(torch).view(torch.int32).tolist()
    v[0, 0] = 0  # (shared memory: 0 is the bits of 0.0)
    assert z[0, 0].item() == 0.0 and z._version == v._version
    h = _z(hx).to("gpu").half().view(hx.bfloat16)
    assert h.float().cpu().tolist() == _z(torch).half().view(torch.bfloat16).float().tolist()
    with pytest.raises(TypeError, match="reading float32 as int16 is not available on the "
                                        "GPU.*move the tensor to the CPU"):
        z.view(hx.int16)
