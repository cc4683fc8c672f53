"""PyTorch's everyday tensor API that programs written for it use: roll, unique, mm,
type(), nelement, legacy tensor types, f-string formatting, Generator objects, and the
torch.cuda / torch.backends / torch.accelerator / torch.compile answers. Checked against
PyTorch (values, gradients, errors)."""

from __future__ import annotations

import numpy as np
import pytest

import haelixe as hx

torch = pytest.importorskip("torch")


def both(a, dtype="float64", requires_grad=False):
    a = np.asarray(a)
    h = hx.tensor(a, dtype=dtype, requires_grad=requires_grad)
    t = torch.tensor(a, dtype=getattr(torch, dtype), requires_grad=requires_grad)
    return h, t


@pytest.mark.parametrize("shifts,dims", [(1, None), (-7, None), (2, 0), ((1, -1), (0, 1)),
                                         ((1, 2), (1, 1)), (0, 1), (5, -1)])
def test_roll_matches_pytorch_values_and_gradients(shifts, dims, make):
    a = np.arange(24, dtype=np.float64).reshape(2, 3, 4) - 5
    x, values = make(a)
    x = x.to(hx.float64).requires_grad_()
    t = torch.tensor(values, requires_grad=True)
    y, ty = hx.roll(x, shifts, dims), torch.roll(t, shifts, dims)
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    w = np.random.default_rng(0).standard_normal(a.shape)
    (y * hx.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy())


def test_roll_gradcheck_and_edge_shapes():
    x = hx.randn(3, 4, dtype=hx.float64, requires_grad=True)
    assert hx.autograd.gradcheck(lambda v: v.roll((1, -2), (0, 1)), (x,))
    for a in (np.zeros((0, 3)), np.array(4.0)):
        h, t = both(a)
        np.testing.assert_array_equal(h.roll(1).numpy(), torch.roll(t, 1).numpy())
    assert hx.tensor([1, 2]).roll(1) is not None and hx.tensor([1, 2]).roll(0).tolist() == [1, 2]
    with pytest.raises(RuntimeError, match="shifts and dimensions must align"):
        hx.zeros(2, 2).roll((1, 1), 0)
    with pytest.raises(RuntimeError, match="one shift"):
        hx.zeros(2, 2).roll((1, 1))


@pytest.mark.parametrize("dim", [None, 0, 1])
def test_unique_matches_pytorch_with_inverse_and_counts(dim):
    a = np.array([[3, 1, 3], [3, 1, 3], [0, 2, 2]])
    h, t = both(a, "int64")
    got = hx.unique(h, return_inverse=True, return_counts=True, dim=dim)
    want = torch.unique(t, return_inverse=True, return_counts=True, dim=dim)
    for g, w in zip(got, want):
        assert g.dtype is hx.int64 or g.dtype is h.dtype
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    np.testing.assert_array_equal(h.unique().numpy(), t.unique().numpy())
    np.testing.assert_array_equal(h.float().unique(sorted=False).numpy(),
                                  t.float().unique(sorted=False).numpy())
    out, counts = h.unique(return_counts=True)
    np.testing.assert_array_equal(counts.numpy(), t.unique(return_counts=True)[1].numpy())


def test_unique_of_a_view_a_scalar_and_an_empty_tensor():
    h, t = both(np.array([[2.0, 1.0], [1.0, 5.0]]))
    np.testing.assert_array_equal(h.T.unique(return_inverse=True)[1].numpy(),
                                  t.T.unique(return_inverse=True)[1].numpy())
    h, t = both(np.array(3.0))
    got, want = h.unique(return_inverse=True), t.unique(return_inverse=True)
    assert got[0].shape == tuple(want[0].shape) and got[1].shape == tuple(want[1].shape)
    assert hx.zeros(0).unique().shape == (0,)
    assert not hx.randn(3, requires_grad=True).unique().requires_grad


def test_mm_matches_pytorch_and_refuses_other_ranks():
    a, ta = both(np.random.default_rng(1).standard_normal((3, 4)), requires_grad=True)
    b, tb = both(np.random.default_rng(2).standard_normal((4, 2)), requires_grad=True)
    a.mm(b).sum().backward()
    ta.mm(tb).sum().backward()
    np.testing.assert_allclose(hx.mm(a, b).detach().numpy(), ta.mm(tb).detach().numpy())
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy())
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy())
    with pytest.raises(RuntimeError, match="mm: expected two 2-D tensors"):
        hx.zeros(2, 3, 4).mm(hx.zeros(4, 2))
    with pytest.raises(RuntimeError):
        torch.zeros(2, 3, 4).mm(torch.zeros(4, 2))


