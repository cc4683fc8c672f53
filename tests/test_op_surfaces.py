"""Every declared op is reachable where PyTorch has it, with PyTorch's signature.

For each op of the registry (``OPS``): ``hx.op``, ``x.op``, ``x.op_``, ``F.op`` and the
``nn`` layer, wherever PyTorch has the same surface. A signature is compared with
PyTorch's as ``inspect.signature`` gives it, else as the first line of PyTorch's
docstring writes it (``add(input, other, *, alpha=1, out=None) -> Tensor``), else with
TABLE below. Parameter names, kinds (positional or keyword-only) and defaults must be
the same; ``out=`` and annotations are not compared (Haelixe has no ``out=``).

An elementwise declaration makes all of its surfaces, so none of them may differ. Ops
whose surfaces are still written by hand are held to the same rule, except for the
differences listed in HAND_WRITTEN_DIFFERENCES: that list may only shrink (an entry that
now matches fails here, so it is taken off). So may HAND_WRITTEN_LAYERS, the layers of
torch.nn.functional's functions still written by hand: every other is made from its op's
declaration.
"""

from __future__ import annotations

import ast
import inspect

import pytest

import haelixe as hx
from haelixe.ops.registry import OPS, Elementwise, Fused

torch = pytest.importorskip("torch")
TF = torch.nn.functional
F = hx.nn.functional

#: PyTorch's signatures where neither inspect nor the docstring gives one
TABLE = {
    ("function", "softplus"): "(input, beta=1.0, threshold=20.0)",
    ("functional", "softplus"): "(input, beta=1.0, threshold=20.0)",
    ("function", "clamp_min"): "(input, min)",
    ("function", "clamp_max"): "(input, max)",
    ("method", "clamp_min"): "(self, min)",
    ("method", "clamp_max"): "(self, max)",
    ("inplace", "clamp_min"): "(self, min)",
    ("inplace", "clamp_max"): "(self, max)",
    ("functional", "scaled_dot_product_attention"):  # (its docstring's line is two)
        "(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, "
        "enable_gqa=False)",
    # (self is the input, the second argument: where(condition, self, other))
    ("method", "where"): "(self, condition, other)",
    # (n comes first in the function, polygamma(n, input); the methods take n alone)
    ("method", "polygamma"): "(self, n)",
    ("inplace", "polygamma"): "(self, n)",
    # (the docstring's first line is the overload without dim; dim=None stands for it)
    ("function", "median"): "(input, dim=None, keepdim=False)",
    ("function", "nanmedian"): "(input, dim=None, keepdim=False)",
    ("function", "nansum"): "(input, dim=None, keepdim=False, *, dtype=None)",
    # (the docstring's line is the tensor-and-tensor overload: std=1.0 and size=None with
    # the options of the number-and-number one stand for the four)
    ("function", "normal"): "(mean, std=1.0, size=None, *, generator=None, dtype=None, "
                            "layout=None, device=None, pin_memory=False, requires_grad=False)",
    # (Tensor.normal_ is not torch.normal's method form: its own defaults)
    ("inplace", "normal"): "(self, mean=0, std=1, *, generator=None)",
    # (the docstring's line is the overload without p; p=None stands for it)
    ("function", "bernoulli"): "(input, p=None, *, generator=None)",
    ("inplace", "bernoulli"): "(self, p=0.5, *, generator=None)",
    # (its docstring names them dividend and divisor; it binds input= and other=)
    ("function", "true_divide"): "(input, other)",
    # (the docstring writes bins as required; PyTorch's schema has bins=100, and
    # torch.histogram(x, density=True) runs)
    ("function", "histogram"): "(input, bins=100, *, range=None, weight=None, "
                               "density=False)",
    # (torch.unique_consecutive is (*args, **kwargs); Tensor.unique_consecutive's own)
    ("function", "unique_consecutive"): "(input, return_inverse=False, return_counts=False, "
                                        "dim=None)",
    # (Tensor.put's docstring names input too, Tensor.masked_scatter's source "tensor";
    # both bind these keywords)
    ("method", "put"): "(self, index, source, accumulate=False)",
    ("method", "masked_scatter"): "(self, mask, source)",
    # (its docstring writes split's names; it binds input= and split_size=, an int)
    ("function", "unsafe_split"): "(input, split_size, dim=0)",
    # (torch.lu dispatches on get_infos: inspect sees *args, **kwargs)
    ("function", "lu"): "(A, pivot=True, get_infos=False)",
}
# (F.max_pool*d dispatch on return_indices: inspect sees *args, **kwargs; their docs'
# signature)
TABLE.update({("functional", f"max_pool{d}d"): "(input, kernel_size, stride=None, padding=0, "
              "dilation=1, ceil_mode=False, return_indices=False)" for d in (1, 2, 3)})
TABLE.update({("functional", f"adaptive_max_pool{d}d"): "(input, output_size, "
              "return_indices=False)" for d in (1, 2, 3)})  # (the same dispatch)
TABLE.update({("functional", f"fractional_max_pool{d}d"): "(input, kernel_size, "
              "output_size=None, output_ratio=None, return_indices=False, "
              "_random_samples=None)" for d in (2, 3)})  # (the same dispatch)

