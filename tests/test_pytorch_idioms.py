"""Everyday PyTorch idioms, each written once and run on PyTorch and on Haelixe (CPU, and
GPU through whatever wgpu adapter exists), with the results compared: values, dtypes,
shapes, gradients, learning rates, batches.

An idiom is a function of ``L``, the library under PyTorch's names: ``L.torch`` (torch or
haelixe), ``L.nn``, ``L.F``, ``L.optim``, ``L.data`` (torch.utils.data or haelixe.data),
and ``L.tensor(array)`` for a tensor on the device under test. It returns tensors,
numbers, strings or nested tuples/lists/dicts of them. Idioms that draw random numbers
return what does not depend on the generator (shapes, bounds, fractions, statistics).
"""

from __future__ import annotations

import functools
import math
from types import SimpleNamespace

import numpy as np
import pytest

import haelixe as hx

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(15)
A = RNG.standard_normal((4, 6)).astype(np.float32)
B = RNG.standard_normal((6, 3)).astype(np.float32)
X3 = RNG.standard_normal((2, 5, 4)).astype(np.float32)
W3 = RNG.standard_normal((2, 4, 3)).astype(np.float32)
DISTINCT = RNG.permutation(24).reshape(4, 6).astype(np.float32) - 11.5
LOGITS = RNG.standard_normal((5, 7)).astype(np.float32)
LABELS = np.array([0, 6, 3, 3, 1], np.int64)
LOGITS_2D = RNG.standard_normal((2, 4, 3, 5)).astype(np.float32)  # (N, C, d1, d2)
LABELS_2D = RNG.integers(0, 4, (2, 3, 5)).astype(np.int64)
QKV = RNG.standard_normal((3, 2, 2, 6, 8)).astype(np.float32)  # (q|k|v, b, heads, t, d)


def library(name: str, device: str = "cpu") -> SimpleNamespace:
    if name == "torch":
        return SimpleNamespace(
            name="torch", torch=torch, nn=torch.nn, F=torch.nn.functional, optim=torch.optim,
            data=torch.utils.data, device="cpu",
            tensor=lambda a, **kw: torch.tensor(np.asarray(a), **kw))
    return SimpleNamespace(
        name="haelixe", torch=hx, nn=hx.nn, F=hx.nn.functional, optim=hx.optim,
        data=hx.data, device=device,
        tensor=lambda a, **kw: hx.tensor(np.asarray(a), device=device, **kw))


IDIOMS = {}
CPU_ONLY = set()  # idioms needing dtypes a GPU may lack


def idiom(fn=None, *, rtol=1e-5, atol=1e-6, cpu_only=False):
    """Register ``fn`` as an idiom compared at the given tolerances; ``cpu_only``: it needs
    dtypes a GPU may lack (WGSL has no float64; float16 needs the adapter's support)."""
    if fn is None:
        return functools.partial(idiom, rtol=rtol, atol=atol, cpu_only=cpu_only)
    IDIOMS[fn.__name__] = (fn, rtol, atol)
    if cpu_only:
        CPU_ONLY.add(fn.__name__)
    return fn


def fill(L, module, seed=0):
    """``module`` on the device under test (model.to(device)), its parameters and buffers
    given the same values in both libraries: each entry of its state dict drawn from a
    generator seeded by ``seed`` and the entry's place in the sorted names."""
    module.to(L.device)
    state = {}
    for i, (name, t) in enumerate(sorted(module.state_dict().items())):
        rng = np.random.default_rng([seed, i])
        values = rng.uniform(-0.5, 0.5, tuple(t.shape)).astype(np.float32)
        state[name] = L.tensor(values).to(t.dtype)
    module.load_state_dict(state)
    return module


def grad_of(L, array):
    return L.tensor(array, requires_grad=True)


# -- tensor ops ----------------------------------------------------------------------------
@idiom
def topk_values_and_indices(L):
    x = L.tensor(DISTINCT)
    top = L.torch.topk(x, 3, dim=-1)
    low = x.topk(2, dim=0, largest=False)
    return top.values, top.indices, low.values, low.indices


@idiom
def sort_descending_and_argsort(L):
    x = L.tensor(DISTINCT)
    values, indices = L.torch.sort(x, dim=1, descending=True)
    return values, indices, L.torch.argsort(x, dim=0), x.argsort(dim=-1, descending=True)


@idiom
def argmax_argmin_max_as_functions(L):
    x = L.tensor(DISTINCT)
    mx = L.torch.max(x, dim=1, keepdim=True)
    return (L.torch.argmax(x, dim=1), L.torch.argmax(x), x.argmin(dim=0, keepdim=True),
            mx.values, mx.indices, L.torch.max(x), L.torch.min(x, dim=0).values,
            L.torch.max(x, L.tensor(np.zeros(6, np.float32))))


@idiom
def multinomial_from_a_few_categories(L):
    # two non-zero categories per row: without replacement both are drawn, in some order
    p = np.zeros((4, 6), np.float32)
    p[np.arange(4), [0, 2, 4, 5]] = 0.3
    p[np.arange(4), [1, 3, 0, 2]] = 0.7
    probs = L.tensor(p)
    pair = L.torch.multinomial(probs, 2).sort(dim=-1).values
    one_hot = L.tensor(np.eye(6, dtype=np.float32)[[5, 0, 3]])
    sure = L.torch.multinomial(one_hot, 4, replacement=True)
    return pair, sure, sure.dtype


@idiom
def cumsum_cumprod_with_gradients(L):
    x = grad_of(L, A[:, :4] * 0.5 + 1)
    y = L.torch.cumsum(x, dim=1) * x.cumprod(dim=0)
    y.sum().backward()
    return y, x.grad


