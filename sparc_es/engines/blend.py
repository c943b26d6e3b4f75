"""The default search in one engine request: SPARC's impacts and BM25's term weights, summed by the engine.

Every sentence stores, beside the neural impacts of its WordPiece tokens, the BM25 weight of each
term of its own text and of the titles of the sections it sits in (:func:`bm25_text`: one field, as
a title field read with the body), as one more impact named ``b|term``::

    bm25(t, s) = idf(t) * tf / (tf + k1 (1 - b + b |s| / avgdl)),   idf(t) = log(1 + (N - N_t + 0.5) / (N_t + 0.5))

with Lucene's BM25 formula, k1 = 1.2 and b = 0.4, over terms analysed as Lucene's English analyser
does (:class:`EnglishAnalyzer`: Unicode words, possessives, stop words, Porter stems), and N, N_t
and avgdl over the sentences being indexed. k1 is Lucene's and Elasticsearch's default, not the
0.9 of Pyserini's passage settings that the Lucene BM25 baseline keeps: on the validation domains
k1 from 1.1 to 1.3 gains on every one (docs/evaluation.md, "The BM25 side's k1"). The weights are stored as
integers, ``round(bm25 * SCALE)``, below 512 so that Elasticsearch keeps them exactly.

A question is then one bag of weighted features, summed by the engine over one field: one Lucene
``BooleanQuery``, one Elasticsearch ``bool`` of ``rank_feature`` clauses (any licence)::

    score(q, s) = C(q) * ( (1 - a) * sum_t c_t I(t, s) / S(q)  +  a * sum_u c_u bm25(u, s) / B(q) )

with c the counts of the question's WordPiece tokens t and terms u, I the stored SPARC impacts and
S(q), B(q) the largest score each side can reach for that question, ``sum c x (the feature's
largest stored value)``, known before the search from the index's :data:`BLEND_FILE` (or the
Elasticsearch mapping's ``_meta``). This is the convex combination with theoretical-maximum
normalisation (Bruch, Gai and Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval",
TOIS 2023), written as clause weights, so the engine's block-max pruning still skips. C(q) is
:meth:`Blend.coverage`, the share of the question's words that the corpus holds: a constant of the
question, so it ranks nothing differently, but a question whose words the corpus lacks cannot
score high through the word pieces it shares with it. A score is then the fraction of the
question's attainable score, between 0 and 1, comparable across questions: it can be thresholded
(``--min-score``). A side the question has nothing of scores 0.

``a`` is BM25's share (:data:`BM25_SHARE`, chosen on the validation domains: docs/evaluation.md).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sparc_es.errors import SparcError, StoreError
from sparc_es.model.lexical import STOP_WORDS

PREFIX = "b|"  # BM25 term features: no WordPiece token starts with it (WORD_PREFIX is "w|")
K1, B = 1.2, 0.4  # chosen on the validation domains (docs/evaluation.md); the baseline keeps Pyserini's 0.9
SCALE = 32  # stored as round(bm25 * SCALE): idf stays under 16 below 8M sentences, so values < 512
BLEND_FILE = "blend.json"  # in a Lucene index folder: the settings and each feature's largest value

# BM25's share of the score by default: chosen on the validation domains (docs/evaluation.md).
BM25_SHARE = 0.35
# The least Blend.coverage gives: a question none of whose words the index holds (or of stop words
# only) keeps its ranking (its scores are not all 0) at a twentieth of its attainable score.
COVERAGE_FLOOR = 0.05

# Unicode words as Lucene's StandardTokenizer cuts them, near enough: letters and digits, joined
# across an apostrophe or a full stop between them (don't, e.g, example.com, 3.5) and a comma
# between digits (1,000).
_WORD = re.compile(r"\w+(?:[.'\u2019]\w+|(?<=\d),(?=\d)\w+)*")


class EnglishAnalyzer:
    """Text -> BM25 terms, as Lucene's English analyser (Anserini's default): words, lower-cased,
    English possessives removed, stop words dropped, Porter-stemmed."""

    def __init__(self) -> None:
        import snowballstemmer

        # PyStemmer's compiled Porter (the original algorithm, as Lucene's PorterStemFilter);
        # corpora repeat their words: a bounded cache.
        self._stem = functools.lru_cache(maxsize=1 << 20)(snowballstemmer.stemmer("porter").stemWord)

    def terms(self, text: str) -> list[str]:
        out = []
        for word in _WORD.findall(text.lower()):
            if word.endswith(("'s", "\u2019s")):
                word = word[:-2]
            if word and word not in STOP_WORDS:
                out.append(self._stem(word))
        return out


@dataclass
class Statistics:
    """What BM25 weights need of the indexed sentences: N, their summed length in terms, each term's df."""

    sentences: int = 0
    terms: int = 0
    df: Counter = field(default_factory=Counter)

    def add(self, terms: list[str]) -> None:
        self.sentences += 1
        self.terms += len(terms)
        self.df.update(set(terms))

    def weights(self, terms: list[str], k1: float | None = None, b: float | None = None) -> dict[str, int]:
        """The stored BM25 features of a sentence with these terms: ``{b|term: round(bm25 * SCALE)}``
        with :data:`K1` and :data:`B` (others given: for studies, scripts/studies/bm25_side.py)."""
        if not terms:
            return {}
        k1, b = K1 if k1 is None else k1, B if b is None else b
        avgdl = self.terms / self.sentences if self.sentences else 1.0
        norm = k1 * (1 - b + b * len(terms) / avgdl)
        out = {}
        for term, tf in Counter(terms).items():
            n = self.df.get(term, 0)
            idf = math.log(1 + (self.sentences - n + 0.5) / (n + 0.5))
            value = round(idf * tf / (tf + norm) * SCALE)
            if value > 0:
                out[PREFIX + term] = value
        return out

    def to_json(self) -> dict:
        return {"sentences": self.sentences, "terms": self.terms, "df": dict(sorted(self.df.items()))}

    @classmethod
    def from_json(cls, record: dict, where: str) -> Statistics:
        try:
            return cls(int(record["sentences"]), int(record["terms"]),
                       Counter({str(t): int(n) for t, n in record["df"].items()}))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise StoreError(f"{where}: unreadable BM25 statistics") from None

    def digest(self) -> str:
        """A fingerprint of the statistics: stored weights made with other statistics differ."""
        h = hashlib.sha256(f"{self.sentences} {self.terms}".encode())
        for term, n in sorted(self.df.items()):
            h.update(f"\0{term}\0{n}".encode())
        return h.hexdigest()[:16]


