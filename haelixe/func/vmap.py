"""torch.func.vmap: a function mapped over a dim of its inputs.

The mapped function runs once per index of the mapped dim, on the inputs' slices at
that index, and the outputs are stacked along ``out_dims``: PyTorch's result for a
function without side effects, computed by a loop instead of batched kernels. Slicing
(``select``) and ``stack`` are recorded ops, so gradients flow from the stacked outputs
back to the inputs, and vmap nests and composes with the derivative transforms
(``vmap(grad(f))`` is a gradient per sample).

An output whose out_dim is None must be the same for every slice; a tensor that
differs between slices there is refused (PyTorch refuses one that depends on the
mapped inputs). A mapped dim of size 0 runs the function once on zeros shaped as a
slice, to learn the outputs' shapes."""

from __future__ import annotations

import functools

import numpy as np

from ..creation import zeros
from ..ops.indexing import stack
from ..tensor import Tensor
from . import pytree
from . import randomness as _randomness


def _name(func) -> str:
    if hasattr(func, "__name__"):
        return func.__name__
    if isinstance(func, functools.partial):
        return f"functools.partial({_name(func.func)}, ...)"
    return repr(func)


def _check_out_dims(out_dims, name) -> None:
    if isinstance(out_dims, int):
        return
    for d in pytree.flatten(out_dims)[0]:
        if d is not None and not isinstance(d, int):
            raise ValueError(f"vmap({name}, ..., out_dims={out_dims}): `out_dims` must be an "
                             f"int, None or a python collection of ints representing where "
                             f"in the outputs the vmapped dimension should appear.")


def _mapped_inputs(in_dims, args, name):
    """(batch size, flat in_dims made non-negative, flat args, args' structure)."""
    head = f"vmap({name}, in_dims={in_dims}, ...)(<inputs>)"
    if not isinstance(in_dims, (int, tuple)):
        raise ValueError(f"{head}: expected `in_dims` to be int or a (potentially nested) "
                         f"tuple matching the structure of inputs, got: {type(in_dims)}.")
    if not args:
        raise ValueError(f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add "
                         f"inputs, or you are trying to vmap over a function with no "
                         f"inputs. The latter is unsupported.")
    flat_args, spec = pytree.flatten(args)
    flat_dims = pytree.broadcast_prefix(in_dims, spec)
    if flat_dims is None:
        raise ValueError(f"{head}: in_dims is not compatible with the structure of `inputs`. "
                         f"in_dims has structure {pytree.flatten(in_dims)[1]} but inputs "
                         f"has structure {spec}.")
    for i, (arg, d) in enumerate(zip(flat_args, flat_dims)):
        if d is None:
            continue
        if not isinstance(d, int):
            raise ValueError(f"{head}: Got in_dim={d} for an input but in_dim must be either "
                             f"an integer dimension or None.")
        if not isinstance(arg, Tensor):
            raise ValueError(f"{head}: Got in_dim={d} for an input but the input is of type "
                             f"{type(arg)}. We cannot vmap over non-Tensor arguments, please "
                             f"use None as the respective in_dim")
        if not -arg.ndim <= d < arg.ndim:
            raise ValueError(f"{head}: Got in_dim={d} for some input, but that input is a "
                             f"Tensor of dimensionality {arg.ndim} so expected in_dim to "
                             f"satisfy -{arg.ndim} <= in_dim < {arg.ndim}.")
        flat_dims[i] = d % arg.ndim
    sizes = [arg.shape[d] for arg, d in zip(flat_args, flat_dims) if d is not None]
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped "
                         f"dimension, got sizes {sizes} for the mapped dimension")
    return sizes[0], flat_dims, flat_args, spec


def _slice(arg, d, b):
    return arg if d is None else arg.select(d, b)


def _stand_in(arg, d):
    """A slice of an input with an empty mapped dim: zeros of a slice's shape."""
    if d is None:
        return arg
    shape = tuple(arg.shape[:d]) + tuple(arg.shape[d + 1:])
    return zeros(*shape, dtype=arg.dtype, device=arg.device)


