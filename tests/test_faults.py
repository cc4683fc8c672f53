"""Faults survived, as crash-testing suites inject them (bounded in time: a few seconds):
processes killed at random points while saving a checkpoint or writing a dataset, a full
disk, two threads capturing at once, and KeyboardInterrupts from a timer during training.
"""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

import haelixe as hx
from haelixe import atomic
from haelixe.backends.graph import CaptureError
from haelixe.data import DatasetWriter, MemmapDataset

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

#: how many times each kill test kills a writer (each run is a fork: ~0.1-0.3 s)
KILLS = 6


def _leftovers(directory, name):
    return sorted(n for n in os.listdir(directory) if n.startswith(f".{name}."))


def _killed_child(work, seconds):
    """Fork a child running ``work()`` forever; SIGKILL it after ``seconds``."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            while True:
                work()
        finally:
            os._exit(1)
    time.sleep(seconds)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def _wait(pid, seconds=30.0):
    """waitpid with a deadline: a forked child stuck on a lock another thread held at
    the fork is killed instead of hanging the suite."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError(f"the child took longer than {seconds} s")


def _version(k):
    return {"w": hx.full((64, 1024), float(k)), "step": k}


def test_killed_saves_leave_the_old_or_new_file_and_the_next_save_removes_their_temporaries(
        tmp_path):
    path = tmp_path / "model.safetensors"
    hx.save(_version(0), path)
    rng = random.Random(0)
    counter = iter(range(1, 10**9))
    for _ in range(KILLS):
        _killed_child(lambda: hx.save(_version(next(counter)), path), rng.uniform(0.05, 0.2))
        loaded = hx.load(path)  # always a complete file: the old or a new one
        assert loaded["w"].numpy().min() == loaded["w"].numpy().max() == loaded["step"]
    hx.save(_version(-1), path)
    assert _leftovers(tmp_path, "model.safetensors") == []
    assert hx.load(path)["step"] == -1


def _write_dataset(path, value, overwrite=True):
    fields = {"inputs": ((8,), "float32"), "targets": ((1,), "int64")}
    with DatasetWriter(path, fields, overwrite=overwrite) as w:
        for _ in range(20):
            w.append(np.full((500, 8), value, np.float32), np.full((500, 1), value))


def test_killed_dataset_writes_leave_a_dataset_and_the_next_write_cleans_up(tmp_path):
    path = tmp_path / "data"
    _write_dataset(path, 0)
    rng = random.Random(1)
    counter = iter(range(1, 10**9))
    for _ in range(KILLS):
        _killed_child(lambda: _write_dataset(path, next(counter)), rng.uniform(0.05, 0.25))
        ds = MemmapDataset(path)
        x = ds.arrays["inputs"]
        assert len(ds) == 10_000 and x.min() == x.max()
    _write_dataset(path, -1)
    assert _leftovers(tmp_path, "data") == []


def test_a_dataset_writer_killed_between_its_two_renames_is_recovered_by_the_reader(
        tmp_path, monkeypatch):
    """Where the system has no atomic exchange the old dataset is moved aside first: a
    writer killed right then leaves nothing at the path, and opening moves it back."""
    path = tmp_path / "data"
    _write_dataset(path, 7)
    pid = os.fork()
    if pid == 0:
        try:
            monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
            real = os.replace

            def replace(src, dst):
                real(src, dst)
                if str(dst).endswith(".old"):
                    os.kill(os.getpid(), signal.SIGKILL)  # between the two renames

            monkeypatch.setattr(os, "replace", replace)
            _write_dataset(path, 8)
        finally:
            os._exit(1)
    _wait(pid)
    assert not path.exists()
    assert MemmapDataset(path).arrays["inputs"].max() == 7  # the old one, moved back
    _write_dataset(path, 9)
    assert _leftovers(tmp_path, "data") == []


# -- a full disk -----------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path, monkeypatch):
    """A 256 KiB tmpfs where mounting one is allowed; else a directory whose writes of
    more than 256 KiB fail with ENOSPC (injected at the file write)."""
    mount = tmp_path / "small"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                             capture_output=True).returncode == 0 if os.geteuid() == 0 \
        else False
    if not mounted:
        import builtins

        real_open = builtins.open

        class Full:
            def __init__(self, f):
                self.f, self.n = f, 0

            def write(self, b):
                self.n += memoryview(b).nbytes
                if self.n > 256 << 10:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                return self.f.write(b)

            def __getattr__(self, name):
                return getattr(self.f, name)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.f.close()

        def small_open(file, mode="r", *args, **kwargs):
            f = real_open(file, mode, *args, **kwargs)
            return Full(f) if str(file).startswith(str(mount)) and "w" in mode else f

        monkeypatch.setattr(builtins, "open", small_open)
    yield mount
    if mounted:
        subprocess.run(["umount", str(mount)], check=False)