#: op -> the surfaces whose hand-written signature still differs from PyTorch's (most:
#: the first argument named x or self where PyTorch says input; some: a keyword-only
#: argument positional, an overload, a missing in-place form). Only ever shrinks.
HAND_WRITTEN_DIFFERENCES = {
    "all": {'function', 'method'},
    "any": {'function', 'method'},
    "argmax": {'function', 'method'},
    "clone": {'function', 'method'},
    "einsum": {'function'},
    "flip": {'function', 'method'},
    "log_softmax": {'functional'},
    "max": {'function', 'method'},
    "mean": {'function', 'method'},
    "min": {'function', 'method'},
    "mse_loss": {'functional'},
    "permute": {'function', 'method'},
    "prod": {'function', 'method'},
    "reshape": {'function', 'method'},
    "scatter": {'function', 'inplace', 'method'},
    "softmax": {'functional'},
    "squeeze": {'function', 'inplace', 'method'},
    "std": {'function', 'method'},
    "sum": {'function', 'method'},
    "to": {'method'},
    "unique": {'function', 'method'},
    "var": {'function', 'method'},
}

IGNORED = {"out"}


def _parse(text: str) -> inspect.Signature:
    """A signature from its text, read with ast (nothing is executed)."""
    fn = ast.parse(f"def f{text}: pass").body[0]
    a = fn.args

    def default(node):
        try:
            return ast.literal_eval(node)
        except ValueError:
            return ast.unparse(node)

    params = []
    positional = a.posonlyargs + a.args
    pos_defaults = [inspect.Parameter.empty] * (len(positional) - len(a.defaults)) + \
        [default(d) for d in a.defaults]
    for arg, d in zip(positional, pos_defaults):
        params.append(inspect.Parameter(arg.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                        default=d))
    if a.vararg:
        params.append(inspect.Parameter(a.vararg.arg, inspect.Parameter.VAR_POSITIONAL))
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        params.append(inspect.Parameter(arg.arg, inspect.Parameter.KEYWORD_ONLY,
                                        default=inspect.Parameter.empty if d is None
                                        else default(d)))
    return inspect.Signature(params)


