"""Corpus input: sentence records from JSONL and from documents (text, Markdown, reST, HTML), streamed.

Two kinds of input give the same record, :class:`Sentence`:

* JSONL, one sentence per line: ``{"id": ..., "text": ..., "context"?: ...}`` (optional ``doc``,
  ``start``, ``end`` are carried through so a hit can be shown in its document).
* JSONL documents in the BEIR layout, ``{"_id": ..., "title"?: ..., "text": ...}``: each is split
  into sentences as a text document is (ids ``<_id>#<n>``, ``doc`` = ``_id``), and each sentence's
  context is the document's title followed by its paragraph.
* Documents: plain text (``.txt``), Markdown (``.md``), reStructuredText (``.rst``) and HTML
  (``.html``). :mod:`sparc_es.readers` parses each into blocks (paragraphs, list items, table rows
  with their section titles and lead-ins); Bling Fire splits each block into sentences. A
  sentence's context is its block with the section titles and lead-in before it
  (:func:`context_of`), its id is ``<document id>#<sentence number>`` and ``start``/``end`` are
  character offsets into the file that hold the sentence's words.

A folder is read recursively; its files that are neither JSONL nor a document are counted by
suffix (:attr:`CorpusStats.skipped_files`) for the user to hear about. Everything is a generator: a
corpus is never held in memory. Files may start with a UTF-8 byte-order mark and end lines with
CRLF; control characters (NUL, BEL, ESC, ...) are removed from texts (they would reach a terminal
when hits are printed) and counted in :class:`CorpusStats`.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Protocol
from dataclasses import asdict, dataclass, field
from pathlib import Path

import orjson

from .errors import InputError
from .readers import CODE, HEADING, ROW, SUFFIXES, Block, format_of, locate, read_blocks

JSONL_SUFFIXES = (".jsonl", ".json")
TEXT_SUFFIXES = tuple(SUFFIXES)  # documents: .txt, .md/.markdown, .rst/.rest, .html/.htm
READ_SUFFIXES = JSONL_SUFFIXES + TEXT_SUFFIXES
_READABLE = ".jsonl, .txt, .md, .rst or .html"
BOM = "\ufeff"
# C0 controls but tab, newline and carriage return; DEL; C1 controls.
_WHITESPACE = re.compile(r"\s")
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


@dataclass
class CorpusStats:
    """What reading a corpus changed, for the user to hear about."""

    control_characters: int = 0  # removed from texts and contexts
    sentences_cleaned: int = 0  # records that had any
    examples: list[str] = field(default_factory=list)  # the first few sentence ids concerned
    skipped_files: dict[str, int] = field(default_factory=dict)  # files in folders not read, by suffix
    hidden_files: int = 0  # hidden files and folders (.git, .DS_Store) passed over

    def skipped_notice(self) -> str:
        """One line for the user about the folder files not read ("" when none were skipped)."""
        if not self.skipped_files:
            return ""
        return f"{_skipped_text(self.skipped_files)} (only {_READABLE} files are read)"


@dataclass(frozen=True)
class Sentence:
    """One retrievable unit: a sentence, the passage it came from, and where it sits."""

    id: str
    text: str
    context: str = ""
    doc: str | None = None
    start: int | None = None
    end: int | None = None

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None and v != ""}


def _decode(raw: bytes, path: Path, line: int | None = None) -> str:
    """UTF-8 text of a line (``line``) or of a whole file; a leading byte-order mark is dropped."""
    try:
        text = raw.decode("utf-8")
        return text[1:] if text.startswith(BOM) and line in (None, 1) else text
    except UnicodeDecodeError as e:
        if line is None:  # whole file: say which line the bad byte is on
            line = raw.count(b"\n", 0, e.start) + 1
        raise InputError(path, f"not valid UTF-8 (byte 0x{raw[e.start]:02x}); "
                               "re-encode the file as UTF-8", line) from None


def _jsonl_lines(path: Path, stats: CorpusStats) -> Iterator[tuple[int, Sentence]]:
    contexts = _Contexts()
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            line = _decode(raw, path, lineno).strip()
            if not line:
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:  # orjson's message has no column: ask json where it failed
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    raise InputError(path, f"malformed JSON at column {e.colno}: {e.msg}", lineno) from None
            if isinstance(obj, dict) and "_id" in obj and "id" not in obj:
                for sentence in _beir_document(obj, path, lineno, stats):
                    yield lineno, sentence
            else:
                yield lineno, _record(obj, path, lineno, stats, contexts)


class _Contexts:
    """The last context cleaned: the sentences of a paragraph come one after another and share it."""

    def __init__(self) -> None:
        self.raw, self.clean, self.removed = None, "", 0

    def __call__(self, context: str) -> tuple[str, int]:
        if context != self.raw:
            cleaned, self.removed = CONTROL.subn("", context)
            self.raw, self.clean = context, cleaned.strip()
        return self.clean, self.removed


def _beir_document(obj: dict, path: Path, lineno: int, stats: CorpusStats) -> Iterator[Sentence]:
    doc_id, title, text = obj.get("_id"), obj.get("title") or "", obj.get("text")
    if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)) or not str(doc_id).strip():
        raise InputError(path, 'invalid "_id" (a non-empty string or an integer)', lineno)
    if not isinstance(text, str) or not isinstance(title, str):
        raise InputError(path, '"text" and "title" must be strings', lineno)
    yield from document_sentences(text, str(doc_id), stats, title)


def document_sentences(text: str, doc_id: str, stats: CorpusStats | None = None, title: str = "",
                       format: str = "text", keep_code: bool = False, where: str | None = None
                       ) -> Iterator[Sentence]:
    """The sentences of one document (a file, a BEIR record, a document from a search index):
    control characters become spaces (counted in ``stats``; offsets do not move), ``format`` says
    how the text is written (see :func:`split_document`), and each sentence's context starts with
    the document's ``title`` when there is one."""
    text, removed = CONTROL.subn(" ", text)
    title, removed_title = CONTROL.subn(" ", title)
    if (removed or removed_title) and stats is not None:
        _count(stats, doc_id, removed + removed_title)
    title = _SPACES.sub(" ", title).strip()
    for s in split_document(text, doc_id, format, keep_code, where):
        context = f"{title}. {s.context}" if title else s.context
        yield Sentence(id=s.id, text=s.text, context=context, doc=s.doc, start=s.start, end=s.end)


