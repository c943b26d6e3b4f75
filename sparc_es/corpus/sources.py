"""Corpus input: sentence records from JSONL and from documents (text, Markdown, reST, HTML), streamed.

Two kinds of input give the same record, :class:`Sentence`:

* JSONL, one sentence per line: ``{"id": ..., "text": ..., "context"?: ...}`` (optional ``doc``,
  ``start``, ``end`` are carried through so a hit can be shown in its document; optional
  ``headings``, its sections' titles, are read by the BM25 side with the text).
* JSONL documents in the BEIR layout, ``{"_id": ..., "title"?: ..., "text": ...}``: each is split
  into sentences as a text document is (ids ``<_id>#<key>``, ``doc`` = ``_id``), and each sentence's
  context is the document's title followed by its paragraph.
* Documents: plain text (``.txt``), Markdown (``.md``), reStructuredText (``.rst``) and HTML
  (``.html``). :mod:`sparc_es.corpus.readers` parses each into blocks (paragraphs, list items, table rows
  with their section titles and lead-ins); Bling Fire splits each block into sentences. A
  sentence's context is its block with the section titles and lead-in before it
  (:func:`context_of`), its id is ``<document id>#<key>`` (:func:`sentence_key`: from its text)
  and ``start``/``end`` are character offsets into the file that hold the sentence's words.

A folder is read recursively; its files that are neither JSONL nor a document are counted by
suffix (:attr:`ReadStats.skipped_files`) for the user to hear about. Everything is a generator: a
corpus is never held in memory. Files may start with a UTF-8 byte-order mark and end lines with
CRLF; control characters (NUL, BEL, ESC, ...) are removed from texts (they would reach a terminal
when hits are printed) and counted in :class:`ReadStats`.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import re
import stat
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Protocol

import orjson

from sparc_es.corpus.ids import ID_UNSAFE, SURROGATE, id_problem, shown
from sparc_es.corpus.readers import SUFFIXES, format_of, read_blocks
from sparc_es.corpus.readers.blocks import CODE, HEADING, PARAGRAPH, ROW, Block, Report, lead_of, line_starts, locate
from sparc_es.errors import InputError

# A .json file is read as JSONL only when named on its own: in a folder, .json files are a project's
# configuration (package.json, a theme's _static/*.json, sparc-es's own meta.json), skipped and counted.
JSONL_SUFFIXES = (".jsonl", ".json")
TEXT_SUFFIXES = tuple(SUFFIXES)  # documents: .txt, .md/.markdown, .rst/.rest, .html/.htm
READ_SUFFIXES = JSONL_SUFFIXES + TEXT_SUFFIXES  # what a file named on its own may be
FOLDER_SUFFIXES = (".jsonl",) + TEXT_SUFFIXES  # what is read in a folder
# The file every folder sparc-es writes holds (sparc_es.layout.ownership.MARKER, the same name): a
# folder inside a corpus folder that holds it (an earlier encode, an index) is not corpus.
OWN_MARKER = ".sparc-es"
_READABLE = ".jsonl, .txt, .md/.markdown, .rst/.rest or .html/.htm"
# A site generator's output: Sphinx's HTML builders write .buildinfo, MkDocs writes sitemap.xml.gz
# with every build. Inside a docs project (a folder holding the generator's configuration, on the way
# down from the folder given) a built site is its sources again, read beside it, so it is left out;
# given on its own (or found where no configuration is), it is read without the pages the generator
# makes of its own: copies of the sources, highlighted module code, indexes, the search and 404 pages,
# and every file that is not HTML (a plugin's copy of the sources: llms-full.txt, index.md).
SITE_MARKERS = {".buildinfo": "Sphinx", "sitemap.xml.gz": "MkDocs"}
PROJECT_FILES = ("conf.py", "mkdocs.yml", "mkdocs.yaml")
_GENERATED = {
    "Sphinx": re.compile(r"(_sources|_modules|_static|_images|_downloads|genindex|search|py-modindex)/|"
                         r"(genindex(-\w+)?|search|\w+-modindex)\.html", re.IGNORECASE),
    "MkDocs": re.compile(r"404\.html", re.IGNORECASE),  # its search plugin's files and assets: no pages
}
SITE_BUILT = "site built from the sources read beside it"
TEMPLATES = "_templates"  # Sphinx's page templates (Jinja), beside conf.py: not pages
REQUIREMENTS = re.compile(r"requirements[\w.-]*\.txt", re.IGNORECASE)  # in a docs project: pip's input, not a page
BOM = "\ufeff"
# C0 controls but tab, newline and carriage return; DEL; C1 controls.
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# The C0 controls' names (tab, line feed and carriage return are kept in texts, so never named).
_C0 = ("NUL SOH STX ETX EOT ENQ ACK BEL BS HT LF VT FF CR SO SI DLE DC1 DC2 DC3 DC4 NAK SYN ETB CAN EM SUB ESC "
       "FS GS RS US").split()


def control_name(code: int) -> str:
    """``U+001B (ESC)``, ``U+007F (DEL)``, ``U+0080 (C1 control)``: a character CONTROL matches, named."""
    name = _C0[code] if code < 0x20 else "DEL" if code == 0x7F else "C1 control" if 0x80 <= code <= 0x9F else None
    return f"U+{code:04X}" + (f" ({name})" if name else "")


def controls_found(kinds: dict[str, int], most: int = 4) -> str:
    """``U+0080 (C1 control) x 2, U+001B (ESC)``: the control characters of :attr:`ReadStats.control_kinds`,
    most frequent first (the first ``most``, then how many other kinds)."""
    ranked = sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))
    named = [control_name(int(k[2:], 16)) + (f" x {n}" if n > 1 else "") for k, n in ranked[:most]]
    if len(ranked) > most:
        named.append(f"{len(ranked) - most} other kinds")
    return ", ".join(named)


# Elasticsearch refuses a longer _id (UTF-8 bytes); Lucene and TREC files take any length.
ID_MAX_BYTES = 512
# A "sentence" longer than this (a line with no sentence end, a table row, minified text) is read as
# pieces of at most this many characters, cut at spaces: the encoder reads only its first
# max_length tokens (256, about 1,200 characters of English), so the rest would be lost, and a 5 MB
# line would be tokenised whole.
MAX_SENTENCE_CHARS = 1_500
# A block longer than this gives each sentence a window of it as context, the part around the
# sentence, not the whole block: the passage encoder reads 256 tokens, and every sentence of a
# 5 MB paragraph would otherwise store all of it.
MAX_CONTEXT_CHARS = 10_000
CUT_EXAMPLES = 5
# A table row longer than this (a handbook's row of 1,600 characters, cut at 128 tokens) is read as
# groups of its "Header: cell" pairs of about this size, each a unit with the whole row as context.
ROW_UNIT_CHARS = 400
SHORT_CHARS = 60  # a paragraph of one sentence shorter than this has the paragraph before it as its lead-in
# A lead-in longer than this (the header row of a table 2,000 columns wide) is cut in contexts: every
# row's context holds it, and the passage encoder reads 256 tokens.
MAX_LEAD_CHARS = 1_000


def sentence_id_problem(sid: str) -> str | None:
    """Why ``sid`` cannot be a sentence id (see :func:`sparc_es.corpus.ids.id_problem`; and at most
    :data:`ID_MAX_BYTES` bytes), as the end of a sentence, or None when it can."""
    problem = id_problem(sid)
    if problem is None and len(sid.encode("utf-8")) > ID_MAX_BYTES:
        problem = f"is {len(sid.encode('utf-8'))} bytes long (UTF-8); Elasticsearch takes ids of at most {ID_MAX_BYTES}"
    return problem


@dataclass
class ReadStats:
    """What reading a corpus changed, for the user to hear about."""

    control_characters: int = 0  # removed from texts and contexts
    control_kinds: dict[str, int] = field(default_factory=dict)  # those characters by code point ("U+0080": 2)
    sentences_cleaned: int = 0  # records that had any
    examples: list[str] = field(default_factory=list)  # the first few sentence ids concerned
    skipped_files: dict[str, int] = field(default_factory=dict)  # files in folders not read, by suffix
    hidden_files: int = 0  # hidden files and folders (.git, .DS_Store) passed over
    skipped_links: int = 0  # links in folders to files or folders outside the folder, or to no regular file
    own_folders: list[str] = field(default_factory=list)  # folders in corpus folders that sparc-es wrote
    # what a site generator made rather than an author wrote: "docs/_build/html/ (...)", "_sources/"
    generated: list[str] = field(default_factory=list)
    empty_files: int = 0  # files read that gave no sentence (an empty page, only a heading and code)
    empty_examples: list[str] = field(default_factory=list)  # the first few
    cut: int = 0  # texts the readers cut or bounded (a sentence too long, an expansion too large, ...)
    cut_examples: list[str] = field(default_factory=list)  # the first few, "file:line: what"

    def note_cut(self, where: str, line: int | None, what: str) -> None:
        """Count one text cut or bounded by a reader, at ``where`` (a file) and ``line``."""
        self.cut += 1
        if len(self.cut_examples) < CUT_EXAMPLES:
            self.cut_examples.append(f"{where}{f':{line}' if line is not None else ''}: {what}")

    def skipped_notice(self) -> str:
        """One line for the user about the folder files not read ("" when none were skipped)."""
        notes = []
        if self.skipped_files:
            notes.append(f"{_skipped_text(self.skipped_files)} (only {_READABLE} files are read)")
        if self.own_folders:
            notes.append(f"skipped {counted(len(self.own_folders), 'folder')} sparc-es wrote (an earlier encode or "
                         f"index is not corpus): {_examples(self.own_folders[:CUT_EXAMPLES], len(self.own_folders))}")
        if self.generated:
            built = any(SITE_BUILT in g for g in self.generated)
            notes.append("left out what is no page of the docs: "
                         f"{_examples(self.generated[:CUT_EXAMPLES], len(self.generated))}"
                         + ("; a built site given as --corpus on its own is read as HTML" if built else ""))
        if self.hidden_files:
            n = self.hidden_files
            notes.append(f"left out {n} hidden {'file or folder' if n == 1 else 'files and folders'} "
                         "(names that start with '.')")
        if self.skipped_links:
            n = self.skipped_links
            notes.append(f"skipped {n} link{'s' if n != 1 else ''} that lead{'s' if n == 1 else ''} outside the "
                         "corpus folder or to no regular file (links are followed only inside the folder)")
        return "; ".join(notes)

    def note_empty(self, path: str | Path) -> None:
        """Count one file read that gave no sentence."""
        self.empty_files += 1
        if len(self.empty_examples) < CUT_EXAMPLES:
            self.empty_examples.append(str(path))

    def empty_notice(self) -> str:
        """One line for the user about the files that gave no sentence ("" when every file gave some)."""
        return empty_files_notice(self.empty_files, self.empty_examples)


def empty_files_notice(count: int, examples: list[str]) -> str:
    """One line about ``count`` files that gave no sentence, ``examples`` of them named ("" for none).
    A reStructuredText page of autodoc directives alone is one: its text is written by Sphinx."""
    if not count:
        return ""
    autodoc = any(str(e).endswith(".rst") for e in examples)
    return (f"{counted(count, 'file')} gave no sentences (empty, or only headings, code or navigation"
            + ("; an .rst page of autodoc directives alone holds no text before Sphinx builds it: encode "
               "the built HTML for its API" if autodoc else "")
            + f"): {_examples(examples, count)}")


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 file``, ``2 files``: ``n`` and the noun, singular or plural as ``n`` says."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def _examples(names: list[str], total: int) -> str:
    """``a.md, b.html and 3 more``: the names, then how many others there are."""
    shown_names = ", ".join(n if n.isprintable() else shown(n, 80) for n in names)
    return shown_names + (f" and {total - len(names)} more" if total > len(names) else "")


@dataclass(frozen=True)
class Sentence:
    """One retrievable unit: a sentence, the passage it came from, and where it sits."""

    id: str
    text: str
    context: str = ""
    doc: str | None = None
    start: int | None = None
    end: int | None = None
    code: str | None = None  # the code block this sentence leads into (shown with it, not searched)
    # the titles of the sections it sits in, " > "-joined (also in its context): the BM25 side of the
    # default search reads them with the text, as a title field (docs/evaluation.md)
    headings: str | None = None

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


# An HTML page's declared encoding, in its first 1,024 bytes as browsers look for it (WHATWG's
# prescan): <meta charset="x"> or <meta http-equiv="Content-Type" content="text/html; charset=x">.
_HTML_CHARSET = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)
# Labels browsers read as another encoding than Python's codec of that name (WHATWG Encoding).
_BROWSER_CODEC = {"iso-8859-1": "windows-1252", "latin1": "windows-1252", "latin-1": "windows-1252",
                  "us-ascii": "windows-1252", "ascii": "windows-1252", "iso-8859-9": "windows-1254"}


def _document_text(raw: bytes, path: Path, format: str, stats: ReadStats | None) -> str:
    """The text of a document file: UTF-8, or the encoding an HTML page declares; bytes that are
    neither are read as U+FFFD and noted in ``stats`` (as Sphinx replaces and warns), so one old
    file does not stop a folder. With no ``stats`` to note them in, they are an :class:`InputError`."""
    if format == "html" and not raw.startswith(BOM.encode()):
        declared = _HTML_CHARSET.search(raw[:1024])
        name = declared.group(1).decode("ascii").lower() if declared is not None else ""
        codec = _BROWSER_CODEC.get(name, name)
        if codec and codec.replace("_", "-") not in ("utf-8", "utf8"):
            try:
                return raw.decode(codec, "replace")
            except LookupError:  # a label Python does not know: read as UTF-8 below
                pass
    try:
        return _decode(raw, path)
    except InputError as e:
        if stats is None:
            raise
        text = raw.decode("utf-8", "replace")
        text = text[1:] if text.startswith(BOM) else text
        bad = text.count("\ufffd") - raw.decode("utf-8", "ignore").count("\ufffd")
        stats.note_cut(str(path), e.line, f"not valid UTF-8: {counted(bad, 'byte sequence')} read as U+FFFD "
                                          "(re-encode the file as UTF-8)")
        return text


def _jsonl_lines(path: Path, stats: ReadStats) -> Iterator[tuple[int, Sentence]]:
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
                # json takes what orjson refuses: a lone surrogate escape ("\ud800") gives a string
                # no file or database can hold as UTF-8, and failed only when the sentence was stored.
                if SURROGATE.search(json.dumps(obj, ensure_ascii=False)):
                    raise InputError(path, "a string holds a lone surrogate escape such as \"\\ud800\": "
                                           "not valid Unicode", lineno) from None
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


def _beir_document(obj: dict, path: Path, lineno: int, stats: ReadStats) -> Iterator[Sentence]:
    doc_id, title, text = obj.get("_id"), obj.get("title") or "", obj.get("text")
    if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)) or not str(doc_id).strip():
        raise InputError(path, 'invalid "_id" (a non-empty string or an integer)', lineno)
    size = len(ID_UNSAFE.sub("_", str(doc_id)).encode("utf-8")) + 9  # its sentences' ids: "<_id>#<8 hex digits>"
    if size > ID_MAX_BYTES:
        raise InputError(path, f'"_id" {shown(str(doc_id))} is too long: its sentence ids ("<_id>#<key>") would '
                               f"be {size} bytes, and Elasticsearch takes ids of at most {ID_MAX_BYTES}", lineno)
    if not isinstance(text, str) or not isinstance(title, str):
        raise InputError(path, '"text" and "title" must be strings', lineno)
    yield from document_sentences(text, str(doc_id), stats, title)


def document_sentences(text: str, doc_id: str, stats: ReadStats | None = None, title: str = "",
                       format: str = "text", keep_code: bool = False, where: str | None = None
                       ) -> Iterator[Sentence]:
    """The sentences of one document (a file, a BEIR record, a document from a search index):
    control characters become spaces (counted in ``stats``; offsets do not move), ``format`` says
    how the text is written (see :func:`split_document`), and each sentence's context starts with
    the document's ``title`` when there is one."""
    raw = (text, title)
    text, removed = CONTROL.subn(" ", text)
    title, removed_title = CONTROL.subn(" ", title)
    if (removed or removed_title) and stats is not None:
        _count(stats, doc_id, *raw)
    title = _SPACES.sub(" ", title).strip()
    report = None
    if stats is not None:
        def report(line: int | None, what: str) -> None:
            stats.note_cut(where or doc_id, line, what)
    for s in split_document(text, doc_id, format, keep_code, where, report):
        if title:
            s = replace(s, context=f"{title}. {s.context}", headings=" > ".join(h for h in (title, s.headings) if h))
        yield s


