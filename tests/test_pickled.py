"""torch.save / torch.load (haelixe.pickled): the object trees PyTorch programs save come
back equal, a weights-only load runs no code the file names, and safe_globals widens what
loads as in PyTorch."""

from __future__ import annotations

import collections
import io
import pickle

import numpy as np
import pytest

import haelixe as hx
from haelixe import pickled


def round_trip(obj, **load_args):
    buf = io.BytesIO()
    pickled.save(obj, buf)
    buf.seek(0)
    return pickled.load(buf, **load_args)


def test_state_dicts_optimizer_state_arrays_and_plain_values_round_trip(tmp_path):
    hx.manual_seed(0)
    model = hx.nn.Sequential(hx.nn.Linear(3, 4), hx.nn.ReLU(), hx.nn.Linear(4, 1))
    opt = hx.optim.AdamW(model.parameters(), lr=1e-2)
    model(hx.randn(5, 3)).sum().backward()
    opt.step()
    obj = {"model": model.state_dict(), "optim": opt.state_dict(), "step": 7, "lr": 0.5,
           "name": "run", "raw": b"\x00\x01", "none": None, "pair": (1, [2.5, "x"]),
           "ids": {3, 4}, "od": collections.OrderedDict(b=1, a=2), "int_keys": {0: "a"},
           "array": np.arange(6, dtype=np.uint8).reshape(2, 3), "f64": np.ones(2),
           "dtype": hx.bfloat16, "device": hx.Device.cpu(), "bf16": hx.ones(2, dtype=hx.bfloat16),
           "view": hx.arange(6).reshape(2, 3).T, "scalar": hx.tensor(2.5),
           "leaf": hx.ones(2, requires_grad=True)}
    path = tmp_path / "ckpt.pt"
    pickled.save(obj, path)
    back = pickled.load(path)
    assert back.keys() == obj.keys()
    for k in ("step", "lr", "name", "raw", "none", "pair", "ids", "od", "int_keys",
              "dtype", "device"):
        assert back[k] == obj[k] and type(back[k]) is type(obj[k])
    assert list(back["od"]) == ["b", "a"]
    for k in ("array", "f64"):
        assert back[k].dtype == obj[k].dtype
        np.testing.assert_array_equal(back[k], obj[k])
    for k in ("bf16", "view", "scalar"):
        assert back[k].dtype is obj[k].dtype and back[k].shape == obj[k].shape
        np.testing.assert_array_equal(back[k].numpy(), obj[k].numpy())
    assert back["leaf"].requires_grad and not back["view"].requires_grad
    fresh = hx.nn.Sequential(hx.nn.Linear(3, 4), hx.nn.ReLU(), hx.nn.Linear(4, 1))
    fresh.load_state_dict(back["model"])
    fresh_opt = hx.optim.AdamW(fresh.parameters(), lr=1e-2)
    fresh_opt.load_state_dict(back["optim"])
    x = hx.randn(2, 3)
    np.testing.assert_array_equal(fresh(x).detach().numpy(), model(x).detach().numpy())


def test_a_weights_only_load_refuses_what_the_file_names_beyond_data():
    class Evil:
        def __reduce__(self):
            return (print, ("ran code",))

    buf = io.BytesIO()
    pickled.save({"x": Evil()}, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="builtins.print.*add_safe_globals"):
        pickled.load(buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="weights_only=False"):
        pickled.load(buf, weights_only=True)


def test_a_whole_module_loads_under_safe_globals_or_weights_only_false():
    hx.manual_seed(1)
    model = hx.nn.Sequential(hx.nn.Linear(2, 3), hx.nn.Tanh())
    buf = io.BytesIO()
    pickled.save(model, buf)
    for load in (lambda: pickled.load(io.BytesIO(buf.getvalue()), weights_only=False),
                 lambda: _with_safe_globals(buf.getvalue(),
                                            [hx.nn.Sequential, hx.nn.Linear, hx.nn.Tanh])):
        back = load()
        assert isinstance(back, hx.nn.Sequential) and isinstance(back[0].weight, hx.nn.Parameter)
        x = hx.randn(4, 2)
        np.testing.assert_array_equal(back(x).detach().numpy(), model(x).detach().numpy())
        back(x).sum().backward()
        assert back[0].weight.grad is not None
    assert pickled.get_safe_globals() == []  # the block's globals were taken back
    with pytest.raises(pickle.UnpicklingError, match="haelixe.nn.fused_layers.Linear"):
        _with_safe_globals(buf.getvalue(), [hx.nn.Sequential])
    pickled.add_safe_globals([hx.nn.Sequential, hx.nn.Linear, hx.nn.Tanh])
    try:
        assert isinstance(pickled.load(io.BytesIO(buf.getvalue())), hx.nn.Sequential)
    finally:
        pickled.clear_safe_globals()


