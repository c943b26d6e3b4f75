"""The data folder the ``data`` tier reads: ``../shared/data`` beside the repository, or ``$SPARC_ES_DATA``.

A test marked ``data`` that runs without it fails with one line naming the path (a plain ``pytest``
leaves the tier out; ``pytest --all``, as CI runs it, does not).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparc_es.evaluation.evalsets import DATA_ENV, data_dir


def need_data(*files: str) -> Path:
    """The data folder, once it holds each of ``files`` (relative paths); else the test fails in one line."""
    root = data_dir()
    if not root.is_dir():
        pytest.fail(f"data folder {root} not found: the `data` tier reads the project's ../shared/data beside the "
                    f"repository, or {DATA_ENV}=FOLDER (a plain `pytest` leaves the tier out)", pytrace=False)
    for name in files:
        if not (root / name).exists():
            pytest.fail(f"{root / name} not found: the data folder {root} is incomplete; restore it from the "
                        f"project's shared data, or point {DATA_ENV} at a complete copy", pytrace=False)
    return root