@idiom
def tril_triu_and_the_causal_mask(L):
    t = 5
    keep = L.torch.tril(L.torch.ones(t, t, device=L.device))
    scores = L.tensor(RNG_SCORES)
    masked = scores.masked_fill(keep == 0, float("-inf")).softmax(dim=-1)
    return keep, L.torch.triu(L.tensor(DISTINCT), diagonal=1), \
        L.tensor(DISTINCT).tril(-1), masked


RNG_SCORES = RNG.standard_normal((5, 5)).astype(np.float32)


@idiom(rtol=1e-5, atol=1e-5)
def einsum_contractions(L):
    x, w = grad_of(L, X3), grad_of(L, W3)
    y = L.torch.einsum("bij,bjk->bik", x, w)
    outer = L.torch.einsum("i,j->ij", L.tensor(A[0]), L.tensor(B[:, 0]))
    scores = L.torch.einsum("bhqd,bhkd->bhqk", L.tensor(QKV[0]), L.tensor(QKV[1]))
    y.square().sum().backward()
    return y, outer, scores, x.grad, w.grad


@idiom(rtol=1e-5, atol=1e-5)
def bmm_and_batched_matmul(L):
    x, w = grad_of(L, X3), grad_of(L, W3)
    y = L.torch.bmm(x, w)
    (y * y).mean().backward()
    return y, x.grad, w.grad, x @ w, (L.tensor(A) @ L.tensor(B)).T


@idiom
def scatter_and_scatter_add(L):
    # scatter writes one value per target (distinct indices in a row: PyTorch leaves the
    # winner of a collision undefined); scatter_add sums the colliding ones
    unique = L.tensor(np.array([[2, 0, 3], [1, 3, 0]], np.int64))
    repeated = L.tensor(np.array([[0, 1, 2, 0], [1, 2, 0, 1]], np.int64))
    src = grad_of(L, A[:2, :4])
    base = L.torch.zeros(2, 4, device=L.device)
    written = base.scatter(1, unique, src[:, :3])
    summed = L.torch.zeros(2, 3, device=L.device).scatter_add(1, repeated, src)
    (written.sum() + (summed * summed).sum()).backward()
    return (written, summed, L.torch.scatter(base, 1, unique[:1], 1.5), src.grad,
            L.torch.zeros(3, 4, device=L.device).scatter_add_(0, repeated[:, :2].T.contiguous(),
                                                                src[:2, :2].detach()))


@idiom
def index_select_and_index_add(L):
    x = grad_of(L, A)
    idx = L.tensor(np.array([3, 0, 3], np.int64))
    rows = L.torch.index_select(x, 0, idx)
    rows.sum().backward()
    acc = L.torch.zeros(4, 6, device=L.device)
    acc.index_add_(0, idx, L.tensor(B.T[:3]))
    return rows, x.grad, acc, x.detach().index_select(1, idx[:2])


@idiom
def floor_division_and_remainder(L):
    i = L.tensor(np.array([7, -7, 6, -6, 0], np.int64))
    f = L.tensor(np.array([7.5, -7.5, 2.0, -0.5, 3.25], np.float32))
    return i // 3, i % 3, i // -4, i % -4, f // 2, f % 2, L.torch.remainder(f, -1.5), \
        L.torch.floor_divide(i, 2)


@idiom
def norm_over_dims(L):
    x = grad_of(L, A)
    n2 = x.norm(dim=1, keepdim=True)
    (x / n2).sum().backward()
    return (n2, x.norm(), x.norm(p=1, dim=0), x.norm(p=float("inf"), dim=1),
            L.torch.norm(x, p=3, dim=1), x.grad)


@idiom
def any_all_with_dim(L):
    m = L.tensor(np.array([[True, False, False], [True, True, True]]))
    x = L.tensor(A)
    return (m.any(dim=1), m.all(dim=0), L.torch.any(m), L.torch.all(m, dim=1, keepdim=True),
            (x > 0).any(), (x > -10).all().item())


@idiom
def gather_picks_the_target_log_probabilities(L):
    logp = grad_of(L, LOGITS).log_softmax(dim=-1)
    picked = logp.gather(1, L.tensor(LABELS).unsqueeze(1)).squeeze(1)
    return picked, -picked.mean()


@idiom
def views_reshape_permute_contiguous(L):
    x = L.tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    y = x.permute(2, 0, 1).contiguous().view(4, 6)
    return (y, x.transpose(0, 2).reshape(-1)[:5], x.flatten(1).shape, x.unsqueeze(1).shape,
            x[:, None].squeeze(1).shape, x.unflatten(2, (2, 2)).shape, x.mT.shape,
            x.is_contiguous(), x.transpose(1, 2).is_contiguous())


@idiom
def cat_stack_chunk_split(L):
    a, b = L.tensor(A), L.tensor(A * 2)
    return (L.torch.cat([a, b], dim=0), L.torch.stack([a, b], dim=1), a.chunk(3, dim=1),
            L.torch.split(a, [2, 2], dim=0), a.split(4, dim=1), L.torch.unbind(a[:2], 0))


@idiom
def where_clamp_and_masking(L):
    x = grad_of(L, A)
    y = L.torch.where(x > 0, x, 0.1 * x) + x.clamp(min=-0.5, max=0.5)
    y.sum().backward()
    z = x.detach().clone()
    z[z < 0] = 0.0
    return y, x.grad, z, x.detach()[x.detach() > 1.0], x.detach()[[0, 2]], \
        L.torch.clamp(x.detach(), max=0.0)


