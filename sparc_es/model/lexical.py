"""The lexical term: a BM25 weight over WordPiece tokens, added to a sentence's stored weights.

A model with ``lexical_weight`` alpha > 0 stores, for every token v of the sentence's own text,

    f(v, s) + alpha * idf(v) * tf (k1 + 1) / (tf + k1 (1 - b + b |s| / avgdl))

with tf the count of v in the sentence, |s| its length in WordPiece tokens, idf(v) =
log(1 + (N - N_v + 0.5) / (N_v + 0.5)) and avgdl over the N sentences of the corpus being encoded
(Lucene's BM25 formula, on the tokens the questions are made of). The neural part still chooses
the top K; the lexical term is added to those tokens and to the sentence's own tokens outside
them. Queries stay plain bags: the engines score the sum as they score any impact.

With ``lexical_skips_stop_words`` the term leaves out the tokens that are Lucene's English stop
words (:data:`STOP_WORDS`), as the BM25 it mirrors does, and the sentence's length is counted
without them: the neural scores store almost none of them, so without the rule "the", "of" and "in"
sat in half a corpus's sentences, lists that a question with such a word walks (docs/training.md).

With ``stem_weight`` beta > 0, the words of the sentence also lend their weight to the other
whole-word vocabulary tokens with the same Porter stem (the stemmer of Lucene's default English
analyzer): a sentence with "architects" stores beta x BM25("architect") for "architect",
"architectural" and "architecture" as well, with the stem's document frequency over the corpus's
words. That is Lucene BM25's stemmed match inside one index of plain WordPiece bags; the
sentence's own tokens keep their WordPiece term alone.

Why: exact matches of tokens that are rare *in the user's corpus* are evidence the neural scores
under-weight; on the validation split the term adds about 1 MRR to the default model
(docs/training.md). The statistics must come from the corpus being indexed: the same term with
the training slice's statistics loses 0.8 MRR on the validation split.

:class:`CorpusStatistics` are counted once per encoded folder (``lexical.json``) and kept by
``encode --update``, so unchanged sentences keep their stored weights; ``--overwrite`` counts afresh.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

import numpy as np

from sparc_es.layout.names import LEXICAL_FILE

# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET, which Anserini's default analyser uses (the BM25
# side of the one-request default, sparc_es.engines.blend, and a model with lexical_skips_stop_words).
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these "
    "they this to was will with".split())


@dataclass
class CorpusStatistics:
    """N sentences, their mean length in tokens and each token's document frequency."""

    sentences: int = 0
    tokens: int = 0  # summed lengths
    df: dict[int, int] = field(default_factory=dict)
    # Only when counted with a Stems (stem_weight > 0): summed lengths in words, each stem's df.
    words: int = 0
    stem_df: dict[str, int] | None = None
    # Only when counted with a Words (word_weight > 0): each whole word's df (see :class:`Words`).
    word_df: dict[str, int] | None = None

    @property
    def avgdl(self) -> float:
        return self.tokens / self.sentences if self.tokens else 1.0  # no tokens: no weight to normalise

    @property
    def avg_words(self) -> float:
        return self.words / self.sentences if self.words else 1.0  # no alphabetic word anywhere: no stem weights

    def add(self, token_ids: Iterable[Iterable[int]], stems: Iterable[list[str]] | None = None,
            words: Iterable[list[str]] | None = None) -> None:
        """Count sentences given as lists of token ids (and, for the stem term, as lists of stems;
        for the whole-word term, as lists of whole words)."""
        for ids in token_ids:
            ids = list(ids)
            self.sentences += 1
            self.tokens += len(ids)
            for i in set(ids):
                self.df[i] = self.df.get(i, 0) + 1
        if stems is not None:
            self.stem_df = {} if self.stem_df is None else self.stem_df
            for stemmed in stems:  # not "words": that is the whole-word parameter below
                self.words += len(stemmed)
                for w in set(stemmed):
                    self.stem_df[w] = self.stem_df.get(w, 0) + 1
        if words is not None:
            self.word_df = {} if self.word_df is None else self.word_df
            for whole in words:
                for w in set(whole):
                    self.word_df[w] = self.word_df.get(w, 0) + 1

    def merge(self, other: CorpusStatistics) -> CorpusStatistics:
        """Add the counts of ``other`` (another part of the same corpus, counted the same way) to
        these, in place, and return them: the reduce of a counting split over many workers
        (``sparc_es.encode.ray``). Exact: every count and document frequency is a sum, so the
        parts merged in any order equal the whole corpus counted at once."""
        if not other.sentences:  # an empty part adds nothing
            return self
        for name in ("stem_df", "word_df"):  # checked before anything is added
            if (getattr(self, name) is None) != (getattr(other, name) is None):
                if self.sentences:
                    raise ValueError(f"cannot merge corpus statistics counted with {name} and without")
                setattr(self, name, None if getattr(other, name) is None else {})  # these were empty
        self.sentences += other.sentences
        self.tokens += other.tokens
        self.words += other.words
        for name in ("df", "stem_df", "word_df"):
            mine, theirs = getattr(self, name), getattr(other, name)
            for k, v in (theirs or {}).items():
                mine[k] = mine.get(k, 0) + v
        return self

    def idf(self, token: int) -> float:
        return _idf(self.sentences, self.df.get(token, 0))

    def stem_idf(self, stem: str) -> float:
        return _idf(self.sentences, self.stem_df.get(stem, 0) if self.stem_df else 0)

    def word_idf(self, word: str) -> float:
        return _idf(self.sentences, self.word_df.get(word, 0) if self.word_df else 0)

    def write(self, folder: str | Path) -> None:
        df = {str(k): v for k, v in sorted(self.df.items())}
        data = {"sentences": self.sentences, "tokens": self.tokens, "df": df}
        if self.stem_df is not None:
            data["stems"] = {"words": self.words, "df": dict(sorted(self.stem_df.items()))}
        if self.word_df is not None:
            data["whole_words"] = {"df": dict(sorted(self.word_df.items()))}
        (Path(folder) / LEXICAL_FILE).write_text(json.dumps(data, separators=(",", ":")) + "\n")

    @classmethod
    def read(cls, folder: str | Path) -> CorpusStatistics | None:
        path = Path(folder) / LEXICAL_FILE
        if not path.is_file():
            return None
        d = json.loads(path.read_text())
        stems, whole = d.get("stems"), d.get("whole_words")
        return cls(int(d["sentences"]), int(d["tokens"]), {int(k): int(v) for k, v in d["df"].items()},
                   int(stems["words"]) if stems else 0, stems["df"] if stems else None,
                   whole["df"] if whole else None)

    def summary(self) -> dict:
        """What the manifest records about them."""
        out = {"sentences": self.sentences, "avgdl": round(self.avgdl, 3), "tokens_seen": len(self.df),
               "counted_in": "sentence text (WordPiece tokens, special tokens left out)"}
        if self.stem_df is not None:
            out["stems_seen"] = len(self.stem_df)
            out["avg_words"] = round(self.avg_words, 3)
        if self.word_df is not None:
            out["whole_words_seen"] = len(self.word_df)
        return out


