"""The op registry: every op is declared once, and its pieces are made from the declaration.

An elementwise op is one ``elementwise(...)`` call in its family's module:

    elementwise("exp", lambda m, x: m.exp(x),          # the forward, over a namespace m
                grad=lambda m, g, y: g * y,            # g * dy/dx, over the same m
                dtypes="float", cpu=np.exp)            # dtype rule; optional numpy ufunc

From it come: the Kernel every backend compiles (numpy on the CPU, a traced WGSL
expression on the GPU), the autograd Function, the Tensor method (``x.exp()``), the
in-place method (``x.exp_()``), the function form (``hx.exp(x)``) and the dunder
operators it names, all with PyTorch's signature (``names=`` for the inputs where PyTorch
does not say ``input, other``; the parameters with their defaults, ``REQUIRED`` for
one without) and a docstring (``doc=``); ``functional=`` and ``module=`` ask for
``F.<op>`` and the ``nn`` layer, which nn/ makes from the same declaration; ``check=``
refuses inputs the kernel must not compute (``check(op, *inputs)`` raises), run by the
forward and the in-place form. The direct path
(operands of one dtype, float32 or float64) runs no forward, hence no check: a check is for
inputs of other dtypes (integer division by zero). ``one_dtype=True`` refuses tensor
operands of different dtypes instead of promoting them (PyTorch's lerp).
``special=True`` files the function form under SPECIAL (``hx.special.<op>``) instead of
FUNCTIONS, for the functions PyTorch has in torch.special alone (ndtr, zeta...).

The gradient is written once over ``m`` too: a first-order backward runs it as one fused
kernel on raw arrays (every op gets a one-kernel backward), while ``create_graph=True``
runs it with Haelixe ops on tensors, so it has a graph of its own.
A gradient function names what it reads by its parameter names: the forward's input
names, ``y`` (the output) and the op's parameters.

Other ops attach their methods with ``tensor_method`` and ``function``; every public op is
listed in ``OPS`` (name -> declaration), which the differential tests read.
"""

from __future__ import annotations

import inspect
import math
import numbers
from types import MappingProxyType

import numpy as np

from .. import dtype as _dtypes
from .. import layout
from ..autograd.function import SINK, Function, record
from ..autograd.mode import STATE
from ..backends import (
    airy_math,
    bessel_math,
    bessel_second_kind,
    error_math,
    gamma_incomplete,
    orthogonal_polynomials,
    special_math,
)
from ..backends.base import Kernel
from ..dtype import (
    ALL,
    bfloat16,
    bool_,
    can_cast,
    float16,
    float32,
    float64,
    int64,
    number_as,
    promote_types,
    result_type,
)
from ..errors import OpError, OpTypeError
from ..tensor import Tensor
from .arguments import Arguments, with_numpy_names

#: an elementwise op's parameter without a default (PyTorch's threshold and value)
REQUIRED = inspect.Parameter.empty
#: every declared op: name -> its declaration (an Elementwise, or an OpInfo for others)
OPS: dict = {}
#: the function forms: name -> callable, exported as ``haelixe.<name>``
FUNCTIONS: dict = {}
#: the function forms PyTorch has only in torch.special (ndtr, i0e...): name ->
#: callable, exported as ``haelixe.special.<name>``
SPECIAL: dict = {}


def tensor_method(fn=None, *, name: str | None = None, function: bool = False):
    """Attach ``fn`` to Tensor as a method (and as ``hx.<name>`` when ``function``)."""

    def attach(f):
        n = name or f.__name__
        public = with_numpy_names(f)
        setattr(Tensor, n, public)
        if function:
            FUNCTIONS[n] = public
        return f

    return attach(fn) if fn is not None else attach


def function(fn=None, *, name: str | None = None):
    """Register ``fn`` as the function form ``hx.<name>``."""

    def register(f):
        FUNCTIONS[name or f.__name__] = with_numpy_names(f)
        return f

    return register(fn) if fn is not None else register


class OpInfo:
    """What the registry knows of an op that is not a table entry: its name, how many
    tensor inputs it takes, and whether it is differentiable (for the tests)."""

    def __init__(self, name, arity=1, differentiable=True, dtypes="float"):
        self.name, self.arity = name, arity
        self.differentiable, self.dtypes = differentiable, dtypes


def declare(name, **kwargs) -> OpInfo:
    info = OpInfo(name, **kwargs)
    OPS[name] = info
    return info


# -- fused declarations -------------------------------------------------------------------------
class Layer:
    """The ``nn`` layer PyTorch has for a fused op, as data: nn/fused_layers.py makes the
    Module class from it.

    ``state`` is a plain function whose signature is the layer's constructor (PyTorch's);
    it returns the layer's attributes by name. The layer's ``forward`` takes the first
    ``inputs`` arguments of the functional form (the input, or input and target) and
    passes each other argument from the attribute of the same name (``self.weight``,
    ``self.eps``...). Tensors named in ``parameters`` become Parameters, those in
    ``buffers`` buffers. ``fixed``: arguments forward always passes as given (PyTorch's
    deprecated ones, left at their defaults; the weight= nn.L1Loss does not hold),
    class attributes of the layer. ``shown``
    is the ``extra_repr``: a format string over the attributes, or a function of the
    layer. ``forward``, where the layer does more than pass its attributes (a
    convolution's padding_mode pads the input first): a function of the functional form
    that returns the layer's forward. ``methods``: the layer's other methods PyTorch's
    has, by name (nn.EmbeddingBag.from_pretrained, a classmethod)."""

    def __init__(self, name, state, *, inputs=1, parameters=(), buffers=(), fixed=None,
                 shown="", forward=None, methods=None):
        self.name, self.state, self.inputs, self.forward = name, state, inputs, forward
        self.fixed, self.methods = dict(fixed or {}), dict(methods or {})
        self.parameters, self.buffers, self.shown = tuple(parameters), tuple(buffers), shown

    def __repr__(self) -> str:
        return f"Layer({self.name!r})"


