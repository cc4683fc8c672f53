"""nn.SyncBatchNorm: batch norm whose statistics PyTorch gathers across the processes
of a distributed group. Haelixe has no process groups (torch.distributed is not part of
it), so it normalizes as BatchNorm does over the local batch, which is what PyTorch's
computes outside a process group; convert_sync_batchnorm swaps a model's batch norms
for it, keeping their parameters and statistics."""

from __future__ import annotations

from .normalization import _BatchNorm


class SyncBatchNorm(_BatchNorm):
    """Batch norm over (N, C, *) of any rank; ``process_group`` must be None (there is
    no distributed group to synchronize with)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None, device=None, dtype=None, *,
                 bias=True):
        if process_group is not None:
            raise ValueError("SyncBatchNorm: process_group must be None (Haelixe has no "
                             "torch.distributed groups; it normalizes over the local batch)")
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)
        self.process_group = None

    def _check_input_dim(self, x):
        if x.ndim < 2:
            raise ValueError(f"SyncBatchNorm: expected at least 2D input (got {x.ndim}D "
                             f"input of shape {tuple(x.shape)})")

    def forward(self, input):  # noqa: A002 (PyTorch's name)
        if input.ndim >= 2 and input.shape[1] == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")
        return super().forward(input)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """``module`` with each BatchNorm1d/2d/3d in it (itself included) replaced by a
        SyncBatchNorm holding the same parameters, buffers and training mode; other
        layers are kept, and the module is changed in place where it is not one."""
        if process_group is not None:
            raise ValueError("convert_sync_batchnorm: process_group must be None (Haelixe "
                             "has no torch.distributed groups)")
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, cls):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats)
            for name in ("weight", "bias"):  # (the same Parameters: an optimizer's too)
                setattr(out, name, getattr(module, name))
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                out._buffers[name] = module._buffers[name]
            out.training = module.training
            if hasattr(module, "qconfig"):
                out.qconfig = module.qconfig
        for name, child in list(module.named_children()):
            converted = cls.convert_sync_batchnorm(child)
            if converted is not child:
                out.add_module(name, converted)
        return out


__all__ = ["SyncBatchNorm"]