def _idf(n_sentences: int, n: int) -> float:
    return math.log(1 + (n_sentences - n + 0.5) / (n + 0.5))


class Stems:
    """Porter stems of a text's words and, for a stem, the whole-word vocabulary tokens that have it.

    Words are what the tokenizer sees before WordPiece (its normaliser and pre-tokeniser:
    lower-cased, accents stripped, split at punctuation); only alphabetic ones are stemmed.
    """

    def __init__(self, tokenizer, scorable=None) -> None:
        import snowballstemmer

        # snowballstemmer hands out PyStemmer's compiled Porter when it is installed (a dependency;
        # the same stems, tests/test_lexical.py). A corpus repeats its words: a bounded cache.
        self.stem = functools.lru_cache(maxsize=1 << 20)(snowballstemmer.stemmer("porter").stemWord)
        backend = tokenizer.backend_tokenizer
        self._normalize, self._split = backend.normalizer, backend.pre_tokenizer
        classes: dict[str, list[int]] = {}
        for token, i in tokenizer.get_vocab().items():
            if token.isascii() and token.isalpha() and (scorable is None or (i < len(scorable) and scorable[i])):
                classes.setdefault(self.stem(token), []).append(i)
        self.siblings = {s: sorted(ids) for s, ids in classes.items()}

    def of(self, text: str) -> list[str]:
        """The stems of the text's alphabetic words, in order."""
        text = self._normalize.normalize_str(text) if self._normalize is not None else text.lower()
        return [self.stem(w) for w, _ in self._split.pre_tokenize_str(text) if w.isalpha()]


