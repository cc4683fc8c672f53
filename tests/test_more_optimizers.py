"""RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, Rprop and ASGD step for step against
PyTorch: hyperparameter settings, groups, parameters without a gradient, state dicts (their
own round trip and PyTorch's), argument errors, BF16 parameters and the GPU."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import haelixe as hx

torch = pytest.importorskip("torch")

# id -> (optimizer, keyword arguments)
CASES = {
    "rmsprop": ("RMSprop", dict()),
    "rmsprop_wd_momentum": ("RMSprop", dict(lr=0.01, alpha=0.9, weight_decay=0.1,
                                            momentum=0.9)),
    "rmsprop_centered_max": ("RMSprop", dict(centered=True, momentum=0.5, maximize=True)),
    "adagrad": ("Adagrad", dict(lr=0.1)),
    "adagrad_decay_wd": ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1,
                                         initial_accumulator_value=0.3)),
    "adagrad_max": ("Adagrad", dict(lr=0.05, maximize=True, eps=1e-6)),
    "adadelta": ("Adadelta", dict()),
    "adadelta_wd_max": ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1, maximize=True)),
    "adamax": ("Adamax", dict(lr=0.02)),
    "adamax_wd_max": ("Adamax", dict(lr=0.02, betas=(0.8, 0.99), weight_decay=0.1,
                                     maximize=True)),
    "nadam": ("NAdam", dict(lr=0.02)),
    "nadam_l2": ("NAdam", dict(lr=0.02, weight_decay=0.1, momentum_decay=0.01)),
    "nadam_decoupled_max": ("NAdam", dict(lr=0.02, weight_decay=0.1,
                                          decoupled_weight_decay=True, maximize=True)),
    "radam": ("RAdam", dict(lr=0.02)),
    "radam_l2": ("RAdam", dict(lr=0.02, betas=(0.8, 0.9), weight_decay=0.1)),
    "radam_decoupled_max": ("RAdam", dict(lr=0.02, weight_decay=0.1,
                                          decoupled_weight_decay=True, maximize=True)),
    "rprop": ("Rprop", dict()),
    "rprop_etas_max": ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2),
                                     maximize=True)),
    # (t0=8: the averaging starts within the 20 steps)
    "asgd": ("ASGD", dict(lr=0.05)),
    "asgd_wd_t0_max": ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.6, t0=8, weight_decay=0.1,
                                    maximize=True)),
}
NAMES = ("RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "Rprop", "ASGD")
SHAPES = {"w": (3, 4), "b": (4,), "frozen": (2,)}
RNG = np.random.default_rng(0)
INIT = {k: RNG.standard_normal(s) for k, s in SHAPES.items()}
SCALE = {k: RNG.uniform(0.5, 2.0, s) for k, s in SHAPES.items()}
TARGET = {k: RNG.standard_normal(s) for k, s in SHAPES.items()}


def _grad(name, value, step):
    """The gradient of a quadratic with a wobble (so it changes sign), the same for
    both libraries."""
    return SCALE[name] * (value - TARGET[name]) + 0.3 * np.sin(3.0 * value + step)


@contextlib.contextmanager
def _torch_dtype(dtype):
    # torch keeps NAdam's mu_product in its default dtype
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64 if dtype == np.float64 else torch.float32)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


class Run:
    """One optimizer over the parameters of SHAPES in one library."""

    def __init__(self, lib, name, kwargs, dtype=np.float64, groups=False, device="cpu",
                 init=None):
        self.lib, self.dtype = lib, dtype
        init = INIT if init is None else init
        if lib == "torch":
            self.params = {k: torch.tensor(v.astype(dtype), requires_grad=True)
                           for k, v in init.items()}
            cls = getattr(torch.optim, name)
        else:
            self.params = {k: hx.tensor(v.astype(dtype), device=device, requires_grad=True)
                           for k, v in init.items()}
            cls = getattr(hx.optim, name)
        p = self.params
        spec = [p["w"], p["b"], p["frozen"]]
        if groups:
            spec = [{"params": [p["w"]], "lr": kwargs.get("lr", 0.01) * 0.5},
                    {"params": [p["b"], p["frozen"]], "lr": kwargs.get("lr", 0.01) * 2}]
        self.opt = cls(spec, **kwargs)
        self.steps = 0

    def values(self):
        return {k: v.detach().numpy().astype(np.float64) for k, v in self.params.items()}

    def step(self):
        values = self.values()
        for k, p in self.params.items():
            # "frozen" never has a gradient; "b" misses steps 3 to 5 (its own count lags)
            if k == "frozen" or (k == "b" and 3 <= self.steps <= 5):
                p.grad = None
                continue
            g = _grad(k, values[k], self.steps).astype(self.dtype)
            p.grad = torch.tensor(g) if self.lib == "torch" else hx.tensor(g, device=p.device)
        with _torch_dtype(self.dtype):
            self.opt.step()
        self.steps += 1
        return self.values()


def _compare(a, b, rtol, atol):
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=rtol, atol=atol, err_msg=k)


@pytest.mark.parametrize("case", list(CASES))
def test_equal_to_pytorch_step_for_step_float64(case):
    name, kwargs = CASES[case]
    ours, ref = Run("hx", name, kwargs), Run("torch", name, kwargs)
    for _ in range(20):
        _compare(ours.step(), ref.step(), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(ours.values()["frozen"], INIT["frozen"])


@pytest.mark.parametrize("name", NAMES)
def test_equal_to_pytorch_float32_with_groups(name):
    kwargs = {"lr": 0.05} if name != "Adadelta" else {}
    ours = Run("hx", name, kwargs, np.float32, groups=True)
    ref = Run("torch", name, kwargs, np.float32, groups=True)
    for _ in range(20):
        _compare(ours.step(), ref.step(), rtol=1e-5, atol=1e-6)
    assert ours.values()["w"].dtype == np.float64  # values() casts; the params stay F32
    assert ours.params["w"].dtype is hx.float32


def _numpy(x):
    return x.detach().numpy()


@pytest.mark.parametrize("case", ["rmsprop_wd_momentum", "rmsprop_centered_max",
                                  "adagrad_decay_wd", "adadelta", "adamax", "nadam_l2",
                                  "radam_decoupled_max", "rprop_etas_max",
                                  "asgd_wd_t0_max"])
def test_state_dict_has_pytorch_layout_and_round_trips(case):
    name, kwargs = CASES[case]
    ours, ref, whole = (Run("hx", name, kwargs), Run("torch", name, kwargs),
                        Run("hx", name, kwargs))
    for _ in range(5):
        ours.step(), ref.step(), whole.step()
    saved, theirs = ours.opt.state_dict(), ref.opt.state_dict()
    assert sorted(saved["state"]) == sorted(theirs["state"])  # "frozen" only in Adagrad's
    for i, entry in theirs["state"].items():
        assert sorted(saved["state"][i]) == sorted(entry)
        for k, v in entry.items():
            np.testing.assert_allclose(_numpy(saved["state"][i][k]), _numpy(v), rtol=1e-10,
                                       atol=1e-14, err_msg=f"{i}.{k}")
    assert [g["params"] for g in saved["param_groups"]] == \
        [g["params"] for g in theirs["param_groups"]]
    resumed = Run("hx", name, kwargs, init=ours.values())
    resumed.steps = 5
    resumed.opt.load_state_dict(saved)
    for _ in range(5):
        _compare(resumed.step(), whole.step(), rtol=0, atol=0)


@pytest.mark.parametrize("name", NAMES)
def test_loads_a_pytorch_state_dict(name):
    kwargs = CASES[name.lower()][1]
    ref = Run("torch", name, kwargs)
    for _ in range(5):
        ref.step()
    ours = Run("hx", name, kwargs, init=ref.values())
    ours.steps = 5
    ours.opt.load_state_dict(ref.opt.state_dict())
    for _ in range(5):
        _compare(ours.step(), ref.step(), rtol=1e-10, atol=1e-12)


def test_load_state_dict_checks_before_changing_anything():
    run = Run("hx", "RMSprop", dict(momentum=0.9))
    run.step()
    sd = run.opt.state_dict()
    sd["state"][0]["square_avg"] = hx.zeros(5)
    before = run.opt.state_dict()
    with pytest.raises(ValueError, match=r"RMSprop.load_state_dict: state 'square_avg'"):
        run.opt.load_state_dict(sd)
    del sd["state"][0]["momentum_buffer"]
    with pytest.raises(KeyError, match="lacks 'momentum_buffer'"):
        run.opt.load_state_dict(sd)
    after = run.opt.state_dict()
    np.testing.assert_array_equal(after["state"][0]["square_avg"].numpy(),
                                  before["state"][0]["square_avg"].numpy())


@pytest.mark.parametrize("name,kwargs,message", [
    ("RMSprop", dict(lr=-1.0), "RMSprop: Invalid learning rate"),
    ("RMSprop", dict(alpha=-0.1), "RMSprop: Invalid alpha value"),
    ("RMSprop", dict(momentum=-0.1), "RMSprop: Invalid momentum value"),
    ("RMSprop", dict(capturable=True), "RMSprop: capturable=True is not supported"),
    ("Adagrad", dict(lr_decay=-1.0), "Adagrad: Invalid lr_decay value"),
    ("Adagrad", dict(initial_accumulator_value=-1.0),
     "Adagrad: Invalid initial_accumulator_value value"),
    ("Adagrad", dict(eps=-1.0), "Adagrad: Invalid epsilon value"),
    ("Adagrad", dict(differentiable=True), "Adagrad: differentiable=True is not supported"),
    ("Adadelta", dict(rho=1.5), "Adadelta: Invalid rho value"),
    ("Adadelta", dict(weight_decay=-1.0), "Adadelta: Invalid weight_decay value"),
    ("Adamax", dict(betas=(1.0, 0.9)), r"Adamax: Invalid beta parameter at index 0"),
    ("NAdam", dict(betas=(0.9, -0.1)), r"NAdam: Invalid beta parameter at index 1"),
    ("NAdam", dict(momentum_decay=-1.0), "NAdam: Invalid momentum_decay value"),
    ("RAdam", dict(lr=-0.1), "RAdam: Invalid learning rate"),
    ("RAdam", dict(betas=(0.9,)), "RAdam: betas must be a pair"),
    ("Rprop", dict(lr=-1.0), "Rprop: Invalid learning rate"),
    ("Rprop", dict(etas=(1.5, 2.0)), "Rprop: Invalid eta values: 1.5, 2.0"),
    ("Rprop", dict(etas=(0.5, 0.9)), "Rprop: Invalid eta values: 0.5, 0.9"),
    ("Rprop", dict(capturable=True), "Rprop: capturable=True is not supported"),
    ("ASGD", dict(lr=-1.0), "ASGD: Invalid learning rate"),
    ("ASGD", dict(weight_decay=-1.0), "ASGD: Invalid weight_decay value"),
    ("ASGD", dict(differentiable=True), "ASGD: differentiable=True is not supported"),
])
def test_bad_arguments_name_the_optimizer(name, kwargs, message):
    with pytest.raises(ValueError, match=message):
        getattr(hx.optim, name)([hx.zeros(2, requires_grad=True)], **kwargs)
    if "Invalid" in message:  # PyTorch refuses them too
        with pytest.raises(ValueError, match=message.split(": ", 1)[1]):
            getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **kwargs)


@pytest.mark.parametrize("name", NAMES)
def test_signature_matches_pytorch(name):
    import inspect

    ours = inspect.signature(getattr(hx.optim, name)).parameters
    theirs = inspect.signature(getattr(torch.optim, name)).parameters
    assert list(ours) == list(theirs)
    for k, p in theirs.items():
        assert ours[k].kind == p.kind, k
        if k != "params":
            assert ours[k].default == p.default, k


@pytest.mark.parametrize("name", NAMES)
def test_bf16_parameters_keep_float32_state(name):
    w = hx.tensor(INIT["w"].astype(np.float32)).to(hx.bfloat16).requires_grad_()
    opt = getattr(hx.optim, name)([w], lr=0.01)
    ref = INIT["w"].astype(np.float32)
    ref_opt = getattr(torch.optim, name)([torch.tensor(ref, requires_grad=True)], lr=0.01)
    for step in range(3):
        g = _grad("w", INIT["w"], step).astype(np.float32)
        w.grad = hx.tensor(g).to(hx.bfloat16)
        opt.step()
        ref_opt.param_groups[0]["params"][0].grad = torch.tensor(g).bfloat16().float()
        ref_opt.step()
    assert w.dtype is hx.bfloat16
    assert all(t.dtype is hx.float32 for t in opt._state_tensors().values())
    got = w.detach().float().numpy()
    want = ref_opt.param_groups[0]["params"][0].detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_gpu_equals_cpu(be, name):
    kwargs = CASES[name.lower()][1]
    gpu = Run("hx", name, kwargs, np.float32, groups=True, device="gpu")
    cpu = Run("hx", name, kwargs, np.float32, groups=True)
    for _ in range(6):
        _compare(gpu.step(), cpu.step(), rtol=1e-4, atol=1e-5)
    assert gpu.params["w"].device.type == "gpu"


def test_nadam_parameters_of_equal_count_with_their_own_mu_product():
    ref = Run("torch", "NAdam", dict(lr=0.02))
    for _ in range(3):
        ref.step()
    sd = ref.opt.state_dict()
    sd["state"][1]["mu_product"] = sd["state"][1]["mu_product"] * 0.5  # "b" only
    ours, fresh = (Run(lib, "NAdam", dict(lr=0.02), init=ref.values()) for lib in ("hx", "torch"))
    for run in (ours, fresh):
        run.steps = 6  # past the steps where "b" has no gradient
        run.opt.load_state_dict(sd)
    for _ in range(5):
        _compare(ours.step(), fresh.step(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["Rprop", "ASGD"])
def test_constructor_signature_is_pytorchs(name):
    import inspect

    ours = inspect.signature(getattr(hx.optim, name).__init__).parameters
    theirs = inspect.signature(getattr(torch.optim, name).__init__).parameters
    assert [(p.name, p.kind, p.default) for p in ours.values()] == \
        [(p.name, p.kind, p.default) for p in theirs.values()]
