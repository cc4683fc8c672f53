"""``torch.onnx``: importable, so a program that imports it for an optional export runs;
exporting itself is not something Haelixe does."""

from __future__ import annotations


class ExportError(NotImplementedError):
    """Haelixe writes no ONNX graphs."""


def export(model, args=None, f=None, *rest, **kwargs):
    raise ExportError("torch.onnx.export: Haelixe cannot write ONNX graphs; save the "
                      "weights with torch.save(model.state_dict(), path) (or "
                      "hx.save(..., 'model.safetensors')) and export from PyTorch")


def is_in_onnx_export() -> bool:
    """False: Haelixe never runs an ONNX export."""
    return False


def __getattr__(name):
    from .closest import missing_attribute

    raise missing_attribute(__name__, name, globals(), {"dynamo_export": "nothing: see export"})
