"""torch.func's derivative transforms: grad, grad_and_value, vjp, jvp, jacrev, jacfwd and
hessian, over arguments that are tensors or nested tuples, lists and dicts of them.

Each runs ``func`` once on fresh differentiable copies of the arguments it
differentiates and takes reverse-mode passes over the graph that call records (the
passes of ``autograd.functional``). A transform's results keep their history where
something around them will differentiate them: another transform (``grad(grad(f))``,
``hessian``), or the caller's own graph, when an argument requires grad. Otherwise they
are plain tensors, as PyTorch's are.

A fused kernel (the norms', F.linear with a GELU) has a first derivative only. Where a result
keeps its history only for the caller's graph, a pass through one is taken without it
(the values are the same; the result then carries no history); inside another
transform, which needs the second derivative, it raises. jvp and jacfwd are computed
from reverse-mode passes (the Jacobian's values are the same as forward mode's)."""

from __future__ import annotations

import contextlib
import functools
import threading

from ..autograd import functional as passes
from ..autograd.engine import NotTwiceDifferentiableError
from ..autograd.mode import enable_grad, is_grad_enabled
from ..creation import zeros_like
from ..ops.linalg import matmul
from ..tensor import Tensor
from . import pytree
from . import randomness as _randomness

_NESTING = threading.local()  # how many transforms are running func on this thread


def _depth() -> int:
    return getattr(_NESTING, "depth", 0)


@contextlib.contextmanager
def _inside_transform():
    _NESTING.depth = _depth() + 1
    try:
        yield
    finally:
        _NESTING.depth -= 1


def _keeps_history(leaves) -> bool:
    """Whether the results must stay differentiable: grad mode is on and either another
    transform encloses this one or an input carries the caller's graph."""
    return is_grad_enabled() and (
        _depth() > 0 or any(isinstance(t, Tensor) and t.requires_grad for t in leaves))


def _release(tree, keep: bool):
    """The tensors of ``tree`` without their history unless it is kept."""
    if keep:
        return tree
    return pytree.tree_map(lambda t: t.detach() if isinstance(t, Tensor) else t, tree)


# -- argnums ------------------------------------------------------------------------------
def _wrap_argnum(argnum, nargs: int) -> int:
    if not isinstance(argnum, int):
        raise RuntimeError(f"argnum must be int, got: {type(argnum)}")
    if -nargs <= argnum < nargs:
        return argnum % nargs
    raise RuntimeError(f"Got argnum={argnum}, but only {nargs} positional inputs")


def _argnums(argnums, nargs: int):
    """argnums checked and made non-negative (an int stays an int)."""
    if isinstance(argnums, int):
        return _wrap_argnum(argnums, nargs)
    if not isinstance(argnums, tuple):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    wrapped = tuple(_wrap_argnum(a, nargs) for a in argnums)
    if not wrapped:
        raise RuntimeError("argnums must be non-empty")
    if len(set(wrapped)) != len(wrapped):
        raise RuntimeError(f"argnums elements must be unique, got {wrapped}")
    return wrapped


