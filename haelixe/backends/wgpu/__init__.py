"""The GPU backend: WGSL compute shaders run through wgpu.

``get_backend()`` (in ``backend``) starts the GPU context on first use; importing this
package does not touch the GPU.
"""

from .array import GpuArray
from .context import GpuUnavailableError, get_context, gpu_available

__all__ = ["GpuArray", "GpuUnavailableError", "get_context", "gpu_available", "get_backend"]


def get_backend():
    """The process's WGPU backend singleton."""
    from .backend import get_backend as _get

    return _get()
