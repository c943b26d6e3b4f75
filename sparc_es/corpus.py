"""Corpus input: sentence records from JSONL, plain text and Markdown, streamed.

Two kinds of input give the same record, :class:`Sentence`:

* JSONL, one sentence per line: ``{"id": ..., "text": ..., "context"?: ...}`` (optional ``doc``,
  ``start``, ``end`` are carried through so a hit can be shown in its document).
* JSONL documents in the BEIR layout, ``{"_id": ..., "title"?: ..., "text": ...}``: each is split
  into sentences as a text document is (ids ``<_id>#<n>``, ``doc`` = ``_id``), and each sentence's
  context is the document's title followed by its paragraph.
* Plain text (``.txt``) and Markdown (``.md``) documents, split offline into paragraphs and
  sentences (Bling Fire's sentence breaker). A sentence's context is its paragraph, its id is
  ``<document id>#<sentence number>`` and ``start``/``end`` are character offsets into the file.

Everything is a generator: a corpus is never held in memory. Files may start with a UTF-8
byte-order mark and end lines with CRLF; control characters (NUL, BEL, ESC, ...) are removed from
texts (they would reach a terminal when hits are printed) and counted in :class:`CorpusStats`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Protocol
from dataclasses import asdict, dataclass, field
from pathlib import Path

import orjson

from .errors import InputError

JSONL_SUFFIXES = (".jsonl", ".json")
TEXT_SUFFIXES = (".txt", ".md", ".markdown")
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
                       markdown: bool = False) -> Iterator[Sentence]:
    """The sentences of one document (a BEIR record, a document from a search index): control
    characters become spaces (counted in ``stats``), each sentence's context is its paragraph,
    after the document's ``title`` when there is one."""
    text, removed = CONTROL.subn(" ", text)
    title, removed_title = CONTROL.subn(" ", title)
    if (removed or removed_title) and stats is not None:
        _count(stats, doc_id, removed + removed_title)
    title = _SPACES.sub(" ", title).strip()
    for s in split_document(text, doc_id, markdown=markdown):
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


# --- plain text and Markdown ---------------------------------------------------------------

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+")
_QUOTE = re.compile(r"^\s*>\s?")
_INLINE = re.compile(r"\*\*|__|`|!?\[|\]\([^)]*\)")
_SPACES = re.compile(r"\s+")


def _blank(text: str, start: int, end: int) -> str:
    return text[:start] + " " * (end - start) + text[end:]


def _markdown_blocks(text: str) -> Iterator[tuple[int, str]]:
    """Yield (offset, block) pairs; line markers (#, -, >) are blanked so offsets still index `text`."""
    block: list[str] = []
    block_start = 0
    in_fence = False
    pos = 0
    for line in text.splitlines(keepends=True):
        line_start, pos = pos, pos + len(line)
        if _FENCE.match(line):
            in_fence = not in_fence
            masked = None
        elif in_fence or not line.strip():
            masked = None
        else:
            masked = line
            for pattern in (_HEADING, _ITEM, _QUOTE):
                m = pattern.match(masked)
                if m:
                    masked = _blank(masked, 0, m.end())
        new_unit = masked is not None and (_HEADING.match(line) or _ITEM.match(line))
        if block and (masked is None or new_unit):
            yield block_start, "".join(block)
            block = []
        if masked is not None:
            if not block:
                block_start = line_start
            block.append(masked)
            if _HEADING.match(line):  # a heading is a paragraph of its own
                yield block_start, "".join(block)
                block = []
    if block:
        yield block_start, "".join(block)


def _clean(text: str) -> str:
    """Text for people and for the model: inline Markdown markup removed, whitespace collapsed."""
    return _SPACES.sub(" ", _INLINE.sub("", text)).strip()


def _text_blocks(text: str) -> Iterator[tuple[int, str]]:
    for m in re.finditer(r"\S(?:.|\n(?!\s*\n))*", text):
        yield m.start(), m.group()


def split_document(text: str, doc_id: str, markdown: bool = False) -> Iterator[Sentence]:
    """Split a document into sentences; each sentence's context is its paragraph."""
    import blingfire  # small native dependency; imported here so reading JSONL never needs it

    blocks = _markdown_blocks(text) if markdown else _text_blocks(text)
    clean = _clean if markdown else (lambda t: _SPACES.sub(" ", t).strip())
    id_prefix = re.sub(r"\s", "_", doc_id)  # ids go into space-separated TREC run files
    n = 0
    for offset, block in blocks:
        context = clean(block)
        if not context:
            continue
        _, spans = blingfire.text_to_sentences_and_offsets(block)
        for a, b in spans:
            while b > a and block[b - 1].isspace():
                b -= 1
            sentence = clean(block[a:b])
            if not sentence:
                continue
            yield Sentence(id=f"{id_prefix}#{n}", text=sentence, context=context, doc=doc_id,
                           start=offset + a, end=offset + b)
            n += 1


def _count(stats: CorpusStats, sid: str, n: int) -> None:
    stats.control_characters += n
    stats.sentences_cleaned += 1
    if len(stats.examples) < 3:
        stats.examples.append(sid)


def read_document(path: str | Path, doc_id: str | None = None, stats: CorpusStats | None = None
                  ) -> Iterator[Sentence]:
    """Yield the sentences of one text or Markdown file (offsets index the file's text)."""
    path = Path(path)
    markdown = path.suffix.lower() in (".md", ".markdown")
    yield from document_sentences(_decode(path.read_bytes(), path), doc_id or path.name, stats, markdown=markdown)


def corpus_files(paths: Iterable[str | Path]) -> list[tuple[Path, str]]:
    """Resolve files and folders to (file, document id) pairs, in a stable order."""
    files: list[tuple[Path, str]] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.rglob("*")
                           if f.is_file() and f.suffix.lower() in JSONL_SUFFIXES + TEXT_SUFFIXES)
            if not found:
                raise InputError(p, "no .jsonl, .txt or .md files in this folder")
            files += [(f, f.relative_to(p).as_posix()) for f in found]
        elif p.is_file():
            if p.suffix.lower() not in JSONL_SUFFIXES + TEXT_SUFFIXES:
                raise InputError(p, "unknown corpus format: use .jsonl records or .txt / .md documents")
            files.append((p, p.name))
        else:
            raise InputError(p, "no such file or folder")
    return files


def read_corpus(paths: Iterable[str | Path], stats: CorpusStats | None = None) -> Iterator[Sentence]:
    """Stream every sentence of the given files and folders; ids must be unique across them.

    ``stats``, when given, counts what was cleaned on the way (see :class:`CorpusStats`).
    """
    files = corpus_files(paths)
    stats = stats if stats is not None else CorpusStats()
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
