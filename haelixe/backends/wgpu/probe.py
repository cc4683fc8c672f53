"""Whether this wgpu build reaches the GPU's matrix units (tensor cores).

WGSL reaches them only through the cooperative-matrix extension. With wgpu-native 0.32 an
adapter may list the feature, but a device cannot be requested with it: the feature is
marked experimental and the C API has no switch to allow experimental features. The
probe asks, so that a newer wgpu that lifts this is noticed:

    python -m haelixe.backends.wgpu.probe      # prints one JSON object

It reports the wgpu version, the adapter, the cooperative-matrix features the adapter
lists, and for each whether a device could be requested with it (and what wgpu said if
not). The kernels use none of it: a matmul on the matrix units would be new work.
"""

from __future__ import annotations

import json

__all__ = ["matrix_units"]


def matrix_units(adapter=None) -> dict:
    """{"wgpu", "adapter", "listed", "usable", "errors"}: the adapter's cooperative-matrix
    features, those a device could be requested with, and wgpu's message for the others.
    ``adapter`` defaults to a fresh high-performance adapter (a device is requested from
    it, so the process's own context is left alone)."""
    import wgpu

    from .context import ensure_runtime_dir

    def fresh():  # (a device request may use an adapter up: one per request)
        ensure_runtime_dir()
        return wgpu.gpu.request_adapter_sync(power_preference="high-performance")

    given = adapter is not None
    if not given:
        adapter = fresh()
    if adapter is None:
        return {"wgpu": wgpu.__version__, "adapter": None, "listed": [], "usable": [],
                "errors": {"adapter": "wgpu found no adapter"}}
    listed = sorted(str(f) for f in adapter.features if "cooperative" in str(f).lower())
    usable, errors = [], {}
    for i, feature in enumerate(listed):
        asked = adapter if given or i == 0 else fresh()
        try:
            device = asked.request_device_sync(required_features=[feature])
        except Exception as e:  # wgpu's error for a refused feature is what we report
            errors[feature] = " ".join(str(e).split())
            continue
        if feature in {str(f) for f in device.features}:
            usable.append(feature)
        else:
            errors[feature] = "the device was made without it"
        device.destroy()
    info = adapter.info
    return {"wgpu": wgpu.__version__,
            "adapter": info.get("device", "") or info.get("description", ""),
            "listed": listed, "usable": usable, "errors": errors}


def main() -> int:
    print(json.dumps(matrix_units()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
