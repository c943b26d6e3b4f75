"""Real Lucene (Pyserini, in-process): scores are exact integer dot products of quantised weights."""

from __future__ import annotations

import json

import pytest

from sparc_es.encode import encode_corpus, iter_vectors, read_meta
from sparc_es.engines.lucene import LuceneEngine, build_index


@pytest.fixture(scope="module")
def squad_index(tmp_path_factory, tiny_model, squad_sample):
    sentences, questions = squad_sample
    root = tmp_path_factory.mktemp("lucene")
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(s.to_json()) + "\n" for s in sentences))
    encode_corpus([corpus], root / "encoded", tiny_model, factor=100, shard_size=128, progress=False)
    build_index(root / "encoded", root / "index")
    return root, questions


def brute_force(vectors: list[dict], bag: dict[str, int]) -> list[tuple[str, int]]:
    """Every sentence sharing a token with the question: (id, sum of count x impact), best first,
    ties in input order (= Lucene docid order)."""
    scored = []
    for position, v in enumerate(vectors):
        score = sum(count * v["vector"].get(token, 0) for token, count in bag.items())
        if score > 0:
            scored.append((-score, position, v["id"]))
    return [(sid, -neg) for neg, _, sid in sorted(scored)]


def test_lucene_scores_equal_brute_force_dot_products(squad_index):
    root, questions = squad_index
    vectors = list(iter_vectors(root / "encoded"))
    assert len(vectors) >= 300 and len(questions) >= 100
    engine = LuceneEngine(root / "index")
    answered = 0
    for q in questions:
        expected = brute_force(vectors, engine.query(q))
        hits = engine.search(q, k=len(vectors))
        assert [(h.id, h.impact) for h in hits] == expected, q
        assert all(h.score == h.impact / 100 for h in hits)
        if hits:
            answered += 1
            assert hits[0].text and hits[0].doc and hits[0].start is not None
    assert answered >= 100


def test_batch_search_equals_single_search(squad_index):
    root, questions = squad_index
    engine = LuceneEngine(root / "index")
    topics = [(f"q{i}", q) for i, q in enumerate(questions[:30])]
    batch = engine.batch_search(topics, k=10, threads=2)
    for qid, q in topics:
        assert [(h.id, h.impact) for h in batch[qid]] == [(h.id, h.impact) for h in engine.search(q, k=10)]


def test_index_metadata_records_the_quantisation(squad_index):
    root, _ = squad_index
    meta = read_meta(root / "index")
    assert meta["factor"] == 100 and meta["top_k"] == 64 and meta["engine"] == "lucene"
    assert meta["index"]["documents"] == meta["sentences"] - meta["empty_vectors"]
    assert meta["model"]["fingerprint"] and meta["index"]["bytes"] > 0
