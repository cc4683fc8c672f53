"""hx.special: PyTorch's torch.special (``import torch.special`` resolves here under
Haelixe's torch alias). Its functions are Haelixe's own elementwise ops and reductions,
under torch.special's names: ``expit`` is ``hx.sigmoid``, ``gammaln`` is ``hx.lgamma``,
``psi`` is ``hx.digamma``, ``multigammaln`` is ``hx.mvlgamma``; the rest share their
names with ``hx``'s. Each is the same function, so values, gradients and devices are
those of the op.

    import haelixe as hx
    hx.special.gammaln(hx.tensor([0.5, 3.0]))   # log |Gamma(x)|
"""

from __future__ import annotations

from .closest import missing_attribute
from .ops.composite import logit, mvlgamma
from .ops.reduce import log_softmax, logsumexp, softmax
from .ops.registry import FUNCTIONS as _FUNCTIONS

digamma = _FUNCTIONS["digamma"]
erf = _FUNCTIONS["erf"]
erfinv = _FUNCTIONS["erfinv"]
exp2 = _FUNCTIONS["exp2"]
expm1 = _FUNCTIONS["expm1"]
log1p = _FUNCTIONS["log1p"]
polygamma = _FUNCTIONS["polygamma"]
round = _FUNCTIONS["round"]  # noqa: A001 (torch.special.round)
xlogy = _FUNCTIONS["xlogy"]
expit = _FUNCTIONS["sigmoid"]
gammaln = _FUNCTIONS["lgamma"]
psi = digamma
multigammaln = mvlgamma

__all__ = ["digamma", "erf", "erfinv", "exp2", "expit", "expm1", "gammaln", "log1p",
           "log_softmax", "logit", "logsumexp", "multigammaln", "polygamma", "psi", "round",
           "softmax", "xlogy"]

#: torch.special's functions Haelixe does not have, with what to write instead
_HINTS = {
    "erfc": "1 - hx.special.erf(x) (which loses digits where erf is near 1)",
    "ndtr": "0.5 * (1 + hx.special.erf(x / 2 ** 0.5)) (which loses digits in the lower "
            "tail)",
    "ndtri": "2 ** 0.5 * hx.special.erfinv(2 * p - 1)",
    "sinc": "hx.where(x == 0, 1.0, hx.sin(pi * x) / (pi * x))",
    "entr": "-hx.special.xlogy(x, x) for x >= 0",
    "xlog1py": "hx.special.xlogy(x, 1 + y) (which loses digits for small y)",
}


def __getattr__(name):
    raise missing_attribute(__name__, name, globals(), _HINTS)