# -- one recorded call --------------------------------------------------------------------
class _Recorded:
    """``func`` called once with the arguments at ``argnums`` (all of them for None)
    replaced by differentiable copies: its output, its aux, the copies (flat) and the
    structure that rebuilds the differentiated arguments from them."""

    def __init__(self, func, args, kwargs, argnums, has_aux, api):
        if argnums is None:
            diff = args
        else:
            nums = _argnums(argnums, len(args))
            diff = args[nums] if isinstance(nums, int) else tuple(args[i] for i in nums)
        leaves, self.spec = pytree.flatten(diff)
        for x in leaves:
            if not isinstance(x, Tensor):
                raise ValueError(f"Thing passed to transform API must be Tensor, got "
                                 f"{type(x)}")
        self.keep = _keeps_history(leaves)
        with enable_grad():
            self.inputs = passes._prepare(tuple(leaves), self.keep)
            copies = pytree.unflatten(self.inputs, self.spec)
            if argnums is None:
                args = copies
            elif isinstance(nums, int):
                args = args[:nums] + (copies,) + args[nums + 1:]
            else:
                args = tuple(copies[nums.index(i)] if i in nums else a
                             for i, a in enumerate(args))
            with _inside_transform():
                out = func(*args, **kwargs)
        self.aux = None
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise RuntimeError(f"{api}: output of function f should be a tuple: "
                                   f"(output, aux) if has_aux is True")
            out, self.aux = out
        self.output = out

    def outputs(self, api: str):
        """The output's tensors (flat) and its structure; PyTorch's errors for none and
        for anything that is not a tensor."""
        flat, spec = pytree.flatten(self.output)
        if not flat or (len(flat) == 1 and flat[0] is None):
            raise RuntimeError(f"{api}: Expected f to be a function that has non-empty "
                               f"output (got output = {flat})")
        for o in flat:
            if not isinstance(o, Tensor):
                raise RuntimeError(f"{api}: expected f(*primals) to return only tensors, "
                                   f"got unsupported type {type(o)}")
        return flat, spec

    def gradients(self, outputs, cotangents=None, create_graph=None, retain_graph=True,
                  explicit=False):
        """d(outputs . cotangents)/d(inputs), zeros where no path leads. The pass keeps a
        graph where the results keep their history (``create_graph``; by default where
        this call's do); where the caller asked for it ``explicit``ly, a kernel with a
        first derivative only raises."""
        create_graph = self.keep if create_graph is None else create_graph
        try:
            grads = self._pass(outputs, cotangents, create_graph, retain_graph)
        except NotTwiceDifferentiableError:
            if explicit or _depth() > 0:
                raise
            grads = self._pass(outputs, cotangents, False, retain_graph)
        return tuple(zeros_like(x) if g is None else g for g, x in zip(grads, self.inputs))

    def _pass(self, outputs, cotangents, create_graph, retain_graph):
        with enable_grad():
            return passes._grad(tuple(outputs), self.inputs, cotangents,
                                create_graph=create_graph, retain_graph=retain_graph)

    def released(self, tree):
        return _release(tree, self.keep)


# -- grad ---------------------------------------------------------------------------------
def _grad_and_value(func, argnums, has_aux, args, kwargs):
    api = "grad_and_value(f)(*args)"
    rec = _Recorded(func, args, kwargs, argnums, has_aux, api)
    out = rec.output
    if not isinstance(out, Tensor):
        raise RuntimeError(f"{api}: Expected f(*args) to return a Tensor, got {type(out)}")
    if out.ndim != 0:
        raise RuntimeError(f"{api}: Expected f(*args) to return a scalar Tensor, got tensor "
                           f"with {out.ndim} dims. Maybe you wanted to use the vjp or jacrev "
                           f"APIs instead?")
    grads = pytree.unflatten(rec.gradients((out,)), rec.spec)
    value = rec.released(out)
    return grads, ((value, rec.released(rec.aux)) if has_aux else value)


def grad_and_value(func, argnums=0, has_aux=False):
    """grad_and_value(func, argnums=0, has_aux=False) -> Callable

    A function returning (the gradient of ``func`` with respect to the argument(s) at
    ``argnums``, the value of ``func``); with ``has_aux``, ``func`` returns
    (value, aux) and the function (gradient, (value, aux))."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return _grad_and_value(func, argnums, has_aux, args, kwargs)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """grad(func, argnums=0, has_aux=False) -> Callable

    A function returning the gradient of the scalar ``func`` with respect to the
    argument(s) at ``argnums`` (each a tensor or a nested tuple, list or dict of them:
    the gradient has its structure; a tuple of them for a tuple of argnums). With
    ``has_aux``, ``func`` returns (value, aux) and the function (gradient, aux)."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        grads, value = _grad_and_value(func, argnums, has_aux, args, kwargs)
        return (grads, value[1]) if has_aux else grads
    return wrapper


# -- vjp ----------------------------------------------------------------------------------
def _check_float_outputs(flat) -> None:
    for o in flat:
        if not o.dtype.is_floating_point:
            raise RuntimeError(f"vjp(f, ...): All outputs of f must be floating-point or "
                               f"complex Tensors, got Tensor with dtype {o.dtype}")