class Fused(OpInfo):
    """A fused op, declared on its functional form (``F.<op>``, a plain function with
    PyTorch's signature): the Function it records, the nn layers where PyTorch has them
    (``layers``: none, one, or several, as F.pad's fifteen), and Haelixe's own parameters
    beyond PyTorch's (``extra``, after PyTorch's)."""

    def __init__(self, form, function, layer, extra, **kwargs):
        super().__init__(form.__name__, **kwargs)
        self.form, self.function_class = form, function
        self.layers = () if layer is None else (layer,) if isinstance(layer, Layer) \
            else tuple(layer)
        if not all(isinstance(spec, Layer) for spec in self.layers):
            raise TypeError(f"{self.name}: layer= takes a Layer or a sequence of them, got "
                            f"{layer!r}")
        self.extra = tuple(extra)
        sig = inspect.signature(form)  # (as PyTorch's docs write it: no annotations)
        self.signature = sig.replace(
            parameters=[p.replace(annotation=p.empty) for p in sig.parameters.values()],
            return_annotation=sig.empty)
        unknown = [n for n in self.extra if n not in self.signature.parameters]
        if unknown:
            raise ValueError(f"{self.name}: extra={unknown} are not its parameters")

    def __repr__(self) -> str:
        recorded = self.function_class.__name__ if self.function_class else "composed"
        return f"Fused({self.name!r}, {recorded}, layers={list(self.layers)})"


def fused(function, *, arity, layer=None, extra=(), dtypes="float", differentiable=True):
    """Declare a fused op on its functional form, which records ``function``::

        @fused(RMSNormFn, arity=2, layer=Layer("RMSNorm", ...))
        def rms_norm(input, normalized_shape, weight=None, eps=None):
            "Divide by the root-mean-square ..."

    The function is ``F.<op>`` as it is (no wrapper: its signature is PyTorch's, and a
    call costs what a call of it costs); the declaration lists it in ``OPS``, starts its
    docstring with the signature line PyTorch's does, and gives nn/ the ``layer`` to
    make (or a sequence of layers, where PyTorch has several: F.pad's ZeroPad2d,
    ReflectionPad1d..., each a Layer with its own state and forward). ``function`` is
    None where the op is a composition of recorded ops (the average pools). ``arity``:
    how many tensor inputs it takes (for the tests). A declaration in nn/ is in ``OPS``
    once ``haelixe.nn`` is imported (``import haelixe`` imports it on first use of
    ``hx.nn``)."""

    def declare_on(form):
        decl = Fused(form, function, layer, extra, arity=arity, dtypes=dtypes,
                     differentiable=differentiable)
        OPS[decl.name] = decl
        form.__doc__ = f"{decl.name}{decl.signature} -> Tensor\n\n" + \
            inspect.cleandoc(form.__doc__ or f"The fused op {decl.name}.")
        return form

    return declare_on


def functional_form(decl):
    """``torch.nn.functional.<op>`` of an elementwise declaration: the function form
    itself, or, where PyTorch's takes an ``inplace`` flag, the function form and the
    in-place method behind one signature ending with that flag."""
    front = FUNCTIONS[decl.name]
    if decl.functional == "plain":
        return front
    if decl.functional != "inplace":
        raise ValueError(f"{decl.name}: functional must be None, 'plain' or 'inplace', got "
                         f"{decl.functional!r}")
    arguments = Arguments(decl.name, decl.names + tuple(decl.params) + ("inplace",),
                          {**decl.params, "inplace": False})
    in_place, n = decl.inplace, len(arguments.names)

    def functional(*args, **kwargs):
        if kwargs or len(args) != n:
            args = arguments.bind(args, kwargs)
        *values, inplace = args
        return in_place(*values) if inplace else front(*values)

    functional.__name__ = functional.__qualname__ = decl.name
    functional.__signature__ = arguments.signature
    functional.__doc__ = f"{arguments} -> Tensor\n\n" + decl.doc.split("\n\n", 1)[1]
    return functional


def inplace_function(decl):
    """``torch.<op>_`` / ``F.<op>_`` of an elementwise declaration: its in-place form as
    a function of the input (PyTorch's signature: the op's parameters, no flag), recorded
    on autograd as ``x.<op>_()`` is, since it is that method."""
    name = decl.name + "_"
    arguments = Arguments(name, decl.names + tuple(decl.params), dict(decl.params))
    in_place, n = decl.inplace, len(arguments.names)

    def inplace(*args, **kwargs):
        if kwargs or len(args) != n:
            args = arguments.bind(args, kwargs)
        return in_place(*args)

    inplace.__name__ = inplace.__qualname__ = name
    inplace.__signature__ = arguments.signature
    inplace.__doc__ = f"{arguments} -> Tensor\n\nIn-place {decl.name}: writes the result " \
                      f"into input's memory and returns input."
    return inplace


