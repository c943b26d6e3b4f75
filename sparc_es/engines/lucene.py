"""The embedded default engine: a Lucene impact index through Pyserini, in-process, no server.

Index layout (``sparc-es index --input ENCODED --index INDEX``)::

    INDEX/meta.json          the encoded folder's metadata plus the index build's own figures
    INDEX/tokenizer/         question tokenizer (a question is a bag of WordPiece tokens)
    INDEX/sentences.sqlite   texts and offsets shown with hits
    INDEX/lucene/            Anserini impact index (JsonVectorCollection, -impact -pretokenized)
    INDEX/bm25/lucene/       Lucene BM25 index of the same sentences' texts (for hybrids)

Scores are exact integer dot products of the question's token counts with the stored impacts
(``min_idf=-1`` so tokens present in every sentence still count); ties come in Lucene docid
order, which is input order.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

from ..docstore import FILENAME as DOCSTORE, DocStore
from ..encode import META, TOKENIZER, VECTORS, read_meta
from ..errors import EngineError, StoreError
from ..model import query_bag
from . import Hit
from ._java import start_jvm

LUCENE = "lucene"
BM25 = "bm25"


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def build_index(encoded: str | Path, index: str | Path, overwrite: bool = False, bm25: bool = True) -> dict:
    """Build a Lucene impact index from an encoded folder; returns the index metadata.

    One indexing thread: Anserini parallelises over files, and the encoded folder is one file so
    that Lucene docids, which break score ties, follow input order. ``bm25`` also indexes the
    sentence texts for BM25 in ``INDEX/bm25`` (what ``--hybrid`` searches fuse with).
    """
    encoded, index = Path(encoded), Path(index)
    meta = read_meta(encoded)
    if index.exists():
        if not overwrite:
            raise StoreError(f"{index}: already exists; pass --overwrite to rebuild it")
        shutil.rmtree(index)
    index.mkdir(parents=True)
    start_jvm()
    from pyserini.pyclass import autoclass

    args = ["-collection", "JsonVectorCollection", "-input", str(encoded / VECTORS),
            "-index", str(index / LUCENE), "-generator", "DefaultLuceneDocumentGenerator",
            "-threads", "1", "-impact", "-pretokenized", "-optimize", "-quiet"]
    started = time.perf_counter()
    try:
        autoclass("io.anserini.index.IndexCollection").main(args)
    except Exception as e:  # a JavaException from inside Anserini
        raise EngineError(f"Lucene indexing failed: {e}") from None
    seconds = time.perf_counter() - started
    from pyserini.index.lucene import LuceneIndexReader

    docs = LuceneIndexReader(str(index / LUCENE)).stats()["documents"]
    # Lucene drops documents with no terms; encode counted and reported those as empty vectors.
    expected = meta["sentences"] - meta["empty_vectors"]
    if docs != expected:
        raise EngineError(f"index holds {docs} sentences but {encoded} has {expected} with weights: "
                          "some were lost while indexing")
    shutil.copytree(encoded / TOKENIZER, index / TOKENIZER)
    shutil.copy2(encoded / DOCSTORE, index / DOCSTORE)
    info = {"documents": docs, "build_seconds": round(seconds, 2), "bytes": folder_size(index / LUCENE),
            "encoded": str(encoded)}
    if bm25:
        from ..corpus import Sentence
        from ..encode import iter_vectors
        from .bm25 import build_bm25_index

        texts = (Sentence(id=r["id"], text=r["contents"]) for r in iter_vectors(encoded))
        info["bm25"] = build_bm25_index(texts, index / BM25)
    meta = {**meta, "engine": LUCENE, "index": info}
    (index / META).write_text(json.dumps(meta, indent=2) + "\n")
    return meta


class _BagEncoder:
    """Pyserini query encoder: the question's WordPiece tokens with their counts."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer

    def encode(self, text: str, **_) -> dict[str, int]:
        return query_bag(self.tokenizer, text)


class LuceneEngine:
    """Search a sparc-es Lucene index; questions are bags of tokens, no model runs."""

    def __init__(self, index: str | Path) -> None:
        self.path = Path(index)
        self.meta = read_meta(self.path)
        if self.meta.get("engine") != LUCENE or not (self.path / LUCENE).is_dir():
            raise StoreError(f"{self.path}: not a sparc-es Lucene index (build one with: sparc-es index)")
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(self.path / TOKENIZER, local_files_only=True)
        self.factor = float(self.meta["factor"])
        self.store = DocStore(self.path / DOCSTORE)
        start_jvm()
        from pyserini.search.lucene import LuceneImpactSearcher

        self.searcher = LuceneImpactSearcher(str(self.path / LUCENE), _BagEncoder(self.tokenizer), min_idf=-1)

    def query(self, question: str) -> dict[str, int]:
        """The bag of tokens the engine scores for ``question``."""
        return query_bag(self.tokenizer, question)

    def search(self, question: str, k: int = 10) -> list[Hit]:
        return self._hits(self.searcher.search(question, k))

    def batch_search(self, topics: Iterable[tuple[str, str]], k: int = 1000, threads: int = 1) -> dict[str, list[Hit]]:
        """Search many (qid, question) pairs; results keyed by qid."""
        topics = list(topics)
        out: dict[str, list[Hit]] = {}
        for start in range(0, len(topics), 256):  # bounded: each Java hit is a heavy Python proxy
            part = topics[start: start + 256]
            results = self.searcher.batch_search([q for _, q in part], [qid for qid, _ in part], k, threads)
            out.update((qid, self._hits(results.get(qid, []), with_text=False)) for qid, _ in part)
        return out

    def _hits(self, scored, with_text: bool = True) -> list[Hit]:
        # Lucene sums in float and can land one ulp under the integer (67.99999 for 68), which
        # would put that hit after its ties: round back to the integer and re-sort by
        # (-score, docid), the order an exact sum gives.
        ranked = sorted((-int(round(h.score)), h.lucene_docid, h.docid) for h in scored)
        pairs = [(docid, -neg) for neg, _, docid in ranked]
        found = self.store.get([d for d, _ in pairs]) if with_text else {}
        return [Hit(id=docid, score=impact / self.factor, impact=impact).located(found.get(docid))
                for docid, impact in pairs]

    def close(self) -> None:
        self.store.close()