@dataclass
class Blend:
    """The query side of the one-request sum: each feature's largest stored value (SPARC tokens and
    ``b|`` terms), and how to turn a question into clause weights."""

    maxima: dict[str, int]
    statistics: str = ""  # Statistics.digest() of the BM25 weights stored
    titles: bool = True  # the BM25 side read section titles with the text (False: built before it did)
    analyzer: EnglishAnalyzer = field(default_factory=EnglishAnalyzer, repr=False, compare=False)

    def weights(self, question: str, tokens: Mapping[str, float], bm25_share: float = BM25_SHARE) -> dict[str, float]:
        """The question as ``{feature: clause weight}``: the two sides' features, each side's weights
        dividing by the largest score it can reach, shares ``1 - bm25_share`` and ``bm25_share``, all
        times :meth:`coverage`. Features no sentence stores are left out (they add nothing to any
        score)."""
        if not 0.0 <= bm25_share <= 1.0:
            raise SparcError(f"BM25's share of the sum must be between 0 and 1, not {bm25_share:g}")
        sparc, stored, scale = self.sides(question, tokens)
        out: dict[str, float] = {}
        for bag, share in ((sparc, 1.0 - bm25_share), (stored, bm25_share)):
            reach = sum(c * self.maxima[f] for f, c in bag.items())
            if share > 0 and reach > 0:
                out.update((f, scale * share * c / reach) for f, c in bag.items())
        return out

    def sides(self, question: str, tokens: Mapping[str, float]) -> tuple[dict[str, float], dict[str, int], float]:
        """The two sides of the sum for a question: its SPARC tokens and its ``b|`` terms that some
        sentence stores (with their counts), and its :meth:`coverage`. Each side's reach is
        ``sum(count x self.maxima[feature])``."""
        sparc = {t: c for t, c in tokens.items() if t in self.maxima}
        terms = Counter(PREFIX + t for t in self.analyzer.terms(question))
        stored = {f: c for f, c in terms.items() if f in self.maxima}
        return sparc, stored, self.coverage(terms, stored)

    @staticmethod
    def coverage(terms: Mapping[str, int], stored: Mapping[str, int]) -> float:
        """The share of the question's words (its BM25 terms, counted) that some sentence stores, at
        least :data:`COVERAGE_FLOOR`, which is also what a question of stop words only gets ("??",
        "what is it": no word for a corpus to hold, so no hit should look like an answer). Every clause weight is
        multiplied by it, which leaves the question's ranking as it is and lowers the scores of a
        question the corpus lacks words of: measured on the validation domains, it parts the top
        scores of questions a corpus answers from those of questions another corpus answers better
        (docs/evaluation.md, "Scores a user can threshold")."""
        asked = sum(terms.values())
        return max(COVERAGE_FLOOR, sum(stored.values()) / asked) if asked else COVERAGE_FLOOR

    def to_json(self) -> dict:
        return {"k1": K1, "b": B, "scale": SCALE, "statistics": self.statistics, "maxima": self.maxima,
                "titles": self.titles}

    def write(self, folder: str | Path) -> None:
        (Path(folder) / BLEND_FILE).write_text(json.dumps(self.to_json(), ensure_ascii=False, sort_keys=True))

    @classmethod
    def from_json(cls, record: dict, where: str) -> Blend:
        if not isinstance(record, dict) or not isinstance(record.get("maxima"), dict):
            raise StoreError(f"{where}: not a sparc-es blend record (no maxima)")
        if (record.get("k1"), record.get("b"), record.get("scale")) != (K1, B, SCALE):
            raise StoreError(f"{where}: BM25 weights stored with k1 {record.get('k1')}, b {record.get('b')}, scale "
                             f"{record.get('scale')}; this sparc-es stores {K1}, {B}, {SCALE}: rebuild the index "
                             "(sparc-es index --overwrite; on Elasticsearch, --engine es --recreate)")
        return cls({str(k): int(v) for k, v in record["maxima"].items()}, str(record.get("statistics", "")),
                   titles=record.get("titles") is True)

    @classmethod
    def read(cls, folder: str | Path) -> Blend | None:
        """The blend of a Lucene index folder; None for an index built before BM25 features were stored."""
        path = Path(folder) / BLEND_FILE
        if not path.is_file():
            return None
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise StoreError(f"{path}: unreadable ({e})") from None
        return cls.from_json(record, str(path))


