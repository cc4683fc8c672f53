"""The command-line apps' progress bar: tqdm on stderr where it is installed, nothing
where it is not (it is an optional dependency)."""

from __future__ import annotations

import sys


class TerminalProgress:
    """``update(step, total, loss)`` advances one step and shows the loss every
    ``every`` steps. A context manager: the bar is closed on exit.

    The first step (building the model, compiling kernels) takes far longer than the
    rest, so the bar starts its clock again after it: the rate and the time left are
    measured over the steps after the first."""

    def __init__(self, total: int, every: int = 50):
        self.every = every
        try:
            from tqdm import tqdm
        except ImportError:
            self._bar = None
        else:
            self._tqdm = tqdm
            self._bar = self._new_bar(total, 0)

    def _new_bar(self, total: int, initial: int, postfix=None):
        return self._tqdm(total=total, initial=initial, unit="step", file=sys.stderr,
                          mininterval=0.5, postfix=postfix)

    def update(self, step: int, total: int, loss: float) -> None:
        if self._bar is None:
            return
        if step == 1 and total > 1:
            first = self._bar.format_dict["elapsed"]
            self._bar.close()
            self._bar = self._new_bar(total, 1, {"first step": f"{first:.2f} s"})
            return
        self._bar.update(1)
        if step % self.every == 0 or step == total:
            self._bar.set_postfix(loss=f"{loss:.4f}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    def __enter__(self) -> TerminalProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