@idiom
def creation_functions(L):
    d = L.device
    x = L.tensor(A)
    return (L.torch.arange(0, 10, 3, device=d), L.torch.arange(5, device=d).dtype,
            L.torch.linspace(0, 1, 5, device=d), L.torch.zeros_like(x), L.torch.ones(2, 3,
            device=d, dtype=L.torch.int64), L.torch.full((2, 2), 7.0, device=d),
            L.torch.eye(3, device=d), L.torch.full_like(x, 2).dtype, L.torch.empty(3, 2).shape)


@idiom
def in_place_arithmetic_on_a_clone(L):
    x = L.tensor(A)
    y = x.clone()
    y.add_(1).mul_(2).clamp_(max=3.0)
    y[0].zero_()
    y[:, 0] = 5.0
    return x, y


@idiom
def reductions_with_keepdim(L):
    x = L.tensor(X3)
    return (x.sum(dim=(0, 2)), x.mean(dim=1, keepdim=True), x.amax(dim=-1), x.var(dim=1),
            x.std(dim=0, unbiased=False), x.var(correction=0), L.torch.logsumexp(x, dim=2),
            x.amin(dim=(0, 1), keepdim=True), L.torch.mean(x, dim=-1))


@idiom
def dtype_promotion_and_conversion(L):
    i = L.tensor(np.array([1, 2, 3], np.int64))
    f = L.tensor(np.array([0.5, 1.5, 2.5], np.float32))
    return ((i + 0.5).dtype, (i / 2).dtype, (i * 2).dtype, (i + f).dtype, i.float().dtype,
            (i > 1).dtype, (i > 1).long().sum().item(), f.bfloat16().dtype,
            (f.bfloat16() + f).dtype, f.tolist(), f.int().tolist(), f[1].item(),
            (i.to(L.torch.int32) + i).dtype, (f > 1).to(f.dtype))


@idiom(cpu_only=True)
def float64_and_float16_conversions(L):
    f = L.tensor(np.array([0.5, 1.5, 2.5], np.float32))
    m = fill(L, L.nn.Linear(3, 2))
    return (f.half().dtype, (f.half() + f).dtype, m.half().weight.dtype,
            m(f.half()).dtype, f.to(L.torch.float64).dtype, f.double().sum().item(),
            (f.double() + f).dtype,
            L.torch.rand(2, 3, dtype=L.torch.float64).dtype, m.double().weight.dtype,
            m.float().weight.dtype, (L.tensor(np.array([1, 2])) / 2.0).double().dtype)


@idiom
def autograd_accumulates_retains_and_detaches(L):
    x = grad_of(L, A[0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    first = x.grad.clone()
    x.grad = None
    with L.torch.no_grad():
        z = x * 3
    d = x.detach()
    w = L.tensor(A[1]).requires_grad_()
    (x * w).sum().backward()
    return first, z.requires_grad, d.requires_grad, x.grad, w.grad, y.grad_fn is not None


@idiom
def softmax_family(L):
    x = L.tensor(LOGITS)
    return (x.softmax(dim=-1), L.F.softmax(x, dim=0), L.F.log_softmax(x, dim=1),
            L.torch.softmax(x, -1).sum(dim=-1))


@idiom
def broadcasting_expand_and_repeat(L):
    col, row = L.tensor(A[:, :1]), L.tensor(A[:1])
    return (col + row, col.expand(4, 3), L.torch.broadcast_to(row, (2, 6)),
            (col * row).shape, row.repeat(2, 1), col.repeat(1, 2, 3).shape)


# -- nn: modules and init ------------------------------------------------------------------
@idiom
def init_deterministic_fills(L):
    w = L.torch.empty(3, 4, device=L.device)
    init = L.nn.init
    return (init.zeros_(w).clone(), init.ones_(w).clone(), init.constant_(w, 0.25).clone(),
            init.calculate_gain("relu"), init.calculate_gain("leaky_relu", 0.2),
            init.calculate_gain("tanh"))


@idiom(rtol=0.08, atol=0.0)
def init_random_distributions(L):
    init = L.nn.init
    w = L.torch.empty(400, 300, device=L.device)
    stats = {}
    for name, fn in (("xavier_uniform", lambda t: init.xavier_uniform_(t)),
                     ("xavier_normal", lambda t: init.xavier_normal_(t, gain=2.0)),
                     ("kaiming_uniform", lambda t: init.kaiming_uniform_(t, a=math.sqrt(5))),
                     ("kaiming_normal", lambda t: init.kaiming_normal_(
                         t, mode="fan_out", nonlinearity="relu")),
                     ("normal", lambda t: init.normal_(t, 0.0, 0.02)),
                     ("uniform", lambda t: init.uniform_(t, -0.1, 0.1))):
        fn(w)
        stats[name] = float(w.std().item())
    init.trunc_normal_(w, std=1.0, a=-2.0, b=2.0)
    stats["trunc_normal_inside"] = float((w.abs() <= 2.0).float().mean().item())
    stats["trunc_normal_std"] = float(w.std().item())
    return stats


@idiom
def activation_and_shape_modules(L):
    nn = L.nn
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 8), nn.Tanh(), nn.Linear(8, 5),
                          nn.Sigmoid(), nn.Identity(54, unused="ignored"), nn.Softmax(dim=-1))
    fill(L, model)
    x = grad_of(L, X3[:, :3].reshape(2, 3, 4))
    y = model(x)
    y[:, 0].sum().backward()
    acts = nn.Sequential(nn.ReLU(), nn.GELU(approximate="tanh"), nn.SiLU(), nn.Softplus(2.0))
    return y, x.grad, acts(L.tensor(A)), [type(m).__name__ for m in model]


