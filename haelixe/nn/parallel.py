"""nn.DataParallel (torch.nn.parallel.DataParallel): Haelixe trains on one device, so
the wrapper runs the module it holds, as PyTorch's does where it finds no CUDA device.
It is a module of its own, holding the model as ``module``: its state_dict's keys start
with "module.", as PyTorch's, so checkpoints saved through it load into it."""

from __future__ import annotations

from .module import Module


class DataParallel(Module):
    """DataParallel(module, device_ids=None, output_device=None, dim=0): ``forward``
    calls ``module`` with the inputs as they are, on the device its parameters are on.
    ``device_ids`` is [] (PyTorch's value where it has no device to spread over); the
    other arguments are accepted and change nothing, as there."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.device_ids = []

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


__all__ = ["DataParallel"]
