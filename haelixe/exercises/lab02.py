"""Lab 02 · Autograd: the exercises and their checkers.

Gradients are checked against the engine's own autograd and, for a Function the learner
writes, by finite differences (gradcheck); when a backward is wrong, the small graph it
ran in is drawn with the node whose gradient differs from the engine's ringed.
"""

from __future__ import annotations

import numpy as np

from ..autograd import grad as autograd_grad
from ..creation import from_numpy, linspace
from .core import Lab, first_hint
from .functions import check_forward, gradcheck_message, locate_difference, require_function
from .values import as_array, first_difference

LAB = Lab(2, "Autograd")


def _rng():
    return np.random.default_rng(2)


def _leaf(a: np.ndarray, transposed: bool = False):
    """A float64 leaf; ``transposed`` makes it a non-contiguous view."""
    t = from_numpy(np.ascontiguousarray(a.T).copy()).T if transposed else from_numpy(a.copy())
    return t.requires_grad_()


# -- 2.1 the gradient of a broadcast ------------------------------------------------------

_SUM_TO_CASES = [((4, 3), (1, 3)), ((2, 3, 4), (3, 1)), ((2, 3), (3,)), ((5, 2, 3), (5, 1, 1)),
                 ((3, 2), (3, 2))]


@LAB.exercise("2.1", "The gradient of a broadcast",
              section="3. Accumulation, and gradients through views")
def sum_to_shape(answer, fb):
    rng = _rng()
    for gshape, shape in _SUM_TO_CASES:
        grad = from_numpy(rng.standard_normal(gshape))
        want = grad.sum_to(shape).numpy()
        call = f"sum_to_shape(grad of shape {gshape}, {shape})"
        raw = fb.call(answer, grad, shape, shown=call)
        got, complaint = as_array(raw, what=call)
        if complaint:
            fb.fail(complaint, expected=want, got=raw,
                    hint="return a Tensor: the gradient summed back to `shape`")
        if got.shape != want.shape:
            fb.fail(f"{call} came back with shape {got.shape}", expected=want, got=got,
                    hint=first_hint(
                        (got.size == want.size and got.size > 0,
                         "the sums are right but size-1 dims went missing: keep them "
                         "(keepdim=True), the gradient must have the input's shape exactly"),
                        (got.ndim == 0,
                         "you summed over every dim; sum only over the leading dims the "
                         "broadcast added and over the dims where `shape` has a 1"),
                        otherwise="sum over the leading dims that the broadcast added, then "
                                  "over each dim where `shape` has a 1, keeping it"))
        if first_difference(want, got, 1e-9, 1e-9) is None:
            continue
        count = grad.numel() // max(int(np.prod(shape)), 1)
        fb.fail(f"{call}: the values differ", expected=want, got=got, hint=first_hint(
            (count > 1 and np.allclose(got * count, want),
             "these are means: every element of the input was read by several elements of "
             "the output, and each read adds its gradient: sum them"),
            otherwise="each element of the input receives the sum of the gradients of all "
                      "the output elements that read it"))
    return "every broadcast gradient sums back to the input's shape, as backward does"


# -- 2.2 softmax as a Function ------------------------------------------------------------

class EngineSoftmax:
    """The engine's softmax over the last dim, called like a Function (``.apply(x)``)."""

    @staticmethod
    def apply(x):
        return x.softmax(-1)


def _softmax_graph(op, a, b, c=None):
    """The small graph the picture shows: loss = Σ softmax(a @ b) · c."""
    weights = from_numpy(np.linspace(-1.0, 2.0, a.shape[0] * b.shape[1])
                         .reshape(a.shape[0], b.shape[1]))
    return (op(a @ b) * weights).sum()


def _softmax_forward_hint(inputs, want, got) -> str:
    return first_hint(
        (not np.isfinite(got).all(),
         "exp of a large score overflows to inf (inf/inf is nan): subtract each row's max "
         "first (x - x.amax(-1, keepdim=True)); softmax does not change"),
        (not np.allclose(got.sum(-1), 1.0),
         "each row must sum to 1: divide exp(x) by its sum over the last dim"),
        otherwise="softmax(x)_i = exp(x_i) / Σ_j exp(x_j), over the last dim")


@LAB.exercise("2.2", "Softmax as a Function", section="4. Your own op, checked by finite "
              "differences", fallback=lambda: EngineSoftmax)
