"""``torch.utils.tensorboard.SummaryWriter`` for scalars: each ``add_scalar`` is one line
of JSON (tag, value, step, wall time) appended to ``<log_dir>/scalars.jsonl``, which
``hx.viz`` charts or any script reads. TensorBoard's own event format needs the
tensorboard package's protocol buffers, which Haelixe does not depend on; the other
``add_*`` methods (images, histograms, graphs) raise NotImplementedError naming this."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime


def _number(value) -> float:
    item = getattr(value, "item", None)
    return float(item() if callable(item) else value)


class SummaryWriter:
    def __init__(self, log_dir=None, comment: str = "", purge_step=None, max_queue=10,
                 flush_secs=120, filename_suffix: str = ""):
        if log_dir is None:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{os.uname().nodename}{comment}")
        self.log_dir = str(log_dir)
        os.makedirs(self.log_dir, exist_ok=True)
        self.path = os.path.join(self.log_dir, f"scalars{filename_suffix}.jsonl")
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close())

    def get_logdir(self) -> str:
        return self.log_dir

    def add_scalar(self, tag: str, scalar_value, global_step=None, walltime=None,
                   new_style=False, double_precision=False) -> None:
        record = {"tag": str(tag), "value": _number(scalar_value),
                  "step": None if global_step is None else int(global_step),
                  "wall_time": time.time() if walltime is None else float(walltime)}
        self._file.write(json.dumps(record) + "\n")

    def add_scalars(self, main_tag: str, tag_scalar_dict: dict, global_step=None,
                    walltime=None) -> None:
        for tag, value in tag_scalar_dict.items():
            self.add_scalar(f"{main_tag}/{tag}", value, global_step, walltime)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getattr__(self, name):
        if name.startswith("add_"):
            raise NotImplementedError(f"SummaryWriter.{name}: Haelixe's writer records "
                                      f"scalars only (add_scalar, add_scalars) into "
                                      f"{self.__dict__.get('path', 'scalars.jsonl')}")
        raise AttributeError(f"'SummaryWriter' object has no attribute {name!r}")
