"""The embedded default engine: a Lucene impact index, in-process through Pyserini's JVM, no server.

Index layout (``sparc-es index --input ENCODED --index INDEX``)::

    INDEX/meta.json          the encoded folder's metadata plus the index build's own figures
    INDEX/tokenizer/         question tokenizer (a question is a bag of WordPiece tokens)
    INDEX/sentences.sqlite   texts and offsets shown with hits
    INDEX/lucene/            Lucene impact index, the one Anserini's JsonVectorCollection -impact
                             -pretokenized builds, written directly (``_impacts.py``: 1.7x faster)
    INDEX/bm25/lucene/       Lucene BM25 index of the same sentences' texts (for hybrids)

Scores are exact integer dot products of the question's token counts with the stored impacts,
summed by Lucene over one posting list per question token (``_java.TopK``); ties come in Lucene
docid order, which is input order.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Iterable
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import orjson

from sparc_es.engines import blend
from sparc_es.engines._impacts import write_impact_index
from sparc_es.engines._java import TopK, index_documents, java_lock, parts, start_jvm
from sparc_es.engines.base import Closing, Description, Engine, EngineKind, Hit, HybridMethod, check_topics
from sparc_es.errors import EngineError, StoreError, count_mismatch, option
from sparc_es.layout import ownership as folders
from sparc_es.layout.locks import exclusive
from sparc_es.layout.manifest import IndexInfo, Manifest, copy_into, reading
from sparc_es.layout.names import BM25, LUCENE, SENTENCES, VECTORS_FILE
from sparc_es.layout.records import iter_vectors
from sparc_es.layout.store import SentenceStore, check_ids
from sparc_es.model.query import QueryEncoder


def build_index(encoded: str | Path, folder: str | Path, overwrite: bool = False, bm25: bool = True,
                progress: bool = False) -> Manifest:
    """Build a Lucene impact index in ``folder`` from an encoded folder; returns the index's manifest.

    ``bm25`` also indexes the sentence texts for BM25 in ``FOLDER/bm25`` (what ``--hybrid``
    searches fuse with, and ``--engine bm25`` searches alone). The index is built in a temporary
    folder beside ``folder`` and renamed into place when complete and checked, so a failed or
    interrupted build never leaves a half index, and the one it replaces stays until the new one
    has taken its place (:func:`_swap`). ``progress``
    says on stderr which stage is running.
    """
    encoded, folder = Path(encoded), Path(folder)
    folders.check_apart(folder, [encoded], "the index folder")  # --overwrite would delete the encoded folder
    Manifest.read_encoded(encoded)  # a clear error for a folder that is not a finished encode, before anything else
    if folder.exists() and not overwrite:
        raise StoreError(f"{folder}: already exists; pass {option('--overwrite', 'overwrite=True')} to rebuild it")
    folders.check_removable(folder, option("--overwrite", "overwrite=True"), replaces=folders.INDEX)  # only an index
    with exclusive(folder, "sparc-es index"):
        building = folder.parent / f".{folder.name}.building"
        retired = folder.parent / f".{folder.name}.old"
        for left in (building, retired):  # left by a build that was killed
            shutil.rmtree(left, ignore_errors=True)
        try:
            folders.claim(building, "index")
            with reading(encoded) as manifest:  # an update finishing meanwhile would mix two corpora
                check_ids(encoded)
                manifest = _build(encoded, building, manifest, bm25, progress)
            _swap(building, folder, retired)
        except OSError as e:
            raise StoreError(f"{e.filename or building}: {e.strerror or e} while building the index; nothing was "
                             f"changed in {folder}") from None
        finally:
            shutil.rmtree(building, ignore_errors=True)
    return manifest


def _swap(building: Path, folder: Path, retired: Path) -> None:
    """The new index in place of the one in ``folder``: that one renamed aside and the new one in
    (a stop between the two puts it back), then it is removed. A stop while it is removed (a large
    index takes seconds) leaves the new index in place, says so, and the next build removes the rest."""
    if folders.check_removable(folder, option("--overwrite", "overwrite=True")):
        folder.rename(retired)
    try:
        building.rename(folder)
    except BaseException:
        if retired.exists() and not folder.exists():
            retired.rename(folder)
        raise
    try:
        shutil.rmtree(retired, ignore_errors=True)
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"index built into {folder}; the previous index, moved aside to {retired}, was "
                                "not all removed (the next build removes the rest)") from None


def _stage(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _build(encoded: Path, folder: Path, manifest: Manifest, bm25: bool, progress: bool) -> Manifest:
    stage = _stage if progress else (lambda message: None)
    stage(f"index: {manifest.retrievable} sentences into a Lucene impact index, with their BM25 terms ...")
    started = time.perf_counter()
    vectors = folder / f"{VECTORS_FILE}.blended"  # the records with their BM25 features (blend.py)
    stats, maxima = blend.count(iter_vectors(encoded))
    with open(vectors, "wb") as f:
        for record in blend.blended(iter_vectors(encoded), stats, maxima):
            f.write(orjson.dumps(record) + b"\n")
    write_impact_index(vectors, folder / LUCENE, manifest.retrievable, progress)
    vectors.unlink()
    blend.Blend(maxima, stats.digest()).write(folder)
    seconds = time.perf_counter() - started
    docs = index_documents(folder / LUCENE)
    # Lucene drops documents with no terms; encode counted and reported those as empty vectors.
    if docs != manifest.retrievable:
        raise EngineError(count_mismatch(f"the Lucene index of {encoded}", docs, manifest.retrievable,
                                         "sentences with weights in the encoded folder"))
    copy_into(encoded, folder)
    bm25_info = None
    if bm25:
        from sparc_es.corpus.sources import Sentence
        from sparc_es.engines.bm25 import build_bm25_index

        stage("index: their texts into a Lucene BM25 index ...")
        texts = (Sentence(id=r["id"], text=r["contents"]) for r in iter_vectors(encoded))
        bm25_info = build_bm25_index(texts, folder / BM25)
    info = IndexInfo(engine=LUCENE, documents=docs, build_seconds=round(seconds, 2),
                     bytes=folders.folder_size(folder / LUCENE), encoded=str(encoded.resolve()), bm25=bm25_info,
                     built_at=datetime.now(UTC).isoformat(timespec="seconds"))
    manifest = manifest.replace(index=info)
    manifest.write(folder)
    return manifest


def lucene_manifest(folder: Path) -> Manifest:
    """The manifest of the sparc-es Lucene index ``folder``; a :class:`StoreError` for any other folder
    (an encoded folder names the command that makes an index of it)."""
    manifest = Manifest.read(folder)
    if manifest.index is None or manifest.index.engine != LUCENE or not (folder / LUCENE).is_dir():
        if manifest.index is None:
            make = option(f"sparc-es index --input {folder} --index DIR", f"build_index({str(folder)!r}, DIR)")
            raise StoreError(f"{folder}: an encoded folder, not an index: make one of it with {make}")
        raise StoreError(f"{folder}: not a sparc-es Lucene index (build one with: sparc-es index)")
    return manifest


class LuceneEngine(Closing, Engine):
    """Search a sparc-es Lucene index; questions are bags of tokens, no model runs.

    ``bm25_share`` None: SPARC alone, scores in model units (the integer sum over the factor).
    A share a in [0, 1]: the one-request sum of SPARC and BM25 (:mod:`~sparc_es.engines.blend`),
    scores the fraction of the question's attainable score. ``search``, ``batch_search`` and the
    reads of what the index holds (``postings``, ``stored``, ``scores_of``) may be called from
    several threads at once; :meth:`asked` changes the engine for every thread, so it is for an
    engine one thread uses (the server's worker).
    """

    def __init__(self, folder: str | Path, bm25_share: float | None = None) -> None:
        self.path = Path(folder)
        self.manifest = lucene_manifest(self.path)
        # the BM25 terms' maxima its sentences store, searched or not (None: built before they did)
        self.stored_blend = blend.Blend.read(self.path)
        self.blend = None
        if bm25_share is not None:
            self.blend = self.stored_blend
            if self.blend is None:
                raise StoreError(f"{self.path}: built before sentences stored their BM25 terms; rebuild it with "
                                 f"{option('sparc-es index --overwrite', 'build_index(..., overwrite=True)')} for "
                                 "the SPARC + BM25 sum")
        # the one-request sum, BM25's share (what a run tag and the server say of it), or SPARC alone
        self.method, self.bm25_weight = (HybridMethod.SUM, bm25_share) if bm25_share is not None else (None, None)
        self.queries = QueryEncoder.load(self.path)
        self.factor = self.manifest.factor
        self.store = SentenceStore(self.path / SENTENCES)
        start_jvm()
        from jnius import autoclass

        with java_lock:
            self.searcher = TopK(self.path / LUCENE, autoclass("io.anserini.search.similarity.ImpactSimilarity")())

    @contextmanager
    def asked(self, bm25_share: float | None):
        """This engine with BM25's share ``bm25_share`` in the sum (None: SPARC alone) for the
        searches inside the ``with``: one request's option, on an engine used by one thread at a time
        (the server's worker)."""
        if bm25_share is not None and self.stored_blend is None:
            raise StoreError(f"{self.path}: built before sentences stored their BM25 terms: no sum with BM25")
        saved = self.blend, self.method, self.bm25_weight
        if bm25_share is None:
            self.blend, self.method, self.bm25_weight = None, None, None
        else:
            self.blend, self.method, self.bm25_weight = self.stored_blend, HybridMethod.SUM, bm25_share
        try:
            yield self
        finally:
            self.blend, self.method, self.bm25_weight = saved

    def weights(self, question: str) -> dict[str, float]:
        """The question as the engine is asked it: ``{feature: clause weight}``."""
        if self.blend is None:
            return self.queries.encode(question)
        return self.blend.weights(question, self.queries.bag(question), self.bm25_weight)

    def search(self, question: str, k: int = 10) -> list[Hit]:
        return self._hits(self.searcher.weighted(self.weights(question), k))

    def batch_search(self, topics: Iterable[tuple[str, str]], k: int = 1000, threads: int = 1) -> dict[str, list[Hit]]:
        """Search many (qid, question) pairs; results keyed by qid."""
        topics = check_topics(topics, threads)
        out: dict[str, list[Hit]] = {}
        for part in parts(topics):
            results = self.searcher.weighted_batch([self.weights(q) for _, q in part], k, threads)
            out.update((qid, self._hits(hits, with_text=False)) for (qid, _), hits in zip(part, results))
        return out

    def _hits(self, scored: list[tuple[int, float, str]], with_text: bool = True) -> list[Hit]:
        if self.blend is not None:  # Lucene's float sum, in Lucene's order (ties: docid)
            found = self.store.get([sid for _, _, sid in scored]) if with_text else {}
            return [Hit(id=sid, score=float(score), order=docid).located(found.get(sid))
                    for docid, score, sid in scored]
        # Lucene sums in float and can land one ulp under the integer (67.99999 for 68), which
        # would put that hit after its ties: round back to the integer and re-sort by
        # (-score, docid), the order an exact sum gives.
        ranked = sorted((-int(round(score)), docid, sentence_id) for docid, score, sentence_id in scored)
        found = self.store.get([sid for _, _, sid in ranked]) if with_text else {}
        return [Hit(id=sid, score=-neg / self.factor, impact=-neg, order=docid).located(found.get(sid))
                for neg, docid, sid in ranked]

    # --- what the index holds (``search`` and ``explain`` say how a question met it) ------------

    def postings(self, tokens: Iterable[str]) -> dict[str, int]:
        """Each token's document frequency in the impact index: how many sentences store a weight for it."""
        return self.searcher.doc_freqs(list(dict.fromkeys(tokens)))

    def stored(self, ids: list[str], tokens: Iterable[str]) -> dict[str, dict[str, int]]:
        """The integer impact each sentence of ``ids`` stores for each of ``tokens``, read from its
        postings (what a search sums; tokens it does not store are left out, unknown ids too)."""
        docids = self.searcher.docids(list(ids))
        held = self.searcher.freqs(list(dict.fromkeys(tokens)), list(docids.values()))
        return {sid: held[d] for sid, d in docids.items()}

    def scores_of(self, question: str, ids: list[str]) -> dict[str, int]:
        """The integer score Lucene gives each sentence of ``ids`` for ``question``, asked as
        :meth:`search` asks (0: it shares no token with the question; unknown ids are left out)."""
        bag = self.queries.encode(question)
        return {sid: int(round(self.searcher.score(bag, d))) if bag else 0
                for sid, d in self.searcher.docids(list(ids)).items()}

    def describe(self) -> Description:
        return Description(EngineKind.LUCENE.value, self.method, self.bm25_weight)

    def close(self) -> None:
        self.searcher.close()
        self.store.close()
