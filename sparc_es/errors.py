"""Typed errors: every failure a user can cause says what was wrong, and where."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path

_COMMAND_LINE = False  # True while the sparc-es command runs a verb (sparc_es.cli.main)


def option(flag: str, keyword: str) -> str:
    """An option as its user gives it: ``flag`` under the ``sparc-es`` command, ``keyword`` from
    Python, so an error says "pass --overwrite" to one and "pass overwrite=True" to the other."""
    return flag if _COMMAND_LINE else keyword


@contextmanager
def command_line() -> Iterator[None]:
    """While inside, :func:`option` names command-line flags (the ``sparc-es`` command enters it)."""
    global _COMMAND_LINE
    before, _COMMAND_LINE = _COMMAND_LINE, True
    try:
        yield
    finally:
        _COMMAND_LINE = before


class SparcError(Exception):
    """Base class of every error sparc-es raises on purpose; the CLI prints it on one line."""


class InputError(SparcError):
    """Bad user input, located by file and (where it applies) line number."""

    def __init__(self, path: str | Path, message: str, line: int | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.reason = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class ModelError(SparcError):
    """A model folder that cannot be loaded or does not hold what sparc-es needs."""


class StoreError(SparcError):
    """An index or encoded folder that is missing, incomplete or inconsistent."""


class EngineError(SparcError):
    """The search engine failed (JVM start, indexing, a query)."""


def choice(enum: type[Enum], value, what: str, error: type[SparcError] = SparcError):
    """``value`` as a member of ``enum``, or a one-line ``error`` naming the choices."""
    try:
        return enum(value)
    except ValueError:
        raise error(f"unknown {what} {value!r}; choose from {', '.join(m.value for m in enum)}") from None


def count_mismatch(where: str, found: int, expected: int, of_what: str) -> str:
    """A count check's message that says which way it is off: extra or missing."""
    if found > expected:
        return (f"{where} holds {found} documents, {found - expected} more than the {expected} {of_what} "
                "(duplicate or foreign records); rebuild it from a clean encode")
    return (f"{where} holds {found} documents, {expected - found} fewer than the {expected} {of_what}: "
            "some were lost; run the same command again")


def one_line(e: BaseException, hint: str = "", most: int | None = None) -> str:
    """What went wrong, on one line: the message of a sparc-es error; the file and reason of an OS
    error (disk full, permission denied); the type and message of anything else, then ``hint``
    (where to see more). Its lines are joined by single spaces, so nothing said is lost. With
    ``most``, for a reader on another machine (an HTTP client): its first line only, since what
    follows there is a stack (a Java exception's), which belongs in a log, and at most ``most``
    characters."""
    if isinstance(e, SparcError):
        text = str(e)
    elif isinstance(e, OSError):
        text = f"{f'{e.filename}: ' if e.filename else ''}{e.strerror or e}"
    else:  # not foreseen: still one line, and where to see more
        text = f"{type(e).__name__}: {e}{hint}"
    if most is None:
        return " ".join(text.split())
    first = " ".join(next((line for line in text.splitlines() if line.strip()), "").split())
    return first if len(first) <= most else first[:most - 3] + "..."