def _record(obj: object, path: Path, lineno: int, stats: ReadStats, contexts: _Contexts | None = None) -> Sentence:
    if not isinstance(obj, dict):
        raise InputError(path, f"expected a JSON object, got {type(obj).__name__}", lineno)
    sid = obj.get("id")
    if isinstance(sid, bool) or not isinstance(sid, (str, int)) or str(sid).strip() == "":
        raise InputError(path, 'missing or invalid "id" (a non-empty string or an integer)', lineno)
    problem = sentence_id_problem(str(sid))
    if problem:
        raise InputError(path, f'"id" {shown(str(sid))} {problem}', lineno)
    text = obj.get("text")
    if not isinstance(text, str):
        raise InputError(path, 'missing or invalid "text" (a string)', lineno)
    context = obj.get("context", "")
    if not isinstance(context, str):
        raise InputError(path, '"context" must be a string', lineno)
    raw = (text, context)
    text, n_text = CONTROL.subn("", text)
    context, n_context = (contexts or _Contexts())(context)
    if n_text or n_context:
        _count(stats, str(sid), *raw)
    if not text.strip():
        raise InputError(path, f'empty sentence: "text" of id {sid!r} has no characters to encode', lineno)
    doc = obj.get("doc")
    start, end = obj.get("start"), obj.get("end")
    for name, value in (("start", start), ("end", end)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InputError(path, f'"{name}" must be an integer offset', lineno)
    code = obj.get("code")
    if code is not None and not isinstance(code, str):
        raise InputError(path, '"code" must be a string', lineno)
    headings = obj.get("headings")
    if headings is not None and not isinstance(headings, str):
        raise InputError(path, '"headings" must be a string', lineno)
    return Sentence(id=str(sid), text=text.strip(), context=context,
                    doc=None if doc is None else str(doc), start=start, end=end, code=code or None,
                    headings=CONTROL.sub("", headings).strip() or None if headings else None)


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
        lead = block.lead if len(block.lead) <= MAX_LEAD_CHARS else block.lead[:MAX_LEAD_CHARS].rsplit(" ", 1)[0] + " …"
        parts.append(lead if lead[-1] in ".!?:;" else lead + ":")
    parts.append(block.text)
    return " ".join(parts)


def _block_sentences(block: Block, source: str, format: str) -> Iterator[tuple[str, int, int, int]]:
    """(text, start, end, at) of each sentence of a block: ``start`` and ``end`` index ``source``,
    ``at`` is about where the sentence starts in ``block.text``."""
    if format == "text":  # the block is the source itself: Bling Fire's offsets are the file's
        raw = source[block.start:block.end]
        spans = sentence_spans(raw)
        for a, b in spans:
            while b > a and raw[b - 1].isspace():
                b -= 1
            sentence = _SPACES.sub(" ", raw[a:b]).strip()
            if sentence:
                yield sentence, block.start + a, block.start + b, a
        return
    if block.kind in (ROW, CODE):  # one unit: a row is its header's pairs, code is not prose
        raw = source[block.start:block.end]
        a, b = len(raw) - len(raw.lstrip()), len(raw.rstrip())
        if block.kind == ROW and len(block.text) > ROW_UNIT_CHARS:  # a wide row: its cells in groups
            at = 0
            for unit in _row_units(block.text):
                yield unit, block.start + a, block.start + max(a, b), at
                at += len(unit) + 2
            return
        yield block.text, block.start + a, block.start + max(a, b), 0
        return
    spans = sentence_spans(block.text)
    pos = block.start
    for a, b in spans:
        sentence = block.text[a:b].strip()
        if sentence:
            start, end = locate(source, sentence, pos, block.end)
            if end > start and (start, end) != (pos, block.end):
                pos = end
            yield sentence, start, end, a


# Where Bling Fire's sentences are wrong on documentation: it joins a sentence that starts with a
# number or a template ("... with Vanguard. 37signals matches ...", "... operator. {{ 1 + 1 }} is 2.")
# and ends one at a quoted "!" or "?" ('Use the "!" prefix'). A sentence end is a word of three
# letters or more and a period (not an abbreviation); a quoted mark is followed by lower case.
_MISSED_END = re.compile(r"\b([A-Za-z]{3,})[.!?](\s+)(?=\d|\{\{|\{%)")
_NOT_ENDS = frozenset({"fig", "figs", "vol", "sec", "approx", "ver", "min", "max", "no", "eq", "ch", "pp", "etc",
                       "ref", "refs", "art", "par", "vs"})
_QUOTED_MARK = re.compile(r"[\"'\u201c\u201d\u2018\u2019`][!?][\"'\u201c\u201d\u2018\u2019`]$")


def _row_units(text: str, most: int = ROW_UNIT_CHARS) -> list[str]:
    """A table row's ``Header: cell`` pairs in groups of at most ``most`` characters (a pair longer
    than that alone), each a retrievable unit; the whole row, with its header row, is their context."""
    units, group = [], ""
    for pair in text.split("; "):
        if group and len(group) + 2 + len(pair) > most:
            units.append(group)
            group = pair
        else:
            group = f"{group}; {pair}" if group else pair
    if group:
        units.append(group)
    return units


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of ``text``: Bling Fire's, mended where it is wrong on
    documentation (see ``_MISSED_END`` and ``_QUOTED_MARK``)."""
    import blingfire  # small native dependency; imported here so reading JSONL never needs it

    _, found = blingfire.text_to_sentences_and_offsets(text)
    merged: list[list[int]] = []
    for a, b in found:
        if merged and _QUOTED_MARK.search(text[merged[-1][0]:merged[-1][1]]) and text[a:b][:1].islower():
            merged[-1][1] = b  # 'Use the "!"' + 'prefix to negate': one sentence
        else:
            merged.append([a, b])
    spans = []
    for a, b in merged:
        for cut in _MISSED_END.finditer(text, a, b):
            if cut.group(1).lower() not in _NOT_ENDS:
                spans.append((a, cut.start(2)))
                a = cut.end(2)
        spans.append((a, b))
    return spans


def _bounded(sentences: Iterable[tuple[str, int, int, int]], source: str, lines: _Lines,
             report: Report | None) -> Iterator[tuple[str, int, int, int]]:
    """The sentences, each over ``MAX_SENTENCE_CHARS`` read as pieces cut at spaces (each located
    in ``source``), and reported."""
    for sentence, start, end, at in sentences:
        if len(sentence) <= MAX_SENTENCE_CHARS:
            yield sentence, start, end, at
            continue
        pieces = _pieces(sentence)
        if report is not None:
            report(lines.of(start), f"a sentence of {len(sentence):,} characters read as {len(pieces):,} pieces "
                                    f"of at most {MAX_SENTENCE_CHARS:,}")
        pos, offset = start, 0
        for piece in pieces:
            a, b = locate(source, piece, pos, max(end, pos))
            if b > a:
                pos = b
            yield piece, a, b, at + offset
            offset += len(piece) + 1


def _pieces(text: str, most: int = MAX_SENTENCE_CHARS) -> list[str]:
    """``text`` cut into pieces of at most ``most`` characters, at the last space before each cut
    (anywhere, when a stretch has no space)."""
    pieces = []
    while len(text) > most:
        cut = text.rfind(" ", most // 2, most + 1)
        cut = cut if cut > 0 else most
        pieces.append(text[:cut].strip())
        text = text[cut:].lstrip()
    if text:
        pieces.append(text)
    return [p for p in pieces if p]


def _window(text: str, at: int, size: int = MAX_CONTEXT_CHARS) -> str:
    """The part of a long block's ``text`` that is the context of the sentence at ``at``: a span of
    ``size`` characters on a grid of half of it (so neighbouring sentences share it, and the
    passage encoded for it), that holds the sentence's start, cut at spaces."""
    half = size // 2
    begin = max(0, (at // half) * half - half // 2)
    finish = begin + size
    if begin > 0:
        space = text.find(" ", begin, begin + 200)
        begin = space + 1 if space >= 0 else begin
    if finish < len(text):
        space = text.rfind(" ", finish - 200, finish)
        finish = space if space >= 0 else finish
    return text[begin:finish].strip()


class _Lines:
    """Line numbers of offsets in one text."""

    def __init__(self, text: str) -> None:
        self.text, self.starts = text, None

    def of(self, offset: int) -> int:
        if self.starts is None:  # counted only when a cut is reported
            self.starts = line_starts(self.text)[:-1]
        return bisect.bisect_right(self.starts, offset)


def split_document(text: str, doc_id: str, format: str = "text", keep_code: bool = False,
                   where: str | None = None, report: Report | None = None) -> Iterator[Sentence]:
    """Split a document into sentences (Bling Fire, inside each block the reader finds).

    ``format``: "text", "markdown", "rst" or "html" (:mod:`sparc_es.corpus.readers`). A sentence's
    context is :func:`context_of` its block (for plain text: its paragraph); ``start``/``end``
    index ``text``. Headings are in the context of every sentence of their section, and give no
    sentence of their own unless code comes right under one (:func:`~.readers.blocks.with_code`).
    ``keep_code`` makes each code block one sentence; ``where`` names the document in errors
    (default: ``doc_id``). A sentence over ``MAX_SENTENCE_CHARS`` is
    read as pieces, and a block over ``MAX_CONTEXT_CHARS`` gives each sentence a window of itself
    as context; ``report(line, what)`` hears of each such cut (and of what the readers cut).
    """
    name = where or doc_id
    if SURROGATE.search(doc_id):  # a file name that is not UTF-8 (Python keeps its bytes as surrogates)
        raise InputError(name.encode("utf-8", "backslashreplace").decode(),
                         "the name is not valid UTF-8, and sentence ids are text: rename it")
    # A path may hold what an id cannot (ids.ID_UNSAFE): whitespace and control characters become
    # "_" in the ids of its sentences ("my notes.md" -> "my_notes.md#5d41402a"). Rejecting the file would
    # stop a whole folder for a name that is fine everywhere else, and "_" keeps the ids readable
    # and the same as they always were; "doc" keeps the path itself.
    id_prefix = ID_UNSAFE.sub("_", doc_id)
    room = ID_MAX_BYTES - len(id_prefix.encode("utf-8")) - 1  # for the key after "#"
    keys: Counter[str] = Counter()
    lines = _Lines(text)
    before: Block | None = None  # the prose block just before, in the same section
    for block in read_blocks(text, format, keep_code, name=name, report=report):
        if block.kind == HEADING:
            before = None
            continue
        pieces = list(_bounded(_block_sentences(block, text, format), text, lines, report))
        alone = block.kind == PARAGRAPH and len(pieces) == 1 and len(block.text) < SHORT_CHARS and not block.lead
        # ... unless a code block stands between them: the paragraph before led into that code
        if alone and before is not None and before.headings == block.headings and not before.code:
            # "The default is 5." as a paragraph of its own says little: the paragraph before is its lead-in
            context = context_of(replace(block, lead=lead_of(before.text)))
        else:
            context = context_of(block)
        before = block if block.kind == PARAGRAPH else None
        for sentence, start, end, at in pieces:
            if len(block.text) > MAX_CONTEXT_CHARS:
                context = context_of(replace(block, text=_window(block.text, at)))
            key = sentence_key(sentence)
            keys[key] += 1
            key = key if keys[key] == 1 else f"{key}-{keys[key]}"
            if len(key) > room:
                raise InputError(name, f"sentence ids ({shown(id_prefix, 40)}#{key}) would be longer than the "
                                       f"{ID_MAX_BYTES} bytes Elasticsearch takes: shorten the "
                                       f"{'path' if where else 'document id'}")
            # the code the paragraph leads into, under each of its sentences: the answer to a how-to is
            # not always the last ("... redirect to it. The view below does that:")
            code = block.code if block.kind != CODE else ""
            yield Sentence(id=f"{id_prefix}#{key}", text=sentence, context=context, doc=doc_id,
                           start=start, end=end, code=code or None,
                           headings=" > ".join(block.headings) or None)


def sentence_key(text: str) -> str:
    """What follows "#" in the id of a document's sentence: 8 hex digits of its text's hash (the
    second sentence of the same text in one file gets "-2", and so on). Ids that come from content,
    not position, stay the same when a paragraph is inserted or removed elsewhere in the file, so
    saved links and qrels keep working and an update rewrites only what changed."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=4).hexdigest()


def _count(stats: ReadStats, sid: str, *raw: str) -> None:
    """Count the control characters of one record's texts as they were read (``raw``), by code point."""
    for c in CONTROL.findall("".join(raw)):
        stats.control_characters += 1
        kind = f"U+{ord(c):04X}"
        stats.control_kinds[kind] = stats.control_kinds.get(kind, 0) + 1
    stats.sentences_cleaned += 1
    if len(stats.examples) < 3:
        stats.examples.append(sid)


def read_document(path: str | Path, doc_id: str | None = None, stats: ReadStats | None = None,
                  keep_code: bool = False) -> Iterator[Sentence]:
    """Yield the sentences of one document file, read as its suffix says (offsets index its text).
    Bytes that are not UTF-8 (nor the encoding an HTML page declares) are read as U+FFFD and noted
    in ``stats``; without ``stats`` they are an :class:`~sparc_es.errors.InputError`."""
    path = Path(path)
    format = format_of(path) or "text"
    text = _document_text(path.read_bytes(), path, format, stats)
    yield from document_sentences(text, doc_id or path.name, stats, format=format,
                                  keep_code=keep_code, where=str(path))


def _suffix(path: Path) -> str:
    return path.suffix.lower() or "(no suffix)"


def corpus_files(paths: Iterable[str | Path], stats: ReadStats | None = None) -> list[tuple[Path, str]]:
    """Resolve files and folders to (file, document id) pairs, in a stable order.

    A folder is read recursively; its files that are neither JSONL (``.jsonl``: a ``.json`` file is
    read only when named on its own) nor a document are counted by suffix in ``stats.skipped_files``,
    hidden files and folders (``.git``, ``.DS_Store``, not descended into) in ``stats.hidden_files``,
    folders sparc-es wrote (they hold :data:`OWN_MARKER`: an earlier encode, an index) in
    ``stats.own_folders``. A link inside a folder is read only when it leads to
    a regular file inside that folder (a cloned repository may hold ``x -> /proc/self/environ``);
    other links, and links to folders (whose files, inside the folder, are read where they are),
    are counted in ``stats.skipped_links``. A file named on its own is read wherever it is. Two
    documents with the same id (``a/setup.md`` and ``b/setup.md`` given as folders ``a`` and ``b``),
    or one file read twice, are refused.
    """
    files: list[tuple[Path, str]] = []
    roots: list[Path] = []  # the path given that each file was found under
    skipped: Counter[str] = Counter()
    hidden = links = 0
    own: list[str] = []
    generated: list[str] = []
    for p in map(Path, paths):
        if p.is_dir():
            if (p / OWN_MARKER).is_file():
                raise InputError(p, f"a folder sparc-es wrote (it holds {OWN_MARKER}: an encoded folder, an index), "
                                    "not a corpus: name the folder of your documents")
            found: list[Path] = []
            here: Counter[str] = Counter()
            inside = p.resolve()
            sites = _Sites(p)
            for root, dirs, names in os.walk(p, onerror=_unreadable):  # does not descend into linked folders
                dirs.sort()  # what is noted comes in the same order on every file system
                names.sort()
                hidden += sum(d.startswith(".") for d in dirs) + sum(n.startswith(".") for n in names)
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                ours = [d for d in dirs if not Path(root, d).is_symlink() and Path(root, d, OWN_MARKER).is_file()]
                own += [Path(root, d).relative_to(p).as_posix() for d in ours]
                dirs[:] = [d for d in dirs if d not in ours]
                links += sum(Path(root, d).is_symlink() for d in dirs)
                dirs[:] = [d for d in dirs if not sites.left_out(Path(root), d, is_dir=True)]
                for name in names:
                    f = Path(root, name)
                    if name.startswith(".") or sites.left_out(Path(root), name, is_dir=False):
                        continue
                    if f.is_symlink() and not _link_inside(f, inside):
                        links += 1
                        continue
                    readable = f.suffix.lower() in FOLDER_SUFFIXES or format_of(f) is not None
                    if readable and f.is_file():
                        found.append(f)
                    elif readable:  # a pipe, a socket, a device: never read
                        here[f"{_suffix(f)} that is not a regular file"] += 1
                    else:
                        here[_suffix(f)] += 1
            skipped += here
            generated += sites.left
            if not found:
                detail = "; ".join(([_skipped_text(here)] if here else [])
                                   + ([f"left out {', '.join(sites.left)}"] if sites.left else []))
                detail = f" ({detail})" if detail else ""
                if any(SITE_BUILT in g for g in sites.left):
                    detail += ": a built site given as --corpus on its own is read as HTML"
                raise InputError(p, f"no {_READABLE} files in this folder{detail}")
            files += [(f, f.relative_to(p).as_posix()) for f in sorted(found)]
            roots += [p] * len(found)
        elif p.is_file():
            if p.suffix.lower() not in READ_SUFFIXES and format_of(p) is None:
                raise InputError(p, "unknown corpus format: use .jsonl records or .txt / .md / .rst / .html "
                                    "documents")
            files.append((p, p.name))
            roots.append(p)
        elif p.exists():
            raise InputError(p, "not a regular file or a folder (a pipe, a socket or a device is never read)")
        else:
            raise InputError(p, "no such file or folder")
    if stats is not None:  # set, not added to: a corpus is listed again each time it is read
        stats.skipped_files = dict(sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])))
        stats.hidden_files = hidden
        stats.skipped_links = links
        stats.own_folders = own
        stats.generated = generated
    _check_distinct(files, roots)
    return files