# -- dtype rules -----------------------------------------------------------------------------
def _compute_dtype(rule: str, dt, op: str):
    """The dtype an op of ``rule`` computes in for inputs of ``dt`` (or a TypeError).

    promote: as the inputs are (bool allowed only where ``bool_ok``); float: ints and
    bools become the default float (exp, true division); float_wide: as float, but no
    float16 or bfloat16 (PyTorch's CPU has no such kernel of erfcx, zeta...); float_only:
    floats only (gelu, as PyTorch); integral: ints and bools only (bitwise ops)."""
    if rule in ("promote", "compare"):
        return dt
    if rule == "bool_to_int":  # x * x of a bool is an int, as PyTorch's square
        return int64 if dt is bool_ else dt
    if rule == "float":
        return dt if dt.is_floating_point else _dtypes.default_float
    if rule == "float_wide":  # (PyTorch's kernels of erfcx, zeta...: no 16-bit forms)
        if dt in (float16, bfloat16):
            raise OpTypeError(f"{op}: not implemented for {dt.name} tensors (as in "
                              f"PyTorch); convert with .float() first")
        return dt if dt.is_floating_point else _dtypes.default_float
    if rule == "float_only":
        if dt.is_floating_point:
            return dt
        raise TypeError(f"{op}: not defined for {dt.name} tensors (as in PyTorch); "
                        f"convert with .float() first")
    if rule == "integral":  # (PyTorch raises RuntimeError: an OpTypeError is both)
        if not dt.is_floating_point:
            return dt
        raise OpTypeError(f"{op}: needs integer or bool tensors, got {dt.name}")
    raise ValueError(f"unknown dtype rule {rule!r}")


def _is_scalar(x) -> bool:
    return isinstance(x, numbers.Number) or (isinstance(x, np.generic) and x.ndim == 0)


def _as_python(x):
    """A numpy scalar or 0-d array as the Python number it holds."""
    return x.item() if isinstance(x, (np.generic, np.ndarray)) else x


# -- elementwise declarations -----------------------------------------------------------------
class Elementwise:
    """One elementwise op: forward and gradient over a namespace, dtype rule, surfaces."""

    def __init__(self, name, fn, grad=None, *, dtypes="promote", cpu=None, wgsl_lib="",
                 params=None, bool_ok=True, method=True, function=True, inplace=True,
                 dunders=(), label=None, dtype_from=0, bool_operands=True,
                 wraps_ints=False, names=None, functional=None, module=None, doc=None,
                 check=None, one_dtype=False, special=False):
        self.name = name
        # the tensor operands must share one dtype, which numbers never change (lerp)
        self.one_dtype = one_dtype
        # check(op, *inputs): raises for inputs the kernel must not compute (an integer
        # division by zero); the op's forward and its in-place form run it first
        self.check = check
        # a Python int beyond an int tensor's range wraps around (PyTorch's arithmetic,
        # bitwise ops and comparisons); elsewhere (pow, clamp...) it is refused
        self.wraps_ints = wraps_ints
        self.bool_operands = bool_operands  # False: no bool tensor operand at all (sub)
        self.dtype_from = dtype_from  # the input whose dtype the op computes in
        sig = list(inspect.signature(fn).parameters)[1:]
        self.params = dict(params or {})
        self.inputs = [n for n in sig if n not in self.params]
        self.arity = len(self.inputs)
        # PyTorch's signature: its names for the inputs, then the parameters
        self.names = tuple(names or _DEFAULT_NAMES.get(self.arity, self.inputs))
        if len(self.names) != self.arity:
            raise ValueError(f"{name}: names={self.names} must name its {self.arity} inputs")
        self.arguments = Arguments(name, self.names + tuple(self.params), self.params)
        #: torch.nn.functional's form: None (none), "plain" or "inplace" (it takes
        #: PyTorch's inplace flag); the nn Module's class name, where PyTorch has one
        self.functional, self.module = functional, module
        self.doc = _docstring(name, self.arguments, doc)
        self.dtypes, self.bool_ok = dtypes, bool_ok
        self.kernel = Kernel(name, fn, len(sig), cpu, wgsl_lib)
        grads = grad if isinstance(grad, tuple) else (grad,)
        self.differentiable = grad is not None
        self.grads = [None if gf is None else _GradKernel(name, i, gf, sig)
                      for i, gf in enumerate(grads)] if grad is not None else []
        self.label = label or name.title().replace("_", "")
        self.saves_output = any(g is not None and "y" in g.needs for g in self.grads)
        self.function_class = _make_function(self)
        # 16-bit float operands beside float32 ones are read as they are (see _prepare)
        self.reads_mixed = dtype_from == 0 and dtypes in ("promote", "float", "float_only",
                                                          "compare")
        self.mixed_apply = _make_function(self, mixed=True).apply if self.reads_mixed \
            else None
        OPS[name] = self
        front = _make_front(self)  # (positional, PyTorch's names where they are the usual)
        self.apply = front
        binds_keywords = bool(self.params) or self.arity > 2  # (the front does it)
        public = front if binds_keywords or self.names == _DEFAULT_NAMES.get(self.arity) \
            else _with_arguments(front, self.arguments, self.doc)
        if method:
            setattr(Tensor, name, public)  # x.op(...) is hx.op(x, ...): self is the input
        if function:
            (SPECIAL if special else FUNCTIONS)[name] = public
        self.inplace = _make_inplace(self) if inplace and self.dtypes != "compare" else None
        if self.inplace is not None:
            setattr(Tensor, name + "_", self.inplace)
        for dunder in dunders:
            setattr(Tensor, dunder, _make_dunder(front, dunder))

    def compute_dtype(self, dt):
        cd = _compute_dtype(self.dtypes, dt, self.name)
        if bool_ in (cd, dt) and not self.bool_ok:  # (before a float rule widens a bool)
            raise TypeError(f"{self.name}: not supported on bool tensors (as in PyTorch); "
                            f"use logical ops or convert with .int() first")
        return cd

    def out_dtype(self, compute):
        return bool_ if self.dtypes == "compare" else compute

    def __repr__(self) -> str:
        return f"Elementwise({self.name!r}, inputs={self.inputs}, dtypes={self.dtypes!r})"


def elementwise(name, fn, grad=None, **kwargs) -> Elementwise:
    """Declare an elementwise op (see the module docstring)."""
    return Elementwise(name, fn, grad, **kwargs)


#: PyTorch's names for an elementwise op's inputs, unless the declaration gives its own
_DEFAULT_NAMES = {1: ("input",), 2: ("input", "other")}


