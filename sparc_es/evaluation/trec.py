"""TREC files, read and written in one place: topics (``qid<TAB>question``), runs
(``qid Q0 docid rank score tag``) and qrels (``qid iter docid relevance``).

Readers stream, check every line and name the file and line of the first bad one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from sparc_es.corpus.ids import id_problem, shown
from sparc_es.engines.base import Hit
from sparc_es.errors import InputError, SparcError

# A topics file's header: the usual names of an id column and of a text column (pandas, spreadsheets,
# BEIR's and ir_datasets' exports), compared lowercased with " " and "-" read as "_".
HEADER_IDS = frozenset({"qid", "q_id", "queryid", "query_id", "question_id", "id", "_id", "topic", "topic_id",
                        "topicid", "number", "num"})
HEADER_TEXTS = frozenset({"question", "query", "text", "topic", "title", "query_text", "question_text",
                          "description"})
RUN_LAYOUT = "qid Q0 docid rank score tag"  # then any columns, which trec_eval ignores


def read_topics(path: str | Path) -> Iterator[tuple[str, str]]:
    """Yield (qid, question) from a ``qid<TAB>question`` file; blank lines are skipped, the whitespace
    around a qid is not part of it, and a line with a third column is refused (it would be searched as
    part of the question). A first line that is a header is not a question: its first column is an id
    column's usual name (:data:`HEADER_IDS`: ``qid``, ``query_id``, ``_id``, ``id``, ``topic``,
    ``number``, ...) and its second a text column's (:data:`HEADER_TEXTS`: ``question``, ``query``,
    ``text``, ``query_text``, ``title``, ...), each a single word, never a question."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "not a regular file" if path.exists() else "topics file not found")
    seen: dict[str, int] = {}  # qid -> line
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            line = _decode(raw, path, lineno).rstrip("\r\n")
            if not line.strip():
                continue
            qid, tab, question = line.partition("\t")
            qid = qid.strip()
            if not tab or not question.strip():
                raise InputError(path, "expected 'qid<TAB>question'", lineno)
            question, _, rest = question.partition("\t")
            if rest.strip():  # an answer or a label column would have been searched with the question
                columns = 3 + rest.count("\t")
                raise InputError(path, f"expected 'qid<TAB>question', not {columns} columns (a question holds no "
                                       "tab: the columns after it would be searched as part of it)", lineno)
            if not seen and _header(qid, question):
                continue  # a header line, as pandas and spreadsheets write one
            problem = id_problem(qid)
            if problem:
                raise InputError(path, f"query id {shown(qid)} {problem}", lineno)
            if qid in seen:  # " q1" and "q1" are one query in every run and qrels file
                raise InputError(path, f"duplicate query id {qid!r} (first at line {seen[qid]})", lineno)
            seen[qid] = lineno
            yield qid, question.strip()


def _header(qid: str, question: str) -> bool:
    """Whether a first line's two columns are an id column's and a text column's names."""
    def name(column: str) -> str:
        return "_".join(column.lower().replace("-", " ").split())

    return name(qid) in HEADER_IDS and name(question) in HEADER_TEXTS


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
        if self._file is None:
            raise SparcError("a TrecRunWriter writes inside its with: with TrecRunWriter(path) as run: run.write(...)")
        for rank, (hit, micro) in enumerate(zip(hits, _ordered_micro_scores(hits)), start=1):
            sign, micro = ("-", -micro) if micro < 0 else ("", micro)
            score = f"{sign}{micro // 1_000_000}.{micro % 1_000_000:06d}"
            self._file.write(f"{qid} Q0 {hit.id} {rank} {score} {self.tag}\n")

    def __exit__(self, *exc) -> None:
        self._file.close()
        self._file = None