def _out_dims_per_leaf(out_dims, first, spec, name):
    def incompatible():
        return ValueError(f"vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is "
                          f"not compatible with the structure of `outputs`. out_dims has "
                          f"structure {pytree.flatten(out_dims)[1]} but outputs has "
                          f"structure {spec}.")
    if isinstance(first, Tensor):  # one tensor: out_dims an int, None or a 1-tuple
        if out_dims is None or isinstance(out_dims, int):
            return [out_dims]
        if isinstance(out_dims, tuple) and len(out_dims) == 1:
            return list(out_dims)
        raise incompatible()
    flat = pytree.broadcast_prefix(out_dims, spec)
    if flat is None:
        raise incompatible()
    return flat


def _same_for_every_slice(values) -> bool:
    first = values[0]
    for v in values[1:]:
        if v is first:
            continue
        if not isinstance(v, Tensor) or tuple(v.shape) != tuple(first.shape) or \
                not np.array_equal(v.detach().cpu().numpy(), first.detach().cpu().numpy(),
                                   equal_nan=first.dtype.is_floating_point):
            return False
    return True


def _join(values, d, name, batch):
    """The slices' outputs of one leaf, stacked along ``d`` (None: the one shared value)."""
    first = values[0]
    if d is None:
        if isinstance(first, Tensor) and not _same_for_every_slice(values):
            raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor "
                             f"when out_dim is None")
        return first
    if not isinstance(first, Tensor):
        raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type "
                         f"{type(first)}. Did you mean to set out_dims= to None for output?")
    if not -(first.ndim + 1) <= d <= first.ndim:
        raise IndexError(f"vmap({name}, ...): Dimension out of range (expected to be in "
                         f"range of [{-(first.ndim + 1)}, {first.ndim}], but got {d}): an "
                         f"out_dim places the mapped dim among an output's {first.ndim} "
                         f"dims")
    if batch == 0:
        d %= first.ndim + 1
        shape = tuple(first.shape[:d]) + (0,) + tuple(first.shape[d:])
        return zeros(*shape, dtype=first.dtype, device=first.device)
    shapes = {tuple(v.shape) for v in values}
    if len(shapes) > 1:
        raise RuntimeError(f"vmap({name}, ...): `{name}` returned tensors of different "
                           f"shapes {sorted(shapes)} for different slices; vmap stacks "
                           f"outputs of one shape")
    return stack(values, d)


def _call(func, in_dims, out_dims, randomness, args, kwargs):
    name = _name(func)
    _check_out_dims(out_dims, name)
    batch, flat_dims, flat_args, spec = _mapped_inputs(in_dims, args, name)
    results = []
    with _randomness.mode(randomness):
        slices = _randomness.Slices(randomness)
        for b in range(batch) if batch else (None,):
            slices.next()
            flat = [_slice(a, d, b) for a, d in zip(flat_args, flat_dims)] if batch else \
                [_stand_in(a, d) for a, d in zip(flat_args, flat_dims)]
            results.append(pytree.flatten(func(*pytree.unflatten(flat, spec), **kwargs)))
    out_spec = results[0][1]
    for _, s in results[1:]:
        if s != out_spec:
            raise RuntimeError(f"vmap({name}, ...): `{name}` returned outputs of different "
                               f"structures ({out_spec} and {s}) for different slices")
    dims = _out_dims_per_leaf(out_dims, results[0][0][0] if out_spec.is_leaf() else None,
                              out_spec, name)
    joined = [_join([r[0][i] for r in results], d, name, batch) for i, d in enumerate(dims)]
    return pytree.unflatten(joined, out_spec)


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """vmap(func, in_dims=0, out_dims=0, randomness='error', *, chunk_size=None) -> Callable

    ``func`` mapped over a dim of its inputs: ``in_dims`` says which dim of each
    positional input (an int for all, or a tuple with one entry per input, nested as the
    inputs are; None: not mapped), ``out_dims`` where the mapped dim goes in each output.
    Keyword arguments are passed to every call unmapped. ``randomness``: 'error'
    (a random draw inside is an error), 'different' or 'same'. ``chunk_size`` is checked
    and changes nothing here (the slices run one by one)."""
    _randomness.check(randomness)
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got "
                         f"{chunk_size})")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        return _call(func, in_dims, out_dims, randomness, args, kwargs)
    return wrapped