def torch_signature(surface, name):
    """PyTorch's signature of ``name`` on ``surface``, or None where it has none. A
    method takes what the function form takes (``self`` for ``input``: PyTorch binds
    ``t.mul(other=u)``, though its method docstrings name some arguments otherwise),
    so a method is compared with the function form where PyTorch has both."""
    if (surface, name) in TABLE:
        return _parse(TABLE[surface, name])
    if surface in ("method", "inplace") and \
            getattr(torch.Tensor, name + "_" if surface == "inplace" else name, None) \
            is not None:
        function = torch_signature("function", name)
        if function is not None:
            return function
    owner = {"function": torch, "method": torch.Tensor, "inplace": torch.Tensor,
             "functional": TF}[surface]
    attr = name + "_" if surface == "inplace" else name
    fn = getattr(owner, attr, None)
    if fn is None:
        return None
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        pass
    first = (fn.__doc__ or "").strip().split("\n", 1)[0]
    if first.startswith(attr + "(") and ") ->" in first:
        sig = _parse(first[len(attr):first.rindex(") ->") + 1])
        if surface in ("method", "inplace"):  # the docstring leaves self out
            sig = sig.replace(parameters=[inspect.Parameter(
                "self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                *sig.parameters.values()])
        return sig
    return None


def comparable(sig: inspect.Signature, method: bool):
    """(name, kind, default) per parameter, ``out`` left out; a method's first
    parameter (self, or the input it stands for) left out too."""
    params = [p for p in sig.parameters.values() if p.name not in IGNORED]
    # numpy's axis= alias, keyword-only: PyTorch's reductions take it too, though the
    # signature text they publish leaves it out
    params = [p for p in params
              if not (p.name == "axis" and p.kind is inspect.Parameter.KEYWORD_ONLY)]
    if method:
        params = params[1:]
    out = []
    for p in params:
        d = p.default
        if isinstance(d, bool) or d is None or d is inspect.Parameter.empty:
            pass
        elif isinstance(d, (int, float)):
            d = float(d)  # (PyTorch writes beta=1 where the value is a float)
        out.append((p.name, p.kind, d))
    return out


def without_extras(decl, sig: inspect.Signature) -> inspect.Signature:
    """``sig`` without the parameters a fused declaration names as Haelixe's own
    (``extra=``: F.linear's activation), each of which must have a default and come
    after PyTorch's, so that every PyTorch call binds as it does there."""
    extra = getattr(decl, "extra", ())
    params = list(sig.parameters.values())
    for p in params:
        if p.name in extra:
            assert p.default is not inspect.Parameter.empty, f"{decl.name}: {p.name} " \
                f"(Haelixe's own) needs a default"
    return sig.replace(parameters=[p for p in params if p.name not in extra])


def haelixe_surface(surface, name):
    if surface == "function":
        return getattr(hx, name, None)
    if surface == "method":
        return getattr(hx.Tensor, name, None)
    if surface == "inplace":
        return getattr(hx.Tensor, name + "_", None)
    return getattr(F, name, None)


def _public(decl) -> bool:
    return decl.name in hx.__dict__ or hasattr(hx.Tensor, decl.name) or \
        hasattr(F, decl.name)


CASES = [(surface, name) for name, decl in sorted(OPS.items()) if _public(decl)
         for surface in ("function", "method", "inplace", "functional")
         if torch_signature(surface, name) is not None]


@pytest.mark.parametrize("surface,name", CASES, ids=[f"{s}-{n}" for s, n in CASES])
def test_each_declared_op_has_pytorchs_surfaces_and_signatures(surface, name):
    ours = haelixe_surface(surface, name)
    label = {"function": f"hx.{name}", "method": f"Tensor.{name}",
             "inplace": f"Tensor.{name}_", "functional": f"F.{name}"}[surface]
    if isinstance(OPS[name], Elementwise) and OPS[name].dtypes == "compare" and \
            surface == "inplace":
        pytest.skip("comparisons have no in-place form that keeps the dtype")
    if ours is None and surface in HAND_WRITTEN_DIFFERENCES.get(name, ()):
        return  # (a missing in-place form, listed)
    assert ours is not None, f"{label} is missing (PyTorch has it)"
    want = comparable(torch_signature(surface, name), surface in ("method", "inplace"))
    got = comparable(without_extras(OPS[name], inspect.signature(ours)),
                     surface in ("method", "inplace"))
    differs = got != want
    if surface in HAND_WRITTEN_DIFFERENCES.get(name, ()):
        assert not isinstance(OPS[name], Elementwise), \
            f"{label}: an elementwise declaration makes its surfaces; none may differ"
        assert ours is None or differs, \
            f"{label} now matches PyTorch: take it off HAND_WRITTEN_DIFFERENCES"
        return
    assert not differs, f"{label}{inspect.signature(ours)} differs from PyTorch's {want}"
    if isinstance(OPS[name], Elementwise):
        assert (ours.__doc__ or "").strip(), f"{label} has no docstring"


def _layer_name(name):
    """PyTorch's nn layer for an op name (leaky_relu -> LeakyReLU), or None."""
    flat = name.replace("_", "")
    return next((c for c in dir(torch.nn) if c.lower() == flat and
                 isinstance(getattr(torch.nn, c), type)), None)


ELEMENTWISE_LAYERS = sorted(n for n, d in OPS.items() if isinstance(d, Elementwise)
                            and _public(d) and _layer_name(n))


#: constructor arguments of the layers whose PyTorch constructor requires some
LAYER_ARGS = {"Threshold": (-0.25, 7.5)}


@pytest.mark.parametrize("name", ELEMENTWISE_LAYERS)
def test_each_elementwise_op_with_a_pytorch_layer_has_that_layer_from_its_declaration(name):
    cls_name = _layer_name(name)
    decl = OPS[name]
    assert decl.module == cls_name, f"declare {name} with module={cls_name!r}"
    ours = getattr(hx.nn, cls_name)
    theirs = getattr(torch.nn, cls_name)
    # (a layer with no parameters keeps Module's __init__(self, *args, **kwargs))
    want = inspect.signature(theirs.__init__) if "__init__" in theirs.__dict__ else \
        inspect.Signature([inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)])
    # (PyTorch's Hardtanh also takes the deprecated min_value / max_value)
    want = want.replace(parameters=[p for p in want.parameters.values()
                                    if p.name not in ("min_value", "max_value")])
    assert comparable(inspect.signature(ours.__init__), True) == comparable(want, True)
    assert ours.forward.__qualname__ == f"{cls_name}.forward"
    x = hx.tensor([[-2.0, -0.5, 0.0, 0.5, 3.0]])
    t = torch.tensor([[-2.0, -0.5, 0.0, 0.5, 3.0]])
    args = LAYER_ARGS.get(cls_name, ())
    got = ours(*args)(x).numpy()
    expected = theirs(*args)(t).numpy()
    assert abs(got - expected).max() < 1e-6
    assert repr(ours(*args)) == repr(theirs(*args))


def _declared_layers(decl) -> tuple:
    """The names of the layers a declaration makes (none for a plain declaration)."""
    return tuple(spec.name for spec in getattr(decl, "layers", ()))


#: declared ops (not elementwise) whose nn layer's __init__ still differs from PyTorch's.
#: Only ever shrinks (empty now: kept so that a new difference is a deliberate entry).
LAYER_DIFFERENCES: set = set()
#: (op, layer) for every layer of a declared op that is not elementwise: the ones its
#: declaration makes, else PyTorch's layer named after it
OTHER_LAYERS = sorted((n, c) for n, d in OPS.items() if not isinstance(d, Elementwise)
                      and _public(d)
                      for c in _declared_layers(d) or filter(None, [_layer_name(n)]))


@pytest.mark.parametrize("name,cls_name", OTHER_LAYERS,
                         ids=[f"{n}-{c}" for n, c in OTHER_LAYERS])
def test_each_other_op_with_a_pytorch_layer_has_that_layer_with_its_signature(name,
                                                                               cls_name):
    decl = OPS[name]
    ours = getattr(hx.nn, cls_name, None)
    assert ours is not None, f"nn.{cls_name} is missing (PyTorch has it)"
    want = comparable(inspect.signature(getattr(torch.nn, cls_name).__init__), True)
    got = comparable(without_extras(decl, inspect.signature(ours.__init__)), True)
    differs = got != want
    if name in LAYER_DIFFERENCES:
        assert differs, f"nn.{cls_name} now matches PyTorch: take {name} off the list"
    else:
        assert not differs, f"nn.{cls_name}{inspect.signature(ours.__init__)} differs " \
                            f"from PyTorch's {want}"


FUSED = sorted(n for n, d in OPS.items() if isinstance(d, Fused))


#: fused ops whose PyTorch layers are not named after them: nn.Upsample's forward is
#: F.interpolate (F.upsample is its deprecated alias); F.pad's are the layers of
#: torch.nn.modules.padding, as PyTorch lists them; nn.Softmax2d is F.softmax over the
#: channels
LAYER_OF = {"interpolate": ("Upsample",), "softmax": ("Softmax", "Softmax2d"),
            "pad": tuple(torch.nn.modules.padding.__all__)}


def _pytorch_layers_of(name) -> tuple:
    """PyTorch's nn layers of a fused op: (RMSNorm,) for rms_norm, (MSELoss,) for
    mse_loss, (CrossEntropyLoss,) for cross_entropy; () where it has none (attention)."""
    if name in LAYER_OF:
        return LAYER_OF[name]
    one = _layer_name(name) or _layer_name(name + "_loss")
    return (one,) if one else ()


@pytest.mark.parametrize("name", FUSED)
def test_each_fused_declaration_makes_its_functional_form_and_layer(name):
    decl = OPS[name]
    # F.op is the declared function itself (no hand-written twin beside it)
    assert getattr(F, name, None) is decl.form, f"F.{name} is not its declaration's form"
    assert torch_signature("functional", name) is not None, \
        f"F.{name}: PyTorch has no such function (declare Haelixe's own ops with declare)"
    assert F.__dict__[name].__doc__.startswith(f"{name}("), f"F.{name}: no signature line"
    for extra in decl.extra:  # (after PyTorch's own: a PyTorch call binds as there)
        names = list(decl.signature.parameters)
        assert names.index(extra) >= len(names) - len(decl.extra), \
            f"F.{name}: {extra} (Haelixe's own) must come after PyTorch's parameters"
    theirs = _pytorch_layers_of(name)
    declared = _declared_layers(decl)
    assert len(set(declared)) == len(declared), f"{name}: a layer declared twice"
    assert sorted(declared) == sorted(theirs), \
        f"declare {name} with layer=Layer(...) for each of PyTorch's nn.{list(theirs)}, " \
        f"not {list(declared)}"
    for cls_name in theirs:
        ours = getattr(hx.nn, cls_name)
        assert ours.__module__ == "haelixe.nn.fused_layers", \
            f"nn.{cls_name} is written by hand; make it from {name}'s declaration"
        assert ours.forward.__qualname__ == f"{cls_name}.forward"
        assert (ours.__doc__ or "").strip()


#: hx.nn layers that are PyTorch's layer of a torch.nn.functional function and are still
#: written by hand (state logic of their own, or an op not declared with its layer yet).
#: Only ever shrinks: every other such layer is made from its op's declaration.
HAND_WRITTEN_LAYERS = {"Embedding", "Unfold"}
#: where the layers made from declarations are (fused ops', elementwise ops')
GENERATED_IN = ("haelixe.nn.fused_layers", "haelixe.nn.activations")


def test_the_layers_of_functional_forms_are_made_from_their_declarations():
    # (from hx.nn's side: a layer written by hand again, its declaration gone with it,
    # is no longer among the fused declarations the test above reads)
    layers = {c for name in dir(TF) if not name.startswith("_")
              for c in _pytorch_layers_of(name)}
    ours = {name: getattr(hx.nn, name) for name in layers if hasattr(hx.nn, name)}
    written = {name for name, cls in ours.items() if cls.__module__ not in GENERATED_IN}
    assert not written - HAND_WRITTEN_LAYERS, \
        f"nn.{sorted(written - HAND_WRITTEN_LAYERS)} written by hand; make each from its " \
        f"op's declaration (@fused(..., layer=Layer(...)), ops/registry.py)"
    assert not HAND_WRITTEN_LAYERS - written, \
        f"{sorted(HAND_WRITTEN_LAYERS - written)} are made from declarations now: take " \
        f"them off HAND_WRITTEN_LAYERS"


def test_a_fused_layer_runs_its_functional_form_with_its_attributes():
    import numpy as np

    a = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    x, t = hx.tensor(a), torch.tensor(a)
    for ours, theirs in ((hx.nn.RMSNorm(4, eps=1e-3), torch.nn.RMSNorm(4, eps=1e-3)),
                         (hx.nn.LayerNorm((3, 4)), torch.nn.LayerNorm((3, 4))),
                         (hx.nn.LayerNorm(4, bias=False), torch.nn.LayerNorm(4, bias=False))):
        assert repr(ours) == repr(theirs)
        assert [n for n, _ in ours.named_parameters()] == \
            [n for n, _ in theirs.named_parameters()]
        np.testing.assert_allclose(ours(x).detach().numpy(), theirs(t).detach().numpy(),
                                   atol=1e-5)
    lin, tlin = hx.nn.Linear(4, 2, dtype=hx.float64), torch.nn.Linear(4, 2, dtype=torch.float64)
    assert lin.weight.dtype is hx.float64 and repr(lin) == repr(tlin)
    with torch.no_grad():
        tlin.weight.copy_(torch.tensor(lin.weight.detach().numpy()))
        tlin.bias.copy_(torch.tensor(lin.bias.detach().numpy()))
    np.testing.assert_allclose(lin(x.double()).detach().numpy(),
                               tlin(t.double()).detach().numpy(), rtol=1e-12)
    assert repr(hx.nn.Linear(4, 2, activation="gelu")).endswith("activation='gelu')")
    w = hx.tensor([1.0, 2.0, 0.5, 1.0])
    loss = hx.nn.CrossEntropyLoss(weight=w, label_smoothing=0.1)
    assert list(loss.state_dict()) == ["weight"]
    target = hx.tensor([[0, 1, 2], [3, 0, 1]])
    want = torch.nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5, 1.0]),
                                     label_smoothing=0.1)(t.permute(0, 2, 1),
                                                          torch.tensor(target.numpy()))
    np.testing.assert_allclose(loss(x.permute(0, 2, 1), target).item(), want.item(),
                               rtol=1e-6)
    with pytest.raises(TypeError, match="size_average and reduce are deprecated"):
        hx.nn.CrossEntropyLoss(size_average=False)