def _docstring(name, arguments, doc) -> str:
    """PyTorch's first line (the signature) and the declaration's text."""
    body = doc or f"Elementwise {name.replace('_', ' ')}, declared in the op registry."
    return f"{arguments} -> Tensor\n\n{body}"


def _with_arguments(fn, arguments, doc):
    """``fn`` (positional) under the signature ``arguments``: keywords bound by name."""
    n = len(arguments.names)

    def call(*args, **kwargs):
        if kwargs or len(args) != n:
            args = arguments.bind(args, kwargs)
        return fn(*args)

    call.__name__ = call.__qualname__ = arguments.op
    call.__signature__, call.__doc__ = arguments.signature, doc
    return call


class _GradKernel:
    """The gradient of one input: g * d out / d input, as a Kernel over what it reads."""

    def __init__(self, op, i, fn, forward_sig):
        self.fn = fn
        self.needs = list(inspect.signature(fn).parameters)[2:]  # after m, g
        unknown = [n for n in self.needs if n not in forward_sig and n != "y"]
        if unknown:
            raise ValueError(f"gradient {i} of {op} reads {unknown}, which are neither "
                             f"inputs, parameters nor y")
        self.kernel = Kernel(f"{op}_grad{i}", fn, 1 + len(self.needs))
        # g passed through unchanged (add's, sub's first): no kernel, no copy
        self.identity = not self.needs and _returns_its_argument(fn)


def _returns_its_argument(fn) -> bool:
    marker = _Marker()
    try:
        return fn(None, marker) is marker
    except TypeError:  # it computes with g (-g, g * 0.0): a real kernel
        return False


class _Marker:
    __slots__ = ()


# -- the namespace derivatives see when they run on tensors (create_graph) -------------------
_SCALAR_MATH = {
    "exp": math.exp, "log": math.log, "log1p": math.log1p, "expm1": math.expm1,
    "sqrt": math.sqrt, "rsqrt": lambda x: 1.0 / math.sqrt(x), "sin": math.sin,
    "cos": math.cos, "tanh": math.tanh, "atan": math.atan, "atan2": math.atan2, "tan": math.tan,
    "sinh": math.sinh, "cosh": math.cosh, "exp2": lambda x: 2.0 ** x, "erf": math.erf, "abs": abs,
    "sigmoid": lambda x: 1.0 / (1.0 + math.exp(-x)), "sign": lambda x: float(np.sign(x)),
    "floor": math.floor, "ceil": math.ceil, "trunc": math.trunc, "round": round,
    "where": lambda c, a, b: a if c else b, "maximum": max, "minimum": min,
    "pow": lambda a, b: a ** b, "floor_divide": lambda a, b: a // b,
    "remainder": lambda a, b: a % b, "isnan": math.isnan, "fmod": math.fmod,
    "copysign": math.copysign, "nextafter": math.nextafter,
    "asin": math.asin, "acos": math.acos, "asinh": math.asinh, "acosh": math.acosh,
    "atanh": math.atanh, **special_math.SCALAR, **error_math.SCALAR,
    **bessel_math.SCALAR, **gamma_incomplete.SCALAR, **bessel_second_kind.SCALAR,
    **airy_math.SCALAR, **orthogonal_polynomials.SCALAR,
}


class TensorMath:
    """Kernel functions run on tensors: every name becomes the Haelixe op of that name
    (and plain math where every argument is a Python number)."""

    def __getattr__(self, name):
        fn = FUNCTIONS.get(name) or SPECIAL.get(name)
        if fn is None:
            raise AttributeError(f"no Haelixe op {name!r} for a derivative to call")
        scalar = _SCALAR_MATH[name]

        def call(*args):
            if any(isinstance(a, Tensor) for a in args):
                return fn(*args)
            return scalar(*args)

        return call


TENSOR_MATH = TensorMath()


# -- the generated Function ---------------------------------------------------------------------
class ElementwiseFunction(Function):
    """Base of the generated Functions. args: the inputs (tensors or Python numbers),
    then the parameter values. A recorded node keeps ``args`` (numbers and parameters by
    value, None for tensors), ``in_shapes`` (the inputs' shapes, only where they differ:
    broadcasting to undo in backward) and the saved tensors its gradients read."""

    decl: Elementwise = None
    #: per input with a gradient: (index, kernel or None for g itself, sources)
    plans: tuple = ()
    save_index: tuple = ()  # the inputs the node keeps (by position)
    in_shapes = None
    in_dtypes = None  # the inputs' dtypes where they differ from the output's (mixed)
    small_state = True  # (besides the saved tensors: shapes, dtypes and numbers)

    forward = None  # made per op by _make_forward
    backward = None  # made per op by _make_backward

    @classmethod
    def _backward_with_graph(cls, ctx, g, saved, args):
        """create_graph: the gradient functions run with Haelixe ops on tensors."""
        decl = cls.decl
        values = dict(zip(decl.inputs, args[:decl.arity]))
        values.update(zip(decl.params, args[decl.arity:]))
        values.update((n, t) for n, t in zip(_saved_names(decl), saved) if t is not None)
        if "y" in values:
            # the output with its history (this node), so the gradient has a graph
            y = values["y"]._alias()
            y.grad_fn, y._requires_grad = ctx, True
            values["y"] = y
        shapes, dtype, in_dtypes = ctx.in_shapes, ctx.out_dtype, ctx.in_dtypes
        out = []
        for i, nxt in enumerate(ctx.next):
            gk = decl.grads[i] if i < len(decl.grads) else None
            if nxt is None or gk is None or i >= decl.arity:
                out.append(None)
                continue
            vals = [_as_python(values[n]) for n in gk.needs]
            gi = gk.fn(TENSOR_MATH, g, *vals)
            if not isinstance(gi, Tensor):
                gi = g * 0 + gi
            if not gi._requires_grad:
                # a gradient made of comparisons (relu: g * (x > 0)) still depends on x,
                # with derivative zero: say so, so the next order has a graph
                for v in vals:
                    if isinstance(v, Tensor) and v._requires_grad:
                        gi = gi + v * 0.0
                        break
            if shapes is not None and gi.shape != shapes[i]:
                gi = gi.sum_to(shapes[i])
            target = dtype if in_dtypes is None else in_dtypes[i]
            out.append(gi if gi.dtype is target else gi.to(target))
        return tuple(out)