class _Sites:
    """Which folders and files under ``top`` a site generator made. A built site (:data:`SITE_MARKERS`)
    inside the folder given is left out whole when that folder also holds a docs project's
    configuration (:data:`PROJECT_FILES`, outside any built site: ``docs/conf.py`` beside
    ``docs/_build/html``, or ``docs/source/conf.py`` beside ``docs/build/html``), whose sources are
    read; otherwise (downloaded docs, a site given on its own) it is read without the generator's
    own pages (:data:`_GENERATED`). Sphinx's templates and a docs project's ``requirements.txt``
    are left out too."""

    def __init__(self, top: Path) -> None:
        self.top = top
        self.projects: set[Path] = set()  # folders at or under a project's configuration
        self.sites: dict[Path, str] = {}  # built sites read, and their generator
        self.left: list[str] = []  # what was left out, as the user is told
        if kind := _site_kind(top):
            self.sites[top] = kind
        elif any(_holds(top, f) for f in PROJECT_FILES):
            self.projects.add(top)
        self.configured = top not in self.sites and _configured(top)

    def left_out(self, root: Path, name: str, is_dir: bool) -> bool:
        """Whether ``root/name`` is left out (then noted); a folder kept is remembered for its contents."""
        path = root / name
        shown_path = path.relative_to(self.top).as_posix() + ("/" if is_dir else "")
        in_project = root in self.projects
        if is_dir and not path.is_symlink():
            if kind := _site_kind(path):
                if self.configured:
                    self.left.append(f"{shown_path} (a {kind} {SITE_BUILT})")
                    return True
                self.sites[path] = kind
            elif name == TEMPLATES and _holds(root, "conf.py"):
                self.left.append(f"{shown_path} (Sphinx's page templates)")
                return True
        elif not is_dir and in_project and REQUIREMENTS.fullmatch(name):
            self.left.append(f"{shown_path} (pip's requirements for building the docs)")
            return True
        site = next((s for s in (root, *root.parents) if s in self.sites), None)
        if site is not None:
            inner = path.relative_to(site).as_posix() + ("/" if is_dir else "")
            if _GENERATED[self.sites[site]].fullmatch(inner):
                self.left.append(shown_path)
                return True
            # a site's pages are its HTML; its Markdown and text files are plugins' copies of the
            # sources (mkdocs-llmstxt's llms-full.txt, index.md), read again in its pages
            read_as = None if is_dir else format_of(path) or (path.suffix.lower() in FOLDER_SUFFIXES and "records")
            if read_as and read_as != "html":
                self.left.append(f"{shown_path} (a {self.sites[site]} site's pages are its HTML)")
                return True
        if is_dir and (in_project or any(_holds(path, f) for f in PROJECT_FILES)):
            self.projects.add(path)
        return False


