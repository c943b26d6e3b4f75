"""Anserini-style batch files: topics TSV in, TREC run file out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from .engines import Hit
from .errors import InputError


def read_topics(path: str | Path) -> Iterator[tuple[str, str]]:
    """Yield (qid, question) from a ``qid<TAB>question`` file; blank lines are skipped."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "topics file not found")
    seen: set[str] = set()
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                raise InputError(path, "not valid UTF-8", lineno) from None
            if not line.strip():
                continue
            qid, tab, question = line.partition("\t")
            if not tab or not qid.strip() or not question.strip():
                raise InputError(path, "expected 'qid<TAB>question'", lineno)
            if " " in qid.strip():
                raise InputError(path, f"query id {qid!r} contains a space (TREC run files split on spaces)", lineno)
            if qid in seen:
                raise InputError(path, f"duplicate query id {qid!r}", lineno)
            seen.add(qid)
            yield qid.strip(), question.strip()


class TrecRunWriter:
    """Write ``qid Q0 docid rank score tag`` lines, hits ordered by (-score, engine order)."""

    def __init__(self, path: str | Path, tag: str = "sparc-es") -> None:
        self.path = Path(path)
        self.tag = tag
        self._file = None

    def __enter__(self) -> TrecRunWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "w", encoding="utf-8")
        return self

    def write(self, qid: str, hits: list[Hit]) -> None:
        for rank, hit in enumerate(hits, start=1):
            self._file.write(f"{qid} Q0 {hit.id} {rank} {hit.score:.6f} {self.tag}\n")

    def __exit__(self, *exc) -> None:
        self._file.close()
