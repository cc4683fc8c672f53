"""Crash-safe writes: build the file (or directory) under a temporary name beside its
destination, fsync it, then rename it into place.

A rename within one directory is atomic on POSIX filesystems, so a reader sees either
the old complete file or the new complete file, never a half-written one; a failure
before the rename leaves the old file untouched and the temporary removed. A new file
gets the mode any other tool would give it (0o666 less the umask); a replaced one keeps
its mode.

A process killed mid-write cannot remove its temporary: each is named
``.NAME.<pid>-<random>.tmp``, and the next write of NAME removes those whose process is
gone. A directory is replaced by one atomic exchange where the system has it (Linux's
renameat2); elsewhere the old one is moved aside as ``.NAME.<pid>-<random>.old`` first,
and a reader or writer finding NAME missing moves a dead writer's one back.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import secrets
import shutil
import stat


def _create_beside(path: str, suffix: str, create) -> str:
    """A new entry named ``.NAME.<random><suffix>`` beside ``path``, made by
    ``create(name)``, which passes the mode a new file or directory gets (the kernel
    then applies the umask, or a default ACL, exactly as for any other tool). When
    ``path`` exists the entry takes its permission bits instead, so replacing a file
    keeps its mode."""
    directory, base = os.path.split(path)
    while True:
        name = _temporary_name(directory, base, suffix)
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


def _temporary_name(directory: str, base: str, suffix: str) -> str:
    return os.path.join(directory, f".{base}.{os.getpid()}-{secrets.token_hex(6)}{suffix}")


def _writer_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _leftovers(path: str, suffix: str) -> list:
    """Temporaries (or moved-aside old directories, ``suffix`` '.old') beside ``path``
    whose writing process is gone, newest first."""
    directory, base = os.path.split(path)
    pattern = re.compile(re.escape(f".{base}.") + r"(\d+)-[0-9a-f]{12}" + re.escape(suffix))
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return []
    found = []
    for name in names:
        m = pattern.fullmatch(name)
        if m and not _writer_alive(int(m.group(1))):
            full = os.path.join(directory, name)
            try:
                found.append((os.lstat(full).st_mtime, full))
            except FileNotFoundError:
                continue
    return [full for _, full in sorted(found, reverse=True)]


def _remove(full: str) -> None:
    if os.path.isdir(full) and not os.path.islink(full):
        shutil.rmtree(full, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(full)


def remove_stale_temporaries(path) -> None:
    """Remove what killed writes of ``path`` left beside it (their process is gone)."""
    path = os.path.abspath(os.fspath(path))
    recover_directory(path)
    for full in _leftovers(path, ".tmp") + _leftovers(path, ".old"):
        _remove(full)


def recover_directory(path) -> bool:
    """Where ``path`` is missing because a writer died between moving the old directory
    aside and moving the new one in, move the old one back; True when it did."""
    path = os.path.abspath(os.fspath(path))
    if os.path.lexists(path):
        return False
    for old in _leftovers(path, ".old"):
        try:
            os.rename(old, path)  # (fails if another reader recovered it first)
            return True
        except OSError:
            return os.path.lexists(path)
    return False


def _exchange(a: str, b: str) -> bool:
    """Swap the entries ``a`` and ``b`` in one atomic step; False where the system or
    the filesystem cannot."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    if renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2) == 0:  # RENAME_EXCHANGE
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), b)


_RENAMEAT2 = []


def _renameat2():
    if not _RENAMEAT2:
        try:
            fn = ctypes.CDLL(None, use_errno=True).renameat2
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_uint]
            fn.restype = ctypes.c_int
        except (AttributeError, OSError):
            fn = None
        _RENAMEAT2.append(fn)
    return _RENAMEAT2[0]


_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


@contextlib.contextmanager
def naming_the_path(path, what: str = "writing"):
    """A full disk (or quota) while writing ``path``: an OSError of the same errno that
    names the path and the fix, instead of the system's bare message."""
    try:
        yield
    except OSError as e:
        if e.errno not in _DISK_FULL:
            raise
        raise OSError(e.errno, f"{os.strerror(e.errno)} while {what} {os.fspath(path)}; free some "
                               f"space on its filesystem (nothing was replaced)",
                      os.fspath(path)) from None


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
        remove_stale_temporaries(self.path)
        self.temp_path = _create_beside(self.path, ".tmp", _create_file)
        self.done = False

    def __exit__(self, exc_type, exc, tb) -> None:
        with naming_the_path(self.path):
            super().__exit__(exc_type, exc, tb)
            if isinstance(exc, OSError) and exc.errno in _DISK_FULL:
                raise exc

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
        remove_stale_temporaries(self.path)
        self.temp_path = _create_beside(self.path, ".tmp",
                                        lambda name: os.mkdir(name, 0o777))
        self.done = False

    def commit(self) -> None:
        for name in os.listdir(self.temp_path):
            fsync_path(os.path.join(self.temp_path, name))
        _fsync_dir(self.temp_path)
        if os.path.exists(self.path) and not self.overwrite:
            raise FileExistsError(f"{self.path} appeared while it was being written; "
                                  f"pass overwrite=True to replace it")
        if os.path.isdir(self.path) and _exchange(self.temp_path, self.path):
            old = self.temp_path  # (the old directory, now under the temporary's name)
        elif os.path.exists(self.path):
            # no atomic exchange here: moved aside under a name readers recover from
            old = _temporary_name(self.parent, os.path.basename(self.path), ".old")
            os.replace(self.path, old)
            os.replace(self.temp_path, self.path)
        else:
            old = None
            os.replace(self.temp_path, self.path)
        self.done = True
        _fsync_dir(self.parent)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    def discard(self) -> None:
        if not self.done:
            self.done = True
            shutil.rmtree(self.temp_path, ignore_errors=True)