def _record(obj: object, path: Path, lineno: int, stats: CorpusStats, contexts: _Contexts | None = None) -> Sentence:
    if not isinstance(obj, dict):
        raise InputError(path, f"expected a JSON object, got {type(obj).__name__}", lineno)
    sid = obj.get("id")
    if isinstance(sid, bool) or not isinstance(sid, (str, int)) or str(sid).strip() == "":
        raise InputError(path, 'missing or invalid "id" (a non-empty string or an integer)', lineno)
    if _WHITESPACE.search(str(sid)):
        # Ids go into TREC run files, whose columns are separated by spaces.
        raise InputError(path, f'"id" {sid!r} contains whitespace', lineno)
    text = obj.get("text")
    if not isinstance(text, str):
        raise InputError(path, 'missing or invalid "text" (a string)', lineno)
    context = obj.get("context", "")
    if not isinstance(context, str):
        raise InputError(path, '"context" must be a string', lineno)
    text, n_text = CONTROL.subn("", text)
    context, n_context = (contexts or _Contexts())(context)
    if n_text or n_context:
        _count(stats, str(sid), n_text + n_context)
    if not text.strip():
        raise InputError(path, f'empty sentence: "text" of id {sid!r} has no characters to encode', lineno)
    doc = obj.get("doc")
    start, end = obj.get("start"), obj.get("end")
    for name, value in (("start", start), ("end", end)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InputError(path, f'"{name}" must be an integer offset', lineno)
    return Sentence(id=str(sid), text=text.strip(), context=context,
                    doc=None if doc is None else str(doc), start=start, end=end)


# --- documents: plain text, Markdown, reStructuredText, HTML -----------------------------------

_SPACES = re.compile(r"\s+")


def context_of(block: Block) -> str:
    """A block's context: its section titles joined by " > ", its lead-in, then its own text.

    ``Block("Port: 8081", ("Serving", "REST server"), "Options:")`` gives
    ``"Serving > REST server. Options: Port: 8081"``: each part ends as a sentence (a lead-in as
    a clause, with ":"), so the model reads the titles and the lead-in as text before the block's.
    """
    parts = []
    if block.headings:
        path = " > ".join(block.headings)
        parts.append(path if path[-1] in ".!?:;" else path + ".")
    if block.lead:
        parts.append(block.lead if block.lead[-1] in ".!?:;" else block.lead + ":")
    parts.append(block.text)
    return " ".join(parts)


def _block_sentences(block: Block, source: str, format: str) -> Iterator[tuple[str, int, int]]:
    """(text, start, end) of each sentence of a block; offsets index ``source``."""
    import blingfire  # small native dependency; imported here so reading JSONL never needs it

    if format == "text":  # the block is the source itself: Bling Fire's offsets are the file's
        raw = source[block.start:block.end]
        _, spans = blingfire.text_to_sentences_and_offsets(raw)
        for a, b in spans:
            while b > a and raw[b - 1].isspace():
                b -= 1
            sentence = _SPACES.sub(" ", raw[a:b]).strip()
            if sentence:
                yield sentence, block.start + a, block.start + b
        return
    if block.kind in (ROW, CODE):  # one unit: a row is its header's pairs, code is not prose
        raw = source[block.start:block.end]
        a, b = len(raw) - len(raw.lstrip()), len(raw.rstrip())
        yield block.text, block.start + a, block.start + max(a, b)
        return
    _, spans = blingfire.text_to_sentences_and_offsets(block.text)
    pos = block.start
    for a, b in spans:
        sentence = block.text[a:b].strip()
        if sentence:
            start, end = locate(source, sentence, pos, block.end)
            if end > start and (start, end) != (pos, block.end):
                pos = end
            yield sentence, start, end


def split_document(text: str, doc_id: str, format: str = "text", keep_code: bool = False,
                   where: str | None = None) -> Iterator[Sentence]:
    """Split a document into sentences (Bling Fire, inside each block the reader finds).

    ``format``: "text", "markdown", "rst" or "html" (:mod:`sparc_es.readers`). A sentence's
    context is :func:`context_of` its block (for plain text: its paragraph); ``start``/``end``
    index ``text``. Headings give no sentence of their own: they are in the context of every
    sentence of their section. ``keep_code`` makes each code block one sentence; ``where``
    names the document in errors (default: ``doc_id``).
    """
    id_prefix = re.sub(r"\s", "_", doc_id)  # ids go into space-separated TREC run files
    n = 0
    for block in read_blocks(text, format, keep_code, name=where or doc_id):
        if block.kind == HEADING:
            continue
        context = context_of(block)
        for sentence, start, end in _block_sentences(block, text, format):
            yield Sentence(id=f"{id_prefix}#{n}", text=sentence, context=context, doc=doc_id,
                           start=start, end=end)
            n += 1


def _count(stats: CorpusStats, sid: str, n: int) -> None:
    stats.control_characters += n
    stats.sentences_cleaned += 1
    if len(stats.examples) < 3:
        stats.examples.append(sid)


def read_document(path: str | Path, doc_id: str | None = None, stats: CorpusStats | None = None,
                  keep_code: bool = False) -> Iterator[Sentence]:
    """Yield the sentences of one document file, read as its suffix says (offsets index its text)."""
    path = Path(path)
    format = format_of(path) or "text"
    yield from document_sentences(_decode(path.read_bytes(), path), doc_id or path.name, stats, format=format,
                                  keep_code=keep_code, where=str(path))


def _suffix(path: Path) -> str:
    return path.suffix.lower() or "(no suffix)"


def corpus_files(paths: Iterable[str | Path], stats: CorpusStats | None = None) -> list[tuple[Path, str]]:
    """Resolve files and folders to (file, document id) pairs, in a stable order.

    A folder is read recursively; its files that are neither JSONL nor a document are counted by
    suffix in ``stats.skipped_files``, hidden files and folders (``.git``, ``.DS_Store``, not
    descended into) in ``stats.hidden_files``.
    """
    files: list[tuple[Path, str]] = []
    skipped: Counter[str] = Counter()
    hidden = 0
    for p in map(Path, paths):
        if p.is_dir():
            found: list[Path] = []
            here: Counter[str] = Counter()
            for root, dirs, names in os.walk(p):
                hidden += sum(d.startswith(".") for d in dirs) + sum(n.startswith(".") for n in names)
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                for name in names:
                    f = Path(root, name)
                    if name.startswith("."):
                        continue
                    if f.suffix.lower() in READ_SUFFIXES and f.is_file():
                        found.append(f)
                    else:
                        here[_suffix(f)] += 1
            skipped += here
            if not found:
                detail = f" ({_skipped_text(here)})" if here else ""
                raise InputError(p, f"no {_READABLE} files in this folder{detail}")
            files += [(f, f.relative_to(p).as_posix()) for f in sorted(found)]
        elif p.is_file():
            if p.suffix.lower() not in READ_SUFFIXES:
                raise InputError(p, "unknown corpus format: use .jsonl records or .txt / .md / .rst / .html "
                                    "documents")
            files.append((p, p.name))
        else:
            raise InputError(p, "no such file or folder")
    if stats is not None:  # set, not added to: a corpus is listed again each time it is read
        stats.skipped_files = dict(sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])))
        stats.hidden_files = hidden
    return files


