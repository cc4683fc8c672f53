"""Finite-difference gradient checks in float64."""

from __future__ import annotations

import numpy as np

from .. import layout


class GradcheckError(AssertionError):
    pass


def _outputs(fn, inputs):
    from ..tensor import Tensor

    out = fn(*inputs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o for o in outs if isinstance(o, Tensor)]


def _numeric(fn, inputs, oi):
    # detach: fn may build a graph of its own (gradgradcheck's first derivative does)
    return _outputs(fn, inputs)[oi].detach().numpy().reshape(-1).astype(np.float64)


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              name=None) -> bool:
    """Compare the Jacobian from autograd with central differences.

    ``inputs`` are float64 CPU tensors; those with requires_grad are checked. Each
    input is perturbed in place through its own layout (so transposed, sliced and flipped
    inputs are checked as they are); inputs whose elements share memory are refused.
    A mismatch raises GradcheckError naming the function, the input, the element and
    both values.
    """
    from ..autograd.api import grad as autograd_grad
    from ..autograd.mode import no_grad
    from ..creation import zeros_like
    from ..tensor import Tensor

    owner = getattr(fn, "__self__", None)  # Function.apply is bound to the op's class
    label = name or (owner.__name__ if isinstance(owner, type) else
                     getattr(fn, "__name__", repr(fn)))
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    checked = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    for i in checked:
        t = inputs[i]
        if t.dtype.name != "float64" or t.device.type != "cpu":
            raise TypeError(f"gradcheck({label}): input {i} is {t.dtype.name} on "
                            f"{t.device.type}; use float64 CPU tensors for finite differences")
        if not layout.is_non_overlapping(t.shape, t.strides):
            raise ValueError(f"gradcheck({label}): input {i} (strides {t.strides}) has "
                             f"elements sharing memory; perturbing one would move several")
    outs = _outputs(fn, inputs)
    for oi, out in enumerate(outs):
        n_out = out.numel()
        analytic = {i: np.zeros((n_out, inputs[i].numel())) for i in checked}
        # an output without a graph (the first derivative of a linear function, say)
        # has a zero Jacobian; finite differences then have to agree with that
        for k in range(n_out if out.requires_grad else 0):
            seed = zeros_like(out)
            seed._data.reshape(-1)[k] = 1.0
            grads = autograd_grad([out], [inputs[i] for i in checked], [seed],
                                  retain_graph=True, allow_unused=True)
            for i, g in zip(checked, grads):
                if g is not None:
                    analytic[i][k] = g.detach().numpy().reshape(-1)
        for i in checked:
            t = inputs[i]
            data = t._data
            numeric = np.zeros_like(analytic[i])
            for j, idx in enumerate(np.ndindex(*t.shape)):
                orig = data[idx]
                with no_grad():
                    data[idx] = orig + eps
                    plus = _numeric(fn, inputs, oi)
                    data[idx] = orig - eps
                    minus = _numeric(fn, inputs, oi)
                    data[idx] = orig
                numeric[:, j] = (plus - minus) / (2 * eps)
            bad = ~np.isclose(analytic[i], numeric, atol=atol, rtol=rtol)
            if bad.any():
                k, j = map(int, np.argwhere(bad)[0])
                idx = next(x for n, x in enumerate(np.ndindex(*t.shape)) if n == j)
                msg = (f"gradcheck({label}): Jacobian mismatch for output {oi} element {k} "
                       f"with respect to input {i} (shape {t.shape}, strides {t.strides}) "
                       f"element {idx}: numerical {numeric[k, j]:.8g} vs analytical "
                       f"{analytic[i][k, j]:.8g} ({int(bad.sum())} of {bad.size} entries "
                       f"differ)")
                if raise_exception:
                    raise GradcheckError(msg)
                return False
    return True


def gradgradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, name=None) -> bool:
    """gradcheck of the first derivative (built with create_graph=True)."""
    from ..autograd.api import grad as autograd_grad
    from ..autograd.mode import enable_grad
    from ..creation import ones_like

    checked = [t for t in inputs if t.requires_grad]

    def first_derivative(*xs):
        # gradcheck evaluates this under no_grad for its finite differences; the first
        # derivative itself needs a graph to exist
        with enable_grad():
            outs = _outputs(fn, xs)
            return autograd_grad(outs, [x for x in xs if x.requires_grad],
                                 [ones_like(o) for o in outs], create_graph=True)

    return gradcheck(first_derivative, inputs, eps, atol, rtol,
                     name=f"d/dx {name or getattr(fn, '__name__', 'fn')}") and bool(checked)