WORD_PREFIX = "w|"  # whole-word features: no WordPiece vocabulary token starts with it
_CONNECTORS = frozenset("_.-:/")


class Words:
    """The technical whole words of a text, which WordPiece splits into common pieces.

    A flag, identifier, version or port number (``storeDocvectors``, ``8081``) becomes several common
    WordPieces (store ##doc ##ve ##ctors), which neither the neural scores nor a WordPiece BM25
    weigh as the one rare word it is. A whole word here is, in the tokenizer's own pre-tokenisation
    (split at punctuation; features are lower-cased as the tokenizer does), a word that the
    vocabulary does not hold as one token and that has a digit or an inner capital (``8081``,
    ``storeDocvectors``, ``HTTPServer``), or an identifier joined by single ``_ . - : /`` with no
    space (``store_docvectors``, ``v1.2.3``, ``localhost:8081``). Plain words that WordPiece splits
    (``listens``) are left to the lexical term: counting them too lost on the validation domains.
    Sentences store them as ``w|word`` features beside the WordPiece ones; questions add their own
    (``QueryEncoder``).
    """

    def __init__(self, tokenizer) -> None:
        backend = tokenizer.backend_tokenizer
        self._normalize, self._split, model = backend.normalizer, backend.pre_tokenizer, backend.model
        vocab = tokenizer.get_vocab()
        # A corpus repeats its words: bounded caches.
        self._norm = functools.lru_cache(maxsize=1 << 20)(
            lambda w: self._normalize.normalize_str(w) if self._normalize is not None else w.lower())
        self._split_by_wordpiece = functools.lru_cache(maxsize=1 << 20)(
            lambda word: word not in vocab and len(model.tokenize(word)) > 1)

    def of(self, text: str) -> list[str]:
        """The text's whole words, in order (a word counts as often as it occurs)."""
        out: list[str] = []
        run: list[str] = []  # pre-tokens with no space between them, as written
        end = -1
        for piece, (a, b) in self._split.pre_tokenize_str(text):
            if a != end:
                self._whole(run, out)
                run = []
            run.append(piece)
            end = b
        self._whole(run, out)
        return out

    def _technical(self, word: str) -> bool:
        return (any(c.isdigit() for c in word) or any(c.isupper() for c in word[1:])) \
            and self._split_by_wordpiece(self._norm(word))

    def _whole(self, run: list[str], out: list[str]) -> None:
        joined: list[str] = []

        def close() -> None:
            parts = joined if not joined or joined[-1].isalnum() else joined[:-1]
            if len(parts) >= 3:
                out.append(self._norm("".join(parts)))

        for piece in run:
            if piece.isalnum():
                if self._technical(piece):
                    out.append(self._norm(piece))
                if len(joined) >= 2 and joined[-1] in _CONNECTORS:
                    joined.append(piece)
                else:
                    close()
                    joined = [piece]
            elif piece in _CONNECTORS and joined and joined[-1].isalnum():
                joined.append(piece)
            else:
                close()
                joined = []
        close()


def word_weights(words: list[str], length: int, stats: CorpusStatistics, k1: float, b: float) -> dict[str, float]:
    """``w|word`` -> BM25 of the whole word in one sentence of ``length`` WordPiece tokens."""
    counts: dict[str, int] = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    norm = k1 * (1 - b + b * length / stats.avgdl)
    return {WORD_PREFIX + w: stats.word_idf(w) * tf * (k1 + 1) / (tf + norm) for w, tf in counts.items()}


def sentence_token_ids(tokenizer, texts: list[str], scorable=None) -> list[list[int]]:
    """Each text's WordPiece ids without special tokens (and, given ``scorable``, only scorable ones)."""
    from sparc_es.model.checkpoint import quiet_transformers

    with quiet_transformers():  # no "longer than 512" warning: no model sees these ids
        ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    if scorable is None:
        return ids
    return [[i for i in x if i < len(scorable) and scorable[i]] for x in ids]


