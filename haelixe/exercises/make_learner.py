"""Write the learner's notebooks: ``python -m haelixe.exercises.make_learner``.

For every instructor notebook ``labs/NN_*.ipynb`` it removes volatile metadata in place
(execution timing, saved widget state) and saves the kernelspec as JupyterLab writes it,
then writes ``labs/learner/NN_*.ipynb`` with each solution replaced by a stub. Options:

    --check     change nothing; exit 1 naming every file that is not up to date
    --execute   first run the instructor notebooks (nbclient) so their saved outputs are
                fresh; do this after editing a lab
    --labs DIR  the folder of instructor notebooks (default: labs)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .notebooks import dumps, learner_version, normalize, read

LEARNER_DIR = "learner"


def instructor_notebooks(labs: Path) -> list[Path]:
    return sorted(labs.glob("[0-9][0-9]_*.ipynb"))


def expected_files(labs: Path) -> dict[Path, str]:
    """{path: the text it should hold}: instructor notebooks normalized (see
    :func:`normalize`), and their learner versions."""
    out = {}
    for path in instructor_notebooks(labs):
        nb = read(path)
        normalize(nb)
        out[path] = dumps(nb)
        out[labs / LEARNER_DIR / path.name] = dumps(learner_version(nb, path.name))
    return out


def stale_files(labs: Path) -> list[Path]:
    return [p for p, text in expected_files(labs).items()
            if not p.exists() or p.read_text(encoding="utf-8") != text]


def execute(path: Path, timeout: int = 600) -> None:
    """Run an instructor notebook in place (outputs refreshed, no timing recorded)."""
    from nbclient import NotebookClient

    nb = read(path)
    NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                   store_widget_state=False,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    normalize(nb)
    _write(path, dumps(nb))


def _write(path: Path, text: str) -> None:
    from ..atomic import AtomicFile

    path.parent.mkdir(parents=True, exist_ok=True)
    with AtomicFile(path) as tmp:
        Path(tmp.temp_path).write_text(text, encoding="utf-8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m haelixe.exercises.make_learner",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--labs", default="labs", type=Path)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--execute", action="store_true")
    args = parser.parse_args(argv)
    if not instructor_notebooks(args.labs):
        parser.error(f"no lab notebooks (NN_*.ipynb) in {args.labs}")
    if args.check:
        stale = stale_files(args.labs)
        for p in stale:
            print(f"not up to date: {p}", file=sys.stderr)
        if stale:
            print("run: python -m haelixe.exercises.make_learner", file=sys.stderr)
        return 1 if stale else 0
    if args.execute:
        # one BLAS thread per kernel, as under nbval (labs/conftest.py says why)
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")
        for path in instructor_notebooks(args.labs):
            print(f"running {path}", flush=True)
            execute(path)
    for path, text in expected_files(args.labs).items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            _write(path, text)
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
