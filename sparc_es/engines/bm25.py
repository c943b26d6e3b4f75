"""BM25 baselines on the same candidate pools as SPARC.

* :class:`LuceneBM25`: a proper Lucene BM25 with Pyserini's defaults (k1 = 0.9, b = 0.4, Porter
  stemming, English stop words, Anserini's bag-of-words query): the baseline to beat. It searches
  through the same ``_java.TopK`` path as the impact index, so the two compare like for like.
* :class:`PaperBM25`: the SPARC paper's weak "BM25" row, reproduced by ``rank_bm25``'s BM25Okapi
  (k1 = 1.5, b = 0.75, epsilon = 0.25) over ``text.lower().split()``, no stemming or stop words
  (``../shared/data/README.md``). rank_bm25 fits the statistics; its per-query loop over every
  document (36 ms a question on 10k sentences) is replaced by one sparse product with the same
  formula, checked against ``get_scores`` in the tests.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from sparc_es.corpus.sources import Sentence
from sparc_es.engines._java import TopK, index_collection, java_lock, parts, start_jvm
from sparc_es.engines.base import Closing, Description, Engine, EngineKind, Hit, check_topics
from sparc_es.engines.exact import ranked_batches
from sparc_es.errors import StoreError, option
from sparc_es.layout.names import BM25, LUCENE, SENTENCES
from sparc_es.layout.ownership import folder_size
from sparc_es.layout.store import SentenceStore
from sparc_es.model.query import check_question

LUCENE_FIELD = "contents"  # the field Anserini indexes a JsonCollection's text in


def build_bm25_index(sentences: Iterable[Sentence], folder: str | Path, overwrite: bool = False) -> dict:
    """Index sentence texts in ``folder`` for Lucene BM25 (Anserini JsonCollection, Pyserini's defaults)."""
    folder = Path(folder)
    if folder.exists():
        if not overwrite:
            raise StoreError(f"{folder}: already exists; pass overwrite to rebuild it")
        shutil.rmtree(folder)
    docs = folder / "docs"
    docs.mkdir(parents=True)
    n = 0
    with open(docs / "docs.jsonl", "w", encoding="utf-8") as f:
        for s in sentences:
            f.write(json.dumps({"id": s.id, "contents": s.text}, ensure_ascii=False) + "\n")
            n += 1
    seconds = index_collection("JsonCollection", docs, folder / LUCENE)
    shutil.rmtree(docs)
    return {"documents": n, "build_seconds": round(seconds, 2), "bytes": folder_size(folder / LUCENE)}


class LuceneBM25(Closing, Engine):
    """Search an index made by :func:`build_bm25_index`: what Pyserini's ``LuceneSearcher`` scores."""

    def __init__(self, folder: str | Path) -> None:
        folder = Path(folder)
        if not (folder / LUCENE).is_dir():
            raise StoreError(f"{folder}: not a BM25 index (no {LUCENE}/ folder in it)")
        start_jvm()
        from jnius import autoclass

        with java_lock:
            similarity = autoclass("org.apache.lucene.search.similarities.BM25Similarity")(0.9, 0.4)
            self.searcher = TopK(folder / LUCENE, similarity)
            self._analyzer = autoclass("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance()
            self._generator = autoclass("io.anserini.search.query.BagOfWordsQueryGenerator")()
        self.store = None
        self.store_path = folder.parent / SENTENCES  # the sparc-es index it sits in, if any

    @staticmethod
    def exists_beside(index: str | Path) -> bool:
        """Whether ``sparc-es index`` built a BM25 index inside the sparc-es index ``index``."""
        return (Path(index) / BM25 / LUCENE).is_dir()

    @classmethod
    def beside(cls, index: str | Path) -> LuceneBM25:
        """The BM25 index that ``sparc-es index`` built inside the sparc-es index ``index``."""
        if not cls.exists_beside(index):
            raise StoreError(f"{index}: has no BM25 index beside the impact index; rebuild it with "
                             f"{option('sparc-es index (without --no-bm25)', 'build_index(..., bm25=True)')}")
        engine = cls(Path(index) / BM25)
        if engine.store_path.is_file():
            engine.store = SentenceStore(engine.store_path)
        return engine

    def search(self, question: str, k: int = 10) -> list[Hit]:
        hits = self.batch_search([("q", question)], k)["q"]
        found = self.store.get([h.id for h in hits]) if self.store is not None else {}
        return [h.located(found.get(h.id)) for h in hits]

    def batch_search(self, topics: Iterable[tuple[str, str]], k: int = 1000, threads: int = 1) -> dict[str, list[Hit]]:
        topics = check_topics(topics, threads)
        out: dict[str, list[Hit]] = {}
        for part in parts(topics):
            with java_lock:
                queries = [self._generator.buildQuery(LUCENE_FIELD, self._analyzer, check_question(q)) for _, q in part]
            for (qid, _), hits in zip(part, self.searcher.queries(queries, k, threads)):
                out[qid] = [Hit(id=sentence_id, score=float(score), order=docid) for docid, score, sentence_id in hits]
        return out

    def describe(self) -> Description:
        return Description(EngineKind.BM25.value)

    def close(self) -> None:
        self.searcher.close()
        if self.store is not None:
            self.store.close()


class PaperBM25(Closing, Engine):
    """BM25Okapi as the SPARC paper scored it (see the module docstring)."""

    def __init__(self, sentences: Iterable[Sentence], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25) -> None:
        from rank_bm25 import BM25Okapi
        from scipy import sparse

        sentences = list(sentences)
        self.ids = [s.id for s in sentences]
        self.model = BM25Okapi([self.tokenize(s.text) for s in sentences], k1=k1, b=b, epsilon=epsilon)
        m = self.model
        self.vocab = {term: j for j, term in enumerate(m.idf)}
        rows, cols, vals = [], [], []
        norm = m.k1 * (1 - m.b + m.b * np.asarray(m.doc_len) / m.avgdl)
        for i, freqs in enumerate(m.doc_freqs):
            for term, tf in freqs.items():
                rows.append(i)
                cols.append(self.vocab[term])
                vals.append(m.idf[term] * tf * (m.k1 + 1) / (tf + norm[i]))
        self.weights = sparse.csr_matrix((vals, (rows, cols)), shape=(len(self.ids), len(self.vocab)))

    @staticmethod
    def tokenize(text: str) -> list[str]:
        return text.lower().split()

    def scores(self, questions: list[str]) -> np.ndarray:
        """BM25Okapi scores (questions x sentences); a repeated query term counts each time, as in rank_bm25."""
        from scipy import sparse

        rows, cols, vals = [], [], []
        for i, q in enumerate(questions):
            for term in self.tokenize(q):
                if term in self.vocab:
                    rows.append(i)
                    cols.append(self.vocab[term])
                    vals.append(1.0)
        queries = sparse.csr_matrix((vals, (rows, cols)), shape=(len(questions), len(self.vocab)))
        return (queries @ self.weights.T).toarray()

    def batch_search(self, topics: Iterable[tuple[str, str]], k: int = 1000, threads: int = 1) -> dict[str, list[Hit]]:
        return {qid: [Hit(id=self.ids[j], score=s, order=j) for j, s in ranked]
                for qid, ranked in ranked_batches(check_topics(topics, threads), self.scores, k)}

    def describe(self) -> Description:
        return Description("paper-bm25")

    def close(self) -> None:
        pass  # everything is in memory