def count_corpus(texts: Iterable[str], tokenizer, scorable=None, batch: int = 1024,
                 stems: Stems | None = None, words: Words | None = None) -> CorpusStatistics:
    """:class:`CorpusStatistics` over a stream of sentence texts (and their stems, given ``stems``;
    their whole words, given ``words``)."""
    stats = CorpusStatistics(stem_df=None if stems is None else {}, word_df=None if words is None else {})
    texts = iter(texts)
    while chunk := list(islice(texts, batch)):
        stats.add(sentence_token_ids(tokenizer, chunk, scorable), None if stems is None else map(stems.of, chunk),
                  None if words is None else map(words.of, chunk))
    return stats


def stop_word_ids(tokenizer) -> frozenset[int]:
    """The vocabulary ids of :data:`STOP_WORDS` (each is one WordPiece token)."""
    vocab = tokenizer.get_vocab()
    return frozenset(vocab[w] for w in STOP_WORDS if w in vocab)


def bm25_weights(ids: list[int], stats: CorpusStatistics, k1: float, b: float) -> dict[int, float]:
    """token id -> idf(v) * saturated tf, for one sentence's token ids."""
    counts: dict[int, int] = {}
    for i in ids:
        counts[i] = counts.get(i, 0) + 1
    norm = k1 * (1 - b + b * len(ids) / stats.avgdl)
    return {i: stats.idf(i) * tf * (k1 + 1) / (tf + norm) for i, tf in counts.items()}


def stem_weights(stems: list[str], own: Iterable[int], stats: CorpusStatistics, vocabulary: Stems,
                 k1: float, b: float, skipped: frozenset[int] = frozenset()) -> dict[int, float]:
    """token id -> BM25 of its stem in one sentence, for the stem siblings of the sentence's words
    that are not among its own tokens ``own`` nor ``skipped`` (the stop words the lexical term leaves
    out: Porter stems "as" to "a" and "its" to "it")."""
    counts: dict[str, int] = {}
    for s in stems:
        counts[s] = counts.get(s, 0) + 1
    norm = k1 * (1 - b + b * len(stems) / stats.avg_words)
    own = set(own)
    out: dict[int, float] = {}
    for s, tf in counts.items():
        weight = stats.stem_idf(s) * tf * (k1 + 1) / (tf + norm)
        for t in vocabulary.siblings.get(s, ()):
            if t not in own and t not in skipped:
                out[t] = weight
    return out


@dataclass
class LexicalTerm:
    """One sentence's lexical weights before scaling: BM25 of its own tokens, and of its words'
    stems for their siblings (empty without the stem term)."""

    own: dict[int, float]
    siblings: dict[int, float]
    words: dict[str, float] = field(default_factory=dict)  # ``w|word`` -> BM25 (empty without a word weight)

    def scaled(self, alpha: float, beta: float) -> dict[int, float]:
        out = {t: alpha * w for t, w in self.own.items()}
        for t, w in self.siblings.items():
            out[t] = out.get(t, 0.0) + beta * w
        return out


def add_words(tokens: list[str], weights: np.ndarray, words: dict[str, float] | None
              ) -> tuple[list[str], np.ndarray]:
    """A stored map (token names, float32 weights) with the whole-word features (already scaled)
    joined, sorted by weight, descending. Not IDF-weighted: BM25 holds an IDF already."""
    extra = {t: w for t, w in (words or {}).items() if w > 0}
    if not extra:
        return tokens, weights
    tokens = tokens + list(extra)
    weights = np.concatenate([weights, np.array(list(extra.values()), dtype=np.float32)])
    order = np.argsort(-weights, kind="stable")
    return [tokens[i] for i in order], weights[order]


def add_lexical(tokens: np.ndarray, weights: np.ndarray, lexical: dict[int, float]
                ) -> tuple[np.ndarray, np.ndarray]:
    """Add ``lexical`` (token id -> weight, already scaled) to a top-K map given as (token ids,
    weights); tokens outside the map join it. Returned sorted by weight, descending."""
    extra = {t: w for t, w in lexical.items() if w > 0}
    if not extra:
        return tokens, weights
    at = {int(t): j for j, t in enumerate(tokens)}
    weights = weights.astype(np.float64).copy()
    new = []
    for t, w in extra.items():
        if t in at:
            weights[at[t]] += w
        else:
            new.append((t, w))
    if new:
        tokens = np.concatenate([tokens, np.array([t for t, _ in new], dtype=tokens.dtype)])
        weights = np.concatenate([weights, np.array([w for _, w in new])])
    order = np.argsort(-weights, kind="stable")
    return tokens[order], weights[order]
