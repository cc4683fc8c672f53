"""``torch.backends``: the switches PyTorch programs set for cuDNN, TF32 and MPS.

Haelixe has no cuDNN, no TF32 and no Metal backend, so these are flags programs may set
and read, as PyTorch lets them set them where the library is absent (where PyTorch
documents them as hints, e.g. ``cudnn.benchmark``); setting one changes nothing in
Haelixe, and the ``is_available()`` questions answer False.
``cudnn.deterministic = True`` costs nothing: Haelixe's CPU kernels are deterministic,
and its GPU kernels are except scatter_add/index_add into large tables (see hx.capture).
"""

from __future__ import annotations

import types


class Flags(types.ModuleType):
    """A namespace of flags (a module, as PyTorch's torch.backends.cudnn is); a name it
    does not have is an error, not a new flag."""

    def __init__(self, name: str, functions=(), **flags):
        super().__init__(f"torch.backends.{name}")
        self.__dict__.update(flags)
        self.__dict__.update({f.__name__: f for f in functions})

    def __setattr__(self, name, value):
        if name not in self.__dict__ and not name.startswith("__"):
            names = sorted(n for n in self.__dict__ if not n.startswith("_"))
            raise AttributeError(f"{self.__name__}: there is no flag {name!r} here; the "
                                 f"names are {', '.join(names)}")
        super().__setattr__(name, value)


def is_available() -> bool:
    """False: Haelixe has none of these libraries."""
    return False


def is_built() -> bool:
    return False


def version():
    return None


cudnn = Flags("cudnn", (is_available, version), enabled=True, benchmark=False,
              deterministic=False, allow_tf32=True, benchmark_limit=10)
cuda = Flags("cuda", (is_built,),
             matmul=Flags("cuda.matmul", allow_tf32=False,
                          allow_fp16_reduced_precision_reduction=True,
                          allow_bf16_reduced_precision_reduction=True))
mps = Flags("mps", (is_available, is_built))
mkldnn = Flags("mkldnn", (is_available,), enabled=False)
opt_einsum = Flags("opt_einsum", (is_available,), enabled=False, strategy=None)


_MATMUL_PRECISION = {"value": "highest"}


def set_float32_matmul_precision(precision: str) -> None:
    """PyTorch's permission to run float32 products in lower internal precision ("high":
    TF32, "medium": bfloat16). Haelixe's float32 products are always float32, which each
    setting allows, so the setting is kept and read back but changes no result."""
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"set_float32_matmul_precision: {precision!r} is not one of "
                           f"'highest', 'high', 'medium'")
    _MATMUL_PRECISION["value"] = precision


def get_float32_matmul_precision() -> str:
    return _MATMUL_PRECISION["value"]


def __getattr__(name):
    from .closest import missing_attribute

    raise missing_attribute(__name__, name, globals())