def run_tag(engine: str, hybrid: str | None = None, weight: float | None = None) -> str:
    """The run tag (last column) that says how a run was made, one token: ``sparc-es-`` then the
    engine, then the hybrid if any, e.g. ``sparc-es-lucene-sum0.3``, ``sparc-es-es-rrf``,
    ``sparc-es-bm25``. ``engine`` and ``hybrid`` may be their enums (``describe()``'s); a hybrid
    ``none`` is none (``run --hybrid none`` and ``table``'s ``sparc:hybrid=none`` are one system)."""
    engine, hybrid = getattr(engine, "value", engine), getattr(hybrid, "value", hybrid)
    tag = f"sparc-es-{engine}"
    if hybrid and hybrid != "none":
        tag += f"-{hybrid}" + (f"{weight:g}" if hybrid in ("sum", "minmax") and weight is not None else "")
    return "".join(tag.split())


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
    for lineno, qid, docid, relevance in _columns(path, "qid iter docid relevance", (0, 2, 3), int, "an integer"):
        if not -2**31 <= relevance < 2**31:  # trec_eval's int
            raise InputError(path, f"relevance {relevance} is out of range (a 32-bit integer)", lineno)
        judged = qrels.setdefault(qid, {})
        if docid in judged:  # which line counts would be a guess (trec_eval keeps the last)
            raise InputError(path, f"document {docid!r} is judged twice for query {qid!r}", lineno)
        judged[docid] = relevance
    if not qrels:
        raise InputError(path, "no judgements in the qrels file")
    if not any(r > 0 for judged in qrels.values() for r in judged.values()):
        raise InputError(path, "no relevant judgement (relevance above 0): every measure would be 0")
    return qrels


def read_run(path: str | Path) -> dict[str, dict[str, float]]:
    """TREC run: ``qid Q0 docid rank score tag`` per line, any columns after the tag ignored as
    trec_eval ignores them (it reads the first six); a document listed twice for one query is an
    error (trec_eval refuses the file, and which score counts would be a guess)."""
    run: dict[str, dict[str, float]] = {}
    for lineno, qid, docid, score in _columns(path, RUN_LAYOUT, (0, 2, 4), float, "a number", more=True):
        docs = run.setdefault(qid, {})
        if docid in docs:
            raise InputError(path, f"document {docid!r} is listed twice for query {qid!r}", lineno)
        docs[docid] = score
    return run


class RunNotGrouped(InputError):
    """A run file in which the lines of a query are not all together: :func:`iter_run` cannot read
    it one query at a time (:func:`read_run` reads it whole)."""


def iter_run(path: str | Path) -> Iterator[tuple[str, dict[str, float]]]:
    """The run :func:`read_run` reads, one query at a time: (qid, docid -> score) in file order,
    holding one query's lines in memory, not the file's. That needs every line of a query
    together, as sparc-es (and trec_eval's usual inputs) write them; a query whose lines come
    back after another query's raises :class:`RunNotGrouped`."""
    done: set[str] = set()
    qid, docs = None, {}
    for lineno, q, docid, score in _columns(path, RUN_LAYOUT, (0, 2, 4), float, "a number", more=True):
        if q != qid:
            if qid is not None:
                yield qid, docs
                done.add(qid)
            if q in done:
                raise RunNotGrouped(path, f"the lines of query {q!r} are not all together", lineno)
            qid, docs = q, {}
        if docid in docs:
            raise InputError(path, f"document {docid!r} is listed twice for query {q!r}", lineno)
        docs[docid] = score
    if qid is not None:
        yield qid, docs


def _columns(path: str | Path, layout: str, keep: tuple[int, int, int], kind: type, kind_name: str,
             more: bool = False) -> Iterator[tuple[int, str, str, float]]:
    """(line number, qid, docid, value) of each line laid out as ``layout``, the value converted by
    ``kind`` and finite (NaN and infinity rank nowhere: trec_eval would sort them arbitrarily).
    With ``more``, columns after the layout's are allowed and ignored."""
    width = len(layout.split())
    for lineno, fields in _lines(path):
        if len(fields) < width or (len(fields) > width and not more):
            raise InputError(path, f"expected '{layout}'", lineno)
        q, d, v = (fields[i] for i in keep)
        try:
            value = kind(v)
        except ValueError:
            raise InputError(path, f"{layout.split()[keep[2]]} {v!r} is not {kind_name}", lineno) from None
        if not math.isfinite(value):
            raise InputError(path, f"{layout.split()[keep[2]]} {v!r} is not a finite number", lineno)
        yield lineno, q, d, value


def _lines(path: str | Path) -> Iterable[tuple[int, list[str]]]:
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "not a regular file" if path.exists() else "file not found")
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
