"""Whole-word features (sparc_es.model.lexical.Words): identifiers, flags, versions and numbers that
WordPiece splits are stored as one ``w|word`` feature with a BM25 weight, questions ask for their
own, and every engine (exact, Lucene, Elasticsearch) scores them the same way."""

from __future__ import annotations

import json
import os

import pytest

from sparc_es.encode.requantize import requantize
from sparc_es.encode.run import encode_corpus
from sparc_es.engines.exact import ExactEngine
from sparc_es.engines.lucene import LuceneEngine, build_index
from sparc_es.layout.manifest import Manifest
from sparc_es.layout.records import iter_vectors
from sparc_es.model import SparcModel
from sparc_es.model.lexical import WORD_PREFIX, Words
from sparc_es.model.query import QueryEncoder

SENTENCES = {
    "flag": "Set storeDocvectors to keep the document vectors in the index.",
    "port": "The REST server listens on port 8081 by default.",
    "store": "Documents are stored as vectors in the index.",
    "version": "Version v1.2.3 added the store_docvectors option.",
    "python": "It needs Python 3.11 or newer.",
    "other": "The server stores its settings in a file.",
}


@pytest.fixture(scope="module")
def words_model():
    return SparcModel.load("default", word_weight=0.5)


@pytest.fixture(scope="module")
def encoded(tmp_path_factory, words_model):
    root = tmp_path_factory.mktemp("words")
    corpus = root / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in SENTENCES.items()))
    encode_corpus([corpus], root / "enc", words_model, progress=False, idf=False, keep_floats=True)
    build_index(root / "enc", root / "idx", bm25=False)
    return root


def test_whole_words_are_the_words_wordpiece_splits(words_model):
    words = Words(words_model.tokenizer)
    got = words.of("Use storeDocvectors, pyserini[optional] and store_docvectors on localhost:8081 with --port. "
                   "Python 3.11 or HTTPServer.")
    assert {"storedocvectors", "store_docvectors", "localhost:8081", "8081", "3.11", "httpserver"} <= set(got)
    assert not {"use", "and", "on", "with", "port", "python", "optional", "[", "--port"} & set(got)
    assert words.of("the cat sat on the mat; it listens") == []  # plain words are the lexical term's
    assert words.of("storeDocvectors and StoreDocVectors") == ["storedocvectors", "storedocvectors"]


@pytest.mark.jvm
def test_sentences_store_their_whole_words_with_a_bm25_weight(encoded, words_model):
    records = {r["id"]: r for r in iter_vectors(encoded / "enc")}
    assert WORD_PREFIX + "storedocvectors" in records["flag"]["vector"]
    assert WORD_PREFIX + "8081" in records["port"]["vector"]
    assert {WORD_PREFIX + "v1.2.3", WORD_PREFIX + "store_docvectors"} <= records["version"]["vector"].keys()
    assert not any(t.startswith(WORD_PREFIX) for t in records["store"]["vector"])
    # The stored weight is gamma x BM25 with the corpus's statistics, as the lexical term's.
    corpus = words_model.count_corpus(SENTENCES.values())
    term = words_model.lexical_terms([SENTENCES["port"]], corpus)[0]
    assert records["port"]["weights"][WORD_PREFIX + "8081"] == pytest.approx(0.5 * term.words[WORD_PREFIX + "8081"],
                                                                           rel=1e-6)
    assert Manifest.read(encoded / "enc").model.word_weight == 0.5


@pytest.mark.jvm
def test_questions_ask_for_their_whole_words_only_where_the_index_stores_them(encoded, tiny_model_dir):
    bag = QueryEncoder.load(encoded / "idx").bag("What does storeDocvectors do?")
    assert bag[WORD_PREFIX + "storedocvectors"] == 1
    assert not any(t.startswith(WORD_PREFIX) for t in QueryEncoder.load(tiny_model_dir).bag("storeDocvectors"))


@pytest.mark.jvm
def test_lucene_scores_whole_words_as_the_exact_engine_does(encoded):
    exact, lucene = ExactEngine(encoded / "enc"), LuceneEngine(encoded / "idx")
    try:
        for question in ("What does storeDocvectors do?", "Which port is 8081?", "Is v1.2.3 out?",
                         "What is store_docvectors?", "Does it need Python 3.11?"):
            want = [(h.id, h.impact) for h in exact.search(question, 6)]
            got = [(h.id, h.impact) for h in lucene.search(question, 6)]
            assert got == want, question
        assert lucene.search("What does storeDocvectors do?", 1)[0].id == "flag"
        assert lucene.search("the option store_docvectors", 1)[0].id == "version"
    finally:
        lucene.close()


@pytest.mark.jvm
def test_requantize_idf_keeps_whole_words_out_of_idf(encoded, tmp_path, words_model):
    requantize(encoded / "enc", tmp_path / "idf", idf=True)
    direct = tmp_path / "direct"
    encode_corpus([encoded / "c.jsonl"], direct, words_model, progress=False, idf=True)
    assert {r["id"]: r["vector"] for r in iter_vectors(direct)} == \
        {r["id"]: r["vector"] for r in iter_vectors(tmp_path / "idf")}


@pytest.mark.es
@pytest.mark.jvm
def test_elasticsearch_scores_whole_words_as_lucene_does(encoded):
    from sparc_es.engines.elastic import Connection, ElasticEngine, build_index as load_es
    from sparc_es.engines.elastic.loopback import noida_binary, noida_server

    if not os.environ.get("SPARC_ES_URL") and noida_binary() is None:
        pytest.skip("noida-db not installed (pip install -e '.[test]')")

    def check(url: str) -> None:
        client = Connection(url).client()
        name = f"words-{os.getpid()}"
        try:
            load_es(encoded / "enc", client, name, progress=False, recreate=True)
            es = ElasticEngine(client, name, QueryEncoder.load(encoded / "enc"))
            lucene = LuceneEngine(encoded / "idx")
            for question in ("What does storeDocvectors do?", "Which port is 8081?", "Is v1.2.3 out?"):
                # impacts far below 512: ES's 9 significant bits keep them exactly
                assert [(h.id, round(h.score, 6)) for h in es.search(question, 6)] == \
                    [(h.id, round(h.score, 6)) for h in lucene.search(question, 6)], question
            lucene.close()
        finally:
            client.indices.delete(index=name, ignore_unavailable=True)

    if os.environ.get("SPARC_ES_URL"):
        check(os.environ["SPARC_ES_URL"])
    else:
        with noida_server() as url:
            check(url)
