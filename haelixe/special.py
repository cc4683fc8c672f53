"""hx.special: PyTorch's torch.special (``import torch.special`` resolves here under
Haelixe's torch alias). Its functions are Haelixe's own elementwise ops and reductions,
under torch.special's names: ``expit`` is ``hx.sigmoid``, ``gammaln`` is ``hx.lgamma``,
``psi`` is ``hx.digamma``, ``multigammaln`` is ``hx.mvlgamma``, ``gammainc`` and
``gammaincc`` are ``hx.igamma`` and ``hx.igammac``; the rest share their names with
``hx``'s, or (erfcx, ndtr, log_ndtr, ndtri, i0e, i1, i1e, entr, xlog1py, zeta, bessel_j0,
bessel_j1, and ops/special_functions.py's polynomials, Bessel functions of the second
kind and airy_ai: PyTorch has them in torch.special alone) are elementwise ops declared
with ``special=True``. Each is the same function, so values, gradients and devices are
those of the op.

    import haelixe as hx
    hx.special.gammaln(hx.tensor([0.5, 3.0]))   # log |Gamma(x)|
"""

from __future__ import annotations

from .closest import missing_attribute
from .ops.composite import logit, mvlgamma
from .ops.reduce import log_softmax, logsumexp, softmax
from .ops.registry import FUNCTIONS as _FUNCTIONS
from .ops.registry import SPECIAL as _SPECIAL

digamma = _FUNCTIONS["digamma"]
erf = _FUNCTIONS["erf"]
erfc = _FUNCTIONS["erfc"]
i0 = _FUNCTIONS["i0"]
sinc = _FUNCTIONS["sinc"]
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
erfcx, ndtr, log_ndtr, ndtri = (_SPECIAL[n] for n in ("erfcx", "ndtr", "log_ndtr", "ndtri"))
i0e, i1, i1e = _SPECIAL["i0e"], _SPECIAL["i1"], _SPECIAL["i1e"]
bessel_j0, bessel_j1 = _SPECIAL["bessel_j0"], _SPECIAL["bessel_j1"]
entr, xlog1py, zeta = _SPECIAL["entr"], _SPECIAL["xlog1py"], _SPECIAL["zeta"]
gammainc, gammaincc = _SPECIAL["gammainc"], _SPECIAL["gammaincc"]  # (igamma, igammac)
# (ops/special_functions.py's entries)
airy_ai = _SPECIAL["airy_ai"]
bessel_y0 = _SPECIAL["bessel_y0"]
bessel_y1 = _SPECIAL["bessel_y1"]
modified_bessel_i0 = _SPECIAL["modified_bessel_i0"]
modified_bessel_i1 = _SPECIAL["modified_bessel_i1"]
modified_bessel_k0 = _SPECIAL["modified_bessel_k0"]
modified_bessel_k1 = _SPECIAL["modified_bessel_k1"]
scaled_modified_bessel_k0 = _SPECIAL["scaled_modified_bessel_k0"]
scaled_modified_bessel_k1 = _SPECIAL["scaled_modified_bessel_k1"]
spherical_bessel_j0 = _SPECIAL["spherical_bessel_j0"]
chebyshev_polynomial_t = _SPECIAL["chebyshev_polynomial_t"]
chebyshev_polynomial_u = _SPECIAL["chebyshev_polynomial_u"]
chebyshev_polynomial_v = _SPECIAL["chebyshev_polynomial_v"]
chebyshev_polynomial_w = _SPECIAL["chebyshev_polynomial_w"]
shifted_chebyshev_polynomial_t = _SPECIAL["shifted_chebyshev_polynomial_t"]
shifted_chebyshev_polynomial_u = _SPECIAL["shifted_chebyshev_polynomial_u"]
shifted_chebyshev_polynomial_v = _SPECIAL["shifted_chebyshev_polynomial_v"]
shifted_chebyshev_polynomial_w = _SPECIAL["shifted_chebyshev_polynomial_w"]
hermite_polynomial_h = _SPECIAL["hermite_polynomial_h"]
hermite_polynomial_he = _SPECIAL["hermite_polynomial_he"]
laguerre_polynomial_l = _SPECIAL["laguerre_polynomial_l"]
legendre_polynomial_p = _SPECIAL["legendre_polynomial_p"]

__all__ = ["airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1",
           "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
           "chebyshev_polynomial_w", "digamma", "entr", "erf", "erfc", "erfcx", "erfinv",
           "exp2", "expit", "expm1", "gammainc", "gammaincc", "gammaln",
           "hermite_polynomial_h", "hermite_polynomial_he", "i0", "i0e", "i1", "i1e",
           "laguerre_polynomial_l", "legendre_polynomial_p", "log1p", "log_ndtr",
           "log_softmax", "logit", "logsumexp", "modified_bessel_i0", "modified_bessel_i1",
           "modified_bessel_k0", "modified_bessel_k1", "multigammaln", "ndtr", "ndtri",
           "polygamma", "psi", "round", "scaled_modified_bessel_k0",
           "scaled_modified_bessel_k1", "shifted_chebyshev_polynomial_t",
           "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
           "shifted_chebyshev_polynomial_w", "sinc", "softmax", "spherical_bessel_j0",
           "xlog1py", "xlogy", "zeta"]


def __getattr__(name):
    raise missing_attribute(__name__, name, globals())