def _configured(top: Path) -> bool:
    """Whether ``top`` holds a docs project's configuration outside hidden folders and built sites
    (a listing of its folders, before the walk that reads them decides what to leave out)."""
    for root, dirs, names in os.walk(top, onerror=_unreadable):
        if any(n in PROJECT_FILES for n in names):
            return True
        dirs[:] = [d for d in dirs if not d.startswith(".") and not Path(root, d).is_symlink()
                   and _site_kind(Path(root, d)) is None]
    return False


def _site_kind(folder: Path) -> str | None:
    """The generator of a built site in ``folder`` (``Sphinx``, ``MkDocs``), or None."""
    return next((kind for marker, kind in SITE_MARKERS.items() if _holds(folder, marker)), None)


def _holds(folder: Path, name: str) -> bool:
    """Whether ``folder`` holds the file ``name``; a folder that cannot be looked into is said to be
    one, not a file in it that may not be there (``locked/.buildinfo: Permission denied``)."""
    try:
        return (folder / name).is_file()
    except OSError as e:
        raise InputError(folder, f"cannot read this folder: {e.strerror or e}") from None


def _check_distinct(files: list[tuple[Path, str]], roots: list[Path]) -> None:
    """Refuse a file read twice, or two documents whose sentence ids would be the same: a document's id
    is its path inside the folder given (its name, for a file given), so ``a/setup.md`` and
    ``b/setup.md`` given as ``a`` and ``b`` would share ids, and their hits each other's lines."""
    by_file: dict[Path, int] = {}
    by_doc: dict[str, int] = {}
    for i, (path, doc_id) in enumerate(files):
        first = by_file.setdefault(Path(os.path.abspath(path)), i)  # links not followed: a link is read as itself
        if first != i:
            raise InputError(path, f"is read twice (also as {files[first][0]}, from {roots[first]}): give each "
                                   "file or folder once (a folder is read with the folders inside it)")
        if path.suffix.lower() in JSONL_SUFFIXES:  # records carry their own ids
            continue
        first = by_doc.setdefault(doc_id, i)
        if first != i:
            given = [str(roots[first]), str(roots[i])]
            try:
                common = os.path.commonpath(given) or "."
            except ValueError:  # one absolute, one relative
                common = os.path.commonpath([os.path.abspath(g) for g in given])
            raise InputError(path, f"has the same document id {doc_id!r} as {files[first][0]} (ids are paths inside "
                                   "each folder given), so their sentence ids would collide: pass the folder that "
                                   f"holds both ({common}) instead, or rename one")