#: where a value a gradient kernel reads comes from (see _plans)
_PARAM, _OUTPUT, _INPUT = 0, 1, 2


def _plans(decl, names):
    """Per input with a gradient: its index, its gradient kernel (None where the
    gradient is g itself) and where each value it reads comes from, as (kind, index):
    a parameter (index into ctx.args), the output (index into the saved tensors), or an
    input (index into the saved tensors; None there, the number it was in ctx.args)."""
    order = list(decl.inputs) + list(decl.params)
    plans = []
    for i, gk in enumerate(decl.grads[:decl.arity]):
        if gk is None:
            continue
        sources = []
        for n in gk.needs:
            if n not in names:
                sources.append((_PARAM, order.index(n), None))
            elif n == "y":
                sources.append((_OUTPUT, names.index(n), None))
            else:
                sources.append((_INPUT, names.index(n), order.index(n)))
        plans.append((i, None if gk.identity else gk.kernel, tuple(sources)))
    return tuple(plans)


def _make_backward(decl, plans):
    """The op's backward. First order (what training runs): each input's gradient kernel
    run once on the raw arrays of the incoming gradient and of what the kernel reads,
    its result wrapped as a tensor (summed back over broadcast dims and cast where the
    node says so); a gradient that is g itself is g. Under create_graph the gradient
    functions run as Haelixe ops on tensors instead (_backward_with_graph)."""
    reads_saved = any(sources for _, _, sources in plans)
    wrap, fit = Tensor._wrap, _fit_gradient

    def backward(ctx, g):
        if STATE.grad_enabled:
            return ctx._backward_with_graph(ctx, g, ctx.saved_tensors, ctx.args)
        saved = ctx.saved_tensors if reads_saved else ()
        dtype = ctx.out_dtype  # the inputs' dtype too, unless in_dtypes says otherwise
        np_dt = dtype.np
        plain = ctx.in_shapes is None and ctx.in_dtypes is None  # (no sum_to, no cast)
        be = ctx.out_device._be
        # the backend's own callable of a kernel (Backend.direct: the front's direct
        # path) for float32/float64 gradients
        direct = be.direct if dtype in _DIRECT_DTYPES else _NO_DIRECT
        nexts = ctx.next
        out = [None] * len(nexts)
        gd = g._data
        for i, kernel, sources in plans:
            if nexts[i] is None:
                continue
            if kernel is None:  # g itself, in whatever dtype it came
                out[i] = g if plain and g.dtype is dtype else fit(g, i, ctx, dtype)
                continue
            raws = [gd]
            for kind, j, k in sources:  # (kind 0: _PARAM; else _OUTPUT or _INPUT)
                if kind == 0:
                    raws.append(np_dt.type(ctx.args[j]))
                else:  # a saved tensor, or (None there: an input) the number it was
                    t = saved[j]
                    raws.append(t._data if t is not None else np_dt.type(ctx.args[k]))
            f = direct.get(kernel)
            if f is None:  # (map gives the output's dtype: only a mixed node's inputs
                gi = be.map(kernel, raws, np_dt)  # need a cast)
            else:  # map's path for such a kernel, its checks hoisted
                gi = f(*raws)
                if gi.dtype is not np_dt and gi.dtype != np_dt:  # (an integer operand)
                    gi = gi.astype(np_dt)
            gi = wrap(gi)
            out[i] = gi if plain else fit(gi, i, ctx, dtype)
        return tuple(out)

    return _named(backward, decl, "backward")


def _fit_gradient(gi, i, ctx, dtype):
    """Input i's gradient summed back over its broadcast dims and in its dtype."""
    shapes, in_dtypes = ctx.in_shapes, ctx.in_dtypes
    if shapes is not None and gi.shape != shapes[i]:
        gi = gi.sum_to(shapes[i])
    target = dtype if in_dtypes is None else in_dtypes[i]
    return gi if gi.dtype is target else gi.to(target)


def _saved_names(decl):
    names = [n for n in decl.inputs if any(g is not None and n in g.needs
                                            for g in decl.grads)]
    return names + (["y"] if decl.saves_output else [])


def _reads(decl, i, name) -> bool:
    """Whether input i's gradient reads the value named ``name``."""
    g = decl.grads[i] if i < len(decl.grads) else None
    return g is not None and name in g.needs


