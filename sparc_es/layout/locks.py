"""Exclusive output folders: one writer at a time for every folder sparc-es writes.

:func:`exclusive` takes an advisory lock (``flock``) on a hidden file beside the folder,
``.NAME.lock``, so the lock holds while the folder itself is created, replaced or renamed into
place. A second writer fails at once with :class:`~sparc_es.errors.StoreError`; the lock goes
with the process however it ends (the kernel releases it), so a killed run never leaves a stale
lock behind that blocks the rerun.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sparc_es.errors import StoreError


def lock_path(folder: str | Path) -> Path:
    folder = Path(folder).absolute()
    return folder.parent / f".{folder.name}.lock"


@contextmanager
def exclusive(folder: str | Path, what: str = "sparc-es") -> Iterator[None]:
    """Hold the write lock of ``folder`` for the ``with`` block (``what``: the command, for the message)."""
    path = lock_path(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreError(f"{folder}: another {what} is writing this folder right now (lock {path}); "
                             "wait for it to finish or choose another folder") from None
        try:  # the file may have been unlinked by a finishing holder between our open and flock
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        os.close(fd)


def check_free(folder: str | Path, what: str = "sparc-es") -> None:
    """Refuse now, as :func:`exclusive` would, when another process holds ``folder``'s lock: a
    command that loads a model first says so before seconds of loading, not after."""
    path = lock_path(folder)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # no lock file (or none that can be read): exclusive will tell
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise StoreError(f"{folder}: another {what} is writing this folder right now (lock {path}); "
                         "wait for it to finish or choose another folder") from None
    finally:
        os.close(fd)  # the shared lock, if taken, goes with it
