"""What ``sparc-es search`` shows of a hit to a person, and how much of the question met the index.

* **Where**: ``file:line``, the 1-based line of the sentence's start in its file, counted from the
  character offset the index keeps. The file is found from the corpus paths the index's manifest
  records (a folder's documents by their path inside it) and read again, so the line is the one
  the file has now; when the file is gone, or no longer holds the sentence there, the offsets are
  shown instead (``setup.md (characters 69-115)``). The **heading path** ("Setup > Requirements")
  is the section titles of the sentence's block, found by reading the file with its reader
  (:mod:`sparc_es.corpus.readers`); without the file, a path of two or more titles is read from the front
  of the stored context (``A > B. ...``: :func:`sparc_es.corpus.sources.context_of`).
* **Marks** (:class:`Marker`): the question's words where the sentence and its paragraph have
  them: whole words (runs of letters and digits), compared case- and accent-insensitively, equal
  or with the same Porter stem ("needs" for "need"); stop words ("which", "does", ...) are not
  marked, as on the search page. On a terminal they are bold (ANSI); in a pipe or a file, or with
  ``NO_COLOR`` set, they are written in guillemets: ``«Java»``.
* **How much of the question matched** (:class:`QuestionMatch`): which question tokens (the
  WordPiece bag the engine sums) have a posting in the impact index, Lucene's document frequency,
  and how many of them each hit stores. And whether any *meaningful* word of the question is in the
  index: a question word that is not a stop word counts as in the index when the corpus's sentences
  have it, that is when its Porter stem is among the stems the index counted (``lexical.json``, for
  a model with a stem term, as the default), or else when each of its WordPiece tokens is in some
  sentence's text (``lexical.json``'s token counts), or, for an index without ``lexical.json``, has
  a posting. When the question has such words and none is in the index, every hit matches only
  pieces of words (``##q``) or common words, and ``search`` says so in one line.
"""

from __future__ import annotations

import os
import re
import sys
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from sparc_es.corpus.ids import ID_UNSAFE
from sparc_es.corpus.readers import format_of, read_blocks
from sparc_es.corpus.readers.blocks import HEADING
from sparc_es.corpus.sources import CONTROL, Sentence, context_of, split_document
from sparc_es.engines.base import Closing, Hit, Impacts, Recorded, Tokenized, sparc_side
from sparc_es.engines.blend import PREFIX as BM25_PREFIX
from sparc_es.layout.names import ES_SOURCE

# Words too common to mark or to count as the question's meaning: the search page's list
# (sparc_es/answers/web/index.html), which it marks by the same rule.
STOP_WORDS = frozenset((
    "a an and are as at be been but by can could do does did for from had has have how i if in into is it its me "
    "my no not of on or so than that the their them then there these they this to was we were what when where "
    "which who whom why will with would you your").split())
_WORD = re.compile(r"[^\W_]+")  # letters and digits
NOTHING_MATCHED = "no word of the question is in the index: the hits below match only word pieces"
ONLY_STOP_WORDS = "the question has only stop words or punctuation: the hits below match only common tokens"