@idiom(rtol=1e-5, atol=1e-5)
def loss_modules(L):
    nn = L.nn
    x = grad_of(L, LOGITS)
    p = grad_of(L, A)
    target = L.tensor((A > 0).astype(np.float32))
    losses = [nn.CrossEntropyLoss()(x, L.tensor(LABELS)),
              nn.CrossEntropyLoss(label_smoothing=0.1, reduction="sum")(x, L.tensor(LABELS)),
              nn.NLLLoss()(x.log_softmax(-1), L.tensor(LABELS)),
              nn.MSELoss()(p, target), nn.L1Loss(reduction="sum")(p, target),
              nn.BCEWithLogitsLoss()(p, target), nn.SmoothL1Loss(beta=0.5)(p, target),
              nn.HuberLoss(delta=0.3)(p, target)]
    sum(losses).backward()
    return losses, x.grad, p.grad


@idiom
def embedding_with_padding_idx(L):
    emb = L.nn.Embedding(10, 4, padding_idx=0)
    zero_row = emb.weight[0].detach().clone()
    fill(L, emb)
    idx = L.tensor(np.array([[0, 3, 3], [9, 0, 1]], np.int64))
    out = emb(idx)
    (out * out).sum().backward()
    return zero_row, out, emb.weight.grad, emb.padding_idx, emb.weight.grad[0]


# x.grad is float32 rounding around a cancelling sum (the gradient of a normalised row's
# sum): PyTorch's own float32 result lies 1.5e-5 from the float64 one, the composed
# default's (without numba) 2.2e-5, the compiled kernel's 1.6e-5
@idiom(rtol=1e-5, atol=3e-5)
def layer_norm_module_variants(L):
    nn = L.nn
    x = grad_of(L, X3)
    full = fill(L, nn.LayerNorm((5, 4), eps=1e-3))
    plain = nn.LayerNorm(4, elementwise_affine=False)
    nobias = fill(L, nn.LayerNorm(4, bias=False))
    y = full(x) + plain(x).sum() + nobias(x)
    y.sum().backward()
    return (y, x.grad, full.weight.grad, nobias.bias is None, plain.weight is None,
            [n for n, _ in full.named_parameters()])


@idiom
def dropout_train_and_eval(L):
    nn = L.nn
    drop = nn.Dropout(p=0.25)
    x = L.torch.ones(200, 100, device=L.device)
    y = drop(x)
    kept = y[y != 0]
    drop.eval()
    z = nn.Dropout(0.5, inplace=True).eval()(x.clone())
    target = x.clone()
    out = nn.Dropout(0.5, inplace=True)(target)
    return (abs((y == 0).float().mean().item() - 0.25) < 0.02, kept.min().item(),
            kept.max().item(), drop(x).sum().item(), z.sum().item(), drop.training,
            nn.Dropout(0.0)(x).sum().item(), repr(nn.Dropout(0.1, inplace=True)).lower(),
            out is target, abs((target == 0).float().mean().item() - 0.5) < 0.02,
            target.max().item())


@idiom
def buffers_persistent_or_not(L):
    class Counter(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = L.nn.Parameter(L.torch.ones(2))
            self.register_buffer("steps", L.torch.zeros(2, dtype=L.torch.int64))
            self.register_buffer("cache", L.torch.zeros(3), persistent=False)

        def forward(self, x):
            return x * self.scale

    m = Counter()
    return (list(m.state_dict()), [n for n, _ in m.named_buffers()],
            [n for n, _ in m.named_parameters()], sum(p.numel() for p in m.parameters()))


@idiom
def module_dtype_casts(L):
    m = fill(L, L.nn.Linear(3, 2))
    x = L.tensor(A[:2, :3])
    return [m.bfloat16().bias.dtype, m(x.bfloat16()).dtype, m.float().weight.dtype,
            m.to(L.torch.float32).weight.dtype, m(x)]


@idiom(rtol=1e-5, atol=1e-5)
def module_tree_train_eval_and_apply(L):
    nn = L.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
            self.out = nn.Linear(4, 1)

        def forward(self, x):
            for layer in self.layers:
                x = L.F.relu(layer(x))
            return self.out(x)

    net = fill(L, Net())

    def zero_bias(m):
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.bias)

    net.apply(zero_bias)
    net.eval()
    modes = [m.training for m in net.modules()]
    net.train()
    return (net(L.tensor(X3[0])), [n for n, _ in net.named_parameters()], modes,
            sum(p.numel() for p in net.parameters() if p.requires_grad),
            [n for n, _ in net.named_children()])


def _tiny_lm(L, vocab=11, dim=8):
    nn = L.nn

    class TinyLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, dim)
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, vocab, bias=False)
            self.head.weight = self.tok.weight

        def forward(self, idx):
            return self.head(self.norm(self.tok(idx)))

    return TinyLM()


@idiom(rtol=1e-5, atol=1e-5)
def tied_weights_load_a_pytorch_checkpoint_strictly(L, tmp_path=None):
    """A PyTorch model's weights saved with safetensors (the tied tensor under both of its
    names, as PyTorch's state dict has it), loaded strictly."""
    from safetensors.torch import save_file

    torch.manual_seed(0)
    theirs = _tiny_lm(library("torch"))
    path = CHECKPOINTS / "tiny_lm.safetensors"
    save_file({k: v.detach().clone() for k, v in theirs.state_dict().items()}, str(path))
    if L.name == "torch":
        from safetensors.torch import load_file

        model, state = _tiny_lm(L), load_file(str(path))
    else:
        model, state = _tiny_lm(L), hx.load(path)
        model.to(L.device)
    result = model.load_state_dict(state, strict=True)
    idx = L.tensor(np.array([[1, 5, 7], [0, 10, 3]], np.int64))
    return (list(result.missing_keys), list(result.unexpected_keys), model(idx),
            model.head.weight is model.tok.weight, len(list(model.parameters())),
            list(model.state_dict()))