#: generated layers beside PyTorch's, built with the same arguments: (ours, theirs, the
#: attributes both hold, inputs as arrays)
def _layers_beside_pytorchs():
    import numpy as np

    r = np.random.default_rng(3)
    image = r.standard_normal((2, 4, 3, 5)).astype(np.float32)
    columns = r.standard_normal((2, 8, 8)).astype(np.float32)
    return [
        (hx.nn.GroupNorm(2, 4, eps=1e-3), torch.nn.GroupNorm(2, 4, eps=1e-3),
         ("num_groups", "num_channels", "eps", "affine"), (image,)),
        (hx.nn.GroupNorm(4, 4, affine=False), torch.nn.GroupNorm(4, 4, affine=False),
         ("num_groups", "num_channels", "eps", "affine"), (image,)),
        (hx.nn.GroupNorm(1, 4, bias=False), torch.nn.GroupNorm(1, 4, bias=False),
         ("num_groups", "num_channels", "eps", "affine"), (image,)),
        (hx.nn.Fold((3, 5), 2), torch.nn.Fold((3, 5), 2),
         ("output_size", "kernel_size", "dilation", "padding", "stride"), (columns,)),
        (hx.nn.Fold(4, (2, 2), padding=1, stride=2), torch.nn.Fold(4, (2, 2), padding=1,
                                                                   stride=2),
         ("output_size", "kernel_size", "dilation", "padding", "stride"),
         (columns[:, :, :1].repeat(9, 2),)),
        (hx.nn.Upsample(scale_factor=2), torch.nn.Upsample(scale_factor=2),
         ("size", "scale_factor", "mode", "align_corners", "recompute_scale_factor"), (image,)),
        (hx.nn.Upsample(size=(4, 7), mode="bilinear", align_corners=True),
         torch.nn.Upsample(size=(4, 7), mode="bilinear", align_corners=True),
         ("size", "scale_factor", "mode", "align_corners", "recompute_scale_factor"), (image,)),
        (hx.nn.Upsample(scale_factor=(1.5, 2), recompute_scale_factor=True),
         torch.nn.Upsample(scale_factor=(1.5, 2), recompute_scale_factor=True),
         ("size", "scale_factor", "mode", "align_corners", "recompute_scale_factor"), (image,)),
    ]


