"""torch.special's orthogonal polynomials, its Bessel functions of the second kind, the
modified ones under their own names, the spherical J0 and Airy's Ai: elementwise
entries filed under SPECIAL (``hx.special.<name>`` alone, as PyTorch has them in
torch.special alone).

The numpy forms are in backends/orthogonal_polynomials.py, bessel_second_kind.py,
bessel_math.py and airy_math.py; the WGSL ones in backends/wgpu/special_polynomials.py
and special_bessel.py. None has a gradient, as PyTorch's have none (their results do not
require grad, so no graph is recorded), and none takes float16 or bfloat16, as PyTorch's
CPU kernels do not.
"""

from __future__ import annotations

from .registry import elementwise

_POLYNOMIALS = {
    "chebyshev_polynomial_t": "The Chebyshev polynomial of the first kind T_n(input), "
                              "cos(n acos(input)) on [-1, 1]",
    "chebyshev_polynomial_u": "The Chebyshev polynomial of the second kind U_n(input)",
    "chebyshev_polynomial_v": "The Chebyshev polynomial of the third kind V_n(input)",
    "chebyshev_polynomial_w": "The Chebyshev polynomial of the fourth kind W_n(input)",
    "shifted_chebyshev_polynomial_t": "The shifted Chebyshev polynomial of the first kind "
                                      "T_n(2 input - 1)",
    "shifted_chebyshev_polynomial_u": "The shifted Chebyshev polynomial of the second kind "
                                      "U_n(2 input - 1)",
    "shifted_chebyshev_polynomial_v": "The shifted Chebyshev polynomial of the third kind "
                                      "V_n(2 input - 1)",
    "shifted_chebyshev_polynomial_w": "The shifted Chebyshev polynomial of the fourth kind "
                                      "W_n(2 input - 1)",
    "hermite_polynomial_h": "The physicists' Hermite polynomial H_n(input)",
    "hermite_polynomial_he": "The probabilists' Hermite polynomial He_n(input)",
    "laguerre_polynomial_l": "The Laguerre polynomial L_n(input)",
    "legendre_polynomial_p": "The Legendre polynomial P_n(input)",
}
_DEGREE = ("; n (a tensor or a number, broadcast with input) is truncated toward zero, a "
           "negative degree giving 0, as PyTorch's. Computed by the three-term recurrence "
           "in the dtype of the result; not differentiable, as PyTorch's.")

for _name, _what in _POLYNOMIALS.items():
    elementwise(_name, (lambda f: lambda m, x, n: getattr(m, f)(x, n))(_name),
                dtypes="float_wide", special=True, method=False, inplace=False,
                names=("input", "n"), doc=_what + ", elementwise" + _DEGREE)

_UNARY = {
    "airy_ai": "The Airy function Ai(input), elementwise (0 from 103.892 on, NaN at +-inf, "
               "as PyTorch's)",
    "bessel_y0": "The Bessel function of the second kind of order 0, elementwise (-inf at "
                 "0, NaN below 0 and at +inf, as PyTorch's)",
    "bessel_y1": "The Bessel function of the second kind of order 1, elementwise (-inf at "
                 "0, NaN below 0 and at +inf, as PyTorch's)",
    "modified_bessel_k0": "The modified Bessel function of the second kind of order 0, "
                          "elementwise (+inf at 0, NaN below 0)",
    "modified_bessel_k1": "The modified Bessel function of the second kind of order 1, "
                          "elementwise (+inf at 0, NaN below 0)",
    "scaled_modified_bessel_k0": "exp(input) * modified_bessel_k0(input), elementwise (no "
                                 "underflow)",
    "scaled_modified_bessel_k1": "exp(input) * modified_bessel_k1(input), elementwise (no "
                                 "underflow)",
    "spherical_bessel_j0": "The spherical Bessel function of the first kind of order 0, "
                           "sin(input) / input, elementwise (1 at 0)",
}
for _name, _what in _UNARY.items():
    elementwise(_name, (lambda f: lambda m, x: getattr(m, f)(x))(_name), dtypes="float_wide",
                special=True, method=False, inplace=False,
                doc=_what + "; not differentiable, as PyTorch's.")

# (the values of i0 and i1, without their gradients and 16-bit forms: PyTorch's
# modified_bessel_i0 and modified_bessel_i1 have neither)
elementwise("modified_bessel_i0", lambda m, x: m.i0(x), dtypes="float_wide", special=True,
            method=False, inplace=False,
            doc="The modified Bessel function of the first kind of order 0, elementwise "
                "(i0's values); not differentiable, as PyTorch's.")
elementwise("modified_bessel_i1", lambda m, x: m.i1(x), dtypes="float_wide", special=True,
            method=False, inplace=False,
            doc="The modified Bessel function of the first kind of order 1, elementwise "
                "(special.i1's values); not differentiable, as PyTorch's.")
