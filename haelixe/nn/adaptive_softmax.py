"""nn.AdaptiveLogSoftmaxWithLoss: the log-softmax over many classes split by frequency
(Grave et al., "Efficient softmax approximation for GPUs"). The ``cutoffs`` split the
classes into a head shortlist, scored with one logit per cluster beside them, and tail
clusters, each scored by a two-layer projection of reduced width. Composed of Linear
layers, log_softmax, gather and index_add, so autograd gives its gradients."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import creation
from ..autograd.mode import no_grad
from ..dtype import int64
from ..ops.indexing import cat
from ..tensor import Tensor
from .fused_layers import Linear
from .module import Module, ModuleList, Sequential

#: what forward returns (PyTorch's torch.nn.modules.adaptive._ASMoutput)
ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


def _check_cutoffs(cutoffs, n_classes):
    ok = list(cutoffs) == sorted(cutoffs) and len(cutoffs) > 0 and \
        min(cutoffs) > 0 and max(cutoffs) <= n_classes - 1 and \
        len(set(cutoffs)) == len(cutoffs) and all(int(c) == c for c in cutoffs)
    if not ok:
        raise ValueError(f"AdaptiveLogSoftmaxWithLoss: cutoffs should be a sequence of "
                         f"unique, positive integers sorted in an increasing order, where "
                         f"each value is between 1 and n_classes-1 ({n_classes - 1}); got "
                         f"{list(cutoffs)}")


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive log-softmax over ``n_classes`` for ``in_features`` inputs: classes below
    cutoffs[0] in the head; cluster i (classes cutoffs[i] to cutoffs[i + 1]) through a
    projection of in_features // div_value ** (i + 1) features."""

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False,
                 device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        _check_cutoffs(cutoffs, n_classes)
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = [int(c) for c in cutoffs] + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        on = {"device": device, "dtype": dtype}
        self.head = Linear(in_features, self.head_size, bias=head_bias, **on)
        tails = []
        for i in range(self.n_clusters):
            width = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            tails.append(Sequential(Linear(in_features, width, bias=False, **on),
                                    Linear(width, size, bias=False, **on)))
        self.tail = ModuleList(tails)

    def reset_parameters(self) -> None:
        self.head.reset_parameters()
        for projection, scores in self.tail:
            projection.reset_parameters()
            scores.reset_parameters()

    def forward(self, input_, target_):
        """(output, loss): each sample's log-probability of its target class, and their
        negated mean. (N, in_features) inputs with an (N,) target, or (in_features,) with
        a 0-d one."""
        if not isinstance(input_, Tensor) or not isinstance(target_, Tensor):
            raise TypeError("AdaptiveLogSoftmaxWithLoss: input and target must be tensors")
        if target_.ndim == 1:
            if input_.ndim == 0 or input_.shape[0] != target_.shape[0]:
                raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: input and target should "
                                   f"have the same size in the batch dimension, got "
                                   f"{tuple(input_.shape)} and {tuple(target_.shape)}")
            if input_.ndim != 2:
                raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: a 1D target expects a 2D "
                                   f"input, got input of shape {tuple(input_.shape)}")
        elif target_.ndim == 0:
            if input_.ndim != 1:
                raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: a 0D target expects a 1D "
                                   f"input, got input of shape {tuple(input_.shape)}")
        else:
            raise RuntimeError("AdaptiveLogSoftmaxWithLoss: 0D or 1D target tensor "
                               "expected, multi-target not supported")
        if target_.dtype.is_floating_point or target_.dtype.name == "bool":
            raise TypeError(f"AdaptiveLogSoftmaxWithLoss: target must hold integer class "
                            f"indices, got {target_.dtype.name}")
        batched = target_.ndim > 0
        x = input_ if batched else input_.unsqueeze(0)
        labels = (target_ if batched else target_.unsqueeze(0)).to(int64)
        classes = labels.cpu().numpy()
        if classes.size and (classes.min() < 0 or classes.max() >= self.n_classes):
            raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: target values should be in "
                               f"[0, {self.n_classes - 1}], but values in range "
                               f"[{classes.min()}, {classes.max()}] were found")
        # each sample's head column: its class in the shortlist, else its cluster's
        cluster = np.searchsorted(np.array(self.cutoffs), classes, side="right")
        column = np.where(cluster == 0, classes, self.shortlist_size + cluster - 1)
        head = self.head(x).log_softmax(1)
        on = {"device": x.device}
        output = head.gather(1, creation.tensor(column, dtype=int64, **on).unsqueeze(1))
        output = output.squeeze(1)
        for i in range(1, self.n_clusters + 1):
            rows = np.nonzero(cluster == i)[0]
            if rows.size == 0:
                continue
            picked = creation.tensor(rows, dtype=int64, **on)
            relative = creation.tensor(classes[rows] - self.cutoffs[i - 1], dtype=int64, **on)
            scores = self.tail[i - 1](x.index_select(0, picked)).log_softmax(1)
            inner = scores.gather(1, relative.unsqueeze(1)).squeeze(1)
            output = output.index_add(0, picked, inner)
        loss = (-output).mean()
        return ASMoutput(output if batched else output.squeeze(0), loss)

    def _full_log_prob(self, x, head_output):
        head = head_output.log_softmax(1)
        parts = [head[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster = self.tail[i](x).log_softmax(1)
            parts.append(cluster + head[:, self.shortlist_size + i].unsqueeze(1))
        return cat(parts, 1)

    def log_prob(self, input):  # noqa: A002 (PyTorch's name)
        """The log-probability of every class: (N, in_features) -> (N, n_classes)."""
        return self._full_log_prob(input, self.head(input))

    def predict(self, input):  # noqa: A002
        """The most probable class of each sample, (N,): log_prob(input).argmax(1),
        the tails computed only for samples whose head picks a cluster."""
        with no_grad():
            head_output = self.head(input)
            best = head_output.argmax(1)
            beyond = (best >= self.shortlist_size).cpu().numpy()
            if not beyond.any():
                return best
            rows = creation.tensor(np.nonzero(beyond)[0], dtype=int64, device=input.device)
            full = self._full_log_prob(input.index_select(0, rows),
                                       head_output.index_select(0, rows)).argmax(1)
            return best.index_copy(0, rows, full)


__all__ = ["AdaptiveLogSoftmaxWithLoss"]
