"""Exact scoring in memory with SciPy sparse products: the reference the engines are checked against.

``ExactEngine`` scores g(q, s) = sum over the question's tokens of f(v, s) for every sentence of
an encoded folder, with the stored integers, with the float weights (``floats=True``; needs an
encode with ``keep_floats``), or with the floats quantised at another ``factor`` (what an impact
index built at that factor would score, without building it). It is for evaluation and tests on
corpora that fit in memory, not a product engine.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from sparc_es.engines.base import Closing, Description, Engine, Hit, check_k, check_topics
from sparc_es.errors import StoreError
from sparc_es.layout.manifest import Manifest
from sparc_es.layout.records import iter_vectors, quantize
from sparc_es.model.query import QueryEncoder


def top_k_rows(scores: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
    """Per row, the k best (column, score) with score > 0, ties by column (= input order)."""
    out = []
    for row in scores:
        columns = np.flatnonzero(row > 0)
        values = row[columns]
        if len(columns) > k:
            keep = values >= np.partition(values, -k)[-k]
            columns, values = columns[keep], values[keep]
        order = np.lexsort((columns, -values))[:k]
        out.append(list(zip(columns[order].tolist(), values[order].tolist())))
    return out


def ranked_batches(topics: list[tuple[str, str]], scores_of, k: int, chunk: int = 256):
    """Yield (qid, top-k (column, score)) with ``scores_of(questions)`` run ``chunk`` questions at a time."""
    for start in range(0, len(topics), chunk):
        part = topics[start: start + chunk]
        yield from zip((qid for qid, _ in part), top_k_rows(scores_of([q for _, q in part]), k))


class ExactEngine(Closing, Engine):
    """Brute-force g(q, s) over an encoded folder."""

    def __init__(self, encoded: str | Path, floats: bool = False, factor: float | None = None) -> None:
        from scipy import sparse

        self.path = Path(encoded)
        self.manifest = Manifest.read(self.path)
        self.factor = float(factor or self.manifest.factor)
        self.floats = floats
        requantize = factor is not None and not floats
        self.queries = QueryEncoder.load(self.path)
        # Columns: the vocabulary, then features outside it (whole words) as they are met.
        self.vocab = dict(self.queries.tokenizer.get_vocab())
        self.ids: list[str] = []
        rows, cols, vals = [], [], []
        for i, record in enumerate(iter_vectors(self.path)):
            weights = record.get("weights") if floats or requantize else record["vector"]
            if weights is None:
                raise StoreError(f"{self.path}: no float weights stored; encode with keep_floats")
            if requantize:
                weights = quantize(list(weights), list(weights.values()), self.factor)
            self.ids.append(record["id"])
            for token, w in weights.items():
                rows.append(i)
                cols.append(self.vocab.setdefault(token, len(self.vocab)))
                vals.append(w)  # floats, or integer impacts: their sums are exact, ranked before dividing
        self.docs = sparse.csr_matrix((vals, (rows, cols)), shape=(len(self.ids), len(self.vocab)), dtype=np.float64)

    def _query_matrix(self, questions: list[str]):
        from scipy import sparse

        rows, cols, vals = [], [], []
        for i, q in enumerate(questions):
            # the integers are asked as Lucene is asked (integer counts); the floats with the exact bag
            for token, count in (self.queries.bag(q) if self.floats else self.queries.encode(q)).items():
                if token in self.vocab:
                    rows.append(i)
                    cols.append(self.vocab[token])
                    vals.append(count)
        return sparse.csr_matrix((vals, (rows, cols)), shape=(len(questions), len(self.vocab)), dtype=np.float64)

    def search(self, question: str, k: int = 10) -> list[Hit]:
        return self.batch_search([("q", question)], k)["q"]

    def scores(self, questions: list[str]) -> np.ndarray:
        """g(q, s) for every question (rows) and sentence (columns), in model units."""
        sums = self._sums(questions)
        return sums if self.floats else sums / self.factor

    def _sums(self, questions: list[str]) -> np.ndarray:
        """The floats' sums, or the integer impact sums (exact in float64, so ties are ties: divided
        first, 82/5 and 82/5 came out 16.4 and 16.400000000000002 and ranked by that)."""
        return (self._query_matrix(questions) @ self.docs.T).toarray()

    def batch_search(self, topics: Iterable[tuple[str, str]], k: int = 1000, threads: int = 1) -> dict[str, list[Hit]]:
        """Score every sentence for every question, a chunk of questions at a time (bounded memory)."""
        check_k(k)
        topics = check_topics(topics, threads)
        if self.floats:
            return {qid: [Hit(id=self.ids[j], score=s, order=j) for j, s in ranked]
                    for qid, ranked in ranked_batches(list(topics), self._sums, k)}
        return {qid: [Hit(id=self.ids[j], score=s / self.factor, impact=int(s), order=j) for j, s in ranked]
                for qid, ranked in ranked_batches(list(topics), self._sums, k)}

    def describe(self) -> Description:
        return Description("exact")

    def close(self) -> None:
        pass  # everything is in memory