def test_the_generated_layers_hold_and_show_what_pytorchs_do():
    import numpy as np

    for ours, theirs, attributes, arrays in _layers_beside_pytorchs():
        what = repr(theirs)
        assert type(ours).__module__ == "haelixe.nn.fused_layers", what
        assert repr(ours) == repr(theirs)
        for name in attributes:
            assert getattr(ours, name) == getattr(theirs, name), f"{what}.{name}"
        assert [n for n, _ in ours.named_parameters()] == \
            [n for n, _ in theirs.named_parameters()], what
        assert list(ours.state_dict()) == list(theirs.state_dict()), what
        xs = [hx.tensor(a, requires_grad=True) for a in arrays]
        ts = [torch.tensor(a, requires_grad=True) for a in arrays]
        got, want = ours(*xs), theirs(*ts)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), atol=1e-5,
                                   err_msg=what)
        got.square().sum().backward()
        want.square().sum().backward()
        for x, t in zip(xs, ts):
            np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), atol=1e-4,
                                       err_msg=what)
        for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), atol=1e-4,
                                       err_msg=f"{what}.{name}")


def test_group_norm_makes_its_parameters_as_the_other_norms_do():
    grouped = hx.nn.GroupNorm(2, 4, dtype=hx.float64)
    assert grouped.weight.dtype is hx.float64 and grouped.bias.dtype is hx.float64
    with pytest.raises(ValueError, match="num_channels \\(4\\) must be divisible"):
        hx.nn.GroupNorm(3, 4)
    with pytest.raises(TypeError, match="only floating dtypes"):
        hx.nn.GroupNorm(2, 4, dtype=hx.int64)