def vjp(func, *primals, has_aux=False):
    """vjp(func, *primals, has_aux=False) -> (output, vjp_fn) or (output, vjp_fn, aux)

    ``func(*primals)`` and ``vjp_fn(cotangents)``: the vector-Jacobian product with
    ``cotangents`` shaped as the output, a tuple with one entry per primal shaped as
    it. ``vjp_fn`` may be called many times."""
    api = "vjp(f, *primals)"
    rec = _Recorded(func, primals, {}, None, has_aux, api)
    flat_out, out_spec = rec.outputs(api)
    _check_float_outputs(flat_out)

    def vjp_fn(cotangents, retain_graph=True, create_graph=None):
        flat_c, c_spec = pytree.flatten(cotangents)
        if c_spec != out_spec:
            raise RuntimeError(f"Expected pytree structure of cotangents to be the same as "
                               f"pytree structure of outputs to the function. cotangents: "
                               f"{c_spec}, primal output: {out_spec}")
        for i, (c, o) in enumerate(zip(flat_c, flat_out)):
            if not isinstance(c, Tensor):
                raise RuntimeError(f"vjp_fn: cotangent {i} is a {type(c).__name__}; give "
                                   f"a tensor for every output")
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of "
                                   f"{c.shape} and output[{i}] has a shape of {o.shape}.")
        explicit = create_graph is not None
        if not explicit:  # PyTorch's default: a graph while grad mode is on
            create_graph = is_grad_enabled() and (
                rec.keep or _depth() > 0 or any(c.requires_grad for c in flat_c))
        grads = rec.gradients(flat_out, tuple(flat_c), create_graph, retain_graph, explicit)
        return pytree.unflatten(grads, rec.spec)

    out = rec.released(rec.output)
    return (out, vjp_fn, rec.released(rec.aux)) if has_aux else (out, vjp_fn)


# -- jvp ----------------------------------------------------------------------------------
_JVP = "jvp(f, primals, tangents)"


def _only_tensors(flat, what: str) -> None:
    if not flat:
        raise RuntimeError(f"{_JVP}: Expected {what} to contain at least one Tensor.")
    for t in flat:
        if not isinstance(t, Tensor):
            raise RuntimeError(f"{_JVP}: Expected {what} to only contain Tensors, got "
                               f"{type(t)}")


def _forward_products(rec, flat_out, tangents):
    """J t for each output: the double-backward trick (u -> J^T u is linear in u, so the
    gradient of (J^T u) . t with respect to u is J t); through a kernel with a first
    derivative only, and where no history is kept, from the Jacobian's rows instead."""
    diff = [o for o in flat_out if o.requires_grad]
    try:
        with enable_grad():
            u = tuple(zeros_like(o).requires_grad_(True) for o in diff)
            back = passes._grad(tuple(diff), rec.inputs, u, create_graph=True)
            pairs = [(b, t) for b, t in zip(back, tangents) if b is not None]
            fwd = passes._grad(tuple(b for b, _ in pairs), u, tuple(t for _, t in pairs),
                               create_graph=rec.keep) if pairs else (None,) * len(u)
    except NotTwiceDifferentiableError:
        if _depth() > 0:  # an enclosing transform needs the second derivative
            raise
        fwd = _products_from_rows(diff, rec.inputs, tangents)
    by_output = dict(zip(map(id, diff), fwd))
    return tuple(zeros_like(o) if by_output.get(id(o)) is None else by_output[id(o)]
                 for o in flat_out)


