"""torch.nn.utils: pad_sequence (its values, gradients and errors against PyTorch), the
packed-sequence names refused when used, parameters_to_vector and vector_to_parameters."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import haelixe as hx
from haelixe.nn.utils import parameters_to_vector, rnn, vector_to_parameters

torch = pytest.importorskip("torch")
from torch.nn.utils import rnn as torch_rnn  # noqa: E402


def _pair(shapes, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    return ([hx.tensor(a, requires_grad=True) for a in arrays],
            [torch.tensor(a, requires_grad=True) for a in arrays])


@pytest.mark.parametrize("shapes", [[(2,), (3,), (1,)], [(4, 3), (1, 3), (0, 3)],
                                    [(2, 2, 5), (2, 2, 5)], [(0,), (0,)]])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence_gives_pytorchs_values_and_gradients(shapes, batch_first, side):
    mine, theirs = _pair(shapes)
    got = rnn.pad_sequence(mine, batch_first=batch_first, padding_value=-2.5,
                           padding_side=side)
    want = torch_rnn.pad_sequence(theirs, batch_first=batch_first, padding_value=-2.5,
                                  padding_side=side)
    assert got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    w = np.random.default_rng(1).standard_normal(got.shape)
    (got * hx.tensor(w)).sum().backward()
    (want * torch.tensor(w)).sum().backward()
    for a, b in zip(mine, theirs):
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


def test_pad_sequence_keeps_dtype_and_reads_strided_sequences():
    a = hx.arange(12, dtype=hx.int64).reshape(4, 3)[:, ::2]  # (4, 2), stepped
    b = hx.arange(6, dtype=hx.int64).reshape(2, 3).mT  # (3, 2), transposed
    got = rnn.pad_sequence([a, b], batch_first=True, padding_value=-1)
    want = torch_rnn.pad_sequence([torch.tensor(a.numpy()), torch.tensor(b.numpy())],
                                  batch_first=True, padding_value=-1)
    assert got.dtype == hx.int64
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_pad_sequence_refuses_what_pytorch_refuses_naming_itself():
    with pytest.raises(RuntimeError, match="pad_sequence: received an empty list"):
        rnn.pad_sequence([])
    with pytest.raises(RuntimeError, match=r"pad_sequence: sequences of shapes \(2, 3\) and "
                                           r"\(2, 4\) differ after their length"):
        rnn.pad_sequence([hx.ones(2, 3), hx.ones(2, 4)])
    with pytest.raises(ValueError, match="pad_sequence: padding_side must be 'left' or "
                                         "'right', got 'up'"):
        rnn.pad_sequence([hx.ones(2)], padding_side="up")
    with pytest.raises(RuntimeError, match="pad_sequence: each sequence must be a tensor"):
        rnn.pad_sequence([hx.ones(())])


PROGRAM = """
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_sequence
import torch
x = pad_sequence([torch.ones(2), torch.ones(3)])
print(tuple(x.shape), isinstance(x, PackedSequence))
try:
    pack_padded_sequence(x, [3, 2])
except NotImplementedError as e:
    print(e)
"""


def test_a_program_importing_the_packed_names_runs_until_it_packs(tmp_path):
    script = tmp_path / "packs.py"
    script.write_text(PROGRAM)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-m", "haelixe.run", str(script)], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         check=True).stdout.splitlines()
    assert out[0] == "(3, 2) False"
    assert out[1].startswith("torch.nn.utils.rnn.pack_padded_sequence: packed sequences are "
                             "not supported; batch the sequences with pad_sequence")


def test_the_packed_names_refuse_when_used():
    assert not isinstance(hx.ones(2), rnn.PackedSequence)
    for make in (lambda: rnn.pack_padded_sequence(hx.ones(3, 2), [3, 2]),
                 lambda: rnn.pad_packed_sequence(None), lambda: rnn.PackedSequence(None)):
        with pytest.raises(NotImplementedError, match="packed sequences are not supported; "
                                                      "batch the sequences with pad_sequence"):
            make()


def test_parameters_to_vector_and_back_as_pytorch():
    lin, tlin = hx.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    tlin.load_state_dict({k: torch.tensor(v.numpy()) for k, v in lin.state_dict().items()})
    vec = parameters_to_vector(lin.parameters())
    np.testing.assert_array_equal(
        vec.detach().numpy(),
        torch.nn.utils.parameters_to_vector(tlin.parameters()).detach().numpy())
    new = hx.arange(8, dtype=hx.float32)
    vector_to_parameters(new, lin.parameters())
    np.testing.assert_array_equal(lin.weight.detach().numpy(),
                                  np.arange(6, dtype=np.float32).reshape(2, 3))
    new[7] = 70.0  # (each parameter is a view of vec, as in PyTorch)
    assert lin.bias.detach().numpy()[1] == 70.0
    with pytest.raises(RuntimeError, match=r"vector_to_parameters: vec has shape \(7,\); "
                                           r"the parameters need a 1-D tensor of 8"):
        vector_to_parameters(hx.zeros(7), lin.parameters())
    with pytest.raises(TypeError, match="vector_to_parameters: expected vec to be a tensor"):
        vector_to_parameters([0.0] * 8, lin.parameters())
