"""The query side: a question becomes a bag of WordPiece tokens. No model runs at query time.

:class:`QueryEncoder` is the one place that turns a question into what an engine scores: each
token's count in the question (special tokens dropped), times an optional per-token weight.
Every engine (Lucene, Elasticsearch, exact), ``sparc-es query-dsl`` and training use it, so the
bag the model was trained on is the bag the engines are asked.

The tokenizer comes from a folder: an encoded folder or an index (their ``tokenizer/``), a model
folder, or ``default`` (the shipped model's).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path

from sparc_es.corpus.ids import SURROGATE
from sparc_es.errors import SparcError
from sparc_es.layout.names import META, TOKENIZER


def query_bag(tokenizer, question: str) -> dict[str, int]:
    """Bag of the question's WordPiece tokens, each occurrence counting once; specials dropped."""
    from sparc_es.model.checkpoint import quiet_transformers

    specials = set(tokenizer.all_special_tokens)
    bag: dict[str, int] = {}
    with quiet_transformers():  # no "longer than 512 tokens" warning: no model sees the question
        tokens = tokenizer.tokenize(question)
    for tok in tokens:
        if tok not in specials:
            bag[tok] = bag.get(tok, 0) + 1
    return bag


def tokenizer_folder(folder: str | Path) -> Path:
    """Where the question tokenizer of ``folder`` is: its ``tokenizer/`` subfolder if it has one
    (encoded folder, index), else the folder itself (a model folder); ``default``: the shipped model's."""
    from sparc_es.model.checkpoint import resolve_model_path

    path = resolve_model_path(folder) if str(folder) == "default" else Path(folder)
    return path / TOKENIZER if (path / TOKENIZER).is_dir() else path


def stores_words(folder: str | Path) -> bool:
    """Whether the sentences of an encoded folder or index (its ``meta.json``), or of a model folder's
    encodes (its ``sparc_config.json``), store whole-word features (:class:`~sparc_es.model.lexical.Words`)."""
    import json

    from sparc_es.model.checkpoint import SPARC_CONFIG, resolve_model_path

    path = resolve_model_path(folder) if str(folder) == "default" else Path(folder)
    for name, key in ((META, ("model", "word_weight")), (SPARC_CONFIG, ("word_weight",))):
        if (path / name).is_file():
            value = json.loads((path / name).read_text(encoding="utf-8"))
            for k in key:
                value = value.get(k, 0) if isinstance(value, dict) else 0
            return bool(value)
    return False


class QueryEncoder:
    """Question -> ``{token: count x weight}``: what every sparc-es engine scores."""

    def __init__(self, tokenizer, weights: Mapping[str, float] | None = None, words: bool = False) -> None:
        """``weights``: an optional multiplier per token (tokens not in it keep 1). ``words``: the
        question also asks for its whole words (``w|word``), for an index whose sentences store them."""
        from sparc_es.model.lexical import Words

        self.tokenizer = tokenizer
        self.weights = dict(weights) if weights else None
        self.words = Words(tokenizer) if words else None
        # A fast tokenizer call mutates the tokenizer's truncation and padding state: engines search
        # from several threads (run --threads, a server), so calls are serialised.
        self._lock = threading.Lock()

    @classmethod
    def load(cls, folder: str | Path = "default", weights: Mapping[str, float] | None = None) -> QueryEncoder:
        """The encoder of an encoded folder, index or model folder (see :func:`tokenizer_folder`)."""
        from sparc_es.errors import StoreError
        from sparc_es.model.checkpoint import from_transformers, quiet_transformers

        (AutoTokenizer,) = from_transformers("AutoTokenizer")

        path = tokenizer_folder(folder)
        if not path.is_dir():  # else transformers reads the path as a model hub name and says so
            raise StoreError(f"{folder}: no such folder (the question tokenizer comes from an encoded folder, "
                             "an index or a model folder)")
        try:
            with quiet_transformers():
                tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        except (OSError, ValueError) as e:
            raise StoreError(f"{path}: cannot load the question tokenizer ({e})") from None
        return cls(tokenizer, weights, words=stores_words(folder))

    def bag(self, question: str) -> dict[str, float]:
        """The question's tokens with their counts (and its whole words, when the index stores
        them), each times its weight."""
        from sparc_es.model.lexical import WORD_PREFIX

        check_question(question)
        with self._lock:
            counts = query_bag(self.tokenizer, question)
            if self.words is not None:
                for w in self.words.of(question):
                    counts[WORD_PREFIX + w] = counts.get(WORD_PREFIX + w, 0) + 1
        if self.weights is None:
            return counts
        return {t: c * self.weights.get(t, 1.0) for t, c in counts.items()}

    def encode(self, text: str, **_) -> dict[str, int]:
        """Pyserini's query-encoder interface. Lucene impact queries take integer weights: each is
        rounded, and a token whose weight rounds to 0 is left out."""
        return {t: round(w) for t, w in self.bag(text).items() if round(w) > 0}


# Characters a question may have: a long BEIR topic (an argument, a post) fits, a pasted document does
# not. It bounds a question's clauses (a clause a distinct token or word: fewer than 1.5 a character)
# below the engine's limit (engines/_java.py: MAX_CLAUSES) and the time one question holds a server.
MAX_QUESTION = 20_000


def check_question(question: str, asked: bool = False) -> str:
    """``question``, or a one-line :class:`~sparc_es.errors.SparcError` when it is not text: a byte
    that is not UTF-8 (an argument or a line read with surrogate escapes) or a lone surrogate (JSON
    allows ``"\\ud800"``), which no tokenizer takes; or when it is longer than
    :data:`MAX_QUESTION` characters. ``asked``: a question a person asked (search, explain, the
    API), which must have a character to show: blank or control characters alone are refused (a
    batch's empty topic is not: it finds nothing)."""
    if not isinstance(question, str):
        raise SparcError(f"a question is text, not {type(question).__name__}")
    if asked and not any(c.isprintable() and not c.isspace() for c in question):
        raise SparcError("empty question" if not question.strip() else
                         f"the question '{question.encode('unicode_escape').decode()[:80]}' has no character to "
                         "show, only control or format characters")
    if len(question) > MAX_QUESTION:
        raise SparcError(f"the question is {len(question):,} characters long, over the {MAX_QUESTION:,} a question "
                         f"may have: shorten it to its key sentences ('{question[:40]}...')")
    bad = SURROGATE.search(question)
    if bad is None:
        return question
    code = ord(bad.group())
    why = f"byte 0x{code - 0xDC00:02x} is not UTF-8" if 0xDC80 <= code <= 0xDCFF else \
        f"U+{code:04X} is half of a surrogate pair, not a character"
    try:  # the bytes as given (a surrogate escape is a byte), else the code points
        shown = question.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")[:80]
    except UnicodeEncodeError:
        shown = question.encode("utf-8", "backslashreplace").decode()[:80]
    raise SparcError(f"the question '{shown}' is not valid text: {why}")
