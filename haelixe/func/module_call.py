"""torch.func's functional_call (a module called with given parameters and buffers) and
stack_module_state (several modules' tensors stacked, for vmap over an ensemble)."""

from __future__ import annotations

from collections.abc import Sequence

from ..autograd.mode import no_grad
from ..nn import stateless
from ..ops.indexing import stack


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False)

    ``module(*args, **kwargs)`` with the tensors of ``parameter_and_buffer_dicts`` (a
    dict from dotted names to tensors, or a sequence of dicts with distinct keys) in
    place of its parameters and buffers; the module is left as it was. ``args`` not a
    tuple is one argument. ``tie_weights``: a value for one name of a tied tensor stands
    for all its names. ``strict``: the names must be exactly the module's."""  # noqa: E501
    if isinstance(parameter_and_buffer_dicts, dict):
        values = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, Sequence) and \
            not isinstance(parameter_and_buffer_dicts, str):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError("Expected all elements of parameter_and_buffer_dicts to be "
                             "dictionaries")
        seen, repeated = set(), []
        for d in parameter_and_buffer_dicts:
            for k in d:
                if k in seen and k not in repeated:
                    repeated.append(k)
                seen.add(k)
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of "
                             f"functional call is ambiguous")
        values = {k: v for d in parameter_and_buffer_dicts for k, v in d.items()}
    else:
        raise ValueError(f"Expected parameter_and_buffer_dicts to be a dict, or a list/tuple "
                         f"of dicts, but got {type(parameter_and_buffer_dicts)}")
    return stateless.call(module, values, args, kwargs, tie_weights=tie_weights,
                          strict=strict)


def stack_module_state(models):
    """stack_module_state(models) -> params, buffers

    The parameters and the buffers of ``models`` (modules of one class), each name's
    tensors stacked along a new first dim: a dict of parameters (fresh leaves that
    require grad where the models' do) and one of buffers, for
    ``vmap(lambda p, b, x: functional_call(models[0], (p, b), x), (0, 0, None))``."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    first = type(models[0])
    if not all(type(m) is first for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same "
                           "class.")
    each_params = [dict(m.named_parameters()) for m in models]
    each_buffers = [dict(m.named_buffers()) for m in models]

    def stacked(tensors):
        with no_grad():
            return stack([t.detach() for t in tensors]).clone()

    params = {n: stacked([d[n] for d in each_params]).requires_grad_(p.requires_grad)
              for n, p in each_params[0].items()}
    buffers = {n: stacked([d[n] for d in each_buffers]) for n in each_buffers[0]}
    return params, buffers