def fold(word: str) -> str:
    """A word lower-cased with its accents taken off, as the tokenizer normalises it ("Café" -> "cafe")."""
    decomposed = unicodedata.normalize("NFKD", word.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


@lru_cache(maxsize=1)
def _porter():
    import snowballstemmer  # the stemmer of the lexical term's stem siblings (sparc_es.model.lexical.Stems)

    return snowballstemmer.stemmer("porter").stemWord


def stem(word: str) -> str:
    """The Porter stem of a folded word."""
    return _porter()(word)


def question_words(question: str) -> list[str]:
    """The question's words that carry its meaning: folded, stop words left out, each once, in order."""
    return list(dict.fromkeys(w for w in map(fold, _WORD.findall(question)) if w not in STOP_WORDS))


class Marker:
    """Where a text has the question's words (see the module docstring)."""

    def __init__(self, question: str) -> None:
        self.words = set(question_words(question))
        self.stems = {stem(w) for w in self.words}

    def spans(self, text: str) -> list[tuple[int, int]]:
        """(start, end) character offsets in ``text`` of each word to mark."""
        out = []
        for m in _WORD.finditer(text):
            w = fold(m.group())
            if w not in STOP_WORDS and (w in self.words or stem(w) in self.stems):
                out.append(m.span())
        return out


# --- where a sentence is, as a person opens it --------------------------------------------------

@dataclass(frozen=True)
class Place:
    """Where a sentence sits: the file it was found in, the lines of its start and end, its heading
    path (None where not known: no file, or offsets the file no longer matches)."""

    path: Path | None = None
    line: int | None = None
    last_line: int | None = None  # the line of its end (a sentence wrapped over lines: the document view marks all)
    headings: tuple[str, ...] | None = None


@dataclass
class _Document:
    text: str
    format: str
    blocks: list | None = None  # read on first use
    # sentence id -> (start, end, heading path) as the document reads now, split on first use
    spans: dict[str, tuple[int, int, tuple[str, ...]]] | None = None
    version: tuple[int, int] | None = None  # the file's (mtime_ns, size) when read


class Places:
    """Finds the files of an index's documents and places sentences in them (one reading per file)."""

    def __init__(self, corpus: Iterable[str | Path] = ()) -> None:
        """``corpus``: the paths ``encode`` read (:meth:`~sparc_es.layout.manifest.Manifest.corpus_roots`)."""
        self.roots = [Path(p) for p in corpus]
        self._documents: dict[str, _Document | None] = {}

    def gone(self) -> list[Path]:
        """The corpus paths that are not there (their hits show character offsets, not lines)."""
        return [r for r in self.roots if not r.exists() and "://" not in str(r) and not str(r).startswith(ES_SOURCE)]

    def file(self, doc: str) -> Path | None:
        """The file of document ``doc``: under a corpus folder (a JSONL corpus file's folder for its
        records' documents), or a corpus file of that name. Only there: an index is a shared
        artefact, and its sentence store must not make a search open any file the process can read
        (an absolute or ``../`` document, or a link leading out of the folder)."""
        for root in self.roots:
            if root.is_file() and root.name == doc:
                return root
            folder = root if root.is_dir() else root.parent if root.is_file() else None
            path = _inside(folder, doc) if folder is not None else None
            if path is not None:
                return path
        return None

    def _document(self, doc: str) -> tuple[Path, _Document] | None:
        path = self.file(doc)
        if path is None or not format_of(path):  # only the documents encode splits itself have offsets to place
            return None
        try:  # read again once the file changes: a server runs while its documents are edited
            stat = path.stat()
            version = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            version = None
        cached = self._documents.get(doc)
        if doc not in self._documents or (cached is not None and cached.version != version):
            try:
                text = path.read_bytes().decode("utf-8", errors="replace")
            except OSError:
                self._documents[doc] = None
            else:  # as encode read it: no byte-order mark, control characters as spaces (offsets kept)
                text = CONTROL.sub(" ", text[1:] if text.startswith("\ufeff") else text)
                self._documents[doc] = _Document(text, format_of(path) or "text", version=version)
        found = self._documents[doc]
        return None if found is None else (path, found)

    def of(self, s: Sentence) -> Place:
        """Where ``s`` sits (its context is needed for the heading path). A file edited since it was
        encoded is split again as encode splits it: a sentence id is its text's, so an unchanged
        sentence is found where it is now, lines added above it or not."""
        opened = self._document(s.doc) if s.doc and s.start is not None and s.end is not None else None
        # an id encode gave (a JSONL record names its own): the current split tells where it is now
        if opened is not None and s.id.startswith(f"{ID_UNSAFE.sub('_', s.doc)}#"):
            document = opened[1]
            if document.spans is None:
                document.spans = _spans(document.text, s.doc, document.format)
            now = document.spans.get(s.id)
            if now is not None:  # where it is now, under the headings it is under now: one reading
                start, end, headings = now
                return Place(opened[0], *_lines(document.text, start, end), headings=headings)
            if document.spans and not _holds(document.text, s, whole_words=0.8):
                opened = None  # edited or removed since (not only read otherwise): its offsets hold another's text
        if opened is None or not _holds(opened[1].text, s):  # the path encode stored, else the context's
            return Place(headings=tuple(s.headings.split(" > ")) if s.headings else _headings_in_context(s))
        path, document = opened
        return Place(path, *_lines(document.text, s.start, s.end), headings=_headings(document, s, path))


def _lines(text: str, start: int, end: int) -> tuple[int, int]:
    """The 1-based lines of ``text`` that ``start`` and ``end`` (a span's) fall on."""
    first = len(_LINE_BREAK.findall(text, 0, start)) + 1
    return first, first + len(_LINE_BREAK.findall(text, start, max(start, end - 1)))


_LINE_BREAK = re.compile(r"\r\n?|\n")


def _spans(text: str, doc: str, format: str) -> dict[str, tuple[int, int, tuple[str, ...]]]:
    """Sentence id -> (start, end, heading path) in the document as it is now ({} when it no longer reads)."""
    try:
        return {s.id: (s.start, s.end, tuple(s.headings.split(" > ")) if s.headings else ())
                for s in split_document(text, doc, format) if s.start is not None}
    except Exception:  # a file that no longer reads: the stored offsets are all there is
        return {}


def _inside(folder: Path, doc: str) -> Path | None:
    """``folder / doc`` when it is a regular file whose real path is inside ``folder``, else None."""
    try:
        path = (folder / doc).resolve(strict=True)
        if not path.is_relative_to(folder.resolve(strict=True)) or not path.is_file():
            return None
    except (OSError, RuntimeError, ValueError):  # missing, a link loop, a NUL in the name
        return None
    return folder / doc


def _holds(text: str, s: Sentence, whole_words: float | None = None) -> bool:
    """Whether the file's text at the sentence's offsets still holds most of its words: 40% of
    them anywhere in it (a table row's sentence has its header's words too), or with
    ``whole_words``, that share of them as words of the span."""
    if not 0 <= s.start <= s.end <= len(text):
        return False
    words = {fold(w) for w in _WORD.findall(s.text)}
    if whole_words is not None:
        span = {fold(w) for w in _WORD.findall(text[s.start: s.end])}
        return bool(words) and len(words & span) >= whole_words * len(words)
    span = fold(text[s.start: s.end])
    return bool(words) and sum(w in span for w in words) >= 0.4 * len(words)


def _headings(document: _Document, s: Sentence, path: Path) -> tuple[str, ...] | None:
    if document.blocks is None:
        try:
            document.blocks = [b for b in read_blocks(document.text, document.format, keep_code=True, name=str(path))
                               if b.kind != HEADING]
        except Exception:  # a file that no longer reads: the line is still right
            document.blocks = []
    around = [b for b in document.blocks if b.start <= s.start <= b.end]
    for b in around + document.blocks:  # its own block: the one whose context it stores
        if context_of(b) == s.context:
            return b.headings
    return around[0].headings if around else None


def _headings_in_context(s: Sentence) -> tuple[str, ...] | None:
    """Without the file: a heading path of two or more titles at the front of the context."""
    if not s.doc or format_of(s.doc) in (None, "text"):
        return None
    first = s.context.split(". ", 1)[0]
    if " > " not in first or s.text.startswith(first):
        return None
    return tuple(first.split(" > "))


# --- how much of the question met the index ----------------------------------------------------

@dataclass
class QuestionMatch:
    """How a question met an index: its tokens' postings and whether any of its words is there."""

    tokens: dict[str, float]  # the bag the engine sums: token -> count (x weight)
    postings: dict[str, int] | None = None  # token -> document frequency in the impact index (None: not known)
    words: list[str] = field(default_factory=list)  # the question's meaningful words
    found: list[str] | None = None  # those in the index (None: not known)
    min_score: float | None = None  # the threshold the answer was cut at (None: none)
    best_below: float | None = None  # the best score when every hit fell under ``min_score``

    @property
    def in_index(self) -> list[str] | None:
        """The question tokens with a posting."""
        return None if self.postings is None else [t for t in self.tokens if self.postings.get(t, 0) > 0]

    @property
    def nothing_meaningful(self) -> bool:
        """The question has meaningful words and the index has none of them."""
        return bool(self.words) and self.found is not None and not self.found

    def notice(self) -> str | None:
        """The one line said when every hit scored under the threshold, when the question has stop
        words only, or when none of its words is in the index, else None."""
        if self.best_below is not None:
            return f"no hit scored {self.min_score:g} or more (the best scored {self.best_below:.2f})"
        if not self.words and self.tokens:
            return ONLY_STOP_WORDS
        if not self.nothing_meaningful:
            return None
        return f"{NOTHING_MATCHED} ({', '.join(self.words)} not found)"

    def summary(self) -> str | None:
        """One line for people: how many question tokens have postings (None when not known)."""
        held = self.in_index
        if held is None:
            return None
        missing = [t for t in self.tokens if t not in held]
        return (f"question tokens in the index: {len(held)} of {len(self.tokens)}"
                + (f" (none for {' '.join(missing)})" if missing else ""))

    def to_json(self) -> dict:
        """As ``search --json`` and the API give it."""
        return {"tokens": self.tokens, "postings": self.postings, "words": self.words, "found": self.found,
                "nothing_meaningful": self.nothing_meaningful, "best_below_min_score": self.best_below}


def match_question(question: str, queries, statistics=None, postings=None, titles=None) -> QuestionMatch:
    """How ``question`` meets an index. ``queries``: the index's :class:`~sparc_es.model.query.QueryEncoder`;
    ``statistics``: its :class:`~sparc_es.model.lexical.CorpusStatistics` (``lexical.json``) or None;
    ``postings``: a function token list -> document frequencies (the impact index's), or None;
    ``titles``: the index's :class:`~sparc_es.engines.blend.Blend` or None: a word only the BM25
    terms hold (a section title's, which sentences' texts lack) is in the index too."""
    bag = queries.bag(question)
    df = postings(list(bag)) if postings is not None and bag else ({} if postings is not None else None)
    words = question_words(question)
    tokenizer = queries.tokenizer
    found: list[str] | None = []
    for w in words:
        pieces = tokenizer.tokenize(w)
        # a word the tokenizer reads as words of their own (日本: 日, 本, as CJK is read) has no stem: its pieces are
        separate = len(pieces) > 1 and not any(p.startswith("##") for p in pieces)
        if statistics is not None and statistics.stem_df is not None and w.isalpha() and not separate:
            here = stem(w) in statistics.stem_df
        elif statistics is not None:
            ids = tokenizer.convert_tokens_to_ids(pieces)
            here = bool(ids) and all(statistics.df.get(i, 0) > 0 for i in ids)
        elif postings is not None:
            held = postings(pieces) if pieces else {}
            here = bool(pieces) and all(held.get(p, 0) > 0 for p in pieces)
        else:
            found = None
            break
        if not here and titles is not None:
            terms = titles.analyzer.terms(w)
            here = bool(terms) and all(BM25_PREFIX + t in titles.maxima for t in terms)
        if here:
            found.append(w)
    return QuestionMatch(tokens=dict(bag), postings=df, words=words, found=found)


# --- a hit for people and for tools -------------------------------------------------------------

@dataclass
class Shown:
    """A hit with what ``search`` shows of it."""

    hit: Hit
    rank: int
    context: str = ""
    place: Place = field(default_factory=Place)
    marks: list[tuple[int, int]] = field(default_factory=list)  # in hit.text
    context_marks: list[tuple[int, int]] = field(default_factory=list)  # in context
    covers: list[str] | None = None  # the question tokens it stores (None: the engine cannot say)
    # the question's BM25 terms it stores, where the search sums them (the default): None otherwise
    covers_terms: list[str] | None = None
    others: list[Shown] = field(default_factory=list)  # lower hits of the same paragraph (collapse)

    def where(self) -> str:
        """``file:line``; else the document with the character offsets; else the id."""
        h = self.hit
        if h.doc and self.place.line is not None:
            return f"{h.doc}:{self.place.line}"
        if h.doc and h.start is not None:
            return f"{h.doc} (characters {h.start}-{h.end})"
        return h.doc or h.id

    def to_json(self) -> dict:
        """One hit as ``search --json`` and the API give it."""
        out = {**self.hit.to_json(), "rank": self.rank, "line": self.place.line, "last_line": self.place.last_line,
               "path": str(self.place.path) if self.place.path else None,
               "headings": list(self.place.headings) if self.place.headings is not None else None,
               "context": self.context, "paragraph": paragraph_spans(self),
               "marks": {"text": [list(m) for m in self.marks], "context": [list(m) for m in self.context_marks]}}
        if self.covers is not None:
            out["covers"] = self.covers
        if self.covers_terms is not None:
            out["covers_bm25"] = self.covers_terms
        if self.others:
            out["collapsed"] = [{"id": o.hit.id, "score": o.hit.score, "text": o.hit.text, "line": o.place.line,
                                 "last_line": o.place.last_line} for o in self.others]
        return out


COLLAPSE_DEPTH = 5  # hits asked of the engine for each hit shown, when sentences of a paragraph are collapsed


def answer(engine, presenter: Presenter, question: str, k: int, collapse_paragraphs: bool = True,
           min_score: float | None = None, start: int = 0, keep=None,
           documents: int | None = None) -> tuple[QuestionMatch, list[Shown]]:
    """One question's answer as every surface shows it (``search``, ``demo``, the API): how it met
    the index, then ``k`` hits from rank ``start + 1``, scoring ``min_score`` or more, the sentences
    of one paragraph one hit unless not ``collapse_paragraphs``. ``keep(hit)``, when given, filters
    the engine's first hits (a deeper search). ``documents``, a depth: ``k`` documents instead, each
    shown by its best sentence among the top ``documents`` (``run --documents``'s aggregation)."""
    import math
    import numbers

    from sparc_es.engines.base import MAX_HITS, above, best_sentences, check_k
    from sparc_es.errors import SparcError
    from sparc_es.model.query import check_question

    # checked before any arithmetic on them (k=-1 was said to be -5, a string k was a TypeError)
    check_question(question, asked=True)
    check_k(k)
    def whole(name: str, value, least: int) -> None:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
            raise SparcError(f"{name} is a whole number of {least} or more, not {value!r}")

    whole("start", start, 0)
    if documents is not None:
        whole("documents", documents, 1)
    if min_score is not None and (isinstance(min_score, bool) or not isinstance(min_score, numbers.Real)
                                  or not math.isfinite(min_score) or min_score < 0):
        raise SparcError(f"min_score is a score of 0 or more, not {min_score!r}")
    if documents is not None:
        found = engine.search(question, max(k, documents))
        found = best_sentences(found, {h.id: h.doc for h in found}, k)
    else:
        depth = (start + k) * (COLLAPSE_DEPTH if collapse_paragraphs else 1) * (KEEP_DEPTH if keep else 1)
        found = engine.search(question, min(MAX_HITS, depth))
        if keep is not None:
            found = [h for h in found if keep(h)]
    hits = above(found, min_score)
    match = presenter.question(question)
    if found and not hits:  # say so, and how far the best fell short, rather than "no hit"
        match.min_score, match.best_below = min_score, found[0].score
    if documents is not None:
        return match, presenter.hits(question, hits, match)
    shown = presenter.hits(question, hits, match)
    shown = collapse(shown, start + k) if collapse_paragraphs else shown[:start + k]
    return match, shown[start:]


KEEP_DEPTH = 10  # with a filter, hits asked of the engine per hit kept


def paragraph(doc: str | None, context: str, sentence_id: str) -> tuple:
    """What the sentences of one paragraph share (their document and passage); a sentence without a
    passage is a paragraph of its own."""
    return (doc, context) if context else ("", sentence_id)


def collapse(shown: list[Shown], k: int) -> list[Shown]:
    """The first ``k`` hits with the sentences of one paragraph (the same document and context) as
    one: the best of them, the others in its ``others``; ranks from 1 again (Elasticsearch's
    ``collapse``). Hits without a context are each their own. A paragraph written twice in one
    document (an inherited docstring on an API page) is two: a sentence whose text its group already
    holds starts a group of its own, and a sentence joins the group nearest its place."""
    groups: dict[tuple, list[Shown]] = {}
    out: list[Shown] = []
    for s in shown:
        same = [g for g in groups.get(paragraph(s.hit.doc, s.context, s.hit.id), [])
                if all(o.hit.text != s.hit.text for o in (g, *g.others))]
        if same:
            min(same, key=lambda g: abs((g.hit.start or 0) - (s.hit.start or 0))).others.append(s)
        elif len(out) < k:
            groups.setdefault(paragraph(s.hit.doc, s.context, s.hit.id), []).append(s)
            out.append(s)
    for rank, s in enumerate(out, start=1):
        s.rank = rank
    return out


class Presenter(Closing):
    """Builds :class:`Shown` hits and :class:`QuestionMatch` for one engine over one index."""

    def __init__(self, engine, index: str | Path | None = None, tokenizer: str | Path | None = None) -> None:
        """``engine`` as ``open_engine`` opened it over ``index`` (default: the engine's own folder;
        None for Elasticsearch, whose ``tokenizer`` folder then gives the question tokenizer and
        corpus statistics)."""
        from sparc_es.errors import StoreError
        from sparc_es.layout.manifest import Manifest
        from sparc_es.layout.names import META, SENTENCES
        from sparc_es.layout.store import SentenceStore
        from sparc_es.model.lexical import CorpusStatistics
        from sparc_es.model.query import QueryEncoder

        self.engine = engine
        self.sparc = sparc_side(engine)  # a hybrid's SPARC engine: the impacts
        if index is None and tokenizer is None:
            index = getattr(self.sparc, "path", None)
        if index is not None and not (Path(index) / META).is_file():
            # else hits came without lines, headings or paragraphs, and nothing said why
            raise StoreError(f"{index}: not the index the engine searches (no sparc-es {META} in it)")
        folder = Path(index) if index is not None else (Path(tokenizer) if tokenizer is not None else None)
        manifest = Manifest.read(folder) if folder is not None and (folder / META).is_file() else None
        if manifest is not None:  # the corpus folders: the manifest's, else those the index records
            self.places = Places(manifest.corpus_roots(folder))
        else:
            self.places = Places(self.sparc.corpus if isinstance(self.sparc, Recorded) else ())
        store = folder / SENTENCES if folder is not None else None
        self.store = SentenceStore(store) if store is not None and store.is_file() else None
        tokenized = isinstance(self.sparc, Tokenized)
        self.queries = self.sparc.queries if tokenized else QueryEncoder.load(folder or "default")
        self.statistics = CorpusStatistics.read(folder) if folder is not None else None

    def question(self, question: str) -> QuestionMatch:
        """How ``question`` meets the index: its tokens, their postings, which of its words are there."""
        postings = self.sparc.postings if isinstance(self.sparc, Impacts) else None
        return match_question(question, self.queries, self.statistics, postings,
                              getattr(self.sparc, "stored_blend", None))

    def hits(self, question: str, hits: list[Hit], match: QuestionMatch | None = None) -> list[Shown]:
        """``hits`` as every surface shows them: place (file, line, headings), passage, the question's
        words marked, and the question tokens (and BM25 terms) each stores; ranks from 1."""
        marker = Marker(question)
        stored = {}
        if self.store is not None and hits:
            stored = self.store.get([h.id for h in hits], context=True)
        covers = terms = None
        if isinstance(self.sparc, Impacts) and hits:
            tokens = list(match.tokens) if match is not None else list(self.queries.bag(question))
            blend = getattr(self.sparc, "blend", None)  # the sum's BM25 side, where it is searched
            words = list(dict.fromkeys(BM25_PREFIX + t for t in blend.analyzer.terms(question))) if blend else []
            held = self.sparc.stored([h.id for h in hits], tokens + words)
            covers = {h.id: [t for t in tokens if held.get(h.id, {}).get(t, 0) > 0] for h in hits}
            if blend is not None:
                terms = {h.id: [w[len(BM25_PREFIX):] for w in words if held.get(h.id, {}).get(w, 0) > 0]
                         for h in hits}
        out = []
        for rank, h in enumerate(hits, start=1):
            s = stored.get(h.id)
            if s is not None and not h.text:
                h = h.located(s)
            context = s.context if s is not None else h.context or ""  # Elasticsearch's hits bring theirs
            sentence = Sentence(id=h.id, text=h.text, context=context, doc=h.doc, start=h.start, end=h.end,
                                headings=s.headings if s is not None else None)
            out.append(Shown(h, rank, context, self.places.of(sentence), marker.spans(h.text),
                             marker.spans(context), None if covers is None else covers.get(h.id, []),
                             covers_terms=None if terms is None else terms.get(h.id, [])))
        return out

    def close(self) -> None:
        """Close the sentence store it opened; the engine stays open (it was given, not opened here)."""
        if self.store is not None:
            self.store.close()


# --- text for people ---------------------------------------------------------------------------

def use_color(stream=None) -> bool:
    """Bold marks on a terminal; guillemets in a pipe or a file, or with NO_COLOR or TERM=dumb."""
    stream = stream or sys.stdout
    return (hasattr(stream, "isatty") and stream.isatty() and not os.environ.get("NO_COLOR")
            and os.environ.get("TERM") != "dumb")


# Everything that moves a terminal's cursor or ends a line: control characters (escape codes), line
# and paragraph separators. A hit's header is one line whatever a file is named.
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: str, one_line: bool = False) -> str:
    """``text`` safe for a terminal: control characters (escape codes) shown as U+FFFD; with
    ``one_line``, tabs and line breaks too (a file name cannot forge a line of output)."""
    return (_BREAKS if one_line else CONTROL).sub("\ufffd", text)


