"""`python -m haelixe.run` and hx.install_as_torch: `import torch` resolves to Haelixe's
modules, with a program's usual script semantics, and names Haelixe lacks fail clearly.
Each check runs in a fresh interpreter (PyTorch itself may be imported in this one)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_program(tmp_path, source: str, *args, module: bool = False):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(source))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "haelixe.run"]
    cmd += ["-m", "prog", *args] if module else [str(script), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120,
                          cwd=tmp_path)


def test_a_program_sees_the_script_semantics_python_gives(tmp_path):
    (tmp_path / "helper.py").write_text("VALUE = 7\n")
    r = run_program(tmp_path, """
        import sys, os
        import helper                      # found beside the script: sys.path[0]
        print(__name__, sys.argv[1:], os.path.basename(sys.argv[0]), helper.VALUE)
        sys.exit(3)
    """, "--steps", "2")
    assert r.returncode == 3, r.stderr
    assert r.stdout.split() == ["__main__", "['--steps',", "'2']", "prog.py", "7"]


def test_run_dash_m_runs_a_module_as_main(tmp_path):
    r = run_program(tmp_path, "import sys, torch\nprint(__name__, sys.argv[1:])\n", "x",
                    module=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "__main__ ['x']"


def test_torch_and_its_submodules_are_haelixes_modules(tmp_path):
    r = run_program(tmp_path, """
        import haelixe as hx
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        import torch.optim.lr_scheduler
        from torch.nn.modules.linear import Linear
        from torch.optim import AdamW
        from torch.utils.data import DataLoader
        import torch.onnx, torch.cuda, torch.backends.cudnn
        import torch.distributions as D
        from torch.distributions.normal import Normal
        from torch.distributions import constraints, kl_divergence
        import torch.linalg, torch.special
        checks = [
            torch.Tensor is hx.Tensor, nn.Module is hx.nn.Module, F.relu is hx.nn.functional.relu,
            Linear is hx.nn.Linear, AdamW is hx.optim.AdamW,
            DataLoader is hx.data.loader.DataLoader, issubclass(torch.utils.data.Dataset, object),
            torch.optim.lr_scheduler.CosineAnnealingLR is hx.optim.lr_scheduler.CosineAnnealingLR,
            torch.nn.modules.sparse.Embedding is hx.nn.Embedding,
            # a Haelixe file of the same name does not hide the family's namespace
            torch.nn.modules.normalization.LayerNorm is hx.nn.LayerNorm,
            torch.nn.modules.rnn.LSTM is hx.nn.LSTM,
            torch.nn.init.normal_ is hx.nn.init.normal_,
            torch.cuda.is_available is hx.cuda.is_available,
            torch.tensor([1.0, 2.0]).sum().item() == 3.0,
            torch.set_float32_matmul_precision("high") is None,
            D.Categorical is hx.distributions.Categorical, Normal is hx.distributions.Normal,
            constraints.positive is hx.distributions.constraints.positive,
            kl_divergence is torch.distributions.kl.kl_divergence,
            torch.linalg.det is hx.linalg.det, torch.special.gammaln is hx.lgamma,
            # the Haelixe modules are left as they were
            hx.backends.__name__ == "haelixe.backends", not hasattr(hx.nn, "modules"),
        ]
        print(checks)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 1)
            def forward(self, x):
                return self.fc(x)
        loss = Net()(torch.randn(2, 3)).sum()
        loss.backward()
        print(f"{loss:.3f}" != "")
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[0] == str([True] * 23)


def test_names_haelixe_lacks_fail_with_its_own_message(tmp_path):
    r = run_program(tmp_path, """
        import torch
        def error(code):
            try:
                exec(code, {"torch": torch})
            except Exception as e:
                return f"{type(e).__name__}: {e}"
            return "no error"
        print(error("torch.nn.LinearCrossEntropyLoss"))
        print(error("from torch.nn import LinearCrossEntropyLoss"))
        print(error("import torch.distributed"))
        print(error("from torch import distributed"))
        print(error("from torch.fft import rfft"))
        print(error("torch.onnx.export(None, None, 'm.onnx')"))
        print(hasattr(torch, "no_such_name"))
        print(error("from torch.distributions import LogisticNormal"))
    """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().split("\n")
    assert lines[0].startswith("AttributeError: torch.nn.LinearCrossEntropyLoss") and \
        "the closest is hx.nn.CrossEntropyLoss" in lines[0]
    assert lines[1].startswith("ImportError: cannot import name 'LinearCrossEntropyLoss' "
                               "from 'torch.nn'")
    assert "the closest is hx.nn.CrossEntropyLoss" in lines[1]
    for line in lines[2:4]:
        assert line.startswith("MissingModuleError: torch.distributed is not part of Haelixe")
    assert lines[4].startswith("MissingModuleError: torch.fft is not part")
    assert lines[5].startswith("ExportError: torch.onnx.export")
    assert lines[6] == "False"
    assert lines[7].startswith("ImportError: cannot import name 'LogisticNormal' from "
                               "'torch.distributions'") and "Normal" in lines[7]


def test_install_as_torch_refuses_when_pytorch_is_already_imported(tmp_path):
    pytest.importorskip("torch")
    code = "import torch, haelixe as hx\ntry:\n hx.install_as_torch()\nexcept RuntimeError " \
           "as e:\n print(e)\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert "already imported" in r.stdout, r.stderr


def test_install_as_torch_in_a_notebook_and_uninstall(tmp_path):
    code = textwrap.dedent("""
        import sys, haelixe as hx
        hx.install_as_torch(); hx.install_as_torch()   # twice is harmless
        import torch
        print(torch.nn.Linear is hx.nn.Linear)
        hx.uninstall_as_torch()
        print("torch" in sys.modules)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert r.stdout.split() == ["True", "False"], r.stderr