CHECKPOINTS = None  # a temporary folder, set by the fixture below


@pytest.fixture(scope="module", autouse=True)
def _checkpoints(tmp_path_factory):
    global CHECKPOINTS
    CHECKPOINTS = tmp_path_factory.mktemp("checkpoints")


# -- functional ------------------------------------------------------------------------------
@idiom(rtol=1e-5, atol=1e-5)
def cross_entropy_options(L):
    F = L.F
    x = grad_of(L, LOGITS)
    target = L.tensor(np.array([0, 6, -100, 3, 1], np.int64))
    weight = L.tensor(np.linspace(0.5, 2.0, 7).astype(np.float32))
    losses = [F.cross_entropy(x, target),
              F.cross_entropy(x, target, weight=weight, label_smoothing=0.2),
              F.cross_entropy(x, L.tensor(LABELS), reduction="none"),
              F.cross_entropy(x, L.tensor(LABELS), reduction="sum", ignore_index=3),
              F.cross_entropy(x, x.detach().softmax(-1) * 0.5 + 0.5 / 7)]
    (losses[0] + losses[1] + losses[2].sum() + losses[3] + losses[4]).backward()
    return losses, x.grad


@idiom(rtol=1e-5, atol=1e-5)
def cross_entropy_over_spatial_dims(L):
    x = grad_of(L, LOGITS_2D)
    target = L.tensor(LABELS_2D)
    loss = L.F.cross_entropy(x, target, weight=L.tensor(np.array([1, 2, 1, 0.5], np.float32)))
    each = L.F.cross_entropy(x, target, reduction="none", label_smoothing=0.1)
    (loss + each.mean()).backward()
    return loss, each, x.grad


@idiom(rtol=1e-5, atol=1e-5)
def nll_bce_l1_smooth_l1(L):
    F = L.F
    x, y = grad_of(L, A), L.tensor((DISTINCT > 0).astype(np.float32))
    pos = L.tensor(np.linspace(0.5, 3, 6).astype(np.float32))
    losses = [F.nll_loss(x.log_softmax(1), L.tensor(np.array([1, 0, 5, 2], np.int64))),
              F.binary_cross_entropy_with_logits(x, y),
              F.binary_cross_entropy_with_logits(x, y, pos_weight=pos, reduction="sum"),
              F.l1_loss(x, y), F.smooth_l1_loss(x, y, beta=0.3), F.mse_loss(x, y)]
    sum(losses).backward()
    return losses, x.grad


@idiom
def pointwise_functions(L):
    F, x = L.F, L.tensor(A * 10)
    return (F.sigmoid(x), F.tanh(x), F.softplus(x), F.softplus(x, beta=2, threshold=5),
            F.relu(x), F.gelu(x), F.silu(x), L.torch.sigmoid(x))


@idiom
def one_hot_pad_normalize(L):
    F = L.F
    labels = L.tensor(np.array([[2, 0], [1, 4]], np.int64))
    x = L.tensor(A[:2, :3].reshape(1, 2, 3))
    return (F.one_hot(labels), F.one_hot(labels, num_classes=6).shape,
            F.pad(x, (1, 2)), F.pad(x, (1, 1, 0, 1), value=-1.0),
            F.pad(x, (2, 1), mode="reflect"), F.pad(x, (1, 1), mode="replicate"),
            F.normalize(L.tensor(A), dim=1), F.normalize(L.tensor(A), p=1, dim=0))


@idiom(rtol=1e-5, atol=1e-5)
def layer_norm_functional(L):
    x = grad_of(L, X3)
    w, b = grad_of(L, B[:4, 0]), grad_of(L, B[:4, 1])
    y = L.F.layer_norm(x, (4,), w, b, eps=1e-5)
    z = L.F.layer_norm(x, x.shape[-2:])
    (y.square().sum() + (z * L.tensor(X3)).sum()).backward()
    return y, z, x.grad, w.grad, b.grad


def _attention(L, **kw):
    q, k, v = (grad_of(L, QKV[i]) for i in range(3))
    out = L.F.scaled_dot_product_attention(q, k, v, **kw)
    out.square().sum().backward()
    return out, q.grad, k.grad, v.grad


@idiom(rtol=1e-4, atol=1e-5)
def sdpa_causal(L):
    return _attention(L, is_causal=True)


@idiom(rtol=1e-4, atol=1e-5)
def sdpa_boolean_mask(L):
    keep = np.ones((2, 1, 6, 6), bool)
    keep[0, :, :, 4:] = False  # padded keys of the first sequence
    keep[1] = np.tril(np.ones((6, 6), bool))
    return _attention(L, attn_mask=L.tensor(keep))


@idiom(rtol=1e-4, atol=1e-5)
def sdpa_additive_mask_and_scale(L):
    bias = RNG_BIAS
    return _attention(L, attn_mask=L.tensor(bias), scale=0.2)


RNG_BIAS = RNG.standard_normal((6, 6)).astype(np.float32)


@idiom(rtol=1e-4, atol=1e-5)
def sdpa_equals_the_written_out_formula(L):
    q, k, v = (L.tensor(QKV[i]) for i in range(3))
    t = q.shape[-2]
    mask = L.torch.ones(t, t, device=L.device, dtype=L.torch.bool).tril()
    fused = L.F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    manual = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v
    return fused, manual, (fused - manual).abs().max().item() < 1e-5


# -- optim ---------------------------------------------------------------------------------
def _quadratic_steps(L, make_opt, steps=5):
    w = L.nn.Parameter(L.tensor(A[0]))
    b = L.nn.Parameter(L.tensor(A[1, :3]))
    opt = make_opt([w, b])
    for _ in range(steps):
        opt.zero_grad()
        loss = (w * w).sum() + ((b - 1) ** 2).sum() * 3
        loss.backward()
        opt.step()
    return w, b