def _unreadable(e: OSError) -> None:
    """A folder that cannot be listed is an error, as a file that cannot be read is: never a silent gap."""
    raise InputError(e.filename or "corpus folder", f"cannot read this folder: {e.strerror or e}")


def _link_inside(link: Path, folder: Path) -> bool:
    """Whether ``link`` leads, through any chain of links, to a regular file inside ``folder``."""
    try:
        target = link.resolve(strict=True)
    except (OSError, RuntimeError):  # dangling, a loop, unreadable
        return False
    return target.is_relative_to(folder) and stat.S_ISREG(target.stat().st_mode)


def _skipped_text(skipped: Counter[str] | dict[str, int], most: int = 6) -> str:
    """``skipped 12 files: 7 .png, 3 .py, 2 .yml``, the most frequent suffixes first."""
    ranked = sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0]))
    parts = [f"{n} {suffix}" for suffix, n in ranked[:most]]
    if len(ranked) > most:
        parts.append(f"{sum(n for _, n in ranked[most:])} other")
    total = sum(skipped.values())
    return f"skipped {total} file{'s' if total != 1 else ''}: {', '.join(parts)}"


def read_corpus(paths: Iterable[str | Path], stats: ReadStats | None = None) -> Iterator[Sentence]:
    """Stream every sentence of the given files and folders; ids must be unique across them.

    ``stats``, when given, counts what was cleaned on the way, and the files that gave no sentence
    (see :class:`ReadStats`).
    """
    stats = stats if stats is not None else ReadStats()
    files = corpus_files(paths, stats)
    stats.empty_files, stats.empty_examples = 0, []  # set, not added to, as the files listed
    seen: dict[str, tuple[int, int | None]] = {}  # id -> (file number, line) of its first record
    count = 0
    for number, (path, doc_id) in enumerate(files):
        before = count
        if path.suffix.lower() in JSONL_SUFFIXES:
            records: Iterator[tuple[int | None, Sentence]] = _jsonl_lines(path, stats)
        else:
            records = ((None, s) for s in read_document(path, doc_id, stats))
        for lineno, s in records:
            if s.id in seen:
                # A second record with the same id would silently replace the first in an index.
                first_file, first_line = seen[s.id]
                first = f"{files[first_file][0]}" + (f":{first_line}" if first_line is not None else "")
                hint = ""
                if lineno is None and first_line is None and ID_UNSAFE.search(doc_id + files[first_file][1]):
                    hint = ("; whitespace and control characters in a path become '_' in sentence ids: "
                            "rename one of the two")
                raise InputError(path, f"duplicate sentence id {s.id!r} (first seen at {first}){hint}", lineno)
            seen[s.id] = (number, lineno)
            count += 1
            yield s
        if count == before:
            stats.note_empty(path)
    if count == 0:
        raise InputError(", ".join(str(f) for f, _ in files) or "corpus", "empty corpus: no sentences found")


