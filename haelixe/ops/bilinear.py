"""``F.bilinear`` / ``nn.Bilinear``: y_k = x1 . A_k x2 + b_k, composed from one matmul and
a product summed over the second input's features."""

from __future__ import annotations

import math

from .. import creation
from ..autograd.mode import no_grad
from ..errors import OpError
from .registry import Layer, function, fused


def _bilinear_layer(in1_features, in2_features, out_features, bias=True, device=None,
                    dtype=None):
    """nn.Bilinear's state, initialised as PyTorch's: uniform in +-1/sqrt(in1_features)."""
    bound = 1.0 / math.sqrt(in1_features) if in1_features else 0.0
    on = {"device": device, "dtype": dtype}
    with no_grad():
        weight = creation.empty(out_features, in1_features, in2_features, **on)
        weight.uniform_(-bound, bound)
        b = creation.empty(out_features, **on).uniform_(-bound, bound) if bias else None
    return {"in1_features": in1_features, "in2_features": in2_features,
            "out_features": out_features, "weight": weight, "bias": b}


def _bilinear_shown(layer) -> str:
    return (f"in1_features={layer.in1_features}, in2_features={layer.in2_features}, "
            f"out_features={layer.out_features}, bias={layer.bias is not None}")


@fused(None, arity=4, layer=Layer("Bilinear", _bilinear_layer, inputs=2,
                                  parameters=("weight", "bias"), shown=_bilinear_shown))
@function
def bilinear(input1, input2, weight, bias=None):
    """input1 (*, in1) and input2 (*, in2) through weight (out, in1, in2): (*, out), each
    output sum_ij input1_i weight_kij input2_j, plus bias (out)."""
    if weight.ndim != 3 or input1.ndim == 0 or input1.shape[-1] != weight.shape[1] or \
            input2.shape[-1:] != weight.shape[2:] or input1.shape[:-1] != input2.shape[:-1]:
        raise OpError(f"bilinear: inputs of shapes {input1.shape} and {input2.shape} do not "
                      f"fit a weight of shape {weight.shape}: expected (*, in1), (*, in2) "
                      f"with the same leading dims and (out, in1, in2)")
    if bias is not None and bias.shape != weight.shape[:1]:
        raise OpError(f"bilinear: a bias of shape {bias.shape} does not fit the weight's "
                      f"{weight.shape[0]} outputs")
    out, in1, in2 = weight.shape
    # (an integer result keeps its dtype, as PyTorch's; sum alone would widen it)
    # x1 @ A laid out (in1, out * in2): each output's A_k x2 against x1 in one product
    t = input1 @ weight.permute(1, 0, 2).reshape(in1, out * in2)
    y = (t.reshape(*input1.shape[:-1], out, in2) * input2.unsqueeze(-2)).sum(-1, dtype=t.dtype)
    return y if bias is None else y + bias