@idiom
def sgd_momentum_nesterov_weight_decay(L):
    return _quadratic_steps(L, lambda ps: L.optim.SGD(ps, lr=0.05, momentum=0.9,
                                                      nesterov=True, weight_decay=0.01))


@idiom
def adam_and_amsgrad(L):
    return (_quadratic_steps(L, lambda ps: L.optim.Adam(ps, lr=0.1, betas=(0.8, 0.95))),
            _quadratic_steps(L, lambda ps: L.optim.Adam(ps, lr=0.05, amsgrad=True,
                                                         weight_decay=0.1)))


@idiom
def adamw_with_parameter_groups(L):
    return _quadratic_steps(L, lambda ps: L.optim.AdamW(
        [{"params": [ps[0]], "weight_decay": 0.1}, {"params": [ps[1]], "lr": 0.01,
                                                    "weight_decay": 0.0}],
        lr=0.05, betas=(0.9, 0.99)))


@idiom
def zero_grad_sets_none_and_a_frozen_parameter_is_skipped(L):
    w = L.nn.Parameter(L.tensor(A[0]))
    frozen = L.nn.Parameter(L.tensor(A[1]))
    opt = L.optim.AdamW([w, frozen], lr=0.1)
    (w * 2).sum().backward()
    opt.step()
    opt.zero_grad()
    return w, frozen, w.grad is None, frozen.grad is None


@idiom
def optimizer_state_dict_round_trip(L):
    def run(split):
        w = L.nn.Parameter(L.tensor(A[0]))
        opt = L.optim.Adam([w], lr=0.1)
        for i in range(6):
            if i == split:
                state = opt.state_dict()
                w = L.nn.Parameter(w.detach().clone())
                opt = L.optim.Adam([w], lr=0.5)
                opt.load_state_dict(state)
            opt.zero_grad()
            (w ** 3).sum().backward()
            opt.step()
        return w, opt.param_groups[0]["lr"]

    return run(None), run(3)


@idiom
def add_param_group_later(L):
    w = L.nn.Parameter(L.tensor(A[0]))
    head = L.nn.Parameter(L.tensor(A[1]))
    opt = L.optim.SGD([w], lr=0.1)
    opt.add_param_group({"params": [head], "lr": 0.01})
    ((w * head).sum() ** 2).backward()
    opt.step()
    return w, head, [g["lr"] for g in opt.param_groups], len(opt.param_groups)


def _lrs(L, make_sched, steps=12, lr=0.1):
    w = L.nn.Parameter(L.tensor(A[0]))
    opt = L.optim.SGD([w], lr=lr)
    sched = make_sched(opt)
    lrs = []
    for _ in range(steps):
        lrs.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    return lrs


@idiom(rtol=1e-9, atol=1e-12)
def lr_schedulers(L):
    S = L.optim.lr_scheduler
    return {"lambda": _lrs(L, lambda o: S.LambdaLR(o, lambda e: 0.9 ** e)),
            "step": _lrs(L, lambda o: S.StepLR(o, step_size=3, gamma=0.5)),
            "cosine": _lrs(L, lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=1e-3)),
            "linear": _lrs(L, lambda o: S.LinearLR(o, start_factor=0.1, total_iters=4))}


@idiom(rtol=1e-9, atol=1e-12)
def warmup_then_cosine_with_sequential_lr(L):
    S = L.optim.lr_scheduler
    return _lrs(L, lambda o: S.SequentialLR(o, [
        S.LinearLR(o, start_factor=0.01, total_iters=5),
        S.CosineAnnealingLR(o, T_max=15, eta_min=1e-4)], milestones=[5]), steps=22)


@idiom(rtol=1e-9, atol=1e-12)
def scheduler_state_dict_resumes(L):
    S = L.optim.lr_scheduler
    w = L.nn.Parameter(L.tensor(A[0]))
    opt = L.optim.SGD([w], lr=0.1)
    sched = S.StepLR(opt, step_size=2, gamma=0.3)
    for _ in range(3):
        opt.step()
        sched.step()
    state = sched.state_dict()
    opt2 = L.optim.SGD([w], lr=0.1)
    resumed = S.StepLR(opt2, step_size=2, gamma=0.3)
    resumed.load_state_dict(state)
    lrs = []
    for _ in range(4):
        opt2.step()
        resumed.step()
        lrs.append(resumed.get_last_lr()[0])

    def warmup_cosine(o):
        return S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1, total_iters=3),
                                  S.CosineAnnealingLR(o, T_max=6)], milestones=[3])

    first = warmup_cosine(opt)
    for _ in range(5):
        opt.step()
        first.step()
    opt3 = L.optim.SGD([w], lr=opt.param_groups[0]["lr"])
    again = warmup_cosine(opt3)
    again.load_state_dict(first.state_dict())
    tail = []
    for _ in range(3):
        opt3.step()
        again.step()
        tail.append(again.get_last_lr()[0])
    return state["last_epoch"], lrs, tail, again.last_epoch


@idiom
def clip_grad_norm_and_value(L):
    utils = L.nn.utils
    w, b = L.nn.Parameter(L.tensor(A)), L.nn.Parameter(L.tensor(B[:, 0]))
    ((w * 3).sum() + (b ** 2).sum()).backward()
    total = utils.clip_grad_norm_([w, b], max_norm=1.0)
    after = [w.grad.clone(), b.grad.clone()]
    inf_total = utils.clip_grad_norm_([w, b], max_norm=0.5, norm_type=float("inf"))
    utils.clip_grad_value_([w, b], clip_value=0.01)
    return total, after, inf_total, w.grad, b.grad


