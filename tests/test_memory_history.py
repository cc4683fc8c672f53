"""hx.memory_snapshot(): live GPU blocks with their category and the user's source line."""

import sys

import pytest

import haelixe as hx
import haelixe.nn as nn
import haelixe.nn.functional as F


@pytest.fixture
def history(be):
    hx.record_memory_history(device="gpu")
    yield
    hx.record_memory_history(False, device="gpu")


@pytest.mark.gpu
def test_snapshot_names_each_block_of_an_adamw_step_by_category_and_line(history):
    hx.manual_seed(0)
    x, y = hx.randn(16, 64).to("gpu"), hx.randn(16, 32).to("gpu")
    model = nn.Linear(64, 32).to("gpu")
    opt = hx.optim.AdamW(model.parameters())
    F.mse_loss(model(x), y).backward()
    opt.step()
    activation, line = model(x), sys._getframe().f_lineno  # the last block's line
    snap = hx.memory_snapshot("gpu")
    blocks = snap["blocks"]
    sizes = {}
    for b in blocks:
        sizes.setdefault(b["category"], []).append(b["requested_size"])
    n_params = 64 * 32 + 32
    assert sum(sizes["parameter"]) >= 4 * n_params
    assert sum(sizes["gradient"]) >= 4 * n_params
    assert sum(sizes["optimizer_state"]) >= 2 * 4 * n_params  # exp_avg and exp_avg_sq
    last = blocks[-1]
    assert last["category"] == "activation" and last["requested_size"] == 16 * 32 * 4
    assert last["frames"][0]["filename"] == __file__
    assert last["frames"][0]["line"] == line and activation.shape == (16, 32)
    assert all(not f["filename"].startswith(hx.__path__[0]) for b in blocks
               for f in b["frames"])


@pytest.mark.gpu
def test_snapshot_drops_freed_blocks_and_needs_history(be):
    with pytest.raises(RuntimeError, match="record_memory_history"):
        hx.memory_snapshot("gpu")
    hx.record_memory_history(device="gpu")
    try:
        t = hx.ones(1000, device="gpu")
        assert any(b["requested_size"] == 4000 for b in hx.memory_snapshot("gpu")["blocks"])
        del t
        assert not any(b["requested_size"] == 4000
                       for b in hx.memory_snapshot("gpu")["blocks"])
    finally:
        hx.record_memory_history(False, device="gpu")
    assert hx.memory.get_allocator("gpu").on_allocate is None