def test_a_full_disk_names_the_path_and_leaves_the_old_file_and_no_temporary(small_disk):
    path = small_disk / "model.safetensors"
    hx.save({"w": hx.ones(1000)}, path)
    with pytest.raises(OSError) as err:
        hx.save({"w": hx.ones(1 << 20)}, path)  # 4 MiB
    assert err.value.errno == errno.ENOSPC and str(path) in str(err.value)
    assert hx.load(path)["w"].shape == (1000,)
    assert _leftovers(small_disk, "model.safetensors") == []


def test_a_full_disk_while_writing_a_dataset_names_the_path(small_disk):
    path = small_disk / "data"
    with pytest.raises(OSError) as err:
        with DatasetWriter(path, {"inputs": ((1024,), "float32")}) as w:
            for _ in range(100):
                w.append(np.zeros((16, 1024), np.float32))
    assert err.value.errno == errno.ENOSPC and str(path) in str(err.value)
    assert not path.exists() and _leftovers(small_disk, "data") == []


# -- threads ---------------------------------------------------------------------------
def test_two_threads_capturing_at_once_both_work_or_get_the_clear_message():
    results, start = {}, threading.Barrier(2)

    def run(k):
        w = hx.full((64, 64), float(k))

        @hx.capture
        def step(x):
            return (x @ w).sum()

        start.wait()
        try:
            x = hx.ones(8, 64)
            results[k] = [step(x).item() for _ in range(4)]
        except CaptureError as e:
            results[k] = str(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for k, r in results.items():
        if isinstance(r, str):
            assert "another thread is recording" in r, r
        else:
            assert r == [8 * 64 * 64 * float(k)] * 4
    assert len(results) == 2


# -- KeyboardInterrupt -----------------------------------------------------------------
def test_keyboard_interrupts_during_backward_leave_grad_mode_on_and_training_working():
    """A timer raises KeyboardInterrupt at random points of backward; afterwards grad
    mode is on and the next step trains (PyTorch's promise too; what Haelixe promises of
    an interrupted optimizer.step is in the next test)."""
    model = hx.nn.Sequential(hx.nn.Linear(16, 32), hx.nn.ReLU(), hx.nn.Linear(32, 1))
    opt = hx.optim.SGD(model.parameters(), lr=1e-3)
    x, y = hx.randn(64, 16), hx.randn(64, 1)

    def interrupt(sig, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    rng, interrupted, deadline = random.Random(2), 0, time.monotonic() + 3.0
    try:
        while interrupted < 50 and time.monotonic() < deadline:
            loss = ((model(x) - y) ** 2).mean()
            opt.zero_grad()
            try:
                signal.setitimer(signal.ITIMER_REAL, rng.uniform(1e-5, 3e-4))
                loss.backward()
                signal.setitimer(signal.ITIMER_REAL, 0)
            except KeyboardInterrupt:
                interrupted += 1
            signal.setitimer(signal.ITIMER_REAL, 0)
            assert hx.is_grad_enabled()
            opt.step()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert interrupted > 0
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_an_interrupted_optimizer_step_leaves_each_parameter_updated_or_not():
    """What an interrupted step promises: every parameter holds finite values, and
    parameters are either stepped or not (the step counter may run ahead of them, as
    PyTorch's CPU AdamW)."""
    p = [hx.nn.Parameter(hx.ones(256)) for _ in range(8)]
    opt = hx.optim.AdamW(p, lr=0.1)
    for q in p:
        q.grad = hx.ones(256)
    previous = signal.signal(signal.SIGALRM, lambda s, f: (_ for _ in ()).throw(
        KeyboardInterrupt()))
    try:
        signal.setitimer(signal.ITIMER_REAL, 1e-4)
        try:
            for _ in range(200):
                opt.step()
        except KeyboardInterrupt:
            pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    for q in p:
        v = q.detach().numpy()
        assert np.isfinite(v).all() and v.min() == v.max()  # a parameter moves whole
    opt.step()  # and the optimizer still steps
    assert hx.is_grad_enabled()


def _raised_inside(error, filename, function):
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename.endswith(filename) and code.co_name == function:
            return True
        tb = tb.tb_next
    return False


@pytest.mark.parametrize("mode", [True, False])
def test_interrupts_inside_optimizer_step_leave_grad_mode_as_it_was(mode):
    """Timer interrupts land at random lines of step() (most of them inside it, as the
    traceback shows); after each the grad mode is the caller's, on or off, and the
    optimizer keeps stepping. Bounded: at most 2 s or 60 interrupts."""
    p = [hx.nn.Parameter(hx.ones(64)) for _ in range(6)]
    opt = hx.optim.AdamW(p, lr=0.1)
    for q in p:
        q.grad = hx.ones(64)
    # (a first step loads the compiled kernels: an interrupt inside numba's loading would
    # leave numba's own registries half-filled, which is numba's state, not the step's)
    opt.step()
    from haelixe.backends import cpu_jit
    cpu_jit.wait()

    def interrupt(sig, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    rng, inside, interrupted = random.Random(5), 0, 0
    deadline = time.monotonic() + 2.0
    hx.set_grad_enabled(mode)
    try:
        while interrupted < 60 and time.monotonic() < deadline:
            try:
                signal.setitimer(signal.ITIMER_REAL, rng.uniform(1e-5, 5e-4))
                for _ in range(100):
                    opt.step()
                signal.setitimer(signal.ITIMER_REAL, 0)
            except KeyboardInterrupt as e:
                interrupted += 1
                inside += _raised_inside(e, "optimizer.py", "step")
            signal.setitimer(signal.ITIMER_REAL, 0)
            assert hx.is_grad_enabled() is mode
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        hx.set_grad_enabled(True)
    assert interrupted > 0 and inside > 0, (interrupted, inside)
    before = [q.detach().numpy().copy() for q in p]
    opt.step()
    assert all((q.detach().numpy() != b).all() for q, b in zip(p, before))


def test_an_interrupted_data_loader_closes_without_blocking(tmp_path):
    ds = hx.data.TensorDataset(hx.arange(10_000, dtype=hx.float32)) \
        if hasattr(hx.data, "TensorDataset") else None
    if ds is None:
        pytest.skip("no TensorDataset")
    loader = hx.data.DataLoader(ds, batch_size=4, prefetch=2) \
        if "prefetch" in hx.data.DataLoader.__init__.__code__.co_varnames else None
    if loader is None:
        pytest.skip("no prefetching DataLoader")
    previous = signal.signal(signal.SIGALRM, lambda s, f: (_ for _ in ()).throw(
        KeyboardInterrupt()))
    rng = random.Random(3)
    try:
        for _ in range(20):
            it = iter(loader)
            try:
                signal.setitimer(signal.ITIMER_REAL, rng.uniform(1e-5, 2e-3))
                for _ in it:
                    pass
                signal.setitimer(signal.ITIMER_REAL, 0)
            except KeyboardInterrupt:
                pass
            signal.setitimer(signal.ITIMER_REAL, 0)
            t0 = time.monotonic()
            it.close()
            assert time.monotonic() - t0 < 2.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert sum(1 for _ in loader) == 2500


def test_set_grad_enabled_called_as_a_function_sets_the_mode():
    hx.set_grad_enabled(False)
    try:
        assert not hx.is_grad_enabled()
    finally:
        hx.set_grad_enabled(True)
    assert hx.is_grad_enabled()
    with hx.set_grad_enabled(False):
        assert not hx.is_grad_enabled()
    assert hx.is_grad_enabled()

    @hx.set_grad_enabled(False)
    def inside():
        return hx.is_grad_enabled()

    assert hx.is_grad_enabled() and not inside() and hx.is_grad_enabled()


def test_absurd_sizes_and_views_raise_haelixes_errors_naming_them():
    with pytest.raises(RuntimeError, match=r"shape \(1099511627776, 1099511627776\)"):
        hx.zeros(2**40, 2**40)
    with pytest.raises(RuntimeError, match="4611686018427387904"):
        hx.zeros(2**62)
    with pytest.raises(RuntimeError, match=r"view: shape \(-4, -3\) is invalid"):
        hx.ones(12).view(-4, -3)


def test_anomaly_mode_lets_a_causal_masks_infinity_through_and_catches_nan():
    x = hx.randn(4, 4, requires_grad=True)
    keep = hx.ones(4, 4).tril().bool()
    with hx.autograd.detect_anomaly():
        x.masked_fill(~keep, -float("inf")).softmax(-1).sum().backward()
        with pytest.raises(RuntimeError, match="NaN"):
            hx.tensor([-1.0], requires_grad=True).sqrt()
    assert np.isfinite(x.grad.numpy()).all()


def test_a_npy_truncated_while_mapped_raises_haelixes_error_not_sigbus(tmp_path):
    path = tmp_path / "data"
    _write_dataset(path, 3, overwrite=False)
    ds = MemmapDataset(path)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a SIGBUS kills only this child
        try:
            f = path / "inputs.npy"
            os.truncate(f, os.path.getsize(f) // 2)
            try:
                ds.slice(9000, 9100)
                [ds[i] for i in range(9000, 9010)]
                message = "no error"
            except Exception as e:  # noqa: BLE001 (reported to the parent)
                message = f"{type(e).__module__} {e}"
            os.write(write, message.encode()[:4000])
        finally:
            os._exit(0)
    os.close(write)
    status = _wait(pid)
    message = os.read(read, 4096).decode()
    os.close(read)
    assert os.WIFEXITED(status), f"the reader died of signal {os.WTERMSIG(status)}"
    assert message.startswith("haelixe") and "inputs.npy" in message, message