def _make_keep(decl, save_index):
    """``keep(ctx, *args)``: what a recorded node of the op keeps for its backward.
    Numbers and parameters by value (``ctx.args``); of tensors only those the gradient
    reads (with their versions), and the inputs' shapes where they differ (the output
    has the common one: broadcasting to undo). forward calls it, and so does the direct
    path, which runs the kernel itself."""
    arity = decl.arity
    if arity == 2 and not decl.params:
        save_a, save_b = 0 in save_index, 1 in save_index
        # which inputs' gradients read each operand: an operand is kept only where one
        # of those will be computed (PyTorch's rule: x * 2.0 keeps nothing), so a later
        # write into it does not fail a backward that never reads it
        a_for_a, a_for_b = (_reads(decl, i, decl.inputs[0]) for i in (0, 1))
        b_for_a, b_for_b = (_reads(decl, i, decl.inputs[1]) for i in (0, 1))

        def keep(ctx, a, b):  # (x + y, the commonest node: no list built, no call made)
            ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
            if ta and tb:  # (ctx.args stays the class's: all tensors)
                if a.shape != b.shape:
                    ctx.in_shapes = (a.shape, b.shape)
            else:
                ctx.args = (None if ta else a, None if tb else b)
            ga, gb = ta and a._requires_grad, tb and b._requires_grad
            ka = ta and ((a_for_a and ga) or (a_for_b and gb))
            kb = tb and ((b_for_a and ga) or (b_for_b and gb))
            # (as save_for_backward: the saved tensors and their versions)
            if save_a and save_b:
                ctx.saved = (a if ka else None, b if kb else None)
                ctx._versions = (a._storage.version if ka else None,
                                 b._storage.version if kb else None)
            elif save_a:
                ctx.saved = (a if ka else None,)
                ctx._versions = (a._storage.version if ka else None,)
            elif save_b:
                ctx.saved = (b if kb else None,)
                ctx._versions = (b._storage.version if kb else None,)
    elif arity == 1 and not decl.params:
        save_x = bool(save_index)

        def keep(ctx, x):
            if save_x:
                ctx.saved = (x,)
                ctx._versions = (x._storage.version,)
    else:
        def keep(ctx, *args):
            ctx.args = [None if isinstance(a, Tensor) else a for a in args]
            shapes = [a.shape if isinstance(a, Tensor) else None for a in args[:arity]]
            if len({s for s in shapes if s is not None}) > 1:
                ctx.in_shapes = shapes
            ctx.save_for_backward(*[a if isinstance(a, Tensor) else None
                                    for a in (args[i] for i in save_index)])

    return _named(keep, decl, "keep").__func__


def _named(fn, decl, what):
    # tracebacks and capture errors name the op (Mul.forward), not its factory
    qualname = f"{decl.label}.{what}"
    fn.__qualname__ = qualname
    if hasattr(fn.__code__, "co_qualname"):  # Python 3.11+
        fn.__code__ = fn.__code__.replace(co_qualname=qualname)
    return staticmethod(fn)


def _make_forward(decl, keep, mixed=False):
    """The op's forward: ``keep`` where a node is recorded, then the backend's map over
    the inputs' raw arrays (numbers converted to the compute dtype). ``mixed``: float
    operands of different widths, each read as it is, the op run in the widest."""
    kernel, arity, dfrom, name = decl.kernel, decl.arity, decl.dtype_from, decl.name
    wrap, check = decl.wraps_ints, decl.check
    out_np = bool_.np if decl.dtypes == "compare" else None

    if mixed:
        def forward(ctx, *args):
            if check is not None:
                check(name, *args[:arity])
            tensors = [a for a in args[:arity] if isinstance(a, Tensor)]
            dt = tensors[0].dtype
            for t in tensors[1:]:
                dt = promote_types(dt, t.dtype)
            np_dt = dt.np
            raws = [a._data if isinstance(a, Tensor) else number_as(np_dt, a, name, False)
                    for a in args]
            if ctx is not SINK:
                keep(ctx, *args)
                ctx.in_dtypes = tuple(a.dtype if isinstance(a, Tensor) else dt
                                      for a in args[:arity])
            return tensors[0]._be.map(kernel, raws, out_np or np_dt)
    elif arity == 2 and not decl.params and dfrom == 0:
        def forward(ctx, a, b):  # (no list built: x + y is the hottest path there is)
            if check is not None:
                check(name, a, b)
            ta = isinstance(a, Tensor)
            ref = a if ta else b
            np_dt = ref.dtype.np
            try:
                ra = a._data if ta else np_dt.type(a)
                rb = b._data if isinstance(b, Tensor) else np_dt.type(b)
            except OverflowError:  # a Python int beyond an int tensor's range
                ra, rb = (x._data if isinstance(x, Tensor) else number_as(np_dt, x, name, wrap)
                          for x in (a, b))
            if ctx is not SINK:
                keep(ctx, a, b)
            return ref._be.map(kernel, (ra, rb), out_np or np_dt)
    elif arity == 1 and not decl.params:
        def forward(ctx, x):
            if check is not None:
                check(name, x)
            if ctx is not SINK:
                keep(ctx, x)
            return x._be.map(kernel, (x._data,), out_np or x.dtype.np)
    else:
        def forward(ctx, *args):
            if check is not None:
                check(name, *args[:arity])
            ref = args[dfrom]
            if not isinstance(ref, Tensor):
                ref = next(a for a in args if isinstance(a, Tensor))
            np_dt = ref.dtype.np
            raws = [a._data if isinstance(a, Tensor) else number_as(np_dt, a, name, wrap)
                    for a in args]
            if ctx is not SINK:
                keep(ctx, *args)
            return ref._be.map(kernel, raws, out_np or np_dt)

    return _named(forward, decl, "forward")


def _make_function(decl, mixed: bool = False) -> type:
    names = _saved_names(decl)
    save_index = tuple(decl.inputs.index(n) for n in names if n != "y")
    plans = _plans(decl, names)
    keep = _make_keep(decl, save_index)
    return type(decl.label, (ElementwiseFunction,), {
        "forward": _make_forward(decl, keep, mixed), "keep": staticmethod(keep),
        "decl": decl, "label": decl.label, "__slots__": (),
        "args": (None,) * (decl.arity + len(decl.params)),  # a node's unless it sets its own
        "saves_output": "y" in names, "differentiable": decl.differentiable,
        "save_index": save_index,
        "plans": plans, "backward": _make_backward(decl, plans)})