def _products_from_rows(outputs, inputs, tangents):
    jac = passes._jacobian_rows(tuple(outputs), tuple(inputs), False, False)
    out = []
    for o, row in zip(outputs, jac):
        total = None
        for j, t in zip(row, tangents):
            term = matmul(j.reshape(o.numel(), t.numel()), t.reshape(t.numel()).to(j.dtype))
            total = term if total is None else total + term
        out.append(total.reshape(o.shape).to(o.dtype))
    return out


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """jvp(func, primals, tangents, *, strict=False, has_aux=False) -> (output, jvp_out)

    ``func(*primals)`` and the Jacobian-vector product with ``tangents`` (shaped as
    ``primals``, a tuple), shaped as the output. ``strict``: an output independent of
    the inputs is an error instead of a zero product."""
    if not isinstance(primals, tuple):
        raise RuntimeError(f"{_JVP}: Expected primals to be a tuple. E.g. it should be "
                           f"valid to call f(*primals).")
    flat_p, p_spec = pytree.flatten(primals)
    flat_t, t_spec = pytree.flatten(tangents)
    if p_spec != t_spec:
        raise RuntimeError(f"{_JVP}: Expected primals and tangents to have the same python "
                           f"structure. For example, if primals is a tuple of 3 tensors, "
                           f"tangents also must be. Got primals with structure {p_spec} and "
                           f"tangents with structure {t_spec}")
    _only_tensors(flat_p, "primals")
    _only_tensors(flat_t, "tangents")
    for p, t in zip(flat_p, flat_t):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(f"{_JVP}: a tangent of shape {tuple(t.shape)} was given for "
                               f"a primal of shape {tuple(p.shape)}; each tangent needs its "
                               f"primal's shape")
    rec = _Recorded(func, primals, {}, None, has_aux, _JVP)
    rec.keep = rec.keep or (is_grad_enabled() and any(t.requires_grad for t in flat_t))
    flat_out, out_spec = pytree.flatten(rec.output)
    if not flat_out:
        raise RuntimeError(f"{_JVP}: Expected f to be a function that has non-empty output "
                           f"(got output = {flat_out})")
    for o in flat_out:
        if not isinstance(o, Tensor):
            raise RuntimeError(f"{_JVP}: expected f(*args) to return only tensors, got "
                               f"unsupported type {type(o)}")
        if strict and not o.requires_grad:
            raise RuntimeError("jvp(f, primals, tangents, strict=True): The output of f is "
                               "independent of the inputs. This is not allowed with "
                               "strict=True.")
    tangents_out = pytree.unflatten(_forward_products(rec, flat_out, tuple(flat_t)), out_spec)
    out = rec.released(rec.output)
    if has_aux:
        return out, tangents_out, rec.released(rec.aux)
    return out, tangents_out


# -- Jacobians ----------------------------------------------------------------------------
def _jacobian(func, args, argnums, has_aux):
    rec = _Recorded(func, args, {}, argnums, has_aux, "vjp(f, *primals)")
    flat_out, out_spec = rec.outputs("vjp(f, *primals)")
    _check_float_outputs(flat_out)
    try:
        with enable_grad():
            rows = passes._jacobian_rows(tuple(flat_out), rec.inputs, rec.keep, False)
    except NotTwiceDifferentiableError:
        if _depth() > 0:
            raise
        with enable_grad():
            rows = passes._jacobian_rows(tuple(flat_out), rec.inputs, False, False)
    jac = pytree.unflatten([pytree.unflatten(list(r), rec.spec) for r in rows], out_spec)
    return (jac, rec.released(rec.aux)) if has_aux else jac


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """jacrev(func, argnums=0, *, has_aux=False, chunk_size=None) -> Callable

    A function returning the Jacobian of ``func`` with respect to the argument(s) at
    ``argnums``, by reverse mode (one pass per output element): for each output tensor,
    shaped output.shape + input.shape, in the output's structure, each holding the
    differentiated arguments' structure. ``chunk_size`` (how many rows PyTorch computes
    at once) is checked and changes nothing here: rows are computed one by one."""
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")

    @functools.wraps(func)
    def wrapper(*args):
        return _jacobian(func, args, argnums, has_aux)
    return wrapper


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """jacfwd(func, argnums=0, has_aux=False, *, randomness="error") -> Callable

    The Jacobian of ``func`` as :func:`jacrev` gives it (computed the same way here: its
    values are forward mode's). ``randomness`` as vmap's: 'error' refuses a random draw
    in ``func``; 'same' and 'different' allow it (func runs once, so its draws are one
    set for every column of the Jacobian)."""
    @functools.wraps(func)
    def wrapper(*args):
        _randomness.check(randomness)  # (when called, as PyTorch's vmap inside checks it)
        with _randomness.mode(randomness):
            return _jacobian(func, args, argnums, has_aux)
    return wrapper


def hessian(func, argnums=0):
    """hessian(func, argnums=0) -> Callable

    The Hessian of the scalar ``func`` with respect to the argument(s) at ``argnums``:
    jacfwd(jacrev(func, argnums), argnums), shaped input.shape + input.shape."""
    return jacfwd(jacrev(func, argnums), argnums)