def test_type_nelement_and_the_legacy_tensor_types_match_pytorch():
    for dtype in ("float32", "float64", "int64", "int32", "bool", "float16", "bfloat16",
                  "int16", "int8", "uint8"):
        h, t = both(np.ones(3), dtype)
        assert h.type() == t.type()
        assert isinstance(h, getattr(hx, t.type().split(".")[-1]))
    h = hx.ones(2, 3)
    assert h.nelement() == torch.ones(2, 3).nelement() == 6
    assert h.type(hx.int64).dtype is hx.int64 and h.type("torch.LongTensor").dtype is hx.int64
    assert h.type(hx.LongTensor).dtype is hx.int64 and h.type(hx.float32) is h
    assert hx.LongTensor([1, 2]).tolist() == torch.LongTensor([1, 2]).tolist()
    assert hx.LongTensor(6).zero_().view(-1, 2).shape == (3, 2)
    assert hx.FloatTensor(2, 3).shape == (2, 3) and hx.FloatTensor(2, 3).dtype is hx.float32
    assert not isinstance(hx.ones(2), hx.LongTensor)
    with pytest.raises(ValueError, match="not a tensor type"):
        h.type("torch.ComplexFloatTensor")
    assert h.type("torch.ByteTensor").dtype is hx.uint8


def test_format_of_a_zero_d_tensor_is_its_number_as_in_pytorch():
    for v in (1.23456, 7):
        h, t = both(np.array(v), "float32" if isinstance(v, float) else "int64")
        for spec in (".4f", "", ">8", ".2e") if isinstance(v, float) else ("d", "03d", ""):
            assert f"{h:{spec}}" == f"{t:{spec}}"
    with pytest.raises(TypeError):
        f"{hx.ones(2):.2f}"
    with pytest.raises(TypeError):
        f"{torch.ones(2):.2f}"
    assert f"{hx.ones(2)}" == str(hx.ones(2))


def test_a_generator_object_reproduces_and_restores_its_draws():
    g = hx.Generator().manual_seed(5)
    assert g.initial_seed() == 5
    state = g.get_state()

    def draws():
        return [hx.randn(3, generator=g), hx.rand(2, generator=g),
                hx.randint(0, 9, (4,), generator=g), hx.randperm(6, generator=g),
                hx.ones(3).normal_(generator=g), hx.ones(3).uniform_(-1, 1, generator=g),
                hx.multinomial(hx.ones(5), 3, generator=g),
                hx.nn.init.normal_(hx.empty(2), generator=g),
                hx.nn.init.trunc_normal_(hx.empty(2), generator=g),
                hx.nn.init.xavier_uniform_(hx.empty(2, 2), generator=g)]

    first = draws()
    g.set_state(state)
    again = draws()
    assert len({tuple(a.reshape(-1).tolist()) for a in first}) == len(first)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # a generator of its own leaves the default one's stream alone
    hx.manual_seed(1)
    first = hx.randn(2)
    hx.manual_seed(1)
    hx.randn(4, generator=hx.Generator().manual_seed(9))
    np.testing.assert_array_equal(hx.randn(2).numpy(), first.numpy())


def test_the_default_generator_state_round_trips_as_torch_rng_state():
    assert hx.manual_seed(3) is hx.default_generator
    assert hx.initial_seed() == 3
    s = hx.get_rng_state()
    a = hx.rand(4)
    hx.set_rng_state(s)
    np.testing.assert_array_equal(hx.rand(4).numpy(), a.numpy())
    assert isinstance(hx.Generator().seed(), int)
    with pytest.raises(RuntimeError, match="get_state"):
        hx.Generator().set_state(hx.zeros(3))
    with pytest.raises(TypeError, match="hx.Generator"):
        hx.randn(2, generator=5)


def test_cuda_answers_by_the_hardware_adapter_rule():
    info = hx.backends.gpu_adapter_info()
    hardware = info is not None and not info["software"]
    assert hx.cuda.is_available() is hardware
    assert hx.cuda.device_count() == int(hardware)
    assert hx.accelerator.is_available() is hardware
    assert hx.accelerator.current_accelerator() == (hx.Device.gpu() if hardware else None)
    assert hx.Device("cuda:0") is hx.Device("cuda") is hx.Device.gpu()
    assert hx.device("cuda", 0) is hx.Device.gpu()
    with pytest.raises(ValueError, match="index 0"):
        hx.device("cuda:1")
    if not hardware:
        hx.manual_seed(4)
        a = hx.rand(2)
        hx.manual_seed(4)
        hx.cuda.manual_seed_all(99)  # ignored without a GPU, as PyTorch documents
        np.testing.assert_array_equal(hx.rand(2).numpy(), a.numpy())
        with pytest.raises(RuntimeError, match="no GPU is available"):
            hx.cuda.synchronize()
        with pytest.raises(RuntimeError, match="no GPU is available"):
            hx.cuda.current_device()