class Source(Protocol):
    """Where a corpus comes from, read as often as encoding needs (validation, IDF, encoding)."""

    def read(self, stats: ReadStats | None = None) -> Iterator[Sentence]:
        """Every sentence, in a stable order; ``stats`` counts what was cleaned."""

    def describe(self) -> list[str]:
        """What the manifest records as the corpus (no secrets)."""


@dataclass(frozen=True)
class Files:
    """A corpus of local files and folders (what ``encode --corpus`` takes)."""

    paths: tuple[str, ...]

    def read(self, stats: ReadStats | None = None) -> Iterator[Sentence]:
        return read_corpus(self.paths, stats)

    def describe(self) -> list[str]:
        """The paths, absolute: a search from another working directory finds the documents."""
        return [os.path.abspath(p) for p in self.paths]


@dataclass
class Checked:
    """Another :class:`Source` (an application's own, an Elasticsearch index's) read with the checks
    files get: every record a :class:`Sentence` with a valid id and some text, no id twice, not
    empty, and the same number of sentences at every reading (a source whose ``read`` hands out one
    generator gives nothing the second time: an encode of no sentences, had it not been refused)."""

    source: Source
    counts: list[int] = field(default_factory=list)  # the sentences of each full reading

    def read(self, stats: ReadStats | None = None) -> Iterator[Sentence]:
        where = f"corpus source {type(self.source).__name__}"
        seen: set[str] = set()
        for s in self.source.read(stats):
            if not isinstance(s, Sentence):
                raise InputError(where, f"read() gave a {type(s).__name__}, not a sparc_es.corpus.sources.Sentence")
            problem = sentence_id_problem(s.id) if isinstance(s.id, str) else "is not a string"
            if problem is not None:
                raise InputError(where, f"sentence id {shown(str(s.id))} {problem}")
            if not isinstance(s.text, str) or not s.text.strip():
                raise InputError(where, f"empty sentence: the text of id {s.id!r} has no characters to encode")
            if s.id in seen:
                raise InputError(where, f"duplicate sentence id {s.id!r}")
            seen.add(s.id)
            yield s
        if self.counts and self.counts[0] != len(seen):
            raise InputError(where, f"read() gave {self.counts[0]} sentences, then {len(seen)}: each call within one "
                                    "encode must give every sentence again (a new iterator each time, not one "
                                    "generator; a corpus that changed meanwhile: encode again)")
        if not seen:
            raise InputError(where, "empty corpus: read() gave no sentences")
        self.counts.append(len(seen))

    def describe(self) -> list[str]:
        return self.source.describe()


def as_source(corpus: Source | str | os.PathLike | Iterable[str | os.PathLike]) -> Source:
    """File and folder paths (one, or several) as :class:`Files`; a :class:`Source` of another kind
    :class:`Checked` (afresh: its counts are one encode's). Records themselves are not a corpus:
    wrap them in a Source."""
    if isinstance(corpus, Files):
        return corpus
    if isinstance(corpus, Checked):
        return Checked(corpus.source)
    if hasattr(corpus, "read") and hasattr(corpus, "describe"):
        return Checked(corpus)  # type: ignore[arg-type]
    paths = [corpus] if isinstance(corpus, (str, os.PathLike)) else corpus  # one path, not its characters
    if not isinstance(paths, Iterable):
        raise TypeError(f"a corpus is file or folder paths or a Source (read() and describe()), not "
                        f"{type(corpus).__name__}")
    paths = list(paths)
    odd = next((c for c in paths if not isinstance(c, (str, os.PathLike))), None)
    if odd is not None:
        raise TypeError(f"a corpus is file or folder paths or a Source (read() and describe()), not an iterable "
                        f"holding a {type(odd).__name__}: give records through a Source (sparc_es.corpus.Source)")
    return Files(tuple(os.fspath(p) for p in paths))
