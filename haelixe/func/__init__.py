"""``torch.func``: function transforms (grad, vjp, jvp, the Jacobians and the Hessian,
vmap) and functional_call, the module call that takes its parameters as arguments.

    from haelixe.func import functional_call, grad, vmap
    params = {k: v.detach() for k, v in model.named_parameters()}
    def loss(p, x, y):
        return F.cross_entropy(functional_call(model, p, (x[None],)), y[None])
    per_sample = vmap(grad(loss), in_dims=(None, 0, 0))(params, xs, ys)
"""

from __future__ import annotations

from .module_call import functional_call, stack_module_state
from .transforms import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp
from .vmap import vmap

__all__ = ["functional_call", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp",
           "stack_module_state", "vjp", "vmap"]

_HINTS = {
    "functionalize": "the function itself (Haelixe runs it eagerly; there is no graph "
                     "rewriting to remove mutations)",
    "linearize": "hx.func.jvp(f, primals, tangents) for each tangent",
    "replace_all_batch_norm_modules_": "BatchNorm layers made with "
                                       "track_running_stats=False",
}


def __getattr__(name):
    from ..closest import missing_attribute

    raise missing_attribute("haelixe.func", name, globals(), _HINTS)
