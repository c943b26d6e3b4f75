"""TREC files, read and written in one place: topics (``qid<TAB>question``), runs
(``qid Q0 docid rank score tag``) and qrels (``qid iter docid relevance``).

Readers stream, check every line and name the file and line of the first bad one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from .engines.base import Hit
from .errors import InputError


def read_topics(path: str | Path) -> Iterator[tuple[str, str]]:
    """Yield (qid, question) from a ``qid<TAB>question`` file; blank lines are skipped."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "topics file not found")
    seen: set[str] = set()
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            line = _decode(raw, path, lineno).rstrip("\r\n")
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


def _ordered_micro_scores(hits: list[Hit]) -> list[int]:
    """Scores in millionths, strictly decreasing in the hits' order (integers: no float drift)."""
    out: list[int] = []
    for hit in hits:
        micro = round(hit.score * 1_000_000)
        out.append(micro if not out or micro < out[-1] else out[-1] - 1)
    return out


def run_of(results: Mapping[str, list[Hit]]) -> dict[str, dict[str, float]]:
    """The run (qid -> docid -> score) that :class:`TrecRunWriter` writes for ``results``, in memory:
    what ``eval`` reads back from the file."""
    return {qid: {h.id: m / 1_000_000 for h, m in zip(hits, _ordered_micro_scores(hits))}
            for qid, hits in results.items()}


class TrecRunWriter:
    """Write ``qid Q0 docid rank score tag`` lines in the order the hits are shown.

    trec_eval (and so ``eval``) re-sorts a query's lines by score and breaks ties by docid, not by
    rank; integer impacts tie often. So, as Anserini does, the written scores encode the displayed
    order: each is at most the one before it less 1e-6 (the printed precision), and a tie becomes
    1e-6 steps. Every tool then reads the ranking that ``search`` and ``run`` show.
    """

    def __init__(self, path: str | Path, tag: str = "sparc-es") -> None:
        self.path = Path(path)
        self.tag = tag
        self._file = None

    def __enter__(self) -> TrecRunWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "w", encoding="utf-8")
        return self

    def write(self, qid: str, hits: list[Hit]) -> None:
        for rank, (hit, micro) in enumerate(zip(hits, _ordered_micro_scores(hits)), start=1):
            sign, micro = ("-", -micro) if micro < 0 else ("", micro)
            self._file.write(f"{qid} Q0 {hit.id} {rank} {sign}{micro // 1_000_000}.{micro % 1_000_000:06d} {self.tag}\n")

    def __exit__(self, *exc) -> None:
        self._file.close()


def write_topics(path: str | Path, topics: Iterable[tuple[str, str]]) -> None:
    """Write (qid, question) pairs as ``qid<TAB>question``; whitespace in a question becomes single spaces."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for qid, question in topics:
            f.write(f"{qid}\t{' '.join(question.split())}\n")


def write_qrels(path: str | Path, qrels: Iterable[tuple[str, Mapping[str, int]]]) -> None:
    """Write (qid, {docid: relevance}) pairs as TREC qrels, documents sorted per query."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for qid, docs in qrels:
            for docid in sorted(docs):
                f.write(f"{qid} 0 {docid} {docs[docid]}\n")


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """TREC qrels: ``qid iter docid relevance`` per line."""
    qrels: dict[str, dict[str, int]] = {}
    for qid, docid, relevance in _columns(path, "qid iter docid relevance", (0, 2, 3), int, "an integer"):
        qrels.setdefault(qid, {})[docid] = relevance
    if not qrels:
        raise InputError(path, "no judgements in the qrels file")
    return qrels


def read_run(path: str | Path) -> dict[str, dict[str, float]]:
    """TREC run: ``qid Q0 docid rank score tag`` per line."""
    run: dict[str, dict[str, float]] = {}
    for qid, docid, score in _columns(path, "qid Q0 docid rank score tag", (0, 2, 4), float, "a number"):
        run.setdefault(qid, {})[docid] = score
    return run


def _columns(path: str | Path, layout: str, keep: tuple[int, int, int], kind: type, kind_name: str
             ) -> Iterator[tuple[str, str, float]]:
    """(qid, docid, value) of each line laid out as ``layout``, the value converted by ``kind``."""
    width = len(layout.split())
    for lineno, fields in _lines(path):
        if len(fields) != width:
            raise InputError(path, f"expected '{layout}'", lineno)
        q, d, v = (fields[i] for i in keep)
        try:
            yield q, d, kind(v)
        except ValueError:
            raise InputError(path, f"{layout.split()[keep[2]]} {v!r} is not {kind_name}", lineno) from None


def _lines(path: str | Path) -> Iterable[tuple[int, list[str]]]:
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "file not found")
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            fields = _decode(raw, path, lineno).split()
            if fields:
                yield lineno, fields


def _decode(raw: bytes, path: Path, lineno: int) -> str:
    """One line as text; a byte-order mark opening the file is dropped."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(path, "not valid UTF-8", lineno) from None
    return text[1:] if lineno == 1 and text.startswith("\ufeff") else text
