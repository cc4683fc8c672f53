"""The matrix-unit probe (backends/wgpu/probe.py): it reports what the adapter lists and
what wgpu grants, and never claims a feature a device was not made with."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from haelixe.backends.wgpu.probe import matrix_units

pytest.importorskip("wgpu", reason="the probe reports wgpu's own version and features")


class _Device:
    def __init__(self, features):
        self.features = set(features)
        self.destroyed = False

    def destroy(self):
        self.destroyed = True


class _Adapter:
    """An adapter listing ``features`` whose device request raises ``refuse`` (if given)
    or returns a device with the features ``grant`` keeps."""

    info = {"device": "a test adapter"}

    def __init__(self, features, refuse=None, grant=lambda asked: asked):
        self.features = set(features)
        self.refuse, self.grant = refuse, grant
        self.devices = []

    def request_device_sync(self, required_features=()):
        if self.refuse is not None:
            raise self.refuse
        device = _Device(self.grant(list(required_features)))
        self.devices.append(device)
        return device


def test_no_cooperative_feature_listed():
    r = matrix_units(_Adapter(["shader-f16", "subgroup"]))
    assert (r["adapter"], r["listed"], r["usable"], r["errors"]) == \
        ("a test adapter", [], [], {})


def test_a_refused_feature_reports_wgpus_words():
    refusal = RuntimeError("Some experimental features, EXPERIMENTAL_COOPERATIVE_MATRIX, "
                           "were requested,\n but experimental features are not enabled")
    r = matrix_units(_Adapter(["cooperative-matrix", "shader-f16"], refuse=refusal))
    assert r["listed"] == ["cooperative-matrix"] and r["usable"] == []
    assert r["errors"] == {"cooperative-matrix": "Some experimental features, "
                           "EXPERIMENTAL_COOPERATIVE_MATRIX, were requested, but "
                           "experimental features are not enabled"}


def test_a_granted_feature_is_usable_and_its_device_released():
    a = _Adapter(["cooperative-matrix"])
    r = matrix_units(a)
    assert r["usable"] == ["cooperative-matrix"] and r["errors"] == {}
    assert [d.destroyed for d in a.devices] == [True]


def test_a_device_made_without_the_feature_is_not_counted():
    r = matrix_units(_Adapter(["cooperative-matrix"], grant=lambda asked: []))
    assert r["usable"] == [] and r["errors"] == {
        "cooperative-matrix": "the device was made without it"}


def test_the_command_line_on_this_machines_adapter():
    pytest.importorskip("wgpu")
    from haelixe.backends.wgpu.context import gpu_available

    if not gpu_available():
        pytest.skip("no wgpu adapter")
    out = subprocess.run([sys.executable, "-m", "haelixe.backends.wgpu.probe"],
                         capture_output=True, text=True, check=True, timeout=120)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(r) == {"wgpu", "adapter", "listed", "usable", "errors"}
    assert set(r["usable"]) <= set(r["listed"])
    assert set(r["usable"]) | set(r["errors"]) == set(r["listed"])
