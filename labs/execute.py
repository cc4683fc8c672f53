"""Run lab notebooks top to bottom and save them with their outputs, without volatile
metadata, so a lab opened without running (JupyterLab, GitHub, nbviewer) shows every
widget's static picture, and opening and re-saving it changes nothing.

    python labs/execute.py                       # every labs/NN_*.ipynb, in place
    python labs/execute.py labs/02_autograd.ipynb --out /tmp/executed

Kept: each cell's outputs and execution counts. Dropped: execution timing metadata, the
notebook's saved widget state, and the widget-view outputs (their model ids change on
every run, and without the kernel there is no model to show; each widget's output also
carries its static picture, which stays). Consecutive stream outputs of one stream are
merged, as JupyterLab merges them on opening. What a cell prints still depends on the
machine where it does (steps/s, timings).

The kernel runs with the working directory of the notebook and this repository first on
PYTHONPATH. A cell that fails stops the run with the cell and its error; the notebook on
disk is then left as it was (files are replaced only when complete).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

LABS = Path(__file__).resolve().parent
ROOT = LABS.parent
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def strip_volatile(nb) -> None:
    """Remove from ``nb`` (in place) what changes from run to run without the lab
    changing."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type != "code":
            continue
        outputs = []
        for out in cell.outputs:
            out.get("data", {}).pop(WIDGET_VIEW, None)
            prev = outputs[-1] if outputs else None
            if (out.output_type == "stream" and prev is not None
                    and prev.output_type == "stream" and prev.name == out.name):
                prev.text += out.text
                continue
            outputs.append(out)
        cell.outputs = outputs


def _name_kernel_as_jupyterlab_does(nb, name: str) -> None:
    """The kernelspec JupyterLab writes when it saves (its display name included)."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec(name)
    nb.metadata["kernelspec"] = {"display_name": spec.display_name,
                                 "language": spec.language, "name": name}


def execute(path: Path, out_dir: Path | None = None, timeout: int = 600) -> Path:
    """Run ``path`` and write it (to ``out_dir``, or in place); returns where."""
    import nbformat
    from nbclient import NotebookClient

    sys.path.insert(0, str(ROOT))
    from haelixe.atomic import AtomicFile

    nb = nbformat.read(path, as_version=4)
    env_path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory() as runtime:
        os.environ["PYTHONPATH"] = env_path  # the kernel inherits it
        os.environ.setdefault("XDG_RUNTIME_DIR", runtime)  # quiets GPU drivers' warnings
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                record_timing=False, store_widget_state=False,
                                resources={"metadata": {"path": str(path.parent)}})
        client.execute()
    strip_volatile(nb)
    _name_kernel_as_jupyterlab_does(nb, "python3")
    target = (out_dir / path.name) if out_dir is not None else path
    target.parent.mkdir(parents=True, exist_ok=True)
    with AtomicFile(target) as tmp:
        nbformat.write(nb, tmp.temp_path)
    return target


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("notebooks", nargs="*", type=Path,
                   help="notebooks to run (default: every labs/NN_*.ipynb)")
    p.add_argument("--out", type=Path, default=None,
                   help="write the executed notebooks here instead of in place")
    p.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = p.parse_args(argv)
    paths = args.notebooks or sorted(LABS.glob("[0-9][0-9]_*.ipynb"))
    for path in paths:
        print(f"running {path} ...", flush=True)
        print(f"  wrote {execute(path.resolve(), args.out, args.timeout)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