@idiom
def seeded_random_draws_repeat(L):
    t = L.torch
    t.manual_seed(1234)
    a = t.randn(3, 4, device=L.device)
    t.manual_seed(1234)
    b = t.randn(3, 4, device=L.device)
    ints = t.randint(5, (200,), device=L.device)
    ranged = t.randint(-3, 3, (2, 50))
    u = t.rand(1000, device=L.device)
    return (bool((a == b).all().item()), ints.dtype, ints.shape, int(ints.min().item()),
            int(ints.max().item()), int(ranged.min().item()), int(ranged.max().item()),
            bool(((u >= 0) & (u < 1)).all().item()), t.randperm(6).sort().values,
            t.randn_like(a).shape, t.rand(2, 3, dtype=t.float16).dtype)


@idiom
def accuracy_and_argmax_predictions(L):
    logits, labels = L.tensor(LOGITS), L.tensor(LABELS)
    pred = logits.argmax(dim=-1)
    correct = (pred == labels).sum().item()
    return pred, correct, (pred == labels).float().mean().item(), \
        L.torch.eq(pred, labels).long().sum().item()


@idiom
def no_grad_decorator_and_set_grad_enabled(L):
    t = L.torch
    w = grad_of(L, A[0])

    @t.no_grad()
    def evaluate(x):
        return (x * w).sum()

    with t.set_grad_enabled(False):
        off = w * 2
    with t.enable_grad():
        on = w * 2
    return evaluate(w).requires_grad, off.requires_grad, on.requires_grad, \
        t.is_grad_enabled()


@idiom
def freezing_a_submodule(L):
    nn = L.nn
    model = fill(L, nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)))
    model[0].requires_grad_(False)
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = L.optim.SGD(trainable, lr=0.1)
    loss = model(L.tensor(X3[0])).square().mean()
    loss.backward()
    opt.step()
    return (len(trainable), model[0].weight.grad is None, model[0].weight, model[2].weight,
            [p.requires_grad for p in model.parameters()])


@idiom
def state_dict_copies_between_two_models(L):
    nn = L.nn
    src = fill(L, nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3)), seed=1)
    dst = nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3)).to(L.device)
    result = dst.load_state_dict(src.state_dict())
    x = L.tensor(X3[0])
    copied = dst.state_dict()["0.weight"]
    with L.torch.no_grad():
        src[0].weight.add_(1.0)  # the copy is a copy
    return (dst(x), list(result.missing_keys), list(dst.state_dict()), copied,
            src[0].weight.requires_grad, copied.requires_grad)


