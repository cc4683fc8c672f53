"""Crash-safe writes: build the file (or directory) under a temporary name beside its
destination, fsync it, then rename it into place.

A rename within one directory is atomic on POSIX filesystems, so a reader sees either
the old complete file or the new complete file, never a half-written one; a failure
before the rename leaves the old file untouched and the temporary removed. A new file
gets the mode any other tool would give it (0o666 less the umask); a replaced one keeps
its mode.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
import tempfile


def _create_beside(path: str, suffix: str, create) -> str:
    """A new entry named ``.NAME.<random><suffix>`` beside ``path``, made by
    ``create(name)``, which passes the mode a new file or directory gets (the kernel
    then applies the umask, or a default ACL, exactly as for any other tool). When
    ``path`` exists the entry takes its permission bits instead, so replacing a file
    keeps its mode."""
    directory, base = os.path.split(path)
    while True:
        name = os.path.join(directory, f".{base}.{secrets.token_hex(6)}{suffix}")
        try:
            create(name)
            break
        except FileExistsError:
            continue
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode) & 0o777
    except FileNotFoundError:
        return name
    try:
        os.chmod(name, mode)
    except BaseException:
        (os.rmdir if os.path.isdir(name) else os.unlink)(name)
        raise
    return name


def _create_file(name: str) -> None:
    os.close(os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))


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


class CommitOnSuccess:
    """The one commit-or-discard protocol of everything written here: a subclass gives
    ``commit`` (publish) and ``discard`` (drop what was written, idempotent).
    :meth:`finish` commits and, when the commit itself fails, discards; ``with``
    finishes when the block succeeds and discards when it raises. So nothing
    half-written is ever published."""

    def commit(self) -> None:
        raise NotImplementedError

    def discard(self) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        try:
            self.commit()
        except BaseException:
            self.discard()
            raise

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.discard()


class AtomicFile(CommitOnSuccess):
    """A temporary file beside ``path`` that replaces ``path`` on :meth:`commit`.

        with AtomicFile("model.safetensors") as tmp:
            write_everything_to(tmp.temp_path)

    Leaving the ``with`` block normally commits; an exception discards the temporary
    and re-raises, leaving any existing ``path`` as it was.
    """

    def __init__(self, path):
        self.path = os.path.abspath(os.fspath(path))
        self.directory = os.path.dirname(self.path)
        self.temp_path = _create_beside(self.path, ".tmp", _create_file)
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


class AtomicDirectory(CommitOnSuccess):
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
        self.temp_path = _create_beside(self.path, ".tmp",
                                        lambda name: os.mkdir(name, 0o777))
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