def test_the_generated_loss_layers_hold_and_show_what_they_did():
    import numpy as np

    r = np.random.default_rng(4)
    a, b = (r.standard_normal((5, 3)).astype(np.float32) for _ in range(2))
    logp = np.log(r.dirichlet(np.ones(3), 5)).astype(np.float32)
    classes = np.array([0, 2, 1, 1, 0])
    w = np.array([0.5, 2.0, 1.0], np.float32)
    cases = [  # (ours, theirs, the repr Haelixe's shows, the inputs)
        (hx.nn.L1Loss(), torch.nn.L1Loss(), "L1Loss(reduction='mean')", (a, b)),
        (hx.nn.L1Loss(reduction="sum"), torch.nn.L1Loss(reduction="sum"),
         "L1Loss(reduction='sum')", (a, b)),
        (hx.nn.SmoothL1Loss(beta=0.5), torch.nn.SmoothL1Loss(beta=0.5),
         "SmoothL1Loss(reduction='mean', beta=0.5)", (a, b)),
        (hx.nn.HuberLoss("none", 0.3), torch.nn.HuberLoss("none", 0.3),
         "HuberLoss(reduction='none', delta=0.3)", (a, b)),
        (hx.nn.NLLLoss(), torch.nn.NLLLoss(), "NLLLoss(reduction='mean', ignore_index=-100)",
         (logp, classes)),
        (hx.nn.NLLLoss(weight=hx.tensor(w), ignore_index=1, reduction="sum"),
         torch.nn.NLLLoss(weight=torch.tensor(w), ignore_index=1, reduction="sum"),
         "NLLLoss(reduction='sum', ignore_index=1)", (logp, classes)),
    ]
    for ours, theirs, shown, arrays in cases:
        assert type(ours).__module__ == "haelixe.nn.fused_layers", shown
        # (PyTorch's loss layers show nothing: NLLLoss(); Haelixe's show their options)
        assert repr(ours) == shown
        assert ours.reduction == theirs.reduction
        for name in ("beta", "delta", "ignore_index"):
            assert getattr(ours, name, None) == getattr(theirs, name, None), shown
        assert list(ours.state_dict()) == list(theirs.state_dict()), shown
        assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
        x = hx.tensor(arrays[0], requires_grad=True)
        t = torch.tensor(arrays[0], requires_grad=True)
        got, want = ours(x, hx.tensor(arrays[1])), theirs(t, torch.tensor(arrays[1]))
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5,
                                   err_msg=shown)
        got.sum().backward()
        want.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-7,
                                   err_msg=shown)
    weighted = hx.nn.NLLLoss(weight=hx.tensor(w)).double()
    assert weighted.weight.dtype is hx.float64 and list(weighted.state_dict()) == ["weight"]
    assert hx.nn.NLLLoss().weight is None and list(hx.nn.NLLLoss().state_dict()) == []


def test_the_loss_layers_and_functions_take_pytorchs_legacy_positions():
    import numpy as np

    r = np.random.default_rng(5)
    x, y = (hx.tensor(r.standard_normal((4, 3)).astype(np.float32)) for _ in range(2))
    # a reduction passed third, where PyTorch's deprecated size_average sits, is the
    # reduction: F.l1_loss(x, y, 'sum'), nn.L1Loss('sum')
    for fn in (F.l1_loss, F.smooth_l1_loss):
        assert fn(x, y, "sum").item() == fn(x, y, reduction="sum").item()
    assert hx.nn.L1Loss("none").reduction == "none"
    assert hx.nn.SmoothL1Loss("sum").reduction == "sum"
    deprecated = "size_average and reduce are deprecated"
    for make in (lambda: hx.nn.L1Loss(size_average=True), lambda: hx.nn.NLLLoss(reduce=False),
                 lambda: hx.nn.SmoothL1Loss("sum", 0.5),
                 lambda: F.l1_loss(x, y, size_average=False),
                 lambda: F.smooth_l1_loss(x, y, reduce=False),
                 lambda: F.nll_loss(x.log_softmax(1), hx.tensor([0, 1, 2, 0]), None, True)):
        with pytest.raises(TypeError, match=deprecated):
            make()


def test_l1_and_huber_loss_take_pytorchs_per_element_weight():
    import numpy as np

    r = np.random.default_rng(6)
    a, b = (r.standard_normal((4, 3)) for _ in range(2))
    w = r.random((4, 3))
    for name in ("l1_loss", "huber_loss"):
        for reduction in ("mean", "sum", "none"):
            x, t = hx.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
            got = getattr(F, name)(x, hx.tensor(b), reduction=reduction, weight=hx.tensor(w))
            want = getattr(TF, name)(t, torch.tensor(b), reduction=reduction,
                                     weight=torch.tensor(w))
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(),
                                       rtol=1e-12, err_msg=f"{name} {reduction}")
            got.sum().backward()
            want.sum().backward()
            np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12,
                                       err_msg=f"{name} {reduction}")
        with pytest.raises(ValueError, match="must have the input's shape"):
            getattr(F, name)(hx.tensor(a), hx.tensor(b), weight=hx.ones(3))
        with pytest.raises(TypeError, match="weight must be a tensor"):
            getattr(F, name)(hx.tensor(a), hx.tensor(b), weight=w)
    assert hx.nn.L1Loss().weight is None and hx.nn.HuberLoss().weight is None


#: layers made from the declarations of ops that keep no state, each with constructor
#: arguments (positional, as PyTorch's docs give them)
STATELESS_LAYERS = [("GELU", ()), ("GELU", ("tanh",)), ("ReLU6", ()), ("ReLU6", (True,)),
                    ("Softmax", ()), ("Softmax", (1,)), ("Softmin", (-1,)),
                    ("LogSoftmax", (0,)), ("Dropout", ()), ("Dropout", (0.2, True)),
                    ("Dropout2d", (0.0,)), ("Dropout2d", (0.3, True))]