# -- fronts: promotion, broadcasting, then the Function -------------------------------------
def _make_front(decl):
    """``hx.<op>``: the operands promoted and broadcast (_prepare), then the Function.
    The direct path is Function.apply with its checks hoisted: for operands already of
    one float32/float64 dtype and device the backend's direct callable computes the
    output (no Backend.map, no generic pass over the arguments), then the same ``keep``
    and ``record`` as apply."""
    cls = decl.function_class
    apply, keep = cls.apply, cls.keep
    name, kernel = decl.name, decl.kernel
    nparams = len(decl.params)
    needs_no_promotion = frozenset(dt for dt in _ALL_DTYPES if _computes_in_its_dtype(decl, dt))
    # the dtypes whose operands take the direct path (none for comparisons: no node)
    direct_dtypes = needs_no_promotion & _DIRECT_DTYPES if decl.dtypes != "compare" \
        else frozenset()
    differentiable = decl.differentiable
    wrap, new = Tensor._wrap, object.__new__

    arguments = decl.arguments
    nargs = len(arguments.names)

    if decl.arity == 1 and not nparams:
        def front(input):  # noqa: A002 (PyTorch's name)
            x = input
            if x.__class__ is Tensor and x.dtype in direct_dtypes and not STATE.anomaly:
                f = x._be.direct.get(kernel)
                if f is not None:  # Function.apply, its checks hoisted (see above)
                    out = wrap(f(x._data))
                    state = STATE
                    if state.grad_enabled and differentiable and x._requires_grad:
                        ctx = new(cls)
                        keep(ctx, x)
                        record(ctx, out, (x,), state)
                    return out
            if x.__class__ is not Tensor and not isinstance(x, Tensor):
                x = _as_operand(name, x, None)
            if x.dtype not in needs_no_promotion:
                x = x.to(decl.compute_dtype(x.dtype))
            return apply(x)
    elif decl.arity == 1:
        def front(input, *params, **kwargs):  # noqa: A002
            if kwargs or len(params) != nparams:
                params = arguments.bind((input, *params), kwargs)[1:]
            x = input
            if x.__class__ is not Tensor and not isinstance(x, Tensor):
                x = _as_operand(name, x, None)
            if x.dtype not in needs_no_promotion:
                x = x.to(decl.compute_dtype(x.dtype))
            return apply(x, *params)
    elif decl.arity == 2 and not nparams:
        def front(input, other):  # noqa: A002 (x + y, x * 2.0 ...: the hot path)
            a, b = input, other
            ca, cb = a.__class__, b.__class__
            f = None
            if ca is Tensor:
                dt = a.dtype
                if cb is Tensor:
                    if dt is b.dtype and a.device is b.device and dt in needs_no_promotion:
                        if a.shape != b.shape:
                            layout.broadcast_shapes(a.shape, b.shape, op=name)
                        if dt in direct_dtypes and not STATE.anomaly:
                            f = a._be.direct.get(kernel)
                        if f is None:
                            return apply(a, b)
                        raw = f(a._data, b._data)
                elif dt in needs_no_promotion and _keeps_dtype(dt, cb):  # a number: no widening
                    if dt in direct_dtypes and not STATE.anomaly and abs(b) < _FINITE_BOUND:
                        f = a._be.direct.get(kernel)
                    if f is None:
                        return apply(a, b)
                    raw = f(a._data, dt.np.type(b))
            elif cb is Tensor:
                dt = b.dtype
                if dt in needs_no_promotion and _keeps_dtype(dt, ca):  # 2.0 - x
                    if dt in direct_dtypes and not STATE.anomaly and abs(a) < _FINITE_BOUND:
                        f = b._be.direct.get(kernel)
                    if f is None:
                        return apply(a, b)
                    raw = f(dt.np.type(a), b._data)
            if f is None:
                ops, mixed = _prepare(decl, (a, b))
                return (decl.mixed_apply if mixed else apply)(*ops)
            out = wrap(raw)
            state = STATE
            if state.grad_enabled and differentiable and (
                    (ca is Tensor and a._requires_grad) or (cb is Tensor and b._requires_grad)):
                ctx = new(cls)
                keep(ctx, a, b)
                record(ctx, out, (a, b), state)
            return out
    else:
        def front(*args, **kwargs):
            if kwargs or len(args) != nargs:
                args = arguments.bind(args, kwargs)
            params = args[decl.arity:]
            xs = args[:decl.arity]
            a = xs[0]
            if decl.arity == 2:
                b = xs[1]
                if a.__class__ is Tensor and b.__class__ is Tensor and a.dtype is b.dtype \
                        and a.device is b.device and a.dtype in needs_no_promotion:
                    if a.shape != b.shape:
                        layout.broadcast_shapes(a.shape, b.shape, op=name)
                    return apply(a, b, *params)
            ops, mixed = _prepare(decl, xs)
            return (decl.mixed_apply if mixed else apply)(*ops, *params)

    front.__name__ = front.__qualname__ = name
    front.__doc__ = decl.doc
    if nparams or decl.arity > 2:
        front.__signature__ = arguments.signature
    return front


#: dtypes whose operands take an elementwise op's direct path (Backend.direct)
_DIRECT_DTYPES = frozenset((float32, float64))
_NO_DIRECT = MappingProxyType({})


#: a Python number's magnitude below which it converts to float32 or float64 without
#: overflow (beyond, apply's path gives the error or the infinity PyTorch gives)
_FINITE_BOUND = 3.0e38


def _keeps_dtype(dt, number_type) -> bool:
    """A Python number of this type leaves a tensor of ``dt`` its dtype (PyTorch's
    wrapped-number rule: a float changes only an int or bool tensor, an int a bool)."""
    if number_type is float:
        return dt.is_floating_point
    return number_type is int and dt.kind != "bool"


def _computes_in_its_dtype(decl, dt) -> bool:
    """An operand of ``dt`` needs no promotion: the op computes in ``dt`` itself."""
    try:
        return decl.compute_dtype(dt) is dt
    except TypeError:
        return False


