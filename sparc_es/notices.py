"""What the library tells its caller while it works, where nothing is wrong enough to raise: an
update that finds no folder and encodes the whole corpus, a run that resumes from a checkpoint.

They go through Python's logging, logger ``sparc_es.notice.<stage>`` at WARNING, so an application
routes or silences them as it does any library's (with no logging configured, Python prints them on
standard error); the ``sparc-es`` command prints them as ``sparc-es <stage>: message``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

LOGGER = "sparc_es.notice"


def notice(stage: str, message: str) -> None:
    """Tell the caller ``message`` from ``stage`` (``encode``, ``adapt``)."""
    logging.getLogger(f"{LOGGER}.{stage}").warning(message)


class _Line(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"sparc-es {record.name.rpartition('.')[2]}: {record.getMessage()}"


@contextmanager
def printed(stream) -> Iterator[None]:
    """While inside, notices are printed on ``stream`` as ``sparc-es <stage>: message`` (the
    command line's form), and not passed on to the application's own handlers."""
    logger = logging.getLogger(LOGGER)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_Line())
    saved = logger.propagate, logger.level
    logger.addHandler(handler)
    logger.propagate, logger.level = False, logging.INFO
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate, logger.level = saved