def marked(text: str, spans: list[tuple[int, int]], color: bool) -> str:
    """``text`` with ``spans`` bold (``color``) or in «guillemets»; control characters shown as U+FFFD."""
    opened, closed = ("\033[1m", "\033[22m") if color else ("«", "»")
    out, last = [], 0
    for a, b in spans:
        out += [CONTROL.sub("\ufffd", text[last:a]), opened, CONTROL.sub("\ufffd", text[a:b]), closed]
        last = b
    out.append(CONTROL.sub("\ufffd", text[last:]))
    return "".join(out)


def paragraph_spans(shown: Shown) -> dict[str, list[int] | None] | None:
    """Where the sentence's paragraph lies in ``shown.context`` around it, as ``[start, end)``
    offsets: ``before`` and ``after`` (whitespace and the heading path at the front left out) and
    ``sentence`` (None when the context does not hold it word for word); None when the paragraph is
    the sentence alone (or there is none). Every surface shows the paragraph from these."""
    context, text, start = shown.context, shown.hit.text, 0
    headings = shown.place.headings
    if headings:
        prefix = " > ".join(headings)
        for lead in (prefix + ". ", prefix + " "):
            if context.startswith(lead):
                start = len(lead)
                break
    at = context.find(text, start) if text else -1
    before, after = ((start, at), (at + len(text), len(context))) if at >= 0 else ((start, len(context)), None)

    def stripped(span: tuple[int, int] | None) -> list[int] | None:
        if span is None:
            return None
        a, b = span
        piece = context[a:b]
        a, b = a + len(piece) - len(piece.lstrip()), b - (len(piece) - len(piece.rstrip()))
        return [a, b] if a < b else None

    before, after = stripped(before), stripped(after)
    if before is None and after is None:
        return None
    return {"before": before, "sentence": [at, at + len(text)] if at >= 0 else None, "after": after}


