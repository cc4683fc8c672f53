"""Crash-safe writes: build the file (or directory) under a temporary name beside its
destination, fsync it, then rename it into place.

A rename within one directory is atomic on POSIX filesystems, so a reader sees either
the old complete file or the new complete file, never a half-written one; a failure
before the rename leaves the old file untouched and the temporary removed.
"""

from __future__ import annotations

import os
import shutil
import tempfile


def _umask() -> int:
    # Read, not set-and-restore: os.umask() would briefly change it for every thread.
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022


def fsync_path(path: str) -> None:
    """Flush a file's or directory's data and metadata to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: str) -> None:
    try:
        fsync_path(path)
    except OSError:  # some filesystems cannot fsync a directory; the rename still holds
        pass



class _CommitOnSuccess:
    """``with`` support: commit when the block succeeds, discard when it raises (and
    when the commit itself fails), so nothing half-written is ever published."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            try:
                self.commit()
            except BaseException:
                self.discard()
                raise
        else:
            self.discard()


class AtomicFile(_CommitOnSuccess):
    """A temporary file beside ``path`` that replaces ``path`` on :meth:`commit`.

        with AtomicFile("model.safetensors") as tmp:
            write_everything_to(tmp.temp_path)

    Leaving the ``with`` block normally commits; an exception discards the temporary
    and re-raises, leaving any existing ``path`` as it was.
    """

    def __init__(self, path):
        self.path = os.path.abspath(os.fspath(path))
        self.directory = os.path.dirname(self.path)
        fd, self.temp_path = tempfile.mkstemp(
            prefix=f".{os.path.basename(self.path)}.", suffix=".tmp", dir=self.directory)
        os.close(fd)
        # mkstemp makes the file 0600; give it the mode a plain open() would have.
        os.chmod(self.temp_path, 0o666 & ~_umask())
        self.done = False

    def commit(self) -> None:
        fsync_path(self.temp_path)
        os.replace(self.temp_path, self.path)
        self.done = True
        _fsync_dir(self.directory)

    def discard(self) -> None:
        if not self.done:
            self.done = True
            try:
                os.unlink(self.temp_path)
            except FileNotFoundError:
                pass



class AtomicDirectory(_CommitOnSuccess):
    """A temporary directory beside ``path`` that becomes ``path`` on :meth:`commit`.

    With ``overwrite`` an existing ``path`` is moved aside, the new directory renamed in,
    and the old one deleted: each step is atomic, and a crash between the two renames
    leaves the old directory under a hidden ``.NAME.*.old`` name, never a mixture.
    """

    def __init__(self, path, overwrite: bool = False):
        self.path = os.path.abspath(os.fspath(path))
        self.parent = os.path.dirname(self.path)
        self.overwrite = overwrite
        if os.path.exists(self.path) and not overwrite:
            raise FileExistsError(f"{self.path} already exists; pass overwrite=True to "
                                  f"replace it or choose another path")
        self.temp_path = tempfile.mkdtemp(prefix=f".{os.path.basename(self.path)}.",
                                          suffix=".tmp", dir=self.parent)
        os.chmod(self.temp_path, 0o777 & ~_umask())
        self.done = False

    def commit(self) -> None:
        for name in os.listdir(self.temp_path):
            fsync_path(os.path.join(self.temp_path, name))
        _fsync_dir(self.temp_path)
        old = None
        if os.path.exists(self.path):
            if not self.overwrite:
                raise FileExistsError(f"{self.path} appeared while it was being written; "
                                      f"pass overwrite=True to replace it")
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(self.path)}.",
                                   suffix=".old", dir=self.parent)
            os.replace(self.path, old)  # an empty directory may be replaced by rename
        os.replace(self.temp_path, self.path)
        self.done = True
        _fsync_dir(self.parent)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    def discard(self) -> None:
        if not self.done:
            self.done = True
            shutil.rmtree(self.temp_path, ignore_errors=True)