def bm25_text(record: dict) -> str:
    """What the BM25 side reads of a record: its section titles (``headings``, where the reader found
    some) and its text, as one field. The titles say what a sentence is about (docs/evaluation.md,
    "Section titles on the BM25 side", has what they changed)."""
    headings = record.get("headings")
    return f"{headings} {record.get('contents', '')}" if headings else record.get("contents", "")


# said once when a sum is searched on an index whose BM25 side predates the titles
OLDER_TITLES = ("{where}'s BM25 side reads the sentences' text alone (built before it read their section titles "
                "too); rebuild it for the default's figures ({how})")


def count(records: Iterable[dict], analyzer: EnglishAnalyzer | None = None) -> tuple[Statistics, dict[str, int]]:
    """One pass over ``JsonVectorCollection`` records: the BM25 statistics of their :func:`bm25_text`
    and the largest impact each SPARC token has."""
    analyzer = analyzer or EnglishAnalyzer()
    stats, maxima = Statistics(), {}
    for r in records:
        stats.add(analyzer.terms(bm25_text(r)))
        for token, impact in r["vector"].items():
            if impact > maxima.get(token, 0):
                maxima[token] = impact
    return stats, maxima


def blended(records: Iterable[dict], stats: Statistics, maxima: dict[str, int],
            analyzer: EnglishAnalyzer | None = None) -> Iterator[dict]:
    """The records with each sentence's BM25 features added to its vector (a record without
    neural weights gets none: it stays unretrievable, as encode counted it); ``maxima`` gains the
    largest value of each ``b|`` feature. A record's ``hash`` gains the statistics' digest, so a
    load that skips unchanged documents rewrites them when the statistics changed."""
    analyzer = analyzer or EnglishAnalyzer()
    digest = stats.digest()
    for r in records:
        if any(v > 0 for v in r["vector"].values()):
            features = stats.weights(analyzer.terms(bm25_text(r)))
            for f, v in features.items():
                if v > maxima.get(f, 0):
                    maxima[f] = v
            r = {**r, "vector": {**r["vector"], **features}}
        if r.get("hash"):
            r = {**r, "hash": f"{r['hash']}+{digest}"}
        yield r