def test_backend_flags_are_accepted_and_typos_refused():
    from haelixe import backend_flags

    backend_flags.cudnn.benchmark = True
    backend_flags.cudnn.deterministic = True
    backend_flags.cuda.matmul.allow_tf32 = True
    assert backend_flags.cudnn.is_available() is False and backend_flags.mps.is_available() is False
    with pytest.raises(AttributeError, match="no flag 'benchmrk'"):
        backend_flags.cudnn.benchmrk = True
    backend_flags.set_float32_matmul_precision("high")
    assert backend_flags.get_float32_matmul_precision() == "high"
    with pytest.raises(RuntimeError, match="'highest', 'high', 'medium'"):
        backend_flags.set_float32_matmul_precision("low")
    backend_flags.set_float32_matmul_precision("highest")


def test_compile_returns_a_module_as_is_and_captures_a_whole_step():
    model = hx.nn.Linear(3, 1)
    assert hx.compile(model) is model and hx.compile(model, mode="max-autotune") is model
    opt = hx.optim.SGD(model.parameters(), lr=0.1, capturable=True)
    x, y = hx.randn(8, 3), hx.randn(8, 1)

    def step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    compiled = hx.compile(step)
    reference = hx.nn.Linear(3, 1)
    reference.load_state_dict(model.state_dict())
    ref_opt = hx.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(5):
        got = compiled(x, y).item()
        ref_opt.zero_grad()
        want = ((reference(x) - y) ** 2).mean()
        want.backward()
        ref_opt.step()
        assert got == pytest.approx(want.item(), rel=1e-6)
    assert compiled.captured is not None and compiled.captured.captured == 1
    # hx.capture's rules hold for what is captured: a host-side optimizer is refused
    plain = hx.optim.SGD(model.parameters(), lr=0.1)
    compiled = hx.compile(lambda: (model(x).sum().backward(), plain.step()) and None)
    compiled()
    with pytest.raises(hx.CaptureError, match="capturable=True"):
        compiled()


def test_compile_runs_a_forward_whose_result_needs_a_gradient_eagerly():
    w = hx.randn(3, requires_grad=True)
    f = hx.compile(lambda x: (x * w).sum())
    for _ in range(4):
        f(hx.ones(3)).backward()
    np.testing.assert_allclose(w.grad.numpy(), 4 * np.ones(3))
    assert f.eager and f.captured is None
    assert hx.compile(disable=True)(step := (lambda: 1)) is step


@pytest.mark.gpu
def test_roll_unique_mm_and_type_on_the_gpu(be):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = hx.tensor(a, device="gpu", requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    y, ty = x.roll((1, -1), (0, 1)), t.roll((1, -1), (0, 1))
    np.testing.assert_array_equal(y.detach().cpu().numpy(), ty.detach().numpy())
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), t.grad.numpy())
    u, inv, counts = hx.tensor([3, 1, 3], device="gpu").unique(return_inverse=True,
                                                               return_counts=True)
    assert u.device == "gpu" and u.cpu().tolist() == [1, 3]
    assert inv.cpu().tolist() == [1, 0, 1] and counts.cpu().tolist() == [1, 2]
    np.testing.assert_allclose(x.detach().mm(x.detach().T).cpu().numpy(), a @ a.T, rtol=1e-6)
    assert x.type() == "torch.cuda.FloatTensor" and x.is_cuda and not x.cpu().is_cuda
    assert isinstance(x, hx.cuda.FloatTensor) and not isinstance(x, hx.FloatTensor)
    assert hx.cuda.LongTensor([1, 2]).device == "gpu"
    assert hx.ones(2).cuda().device == "gpu"


def test_summary_writer_records_scalars_as_json_lines(tmp_path):
    import json

    from haelixe.utils.tensorboard import SummaryWriter

    with SummaryWriter(log_dir=tmp_path / "run") as w:
        w.add_scalar("Loss/train", hx.tensor(0.5), 10)
        w.add_scalars("Loss", {"test": 0.25}, global_step=11)
        with pytest.raises(NotImplementedError, match="scalars only"):
            w.add_image("x", hx.zeros(3, 2, 2))
    lines = (tmp_path / "run" / "scalars.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert [(r["tag"], r["value"], r["step"]) for r in rows] == \
        [("Loss/train", 0.5, 10), ("Loss/test", 0.25, 11)]


def test_rnn_flatten_parameters_is_the_no_op_pytorch_documents_off_cudnn():
    lstm = hx.nn.LSTM(3, 4)
    before = {k: v.clone() for k, v in lstm.state_dict().items()}
    assert lstm.flatten_parameters() is None
    for k, v in lstm.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k].numpy())
    assert issubclass(hx.nn.NonDynamicallyQuantizableLinear, hx.nn.Linear)