@pytest.mark.parametrize("name,args", STATELESS_LAYERS,
                         ids=[f"{n}{a}" for n, a in STATELESS_LAYERS])
def test_a_stateless_layer_made_from_its_declaration_is_pytorchs_layer(name, args):
    ours, theirs = getattr(hx.nn, name), getattr(torch.nn, name)
    assert ours.__module__ == "haelixe.nn.fused_layers"
    want = inspect.signature(theirs.__init__)
    assert comparable(inspect.signature(ours.__init__), True) == comparable(want, True)
    keywords = dict(zip(list(want.parameters)[1:], args))
    for layer, reference in ((ours(*args), theirs(*args)),
                             (ours(**keywords), theirs(**keywords))):
        assert repr(layer) == repr(reference)
        assert not layer.state_dict() and not list(layer.parameters())
        assert not list(layer.buffers())


#: (not the dropouts, random, nor a softmax without its dim, which it refuses: below)
DETERMINISTIC_LAYERS = [(n, a) for n, a in STATELESS_LAYERS
                        if not n.startswith("Dropout") and (n, a) != ("Softmax", ())]


@pytest.mark.parametrize("name,args", DETERMINISTIC_LAYERS,
                         ids=[f"{n}{a}" for n, a in DETERMINISTIC_LAYERS])
def test_a_stateless_layer_computes_pytorchs_values_and_gradients(name, args):
    import numpy as np

    rng = np.random.default_rng(4)
    a, g = rng.standard_normal((2, 3, 4)) * 4, rng.standard_normal((2, 3, 4))
    x, t = hx.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, w = getattr(hx.nn, name)(*args)(x * 1.0), getattr(torch.nn, name)(*args)(t * 1.0)
    np.testing.assert_allclose(y.detach().numpy(), w.detach().numpy(), rtol=1e-12,
                               atol=1e-14)
    y.backward(hx.tensor(g))
    w.backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_the_functional_forms_of_the_stateless_layers_bind_pytorchs_keywords():
    import numpy as np

    a = np.linspace(-8.0, 8.0, 12).reshape(3, 4)
    x, t = hx.tensor(a), torch.tensor(a)
    pairs = [(F.gelu(input=x, approximate="tanh"), TF.gelu(input=t, approximate="tanh")),
             (F.relu6(input=x), TF.relu6(input=t)),
             (F.softmin(input=x, dim=0), TF.softmin(input=t, dim=0)),
             (F.dropout(input=x, p=0.5, training=False), TF.dropout(input=t, p=0.5,
                                                                    training=False))]
    for got, want in pairs:
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)
    y = x.clone()
    assert hx.nn.ReLU6(inplace=True)(y) is y and y.numpy().max() == 6.0


@pytest.mark.parametrize("make,expected", [
    (lambda: hx.nn.GELU("none", 2), "GELU(): too many positional arguments"),
    (lambda: hx.nn.Linear(3), "Linear(): missing a required argument: 'out_features'"),
    (lambda: hx.nn.MaxPool2d(2, strid=1), "MaxPool2d(): got an unexpected keyword"),
])
def test_a_generated_layer_called_with_wrong_arguments_names_itself_and_its_signature(
        make, expected):
    with pytest.raises(TypeError) as info:
        make()
    message = str(info.value)
    assert message.startswith(expected)
    name = expected.split("(")[0]
    assert f"signature: {name}(" in message and "_layer" not in message


@pytest.mark.parametrize("name", ["Softmax", "Softmin", "LogSoftmax"])
def test_a_softmax_layer_made_without_a_dim_asks_for_one(name):
    with pytest.raises(ValueError, match=rf"^{name}: pass dim= \(the dim to normalise "
                                         rf"over\); for input of shape \(2, 3\) it is "
                                         rf"usually -1$"):
        getattr(hx.nn, name)()(hx.ones(2, 3))


@pytest.mark.parametrize("name,shape", [("Dropout", (40, 50)), ("Dropout2d", (8, 50, 2, 2))])
def test_a_dropout_layer_drops_while_training_and_passes_its_input_in_eval(name, shape):
    import numpy as np

    layer, dropout = getattr(hx.nn, name)(0.25), getattr(F, name.lower())
    x = hx.ones(*shape)
    hx.manual_seed(3)
    y = layer(x).numpy()
    hx.manual_seed(3)
    np.testing.assert_array_equal(y, dropout(x, 0.25, True).numpy())  # (the same draws)
    assert np.isin(y, [0.0, np.float32(1.0 / 0.75)]).all()  # zeroed, or scaled by 1/(1-p)
    assert 0.15 < (y == 0).mean() < 0.35
    assert layer.eval()(x) is x and not layer.training
    assert layer.train()(x) is not x
    target = hx.ones(*shape)
    assert getattr(hx.nn, name)(0.5, inplace=True)(target) is target
    assert (target.numpy() == 0).any()
    with pytest.raises(ValueError, match=r"^Dropout: p must be in \[0, 1\], got 1.5$"):
        getattr(hx.nn, name)(1.5)