def _paragraph(shown: Shown, width: int = 160) -> tuple[str, str, bool] | None:
    """(before, after, whether the sentence is in it) of the sentence's paragraph
    (:func:`paragraph_spans`), each side cut to about ``width`` characters."""
    spans = paragraph_spans(shown)
    if spans is None:
        return None
    before, after = (shown.context[slice(*spans[side])] if spans[side] else "" for side in ("before", "after"))
    if len(before) > width:
        before = "…" + before[-width:].split(" ", 1)[-1]
    if len(after) > width:
        after = after[:width].rsplit(" ", 1)[0] + "…"
    return before, after, spans["sentence"] is not None


def render(shown: Shown, question: str, color: bool, of: int | None = None, indent: int = 15) -> str:
    """A hit for people, three lines at most: ``rank. score  where · heading path · [id] · covers n
    of m question tokens`` (``of``: how many have a posting), the sentence with the question's words
    marked, and ``in: <the paragraph before> […] <after>`` when the paragraph has more than the
    sentence ([…] stands for the sentence)."""
    h, pad = shown.hit, " " * indent
    parts = [shown.where()]
    if shown.place.headings:
        parts.append(" > ".join(shown.place.headings))
    if parts[0] != h.id:
        parts.append(f"[{h.id}]")
    if shown.covers is not None:
        covered = f"covers {len(shown.covers)}" + (f" of {of}" if of is not None else "") + " question tokens"
        if shown.covers_terms:  # what the BM25 side of the sum matched (its section titles' words too)
            covered += f" and BM25 term{'s' if len(shown.covers_terms) > 1 else ''} {', '.join(shown.covers_terms)}"
        parts.append(covered)
    lines = [f"{shown.rank:3d}. {h.score:8.2f}  " + printable(" · ".join(parts), one_line=True),
             pad + marked(h.text or h.id, shown.marks, color)]
    paragraph = _paragraph(shown)
    if paragraph is not None:
        marker = Marker(question)
        before, after, inside = paragraph
        pieces = [marked(before, marker.spans(before), color), "[…]" if inside else "",
                  marked(after, marker.spans(after), color)]
        lines.append(pad + "in: " + " ".join(p for p in pieces if p))
    if shown.others:  # the same paragraph's other hits
        more = f" (and {len(shown.others) - COLLAPSED_SHOWN} more)" if len(shown.others) > COLLAPSED_SHOWN else ""
        lines.append(pad + f"also in this paragraph{more}: " + " · ".join(
            f"[{printable(o.hit.id, one_line=True)}] {o.hit.score:.2f}" for o in shown.others[:COLLAPSED_SHOWN]))
    if h.code:  # the command or example the sentence leads into, as written
        code = h.code.splitlines()
        lines += [pad + "\u2502 " + printable(line, one_line=True) for line in code[:CODE_LINES]]
        if len(code) > CODE_LINES:
            more = len(code) - CODE_LINES
            lines.append(pad + f"\u2502 \u2026 {more} more line{'s' if more > 1 else ''}")
    return "\n".join(lines)


CODE_LINES = 12  # of a hit's code shown in the terminal (--json and the API give all of it)
COLLAPSED_SHOWN = 3  # of a hit's collapsed neighbours named in the terminal