def softmax(answer, fb):
    apply = require_function(fb, answer, "Softmax")
    rng = _rng()
    big = np.array([[1000.0, 1001.0, 999.0, 1000.5], [-3.0, 0.0, 2.0, 1.0]])
    cases = [("x of shape (3, 5)", (_leaf(rng.standard_normal((3, 5))),)),
             ("a transposed x", (_leaf(rng.standard_normal((4, 3)), transposed=True),)),
             ("x with scores near 1000", (_leaf(big),))]
    check_forward(fb, apply, cases, lambda x: x.softmax(-1), "Softmax",
                  _softmax_forward_hint)

    x = _leaf(rng.standard_normal((3, 4)), transposed=True)
    g = from_numpy(rng.standard_normal((3, 4)))
    y = fb.call(apply, x)
    fb.call(y.backward, g, shown="backward of Softmax",
            unfinished="the forward is right; backward is not written yet")
    yv, gv = y.detach().numpy(), g.numpy()
    want = yv * (gv - (gv * yv).sum(-1, keepdims=True))
    got, complaint = as_array(x.grad, want.shape, "the gradient backward returned")
    if complaint:
        fb.fail(complaint, hint="backward returns one gradient per input of forward")
    message = gradcheck_message(apply, [_leaf(rng.standard_normal((3, 4)), transposed=True)],
                                "Softmax")
    if first_difference(want, got, 1e-6, 1e-6) is None and message is None:
        return ("forward matches the engine's (large scores too) and gradcheck passes on "
                "a transposed input")
    hint = first_hint(
        (np.allclose(got, gv * yv * (1 - yv)),
         "that is only the diagonal of the Jacobian: every output of a row depends on every "
         "input of the row, dy_i/dx_j = y_i (δ_ij − y_j), so dx = y · (g − Σ_j g_j y_j)"),
        otherwise="dy_i/dx_j = y_i (δ_ij − y_j), so dx = y · (g − Σ_j g_j y_j) over the "
                  "last dim")
    located = fb.call(locate_difference, _softmax_graph, apply, EngineSoftmax.apply,
                      [from_numpy(rng.standard_normal((3, 2))),
                       from_numpy(rng.standard_normal((2, 4)))], ["a", "b"])
    fb.fail("backward gives wrong gradients", expected=want, got=got, hint=hint,
            detail=message, pictures=[located[::-1]] if located else [])


# -- 2.3 a second derivative --------------------------------------------------------------

def _sigmoid(t):
    return t.sigmoid()


def _cube(t):
    return t ** 3


def _tanh(t):
    return t.tanh()


def _sigmoid_second(x):
    s = 1 / (1 + np.exp(-x))
    return s * (1 - s) * (1 - 2 * s)


_SECOND = [("sigmoid", _sigmoid, _sigmoid_second),
           ("x ** 3", _cube, lambda x: 6 * x),
           ("tanh", _tanh, lambda x: -2 * np.tanh(x) * (1 - np.tanh(x) ** 2))]


def engine_second_derivative(f, x):
    """f''(x) elementwise by the engine's autograd: grad of the gradient."""
    (g1,) = autograd_grad(f(x).sum(), x, create_graph=True)
    (g2,) = autograd_grad(g1.sum(), x)
    return g2


def _first_derivative(f, x: np.ndarray) -> np.ndarray:
    t = from_numpy(x.copy()).requires_grad_()
    (g,) = autograd_grad(f(t).sum(), t)
    return g.numpy()


@LAB.exercise("2.3", "A second derivative", section="6. Second derivatives",
              fallback=lambda: engine_second_derivative,
              error_hint="if the error says a tensor does not require grad: the first "
                         "derivative must be taken with create_graph=True, so that it has "
                         "a graph of its own to differentiate")
def second_derivative(answer, fb):
    for name, f, exact in _SECOND:
        x = linspace(-2.5, 2.5, 7, dtype="float64").requires_grad_()
        xs = x.detach().numpy().copy()
        call = f"second_derivative({name}, x)"
        raw = fb.call(answer, f, x, shown=call)
        want = exact(xs)
        got, complaint = as_array(raw, want.shape, call)
        if complaint:
            fb.fail(complaint, expected=want, got=raw, hint="return f''(x) as a Tensor of "
                    "x's shape")
        if first_difference(want, got, 1e-8, 1e-6) is None:
            continue
        fb.fail(f"{call}: wrong values", expected=want, got=got, hint=first_hint(
            (np.allclose(got, _first_derivative(f, xs)),
             "that is the first derivative; differentiate it once more: grad(g1.sum(), x) "
             "where g1 = grad(f(x).sum(), x, create_graph=True)"),
            otherwise="g1 = grad(f(x).sum(), x, create_graph=True) is f'(x) elementwise, "
                      "with a graph; grad(g1.sum(), x) is then f''(x)"))
    return "f'' of sigmoid, x³ and tanh all match their formulas"