def test_keywords_reach_every_surface_of_a_declared_op():
    x = hx.tensor([-30.0, -1.0, 2.0])
    t = torch.tensor([-30.0, -1.0, 2.0])
    pairs = [
        (hx.softplus(x, beta=2.0), TF.softplus(t, beta=2.0)),
        (F.softplus(x, beta=2.0, threshold=10.0), TF.softplus(t, beta=2.0, threshold=10.0)),
        (x.leaky_relu(negative_slope=0.1), TF.leaky_relu(t, negative_slope=0.1)),
        (F.hardtanh(x, min_val=-0.5, max_val=1.5), TF.hardtanh(t, min_val=-0.5, max_val=1.5)),
        (hx.nn.LeakyReLU(negative_slope=0.2)(x), torch.nn.LeakyReLU(negative_slope=0.2)(t)),
        (hx.pow(x, exponent=2), torch.pow(t, exponent=2)),
        (x.mul(other=x), t.mul(other=t)),
    ]
    for got, want in pairs:
        assert abs(got.numpy() - want.numpy()).max() <= 1e-6 * (1 + abs(want.numpy()).max())
    # beta=2 at x=-30: log1p(exp(-60)) / 2, PyTorch's 4.38e-27 (not 0)
    assert abs(F.softplus(x, beta=2.0).numpy()[0] - 4.3782e-27) < 1e-30
    y = x.clone()
    assert y.leaky_relu_(negative_slope=0.5) is y and y.numpy()[1] == -0.5
    z = x.clone()
    assert F.leaky_relu(z, 0.5, inplace=True) is z and z.numpy()[1] == -0.5
    with pytest.raises(TypeError, match="unexpected keyword argument 'slope'"):
        x.leaky_relu(slope=0.1)
    with pytest.raises(TypeError, match="takes 2 positional arguments"):
        hx.leaky_relu(x, 0.1, 0.2)


def test_the_signature_reader_reads_pytorchs_docstring_lines():
    sig = _parse("(input, other, *, alpha=1, out=None)")
    assert comparable(sig, False) == [
        ("input", inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.empty),
        ("other", inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.empty),
        ("alpha", inspect.Parameter.KEYWORD_ONLY, 1.0)]
    assert comparable(torch_signature("method", "add"), True) == comparable(sig, False)[1:]


def test_pytorch_style_keyword_calls_bind_and_agree_with_pytorch():
    import numpy as np
    a = np.arange(12, dtype=np.float64).reshape(3, 4) - 5
    x, t = hx.tensor(a), torch.tensor(a)
    i, ti = hx.tensor([[0, 2, 1]]), torch.tensor([[0, 2, 1]])
    pairs = [
        (hx.sum(input=x, dim=1), torch.sum(input=t, dim=1)),
        (hx.amax(input=x, dim=0), torch.amax(input=t, dim=0)),
        (hx.transpose(input=x, dim0=0, dim1=1), torch.transpose(input=t, dim0=0, dim1=1)),
        (hx.matmul(input=x, other=x.T), torch.matmul(input=t, other=t.T)),
        (hx.gather(input=x, dim=1, index=i.expand(3, 3)),
         torch.gather(input=t, dim=1, index=ti.expand(3, 3))),
        (hx.topk(x, 2).values, torch.topk(t, 2).values),  # (dim None: the last)
        (hx.norm(input=x.float(), dtype=hx.float64),
         torch.norm(input=t.float(), dtype=torch.float64)),
        (hx.cumsum(input=x, dim=1, dtype=hx.float32),
         torch.cumsum(input=t, dim=1, dtype=torch.float32)),
        (hx.sort(input=x, dim=0, stable=True).indices,
         torch.sort(input=t, dim=0, stable=True).indices),
    ]
    for ours, theirs in pairs:
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)
    assert hx.norm(x.float(), dtype=hx.float64).dtype is hx.float64
    with pytest.raises(TypeError, match="norm: input dtype float64 cannot be cast"):
        hx.norm(x, dtype=hx.float32)  # (narrowing: PyTorch refuses it too)
    with pytest.raises(TypeError, match="gather: sparse_grad=True"):
        hx.gather(x, 1, i, sparse_grad=True)
    with pytest.raises(TypeError):  # (keyword-only, as PyTorch)
        hx.cumsum(x, 1, hx.float32)


#: elementwise ops whose hx.op, x.op or x.op_ is written by hand in front of the
#: generated one: a PyTorch keyword the declaration cannot carry yet (add's and sub's
#: alpha, div's rounding_mode, round's decimals), pow's bool and negative-integer cases,
#: where's condition first. Only ever shrinks.
HAND_WRITTEN_FRONTS = {"add", "sub", "div", "pow", "round", "where"}


def test_elementwise_surfaces_are_the_generated_fronts():
    from haelixe.ops.registry import FUNCTIONS

    # (a declaration without a method, as threshold, PyTorch's Tensor lacks, has the
    # function form alone)
    method_less = {n for n, d in OPS.items() if isinstance(d, Elementwise)
                   and n in FUNCTIONS and not hasattr(hx.Tensor, n)}
    assert method_less == {"threshold"}
    wrapped = {n for n, d in OPS.items() if isinstance(d, Elementwise) and n not in
               method_less and (getattr(hx.Tensor, n, None) is not FUNCTIONS.get(n) or
                                (d.inplace is not None and
                                 getattr(hx.Tensor, n + "_") is not d.inplace))}
    assert wrapped == HAND_WRITTEN_FRONTS