def _prepare(decl, xs):
    """(operands, mixed): the operands promoted to one compute dtype on one device; Python
    numbers stay numbers (they never widen a tensor: PyTorch's wrapped-number rule). A
    16-bit float tensor beside a float32 one is not converted: the kernel reads it as it
    is and computes in float32 (the widening is exact, and a cast would be one more pass
    over memory and one more graph node); ``mixed`` says so."""
    name = decl.name
    ref = next((x for x in xs if isinstance(x, Tensor)), None)
    if ref is None:
        raise TypeError(f"{name}: expected at least one tensor operand, got "
                        f"{', '.join(type(x).__name__ for x in xs)}")
    ops = [_as_operand(name, x, ref) for x in xs]
    tensors = [o for o in ops if isinstance(o, Tensor)]
    if not decl.bool_operands and any(t.dtype is bool_ for t in tensors):
        raise TypeError(f"{name}: not supported with a bool tensor operand (as in PyTorch); "
                        f"to invert a mask use ~ or logical_not()")
    device = _common_device(name, tensors)
    rt = one_dtype(decl, tensors) if decl.one_dtype else result_type(
        *((t.dtype, t.ndim == 0) if isinstance(t, Tensor) else _as_python(t) for t in ops))
    cd = decl.compute_dtype(rt)
    mixing = cd is float32 and decl.reads_mixed
    out, mixed = [], False
    for o in ops:
        if isinstance(o, Tensor):
            if o.device is not device:
                o = o.to(device)  # a CPU 0-d tensor with a GPU one, as PyTorch allows
            if o.dtype is not cd:
                if mixing and o.dtype in _WIDENS_TO_F32:
                    mixed = True
                else:
                    o = o.to(cd)
        else:
            o = _as_python(o)
        out.append(o)
    shapes = [o.shape for o in out if isinstance(o, Tensor)]
    if len(shapes) > 1:
        layout.broadcast_shapes(*shapes, op=name)
    return out, mixed


_WIDENS_TO_F32 = (bfloat16, float16)


def one_dtype(decl, tensors):
    """The one dtype of the tensor operands of a ``one_dtype`` op, or an OpError."""
    dt = tensors[0].dtype
    for t in tensors[1:]:
        if t.dtype is not dt:
            raise OpError(f"{decl.name}: the tensors ({', '.join(decl.names)}) must have one "
                          f"dtype, got {dt.name} and {t.dtype.name}; convert with "
                          f".to({decl.names[0]}.dtype)")
    return dt


def _as_operand(name, x, ref):
    if isinstance(x, Tensor):
        return x
    if _is_scalar(x):
        return x
    if isinstance(x, np.ndarray) and x.ndim == 0:
        return x.item()
    if getattr(x, "is_sparse", False):  # a sparse tensor takes part as its dense form
        return x.to_dense()
    if ref is None:
        raise TypeError(f"{name}: expected a Tensor, got {type(x).__name__}; build one with "
                        f"hx.tensor(...)")
    from ..creation import tensor

    try:
        return tensor(x, device=ref.device)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name}: cannot use a {type(x).__name__} as an operand ({e})") \
            from None


def _common_device(name, tensors):
    devices = {t.device for t in tensors if t.ndim > 0} or {t.device for t in tensors}
    if len(devices) > 1:
        desc = ", ".join(f"{t.device.type} (shape {t.shape})" for t in tensors)
        raise RuntimeError(f"{name}: expected all tensors on one device, got {desc}; move "
                           f"them with .to(...)")
    return devices.pop()


_REFLECTED = {"__radd__", "__rsub__", "__rmul__", "__rtruediv__", "__rpow__",
              "__rfloordiv__", "__rmod__", "__rand__", "__ror__", "__rxor__",
              "__rmatmul__", "__rlshift__", "__rrshift__"}


def _make_dunder(front, dunder):
    if dunder not in _REFLECTED and dunder not in ("__neg__", "__abs__", "__invert__"):
        return front  # x.__mul__(y) is front(x, y): no extra call
    if dunder in _REFLECTED:
        def op(self, other):
            return front(other, self)
    else:
        def op(self, other=None):
            return front(self) if other is None else front(self, other)
    op.__name__ = dunder
    return op


# -- in-place variants ----------------------------------------------------------------------
def _make_inplace(decl):
    from . import inplace

    arguments, n = decl.arguments, len(decl.arguments.names)

    def method(self, *args, **kwargs):
        if kwargs or len(args) != n - 1:
            args = tuple(arguments.bind((self, *args), kwargs)[1:])
        return inplace.apply_elementwise(decl, self, args)

    method.__name__ = method.__qualname__ = decl.name + "_"
    method.__signature__ = arguments.without_first()
    method.__doc__ = (f"{decl.name}_{method.__signature__} -> Tensor\n\nIn-place "
                      f"{decl.name}: writes the result into this tensor's memory.")
    return method


def inplace_result_dtype(decl, x, others):
    """The dtype an in-place op computes in, refused when its result cannot be written
    back into x (an int tensor cannot take a float result: PyTorch raises too)."""
    if decl.one_dtype:
        return decl.compute_dtype(one_dtype(decl, [x, *(o for o in others
                                                        if isinstance(o, Tensor))]))
    rt = result_type((x.dtype, x.ndim == 0), *(
        (o.dtype, o.ndim == 0) if isinstance(o, Tensor) else _as_python(o) for o in others))
    if not rt.is_floating_point and x.dtype.is_floating_point:
        rt = promote_types(rt, x.dtype)
    cd = decl.compute_dtype(rt)
    out = decl.out_dtype(cd)
    if not can_cast(out, x.dtype):
        raise RuntimeError(f"{decl.name}_: result type {out.name} can't be cast to the "
                           f"desired output type {x.dtype.name} (shape {x.shape}); use the "
                           f"out-of-place {decl.name} and convert explicitly")
    return cd


_ALL_DTYPES = ALL