def _skipped_text(skipped: Counter[str] | dict[str, int], most: int = 6) -> str:
    """``skipped 12 files: 7 .png, 3 .py, 2 .yml``, the most frequent suffixes first."""
    ranked = sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0]))
    parts = [f"{n} {suffix}" for suffix, n in ranked[:most]]
    if len(ranked) > most:
        parts.append(f"{sum(n for _, n in ranked[most:])} other")
    total = sum(skipped.values())
    return f"skipped {total} file{'s' if total != 1 else ''}: {', '.join(parts)}"


def read_corpus(paths: Iterable[str | Path], stats: CorpusStats | None = None) -> Iterator[Sentence]:
    """Stream every sentence of the given files and folders; ids must be unique across them.

    ``stats``, when given, counts what was cleaned on the way (see :class:`CorpusStats`).
    """
    stats = stats if stats is not None else CorpusStats()
    files = corpus_files(paths, stats)
    seen: dict[str, tuple[int, int | None]] = {}  # id -> (file number, line) of its first record
    count = 0
    for number, (path, doc_id) in enumerate(files):
        if path.suffix.lower() in JSONL_SUFFIXES:
            records: Iterator[tuple[int | None, Sentence]] = _jsonl_lines(path, stats)
        else:
            records = ((None, s) for s in read_document(path, doc_id, stats))
        for lineno, s in records:
            if s.id in seen:
                # A second record with the same id would silently replace the first in an index.
                first_file, first_line = seen[s.id]
                first = f"{files[first_file][0]}" + (f":{first_line}" if first_line is not None else "")
                raise InputError(path, f"duplicate sentence id {s.id!r} (first seen at {first})", lineno)
            seen[s.id] = (number, lineno)
            count += 1
            yield s
    if count == 0:
        raise InputError(", ".join(str(f) for f, _ in files) or "corpus", "empty corpus: no sentences found")


class Source(Protocol):
    """Where a corpus comes from, read as often as encoding needs (validation, IDF, encoding)."""

    def read(self, stats: CorpusStats | None = None) -> Iterator[Sentence]:
        """Every sentence, in a stable order; ``stats`` counts what was cleaned."""

    def describe(self) -> list[str]:
        """What the manifest records as the corpus (no secrets)."""


@dataclass(frozen=True)
class Files:
    """A corpus of local files and folders (what ``encode --corpus`` takes)."""

    paths: tuple[str, ...]

    def read(self, stats: CorpusStats | None = None) -> Iterator[Sentence]:
        return read_corpus(self.paths, stats)

    def describe(self) -> list[str]:
        return list(self.paths)


def as_source(corpus: Source | Iterable[str | Path]) -> Source:
    """A :class:`Source` as it is; file and folder paths as :class:`Files`."""
    if hasattr(corpus, "read") and hasattr(corpus, "describe"):
        return corpus  # type: ignore[return-value]
    return Files(tuple(str(p) for p in corpus))  # type: ignore[union-attr]