def _with_safe_globals(data, allowed):
    with pickled.safe_globals(allowed):
        return pickled.load(io.BytesIO(data))


def test_map_location_moves_tensors_and_files_of_others_are_refused_clearly(tmp_path):
    obj = {"w": hx.ones(2)}
    for where in ("cpu", hx.Device.cpu(), {"gpu": "cpu"}, lambda storage, loc: storage):
        assert round_trip(obj, map_location=where)["w"].device == "cpu"
    zip_file = tmp_path / "torch.pt"
    zip_file.write_bytes(b"PK\x03\x04rest")
    with pytest.raises(pickle.UnpicklingError, match="truncated or damaged"):
        pickled.load(zip_file)
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(pickle.UnpicklingError, match="not a file torch.save wrote"):
        pickled.load(tmp_path / "junk.pt")
    with pytest.raises(pickle.PicklingError, match="Python objects"):
        pickled.save(np.array([object()]), io.BytesIO())


@pytest.mark.gpu
def test_gpu_tensors_save_from_and_load_back_to_the_gpu(be):
    obj = {"w": hx.ones(3, device="gpu") * 2}
    back = round_trip(obj)
    assert back["w"].device == "gpu" and back["w"].cpu().tolist() == [2.0, 2.0, 2.0]
    assert round_trip(obj, map_location="cpu")["w"].device == "cpu"


def test_a_model_holding_a_functional_activation_saves_and_loads():
    import haelixe.nn.functional as F

    layer = hx.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)
    assert layer.activation is F.relu
    buf = io.BytesIO()
    pickled.save(layer, buf)
    back = pickled.load(io.BytesIO(buf.getvalue()), weights_only=False)
    assert back.activation is F.relu
    x = hx.randn(3, 2, 8)
    np.testing.assert_allclose(back(x).detach().numpy(), layer(x).detach().numpy())


#: the layers made from their ops' declarations, by the module that once held each
#: written out: a pickle names a class by module and name
FORMER_HOMES = {
    "haelixe.nn.layers": lambda: [hx.nn.Linear(2, 3), hx.nn.LayerNorm(3),
                                  hx.nn.GELU("tanh"), hx.nn.ReLU6(True), hx.nn.Softmax(1),
                                  hx.nn.Softmin(-1), hx.nn.LogSoftmax(0),
                                  hx.nn.Dropout(0.2, True).eval()],
    "haelixe.nn.loss_layers": lambda: [hx.nn.MSELoss(), hx.nn.L1Loss("sum"),
                                       hx.nn.SmoothL1Loss(beta=0.5), hx.nn.HuberLoss(delta=2.0),
                                       hx.nn.NLLLoss(weight=hx.tensor([1.0, 0.5]))],
    "haelixe.nn.normalization": lambda: [hx.nn.GroupNorm(2, 4), hx.nn.GroupNorm(1, 2,
                                                                                affine=False)],
    "haelixe.nn.spatial": lambda: [hx.nn.Fold((3, 4), 2), hx.nn.Upsample(scale_factor=2),
                                   hx.nn.Dropout2d(0.3)],
    "haelixe.nn.conv": lambda: [hx.nn.Conv2d(2, 3, 3, padding_mode="reflect"),
                                hx.nn.Conv1d(2, 2, 1), hx.nn.ConvTranspose2d(2, 3, 3, stride=2)],
    "haelixe.nn.pooling": lambda: [hx.nn.MaxPool2d(2), hx.nn.AvgPool1d(3),
                                   hx.nn.AdaptiveAvgPool2d(2),
                                   hx.nn.AdaptiveMaxPool1d(3, True), hx.nn.MaxUnpool2d(2)],
}


@pytest.mark.parametrize("home", sorted(FORMER_HOMES))
def test_a_model_pickled_where_its_layers_were_written_out_loads(home, monkeypatch):
    hx.manual_seed(2)
    layers = FORMER_HOMES[home]()
    for layer in layers:  # (pickled as that module's classes)
        monkeypatch.setattr(type(layer), "__module__", home)
    buf = io.BytesIO()
    pickled.save(layers, buf)
    monkeypatch.undo()
    assert b"fused_layers" not in buf.getvalue()
    back = pickled.load(io.BytesIO(buf.getvalue()), weights_only=False)
    for ours, theirs in zip(back, layers):
        assert type(ours) is type(theirs) and repr(ours) == repr(theirs)
        assert ours.training == theirs.training
        assert list(ours.state_dict()) == list(theirs.state_dict())
        for (name, a), (_, b) in zip(ours.state_dict().items(), theirs.state_dict().items()):
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
