"""Run a PyTorch program on Haelixe, unmodified.

    python -m haelixe.run train.py --epochs 1      # as `python train.py --epochs 1`
    python -m haelixe.run -m package.module args   # as `python -m package.module args`

``import torch`` inside the program (and in everything it imports) resolves to Haelixe
(see :mod:`haelixe.torch_alias`). The program sees what ``python`` would give it:
``sys.argv`` (its own path first), ``__name__ == "__main__"``, its directory as
``sys.path[0]``, and its exit status.
"""

from __future__ import annotations

import os
import runpy
import sys

from .torch_alias import install_as_torch

USAGE = "usage: python -m haelixe.run script.py [args...] | -m module [args...]"


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE + "\n\n" + __doc__.strip().splitlines()[0])
        raise SystemExit(0 if argv else 2)
    install_as_torch()
    if argv[0] == "-m":
        if len(argv) < 2:
            raise SystemExit(USAGE)
        sys.argv = argv[1:]
        sys.path[0] = os.getcwd()  # as `python -m`: the current directory first
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return
    script = argv[0]
    if not os.path.exists(script):
        raise SystemExit(f"python -m haelixe.run: can't open file {script!r}: "
                         f"no such file")
    sys.argv = argv
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