@idiom(rtol=1e-5, atol=1e-5)
def a_training_loop(L):
    """zero_grad, forward, loss, backward, clip, step, schedule: a small regression."""
    nn = L.nn
    model = fill(L, nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)))
    opt = L.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.01)
    sched = L.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5)
    x = L.tensor(X3.reshape(10, 4))
    y = L.tensor(np.sin(X3.reshape(10, 4).sum(1, keepdims=True)))
    losses = []
    for _ in range(15):
        opt.zero_grad()
        loss = L.F.mse_loss(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses, model[0].weight


@idiom(rtol=1e-5, atol=1e-5)
def causal_self_attention_written_out(L):
    """nanoGPT's attention with its mask buffer: view, transpose, masked_fill, softmax."""
    nn, t = L.nn, L.torch
    b, T, C, H = 2, 6, 8, 2
    c_attn = fill(L, nn.Linear(C, 3 * C), seed=2)
    mask = t.tril(t.ones(T, T, device=L.device)).view(1, 1, T, T)
    x = grad_of(L, QKV[0, 0].reshape(b, T, C))
    q, k, v = c_attn(x).split(C, dim=2)
    q, k, v = (z.view(b, T, H, C // H).transpose(1, 2) for z in (q, k, v))
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    att = att.masked_fill(mask[:, :, :T, :T] == 0, float("-inf"))
    att = L.F.softmax(att, dim=-1)
    y = (att @ v).transpose(1, 2).contiguous().view(b, T, C)
    y.square().sum().backward()
    return y, x.grad, c_attn.weight.grad


@idiom
def tensor_sizes_and_iteration(L):
    x = L.tensor(X3)
    return (x.size(), x.size(-1), x.dim(), x.numel(), len(x), [r.shape for r in x],
            x.new_zeros(2, 3), x.new_ones((2,)).dtype, x.new_tensor([1.0, 2.0]),
            x.new_empty([1, 2]).shape, x.new_full((2,), 7.0),
            x.new_zeros(3, dtype=L.torch.int64), x.new_ones(2, requires_grad=True).requires_grad,
            L.tensor(LABELS).type_as(x).dtype, x.to(L.tensor(LABELS)).dtype,
            x.masked_fill_(x > 0, 0.0).max().item())


@idiom
def functional_embedding_and_dropout_off(L):
    weight = grad_of(L, A)
    idx = L.tensor(np.array([[3, 0], [1, 1]], np.int64))
    out = L.F.embedding(idx, weight)
    out.sum().backward()
    x = L.tensor(A)
    return out, weight.grad, L.F.dropout(x, p=0.5, training=False), \
        L.F.dropout(x, p=0.0).sum().item()


# -- data ------------------------------------------------------------------------------------
@idiom
def tensor_dataset_and_loader(L):
    ds = L.data.TensorDataset(L.tensor(A), L.tensor(np.arange(4, dtype=np.int64)))
    loader = L.data.DataLoader(ds, batch_size=3, shuffle=False)
    batches = [(x, y) for x, y in loader]
    return len(ds), ds[2], len(loader), batches


class Squares:
    """A map-style dataset: any class with __len__ and __getitem__."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"x": np.float32(i) * np.ones(2, np.float32), "y": i * i}


@idiom
def loader_over_a_map_style_dataset(L):
    loader = L.data.DataLoader(Squares(7), batch_size=3, drop_last=True)
    default = [(b["x"], b["y"]) for b in loader]
    pairs = L.data.DataLoader(Squares(5), batch_size=2,
                              collate_fn=lambda items: [it["y"] for it in items])
    return len(loader), default, list(pairs)


@idiom
def loader_shuffle_covers_every_item_once(L):
    ds = L.data.TensorDataset(L.tensor(np.arange(10, dtype=np.float32)))
    loader = L.data.DataLoader(ds, batch_size=4, shuffle=True)
    seen = sorted(float(v) for (batch,) in loader for v in batch.tolist())
    return seen, [len(batch) for (batch,) in loader]


@idiom
def random_split_lengths_and_fractions(L):
    ds = L.data.TensorDataset(L.tensor(np.arange(10, dtype=np.float32)))
    parts = L.data.random_split(ds, [7, 3])
    fractions = L.data.random_split(ds, [0.5, 0.3, 0.2])
    items = sorted(float(parts[i][j][0].item()) for i in range(2) for j in range(len(parts[i])))
    return [len(p) for p in parts], [len(p) for p in fractions], items


# -- the harness -----------------------------------------------------------------------------
def _plain(value):
    """Nested numpy/Python values of an idiom's result, with each tensor's dtype name."""
    if isinstance(value, (hx.Tensor, torch.Tensor)):
        t = value.detach()
        name = t.dtype.name if isinstance(t, hx.Tensor) else str(t.dtype).replace("torch.", "")
        if isinstance(t, hx.Tensor):
            arr = t.cpu().float().numpy() if name in ("bfloat16", "float16") else t.cpu().numpy()
        else:
            arr = t.float().numpy() if name in ("bfloat16", "float16") else t.numpy()
        return ("tensor", name, np.array(arr))
    if isinstance(value, (hx.DType, torch.dtype)):
        return ("dtype", value.name if isinstance(value, hx.DType) else
                str(value).replace("torch.", ""))
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _compare(got, want, rtol, atol, where="result", same_dtype=str.__eq__):
    if isinstance(want, tuple) and want and want[0] in ("tensor", "dtype"):
        assert isinstance(got, tuple) and got[0] == want[0], \
            f"{where}: {got!r}, PyTorch a {want[0]}"
        assert same_dtype(got[1], want[1]), f"{where}: dtype {got[1]}, PyTorch {want[1]}"
        if want[0] == "dtype":
            return
        assert got[2].shape == want[2].shape, f"{where}: shape {got[2].shape}, PyTorch " \
                                              f"{want[2].shape}"
        if want[2].dtype.kind in "fc":
            np.testing.assert_allclose(got[2], want[2], rtol=rtol, atol=atol, err_msg=where)
        else:
            np.testing.assert_array_equal(got[2], want[2], err_msg=where)
    elif isinstance(want, list):
        got = list(got) if isinstance(got, (tuple, list)) else got
        assert isinstance(got, list) and len(got) == len(want), \
            f"{where}: {len(got) if isinstance(got, list) else got!r} items, PyTorch " \
            f"{len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            _compare(g, w, rtol, atol, f"{where}[{i}]", same_dtype)
    elif isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), f"{where}: keys differ"
        for k in want:
            _compare(got[k], want[k], rtol, atol, f"{where}[{k!r}]", same_dtype)
    elif isinstance(want, float) and not isinstance(want, bool):
        assert got == pytest.approx(want, rel=rtol, abs=atol), where
    else:
        assert got == want, f"{where}: {got!r}, PyTorch {want!r}"


@functools.cache
def _reference(name):
    fn = IDIOMS[name][0]
    torch.manual_seed(0)
    return _plain(fn(library("torch")))


def _check(name, device, rtol=0.0, atol=0.0, same_dtype=str.__eq__):
    fn, fn_rtol, fn_atol = IDIOMS[name]
    want = _reference(name)
    hx.manual_seed(0)
    got = _plain(fn(library("haelixe", device)))
    _compare(got, want, max(rtol, fn_rtol), max(atol, fn_atol), name, same_dtype)


def test_the_list_is_long_enough():
    assert len(IDIOMS) >= 60, len(IDIOMS)


@pytest.mark.parametrize("name", list(IDIOMS))
def test_idiom_on_cpu(name):
    _check(name, "cpu")


def _gpu_dtype_rule():
    """Dtype names equal, except that a GPU backend which still stores int64 tensors as
    int32 (and says so) may answer int32 where PyTorch answers int64; once it keeps int64
    this falls back to plain equality by itself."""
    probe = hx.tensor(np.array([1], np.int64), device="gpu").dtype
    if probe is hx.int64:
        return str.__eq__
    return lambda got, want: got == want or (got, want) == ("int32", "int64")


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(IDIOMS))
def test_idiom_on_gpu(be, name):
    try:
        # f32 kernels on the GPU sum in other orders than PyTorch's CPU ones
        _check(name, "gpu", rtol=1e-4, atol=1e-5, same_dtype=_gpu_dtype_rule())
    except TypeError as err:
        if name not in CPU_ONLY or "is not available on the GPU" not in str(err):
            raise
        pytest.skip(f"this GPU lacks a dtype the idiom uses: {err}")


def test_randint_refuses_an_empty_range():
    with pytest.raises(ValueError, match=r"randint: high \(3\) must be greater than low \(3\)"):
        hx.randint(3, 3, (2,))
    with pytest.raises(ValueError, match=r"randint: high \(0\) must be greater than low \(0\)"):
        hx.randint(0, (2,))
