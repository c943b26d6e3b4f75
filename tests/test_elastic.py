"""Elasticsearch over real HTTP: noida-db (an ES-API-compatible server from PyPI) on loopback, or a
real cluster when SPARC_ES_URL is set. The same questions give the same top 10 as Lucene."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from types import SimpleNamespace

import pytest

from sparc_es.cli import main
from sparc_es.encode.run import encode_corpus
from sparc_es.engines import open_engine
from sparc_es.engines.blend import PREFIX
from sparc_es.engines.elastic import (
    BASE_MAPPING,
    SETTINGS,
    Connection,
    ElasticBM25,
    ElasticEngine,
    build_index as load_es,
    es_features,
    feature_name,
    mapping,
    query_body,
    token_name,
)
from sparc_es.engines.hybrid import BM25_WEIGHT, DEPTH, HybridEngine, normalised_sum, reciprocal_rank
from sparc_es.engines.lucene import LuceneEngine, build_index
from sparc_es.errors import EngineError, SparcError
from sparc_es.layout.manifest import Manifest
from sparc_es.layout.records import iter_vectors
from sparc_es.model.query import QueryEncoder

from tolerance import assert_same_impacts, assert_same_records

ROOT = Path(__file__).resolve().parents[1]


def test_feature_names_round_trip_and_never_contain_dots():
    for token in ["paris", ".", "...", "##.", "%", "%2E", "a.b%c", "[UNK]", "é.25%"]:
        name = feature_name(token)
        assert "." not in name and token_name(name) == token
    assert len({feature_name(t) for t in [".", "%2E", "%252E"]}) == 3


def test_features_drop_non_positive_weights():
    assert es_features({"a": 3, "b": 0, "c": -1, "d.e": 0.5}) == {"a": 3.0, "d%2Ee": 0.5}


def test_mapping_file_is_the_mapping_the_code_creates():
    shipped = json.loads((ROOT / "mappings" / "sparc.json").read_text())
    shipped.pop("_meta")
    assert shipped == BASE_MAPPING
    assert json.loads((ROOT / "mappings" / "sparc-settings.json").read_text()) == SETTINGS


@pytest.mark.es
@pytest.mark.jvm
def test_a_match_on_text_is_the_lucene_bm25_indexs_bm25(tmp_path, es_url):
    """One BM25: the mapping analyses ``text`` as Lucene's English analyser and scores it with k1 0.9,
    b 0.4, so a ``match`` ranks nearly as the Lucene BM25 index of the same sentences (Lucene's
    length norms are stored in one byte, the server's need not be). With the mapping of earlier
    versions (the standard analyser, k1 1.2, b 0.75) they differ far more."""
    from sparc_es.corpus.sources import read_corpus
    from sparc_es.engines.bm25 import LuceneBM25, build_bm25_index

    sentences = list(read_corpus([ROOT / "tests" / "data" / "docs"]))
    build_bm25_index(sentences, tmp_path / "bm25")
    lucene = LuceneBM25(tmp_path / "bm25")
    client = Connection(es_url).client()
    questions = ["How do I add a boolean flag?", "prompting the user for passwords", "environment variables defaults",
                 "testing click applications", "command groups and subcommands", "required options",
                 "colored terminal output", "parameter types", "progress bars", "the user's home folder",
                 "options that are counted", "file arguments opened lazily"]
    agree = {}
    for name, settings, text in ((f"bm25-now-{os.getpid()}", SETTINGS, BASE_MAPPING["properties"]["text"]),
                                 (f"bm25-before-{os.getpid()}", {}, {"type": "text"})):
        client.indices.create(index=name, mappings={"properties": {"text": text}}, settings=settings)
        try:
            for start in range(0, len(sentences), 200):
                client.bulk(operations=[x for s in sentences[start: start + 200]
                                        for x in ({"index": {"_index": name, "_id": s.id}}, {"text": s.text})])
            client.indices.refresh(index=name)
            es = ElasticBM25(client, name)
            top1 = overlap = 0
            for q in questions:  # tied scores may come in another order: the top hit and the top 10 as sets
                mine, theirs = es.search(q, k=10), lucene.search(q, k=10)
                top1 += mine[0].id == theirs[0].id
                overlap += len({h.id for h in mine} & {h.id for h in theirs})
            agree[name] = (top1, overlap / len(questions))
        finally:
            client.indices.delete(index=name, ignore_unavailable=True)
    lucene.close()
    (now_top1, now_overlap), (before_top1, before_overlap) = agree.values()
    # measured: 10 of 12 top hits and 9.25 of the top 10 in common, against 5 and 5.9 before
    assert now_top1 >= 9 and now_overlap >= 8.5, agree
    assert before_top1 < now_top1 and before_overlap < now_overlap, agree


def test_query_is_a_linear_dot_product():
    body = query_body({"paris": 2, "u.s": 1}, size=5)
    clauses = body["query"]["bool"]["should"]
    assert {"rank_feature": {"field": "weights.paris", "linear": {}, "boost": 2}} in clauses
    assert {"rank_feature": {"field": "weights.u%2Es", "linear": {}, "boost": 1}} in clauses
    sparse = query_body({"paris": 2}, mode="sparse_vector")["query"]["bool"]["should"][0]
    assert sparse == {"sparse_vector": {"field": "weights", "query_vector": {"paris": 2.0}}}


def test_connection_never_shows_secrets():
    c = Connection("https://es.example:9200", api_key="s3cret", username="u", password="p4ss")
    assert "s3cret" not in repr(c) and "p4ss" not in repr(c)


@pytest.fixture(scope="module")
def squad_both(tmp_path_factory, tiny_model, squad_sample, es_url):
    sentences, questions = squad_sample
    root = tmp_path_factory.mktemp("es")
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(s.to_json()) + "\n" for s in sentences))
    encode_corpus([corpus], root / "encoded", tiny_model, factor=100, progress=False, idf=False)
    build_index(root / "encoded", root / "index")
    client = Connection(es_url).client()
    index = f"sparc-test-{os.getpid()}"
    load_es(root / "encoded", client, index, progress=False, recreate=True)
    yield root, questions, client, index
    client.indices.delete(index=index, ignore_unavailable=True)


@pytest.mark.es
@pytest.mark.jvm
@pytest.mark.data
def test_elasticsearch_top10_equals_lucene(squad_both):
    root, questions, client, index = squad_both
    largest = max(max(r["vector"].values(), default=0) for r in iter_vectors(root / "encoded"))
    lucene = LuceneEngine(root / "index")
    es = ElasticEngine(client, index, QueryEncoder.load(root / "encoded"))
    compared = 0
    for q in questions:
        want = lucene.search(q, k=30)
        got = es.search(q, k=10)
        assert len(got) == min(10, len(want)), q
        for rank, hit in enumerate(got):
            # 9 significant bits: exact below 512, within 0.4% above
            assert hit.score == pytest.approx(want[rank].score, rel=0.004 if largest >= 512 else 1e-9), q
            tied = {h.id for h in want if abs(h.score - hit.score) <= 0.004 * hit.score}
            assert hit.id in tied, q  # the same sentence, or one tied with it
        compared += bool(got)
    assert compared >= 100


@pytest.mark.es
@pytest.mark.jvm
def test_ties_go_to_input_order_on_both_engines_and_after_an_update(tmp_path, tiny_model, es_url):
    """The one tie rule: sentences of equal score rank in input order on Lucene and on Elasticsearch
    alike (ids in another order, so an id order would show), SPARC alone and in the default sum;
    after updates that rewrite the first tied sentence in the cluster (a document's docid then comes
    last) or insert one before it, both still agree."""
    twin = "The lighthouse keeper lit the lamp at dusk."
    rows = [{"id": "p0", "text": "Ships pass the harbour wall at night."}, {"id": "z1", "text": twin, "doc": "a"},
            {"id": "a2", "text": twin}, {"id": "m3", "text": twin},
            {"id": "c4", "text": "The keeper's cottage stands beside the lighthouse."}]
    corpus = tmp_path / "corpus.jsonl"
    client = Connection(es_url).client()
    name = f"ties-{os.getpid()}"

    def ranked(question: str) -> dict[str, list[list[str]]]:
        out = {}
        for hybrid in ("none", "default"):
            lucene = open_engine("lucene", tmp_path / "index", hybrid=hybrid)
            es = open_engine("es", connection=Connection(es_url), es_index=name, tokenizer=tmp_path / "index",
                             hybrid=hybrid)
            try:
                out[hybrid] = [[h.id for h in engine.search(question, k=5)] for engine in (lucene, es)]
            finally:
                lucene.close()
                es.close()
        return out

    try:
        for step in ("load", "moved", "inserted"):
            if step == "moved":
                rows[1]["doc"] = "b"  # an update rewrites z1 alone: the cluster's docid order is no longer input order
            if step == "inserted":
                rows.insert(0, {"id": "y9", "text": twin})
            corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
            encode_corpus([corpus], tmp_path / "enc", tiny_model, progress=False, idf=False, update=step != "load")
            build_index(tmp_path / "enc", tmp_path / "index", overwrite=True)
            load_es(tmp_path / "enc", client, name, progress=False, recreate=step == "load")
            client.indices.refresh(index=name)
            twins = [r["id"] for r in rows if r["text"] == twin]
            for hybrid, (lucene, es) in ranked("lighthouse keeper lit the lamp").items():
                assert lucene == es, (step, hybrid)
                assert [i for i in lucene if i in twins] == twins, (step, hybrid)  # input order
    finally:
        client.indices.delete(index=name, ignore_unavailable=True)


@pytest.mark.es
@pytest.mark.jvm
@pytest.mark.data
def test_batch_search_and_cli_on_elasticsearch(squad_both, es_url, capsys, tmp_path):
    root, questions, client, index = squad_both
    es = ElasticEngine(client, index, QueryEncoder.load(root / "encoded"))
    topics = [(f"q{i}", q) for i, q in enumerate(questions[:60])]
    batch = es.batch_search(topics, k=10)
    for qid, q in topics[:20]:
        assert [h.id for h in batch[qid]] == [h.id for h in es.search(q, k=10)]
    args = ["--engine", "es", "--es-url", es_url, "--es-index", index, "--tokenizer", str(root / "encoded")]
    assert main(["search", *args, "--json", "-k", "3", questions[0]]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 3
    topics_file = tmp_path / "topics.tsv"
    topics_file.write_text("".join(f"{qid}\t{q}\n" for qid, q in topics[:5]))
    assert main(["run", *args, "--topics", str(topics_file), "--output", str(tmp_path / "run.trec"), "-k", "5",
                 "--hybrid", "none"]) == 0
    lines = [line.split() for line in (tmp_path / "run.trec").read_text().splitlines()]
    assert [(r[0], r[2]) for r in lines] == [(qid, h.id) for qid, q in topics[:5] for h in es.search(q, k=5)]
    assert {r[5] for r in lines} == {"sparc-es-es"}
    # the default: the one-request sum, as on the Lucene engine
    hybrid = open_engine("es", connection=Connection(es_url), es_index=index, tokenizer=root / "encoded",
                         hybrid="default")
    assert main(["run", *args, "--topics", str(topics_file), "--output", str(tmp_path / "hybrid.trec"), "-k", "5"]) == 0
    lines = [line.split() for line in (tmp_path / "hybrid.trec").read_text().splitlines()]
    assert [(r[0], r[2]) for r in lines] == [(qid, h.id) for qid, q in topics[:5] for h in hybrid.search(q, k=5)]
    assert {r[5] for r in lines} == {f"sparc-es-es-sum{BM25_WEIGHT:g}"}
    hybrid.close()


@pytest.mark.es
@pytest.mark.jvm
@pytest.mark.data
def test_reloading_is_idempotent_and_other_weights_are_refused(squad_both, tiny_model, tmp_path):
    root, _, client, index = squad_both
    first = next(iter_vectors(root / "encoded"))["id"]
    source = client.get(index=index, id=first)["_source"]
    assert source["context"] and source["text"] in source["context"]  # the passage travels with it
    before = client.count(index=index)["count"]
    load_es(root / "encoded", client, index, progress=False)  # same ids: replaced, not duplicated
    assert client.count(index=index)["count"] == before
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "x", "text": "Other weights."}\n')
    encode_corpus([corpus], tmp_path / "other", tiny_model, factor=7, progress=False, idf=False)
    with pytest.raises(EngineError, match="already holds other weights"):
        load_es(tmp_path / "other", client, index, progress=False)


class FlakyClient:
    """The real client, except that bulk requests fail on purpose (429s, or one rejected document)."""

    def __init__(self, real, busy_calls: int = 0, reject: str | None = None) -> None:
        self.real, self.busy_calls, self.reject, self.calls = real, busy_calls, reject, 0

    def __getattr__(self, name):
        return getattr(self.real, name)

    def options(self, **kwargs):
        return self

    def bulk(self, *args, operations, **kwargs):
        self.calls += 1
        pairs = [(operations[i], operations[i + 1]) for i in range(0, len(operations), 2)]
        if self.calls <= self.busy_calls:
            items = [{"index": {"_id": json.loads(h)["index"]["_id"], "status": 429,
                                "error": {"type": "es_rejected_execution_exception"}}} for h, _ in pairs]
            return SimpleNamespace(body={"errors": True, "items": items})
        ids = [json.loads(h)["index"]["_id"] for h, _ in pairs]
        kept = [line for (h, b), i in zip(pairs, ids) if i != self.reject for line in (h, b)]
        response = self.real.bulk(*args, operations=kept, **kwargs).body if kept else {"items": []}
        real_items = iter(response["items"])
        items = [{"index": {"_id": i, "status": 400, "error": {"type": "mapper_parsing_exception"}}}
                 if i == self.reject else next(real_items) for i in ids]
        return SimpleNamespace(body={"errors": True, "items": items})


@pytest.mark.es
@pytest.mark.jvm
@pytest.mark.data
def test_bulk_retries_429_with_backoff(squad_both, es_url):
    root, _, _, _ = squad_both
    flaky = FlakyClient(Connection(es_url).client(), busy_calls=2)
    result = load_es(root / "encoded", flaky, f"retry-{os.getpid()}", chunk_size=1000, initial_backoff=0,
                  progress=False, recreate=True)
    assert flaky.calls >= 3 and result["failed"] == 0 and result["count"] == result["expected"]
    flaky.real.indices.delete(index=f"retry-{os.getpid()}")


@pytest.mark.es
@pytest.mark.jvm
@pytest.mark.data
def test_partial_failure_is_reported_and_fails(squad_both, es_url, tmp_path):
    root, _, _, _ = squad_both
    victim = next(iter_vectors(root / "encoded"))["id"]
    flaky = FlakyClient(Connection(es_url).client(), reject=victim)
    report = tmp_path / "failures.jsonl"
    with pytest.raises(EngineError, match="1 of .* documents failed"):
        load_es(root / "encoded", flaky, f"partial-{os.getpid()}", initial_backoff=0, progress=False,
             recreate=True, report=report)
    assert victim in report.read_text()
    flaky.real.indices.delete(index=f"partial-{os.getpid()}")


@pytest.mark.es
@pytest.mark.jvm
@pytest.mark.data
def test_sparse_vector_field_and_query_give_the_same_ranking(squad_both, es_url):
    root, questions, client, index = squad_both
    other = f"sv-{os.getpid()}"
    load_es(root / "encoded", client, other, progress=False, recreate=True, field_type="sparse_vector")
    features = ElasticEngine(client, index, QueryEncoder.load(root / "encoded"))
    vectors = ElasticEngine(client, other, QueryEncoder.load(root / "encoded"), mode="sparse_vector")
    for q in questions[:30]:
        a, b = features.search(q, k=10), vectors.search(q, k=10)
        assert [h.score for h in a] == pytest.approx([h.score for h in b], rel=0.004)
    client.indices.delete(index=other)


@pytest.mark.es
@pytest.mark.jvm
@pytest.mark.data
@pytest.mark.parametrize("method", ["minmax", "rrf"])
def test_the_client_side_hybrid_on_elasticsearch_is_the_lucene_engines_fusion(squad_both, es_url, method):
    """--hybrid minmax or rrf on Elasticsearch: the SPARC query and a BM25 match query on the text,
    each to the fusion depth, fused client-side by the very function the Lucene hybrid uses; hits
    keep their text. (The default, one request, is tests/test_one_request.py's.)"""
    root, questions, client, index = squad_both
    sparc = ElasticEngine(client, index, QueryEncoder.load(root / "encoded"))
    bm25 = sparc.bm25()
    assert sparc.text_searchable and isinstance(bm25, ElasticBM25)
    engine = open_engine("es", connection=Connection(es_url), es_index=index, tokenizer=root / "encoded",
                         hybrid=method)
    assert isinstance(engine, HybridEngine) and engine.method.value == method and engine.bm25_weight == BM25_WEIGHT
    fused = 0
    for q in questions[:25]:
        s, b = sparc.search(q, k=DEPTH), bm25.search(q, k=DEPTH)
        want = normalised_sum(s, b, BM25_WEIGHT) if method == "minmax" else reciprocal_rank(s, b)
        got = engine.search(q, k=10)
        assert [(h.id, round(h.score, 9)) for h in got] == [(i, round(x, 9)) for i, x in want[:10]], q
        assert all(h.text and h.doc for h in got)
        words = {w.strip("?,.").lower() for w in q.split()}
        assert not b or words & {w.strip("?,.;:()'\"").lower() for w in b[0].text.split()}, q  # BM25 matched a word
        fused += bool({h.id for h in b[:10]} - {h.id for h in s[:10]})  # BM25 brings sentences of its own
    assert fused > 5
    batch = engine.batch_search([(f"q{i}", q) for i, q in enumerate(questions[:5])], k=10)
    assert [[h.id for h in batch[f"q{i}"]] for i in range(5)] == [[h.id for h in engine.search(q, k=10)]
                                                                   for q in questions[:5]]
    engine.close()


@pytest.mark.es
def test_an_index_without_searchable_text_is_searched_by_sparc_alone_and_says_so(tmp_path, tiny_model_dir, es_url,
                                                                                 capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"s{i}", "text": t}) + "\n" for i, t in
                              enumerate(["Lucene stores integer impacts.", "Questions are bags of tokens."])))
    assert main(["encode", "--corpus", str(corpus), "--output", str(tmp_path / "enc"), "--model",
                 str(tiny_model_dir), "--quiet"]) == 0
    name = f"notext-{os.getpid()}"
    client = Connection(es_url).client()
    body = mapping(Manifest.read(tmp_path / "enc"))
    body["properties"] = {"weights": {"type": "rank_features"}}  # no text field
    client.indices.create(index=name, mappings=body)
    try:
        search = ["search", "--engine", "es", "--es-url", es_url, "--es-index", name, "--tokenizer",
                  str(tmp_path / "enc"), "--json", "integer impacts"]
        capsys.readouterr()
        assert main(search) == 0
        err = capsys.readouterr().err
        assert err == (f"sparc-es: warning: index {name!r} stores no BM25 terms and it cannot be searched by BM25: "
                       "searching with SPARC alone, not the default hybrid\n"), err
        for extra, reason in ((["--hybrid", "sum"], "stores no BM25 terms"), (["--hybrid", "minmax"],
                                                                              "no searchable text field"),
                              (["--hybrid-weight", "0.5"], "--hybrid-weight weighs the default hybrid")):
            assert main([*search, *extra]) == 1
            err = capsys.readouterr().err
            assert err.startswith("sparc-es: error: ") and err.count("\n") == 1 and reason in err, err
    finally:
        client.indices.delete(index=name, ignore_unavailable=True)


def test_unreachable_cluster_is_one_line(capsys, tmp_path):
    import time

    started = time.monotonic()
    rc = main(["search", "--engine", "es", "--es-url", "http://127.0.0.1:9", "--es-index", "x", "question"])
    err = capsys.readouterr().err
    assert rc == 1 and err.startswith("sparc-es: error: cannot reach Elasticsearch") and err.count("\n") == 1
    assert time.monotonic() - started >= 0.5 + 1 + 2  # the default 3 retries waited as the README says


class DyingClient:
    """The real client until the cluster "goes away": every bulk request after the first few raises
    the connection error the client raises when a server is killed."""

    def __init__(self, real, bulk_calls: int) -> None:
        self.real, self.left = real, bulk_calls

    def __getattr__(self, name):
        return getattr(self.real, name)

    def options(self, **kwargs):
        return self

    def bulk(self, *args, **kwargs):
        from elastic_transport import ConnectionError as Lost

        if self.left <= 0:
            raise Lost("Connection refused")
        self.left -= 1
        return self.real.bulk(*args, **kwargs)


@pytest.mark.es
@pytest.mark.jvm
@pytest.mark.data
def test_cluster_lost_midway_is_one_error_and_the_rerun_resumes(squad_both, es_url):
    root, _, _, _ = squad_both
    name = f"lost-{os.getpid()}"
    real = Connection(es_url).client()
    with pytest.raises(EngineError, match="did not answer while loading .*loading resumes"):
        load_es(root / "encoded", DyingClient(real, bulk_calls=2), name, chunk_size=50, initial_backoff=0,
                progress=False, recreate=True)
    real.indices.refresh(index=name)
    loaded = real.count(index=name)["count"]
    result = load_es(root / "encoded", real, name, chunk_size=50, progress=False)
    assert 0 < result["already_there"] == loaded < result["expected"]
    assert result["loaded"] == result["expected"] - loaded and result["count"] == result["expected"]
    real.indices.delete(index=name)


@pytest.mark.es
@pytest.mark.slow
def test_a_killed_bulk_load_resumes_with_every_record_once(tmp_path, tiny_model, es_url):
    """A real `sparc-es index --engine es` process killed with SIGKILL partway, then run again."""
    import signal
    import subprocess
    import sys
    import time

    n = 4000
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"s{i}", "text": f"Sentence number {i} about stored weights."})
                              + "\n" for i in range(n)))
    encode_corpus([corpus], tmp_path / "enc", tiny_model, progress=False, idf=False)
    expected = sum(1 for r in iter_vectors(tmp_path / "enc") if es_features(r["vector"]))
    name = f"killed-{os.getpid()}"
    client = Connection(es_url).client()
    args = [sys.executable, "-m", "sparc_es", "index", "--engine", "es", "--es-url", es_url, "--es-index", name,
            "--input", str(tmp_path / "enc"), "--chunk-size", "20", "--quiet"]
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    deadline, count = time.time() + 120, 0
    while time.time() < deadline and proc.poll() is None:
        try:
            client.indices.refresh(index=name)
            count = client.count(index=name)["count"]
        except Exception:
            count = 0
        if count >= 200:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the load finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    rerun = subprocess.run(args, stderr=subprocess.PIPE, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    client.indices.refresh(index=name)
    assert client.count(index=name)["count"] == expected
    ids = [h["_id"] for h in client.search(index=name, size=n, source=False, query={"match_all": {}})["hits"]["hits"]]
    assert len(ids) == len(set(ids)) == expected
    client.indices.delete(index=name)


@pytest.mark.es
@pytest.mark.jvm
@pytest.mark.data
def test_an_encoded_folder_with_extra_records_is_refused(squad_both, es_url, tmp_path, monkeypatch):
    import shutil

    monkeypatch.chdir(tmp_path)  # the failure report goes to the working directory, not the checkout
    root, _, client, _ = squad_both
    twice = tmp_path / "twice"
    shutil.copytree(root / "encoded", twice)
    vectors = twice / "vectors" / "vectors.jsonl"
    lines = vectors.read_text().splitlines(keepends=True)
    vectors.write_text("".join(lines + lines[:5]))  # what two writers into one folder used to produce
    name = f"twice-{os.getpid()}"
    with pytest.raises(EngineError, match="5 more than the"):
        load_es(twice, client, name, progress=False, recreate=True)
    client.indices.delete(index=name, ignore_unavailable=True)


def _source_docs(n: int) -> dict[str, str]:
    return {f"d{i}": f"Document {i} opens here. It talks about topic {i}.\n\nA second paragraph of document {i}. "
                     f"It ends document {i}." for i in range(n)}


@pytest.mark.es
def test_living_index_from_a_source_index(tmp_path, tiny_model_dir, es_url, capsys):
    """Encode from a cluster, change a few documents (edit, add, delete), update: the sparc index
    ends equal to a from-scratch build, and only the changed sentences were encoded again."""
    from elasticsearch import helpers

    from sparc_es.corpus.sources import document_sentences

    client = Connection(es_url).client()
    src, sparc, scratch = (f"{name}-{os.getpid()}" for name in ("src", "living", "scratch"))
    docs = _source_docs(12)
    client.indices.create(index=src, mappings={"properties": {"body": {"type": "text"}}})
    helpers.bulk(client, ({"_index": src, "_id": i, "_source": {"body": t}} for i, t in docs.items()), refresh=True)
    # --no-idf: an update keeps the first encode's statistics, a fresh encode counts its own; without
    # corpus statistics the two are the same weights (with IDF, see test_cli's update test).
    common = ["--from-es", src, "--text-field", "body", "--es-url", es_url, "--model", str(tiny_model_dir), "--quiet",
              "--no-idf"]
    load = ["index", "--engine", "es", "--es-url", es_url, "--quiet"]
    try:
        assert main(["encode", *common, "--output", str(tmp_path / "enc")]) == 0
        first = [json.loads(line) for line in (tmp_path / "enc/vectors/vectors.jsonl").read_text().splitlines()]
        assert first[0]["id"] == next(document_sentences(docs["d0"], "d0")).id and len(first) == 12 * 4
        assert main([*load, "--input", str(tmp_path / "enc"), "--es-index", sparc]) == 0
        third = list(document_sentences(docs["d3"], "d3"))[2].id
        assert client.get(index=sparc, id=third)["_source"]["doc"] == "d3"  # points back to its source
        first_meta = client.indices.get_mapping(index=sparc)[sparc]["mappings"]["_meta"]

        edited = docs["d1"].replace("A second paragraph", "An edited second paragraph")
        client.index(index=src, id="d1", document={"body": edited})
        client.index(index=src, id="d12", document={"body": "A new document. With two sentences."})
        client.delete(index=src, id="d2")
        client.indices.refresh(index=src)
        capsys.readouterr()
        assert main(["encode", *common, "--output", str(tmp_path / "enc"), "--update"]) == 0
        out = capsys.readouterr().out
        old = {(s.text, s.context) for s in document_sentences(docs["d1"], "d1")}
        changed = sum((s.text, s.context) not in old for s in document_sentences(edited, "d1")) + 2  # + d12's
        manifest = Manifest.read(tmp_path / "enc")
        assert changed == 2 + 2 and manifest.sentences == 12 * 4 - 4 + 2  # d1's second paragraph changed
        assert manifest.reused == manifest.sentences - changed and f"{changed} encoded" in out

        assert main(["encode", *common, "--output", str(tmp_path / "fresh")]) == 0
        updated = (tmp_path / "enc/vectors/vectors.jsonl").read_bytes()
        # as if encoded from scratch: the four changed sentences were encoded in one batch, the fresh
        # encode's in batches of 32, so equal but for float noise (an impact at a .5 boundary)
        assert_same_records(updated.splitlines(), (tmp_path / "fresh/vectors/vectors.jsonl").read_bytes().splitlines())

        capsys.readouterr()
        assert main([*load, "--input", str(tmp_path / "enc"), "--es-index", sparc]) == 0
        out, err = capsys.readouterr()
        assert f"index {sparc!r} keeps the BM25 statistics of its first load" in err and "--recreate" in err, err
        # d2's four sentences went, and the old id of each sentence of d1 whose text changed (ids come from text)
        renamed = sum(s.text not in {o for o, _ in old} for s in document_sentences(edited, "d1"))
        assert renamed == 1 and f"{4 + renamed} deleted" in out and f"loaded {changed} sentences" in out
        assert main([*load, "--input", str(tmp_path / "fresh"), "--es-index", scratch]) == 0
        client.indices.refresh(index=sparc)
        client.indices.refresh(index=scratch)

        def everything(index):
            hits = client.search(index=index, size=1000, query={"match_all": {}})["hits"]["hits"]
            return {h["_id"]: h["_source"] for h in hits}

        living, fresh = everything(sparc), everything(scratch)
        assert living.keys() == fresh.keys()
        for doc_id, source in living.items():  # the same documents; the weights as the folders' (above)
            other = dict(fresh[doc_id])
            mine, theirs = source.pop("weights"), other.pop("weights")
            source.pop("hash"), other.pop("hash")  # they name the BM25 statistics too (below)
            # a sentence that moved (d2 went) is rewritten in place, a field it lacks written as null
            assert {k: v for k, v in source.items() if v is not None} == other, doc_id
            assert_same_impacts({token_name(f): int(v) for f, v in mine.items() if not f.startswith(PREFIX)},
                                {token_name(f): int(v) for f, v in theirs.items() if not f.startswith(PREFIX)},
                                doc_id)
        meta = client.indices.get_mapping(index=sparc)[sparc]["mappings"]["_meta"]
        built = meta["sparc_es_build"]
        assert built["sentences"] == manifest.sentences and built["at"]
        capsys.readouterr()  # its corpus is an index, not files: a search does not call it gone
        assert main(["search", "--engine", "es", "--es-url", es_url, "--es-index", sparc, "--tokenizer",
                     str(tmp_path / "enc"), "--hybrid", "none", "a second paragraph"]) == 0
        assert "is not at" not in capsys.readouterr().err
        # the BM25 terms: the update kept the first load's statistics, as encode --update keeps its IDF
        kept, counted = (json.loads(m["sparc_es_blend"])["counts"] for m in (meta, first_meta))
        assert kept == counted
        scratch_counts = json.loads(client.indices.get_mapping(index=scratch)[scratch]["mappings"]["_meta"]
                                    ["sparc_es_blend"])["counts"]
        assert scratch_counts != kept  # a fresh load counts the corpus as it is now
    finally:
        for index in (src, sparc, scratch):
            client.indices.delete(index=index, ignore_unavailable=True)


@pytest.mark.es
def test_the_default_model_reloads_updates_and_resumes(tmp_path, es_url, capsys):
    """The shipped default model (whose passage weight a server may return one rounding step off):
    loading the same folder again, loading an update and resuming a cut-off load are accepted;
    another K is refused, saying what differs."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"d{i}.md").write_text(f"# Server {i}\n\nThe REST server {i} listens on port 80{i}1. "
                                       f"It answers JSON.\n\nA second paragraph of file {i}.\n")
    name = f"default-{os.getpid()}"
    load = ["index", "--engine", "es", "--es-url", es_url, "--es-index", name, "--input", str(tmp_path / "enc"),
            "--quiet"]
    client = Connection(es_url).client()
    try:
        assert main(["encode", "--corpus", str(docs), "--output", str(tmp_path / "enc"), "--quiet"]) == 0
        assert Manifest.read(tmp_path / "enc").model.passage_weight  # the float that came back changed
        assert main(load) == 0
        stored = client.indices.get_mapping(index=name)[name]["mappings"]["_meta"]["sparc_es"]
        assert stored["fingerprint"] == Manifest.read(tmp_path / "enc").model.fingerprint
        assert main(load) == 0, capsys.readouterr().err  # reload: the same weights

        (docs / "d1.md").write_text("# Server 1\n\nThe REST server 1 now listens on port 9000.\n")
        assert main(["encode", "--corpus", str(docs), "--output", str(tmp_path / "enc"), "--update", "--quiet"]) == 0
        capsys.readouterr()
        assert main(load) == 0, capsys.readouterr().err  # update
        expected = Manifest.read(tmp_path / "enc").retrievable
        client.indices.refresh(index=name)
        assert client.count(index=name)["count"] == expected

        # Resume: a load cut off after its first bulk request, then the same load again.
        client.indices.delete(index=name)
        with pytest.raises(EngineError, match="loading resumes"):
            load_es(tmp_path / "enc", DyingClient(client, bulk_calls=1), name, chunk_size=2, initial_backoff=0,
                    progress=False)
        result = load_es(tmp_path / "enc", client, name, chunk_size=2, progress=False)
        assert result["already_there"] == 2 and result["count"] == expected

        assert main(["encode", "--corpus", str(docs), "--output", str(tmp_path / "k100"), "--top-k", "100",
                     "--quiet"]) == 0
        capsys.readouterr()
        assert main([*load[:-3], "--input", str(tmp_path / "k100"), "--quiet"]) == 1
        assert "top_k 500 there, 100 here" in capsys.readouterr().err
    finally:
        client.indices.delete(index=name, ignore_unavailable=True)


@pytest.mark.es
def test_a_rejected_request_says_what_the_cluster_rejected(tmp_path, tiny_model_dir, es_url, capsys, monkeypatch):
    """A 400 is a bad request, not a slow cluster: the error gives the server's reason and no
    --es-timeout hint (that one is for timeouts only) nor a rerun hint."""
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"s{i}", "text": t}) + "\n" for i, t in
                              enumerate(["Lucene stores integer impacts.", "Questions are bags of tokens."])))
    assert main(["encode", "--corpus", str(corpus), "--output", str(tmp_path / "enc"), "--model",
                 str(tiny_model_dir), "--quiet"]) == 0
    name = f"rejected-{os.getpid()}"
    client = Connection(es_url).client()
    try:
        load_es(tmp_path / "enc", client, name, progress=False, recreate=True)
        search = ["search", "--engine", "es", "--es-url", es_url, "--es-index", name, "--tokenizer",
                  str(tmp_path / "enc"), "--hybrid", "none"]
        capsys.readouterr()
        # a sparse_vector query on rank_features (a --query-mode that does not fit is refused before
        # asking since the mode follows the mapping: the request is made wrong here to be sent)
        reason = "must be type [sparse_vector]"
        monkeypatch.setattr(ElasticEngine, "body", lambda self, question, k=10: query_body(
            self.weights(question), size=k, mode="sparse_vector"))
        assert main([*search, "integer impacts"]) == 1
        monkeypatch.undo()
        err = capsys.readouterr().err
        assert err.startswith(f"sparc-es: error: Elasticsearch rejected a request while searching '{name}' "
                              "(400 Bad Request): ") and err.count("\n") == 1, err
        assert reason in err and "--es-timeout" not in err and "again" not in err, err
        # past the cluster's result window: the library refuses it before asking, as the CLI does
        from sparc_es.engines import open_engine

        engine = open_engine("es", None, connection=Connection(es_url), es_index=name, tokenizer=tmp_path / "enc",
                             hybrid="none")
        try:
            with pytest.raises(SparcError, match="k is the number of hits a question gets: 1 to 10,000, not 20000"):
                engine.search("integer impacts", 20_000)
        finally:
            engine.close()
        with pytest.raises(SparcError, match="invalid Elasticsearch index name 'Bad Name'"):  # was "no index"
            open_engine("es", None, connection=Connection(es_url), es_index="Bad Name", tokenizer=tmp_path / "enc")
    finally:
        client.indices.delete(index=name, ignore_unavailable=True)


def test_only_a_timeout_suggests_raising_the_timeout():
    from elastic_transport import ConnectionError as Lost, ConnectionTimeout

    from sparc_es.engines.elastic.connection import _cluster_errors

    for error, hinted in ((ConnectionTimeout("timed out"), True), (Lost("Connection refused"), False)):
        with pytest.raises(EngineError, match="did not answer while searching 'x'") as raised:
            with _cluster_errors("searching 'x'", slow="; raise --es-timeout if the cluster is slow"):
                raise error
        assert ("raise --es-timeout" in str(raised.value)) is hinted, raised.value


def test_a_cluster_gone_while_searching_is_said_with_the_systems_reason_and_where():
    """serve said "(ConnectionError: Connection error)" while the cluster was down."""
    from sparc_es.engines.elastic import Connection
    from sparc_es.engines.elastic.connection import _cluster_errors

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = Connection(f"http://127.0.0.1:{port}", retries=0).client()
    with pytest.raises(EngineError) as raised:
        with _cluster_errors("searching 'x'"):
            client.search(index="x")
    assert str(raised.value) == f"Elasticsearch did not answer while searching 'x' (connection refused at " \
                                f"127.0.0.1:{port})"


# --- a new user's walkthrough of the Elasticsearch path ------------------------------------------

WALK = ["Lucene stores integer impacts in its posting lists.", "Questions are bags of weighted tokens.",
        "The lighthouse keeper lit the lamp at dusk.", "Ships pass the harbour wall at night.",
        "A rank feature query with a linear function sums the stored values.",
        "Elasticsearch keeps nine significant bits of each feature value."]


@pytest.fixture(scope="module")
def walk(tmp_path_factory, tiny_model):
    """Encoded folders of the same small corpus at factors 5 and 10, and of another corpus at 5."""
    root = tmp_path_factory.mktemp("walk")
    for name, texts in (("corpus.jsonl", WALK), ("other.jsonl", WALK[3:] + ["The harbour master rang the bell."])):
        (root / name).write_text("".join(json.dumps({"id": f"{name[0]}{i}", "text": t}) + "\n"
                                         for i, t in enumerate(texts)))
    for out, corpus, factor in (("enc", "corpus.jsonl", 5), ("enc10", "corpus.jsonl", 10), ("other", "other.jsonl", 5)):
        encode_corpus([root / corpus], root / out, tiny_model, factor=factor, progress=False, idf=False)
    return root


@pytest.fixture
def names(es_url):
    """Index names for one test, deleted after it."""
    client = Connection(es_url).client()
    made: list[str] = []

    def name(what: str) -> str:
        made.append(f"{what}-{os.getpid()}")
        return made[-1]

    yield name
    for index in made:
        client.indices.delete(index=index, ignore_unavailable=True)


def _one_line_error(rc: int, err: str, *wanted: str) -> None:
    assert rc == 1 and err.startswith("sparc-es: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and all(w in err for w in wanted), (wanted, err)


def _as_an_older_sparc_es_made_it(client, loaded: str, old: str) -> None:
    """``old``: the documents of ``loaded`` as an older sparc-es wrote them: no BM25 terms, no
    record of them in the mapping, the text analysed by Elasticsearch's standard analyser."""
    from elasticsearch import helpers

    mappings = client.indices.get_mapping(index=loaded)[loaded]["mappings"]
    mappings["_meta"] = {"sparc_es": mappings["_meta"]["sparc_es"]}
    mappings["properties"]["text"] = {"type": "text"}
    client.indices.create(index=old, mappings=mappings)
    docs = [{"_index": old, "_id": h["_id"], "_source": {**h["_source"], "weights": {
        f: v for f, v in h["_source"]["weights"].items() if not f.startswith(PREFIX)}}}
        for h in client.search(index=loaded, size=100)["hits"]["hits"]]
    helpers.bulk(client, docs)
    client.indices.refresh(index=old)


@pytest.mark.es
def test_an_index_loaded_by_an_older_sparc_es_is_refused_not_declared_unchanged(walk, es_url, names, cli):
    """Its documents have no BM25 terms: reloading the same folder into it skipped every document as
    unchanged, then recorded the sum's maxima, so the default searched terms no document had. Now
    the load is refused in one line naming what --recreate deletes, and --recreate rebuilds it.
    query-dsl on it prints what search does: the minmax fallback, with the same notice."""
    client = Connection(es_url).client()
    new, old = names("walk-new"), names("walk-old")
    load_es(walk / "enc", client, new, progress=False)
    _as_an_older_sparc_es_made_it(client, new, old)
    es = ["--es-url", es_url, "--es-index", old]
    rc, out, err = cli("index", "--engine", "es", *es, "--input", walk / "enc", "--quiet")
    _one_line_error(rc, err, "stores no BM25 terms", "--recreate", f"index '{old}' and its {len(WALK)} documents")
    assert "sparc_es_blend" not in client.indices.get_mapping(index=old)[old]["mappings"]["_meta"]
    rc, out, err = cli("query-dsl", *es, "--tokenizer", walk / "enc", "lighthouse keeper")
    assert rc == 0 and f"index '{old}' stores no BM25 terms: fusing two searches client-side (minmax)" in err, err
    assert f"GET /{old}/_msearch" in out and "0.35 x BM25'" in out
    rc, _, searched = cli("search", "--engine", "es", *es, "--tokenizer", walk / "enc", "lighthouse keeper")
    assert rc == 0 and searched.splitlines()[0] == err.splitlines()[0]  # the same notice
    rc, out, err = cli("index", "--engine", "es", *es, "--input", walk / "enc", "--recreate", "--quiet")
    assert rc == 0 and f"{len(WALK)} documents, their ids checked against the encoded folder's" in out, err
    engine = open_engine("es", connection=Connection(es_url), es_index=old, tokenizer=walk / "enc")
    try:
        assert engine.method.value == "sum" and engine.same_bm25
        assert [h.id for h in engine.search("lighthouse keeper")][:1] == ["c2"]
    finally:
        engine.close()


@pytest.mark.es
def test_a_long_lived_engine_follows_the_index_rebuilt_under_it(walk, es_url, names):
    """serve keeps its engine: after index --recreate rebuilt the index with another factor, its
    scores (the sum's and SPARC alone's) are a fresh engine's again, noticed by the build id within
    the recheck interval, or at once when a sum scores above 1; one _search a question otherwise."""
    from sparc_es.engines.elastic import engine as elastic_engine

    client = Connection(es_url).client()
    name = names("walk-rebuilt")
    load_es(walk / "enc", client, name, progress=False)

    def opened(hybrid: str):
        return open_engine("es", connection=Connection(es_url), es_index=name, tokenizer=walk / "enc", hybrid=hybrid)

    question = WALK[4]
    summed, alone = opened("default"), opened("none")
    try:
        before = summed.search(question)
        assert 0 < before[0].score <= 1 and alone.factor == 5
        sent = []
        search = summed.client.search
        summed.client.search = lambda **kw: sent.append("search") or search(**kw)
        get_mapping = summed.client.indices.get_mapping
        summed.client.indices.get_mapping = lambda **kw: sent.append("mapping") or get_mapping(**kw)
        summed.search(question)
        summed.batch_search([("a", question), ("b", WALK[0])])
        assert sent == ["search"] * 3  # within the recheck interval: nothing but the searches

        load_es(walk / "enc10", client, name, progress=False, recreate=True)
        fresh, fresh_alone = opened("default"), opened("none")
        try:
            # a sum above 1 is checked at once, whatever the interval
            assert [(h.id, h.score) for h in summed.search(question)] == \
                   [(h.id, h.score) for h in fresh.search(question)]
            assert fresh.search(question)[0].score <= 1 and "mapping" in sent
            alone.recheck = 0  # SPARC alone has no such tell: the interval
            assert alone.factor == 5 and [(h.id, h.score) for h in alone.search(question)] == \
                   [(h.id, h.score) for h in fresh_alone.search(question)] and alone.factor == 10
        finally:
            fresh.close()
            fresh_alone.close()
        assert elastic_engine.RECHECK <= 10  # "within a few seconds"
    finally:
        summed.close()
        alone.close()


@pytest.mark.es
def test_the_query_mode_follows_the_mapping_and_one_that_does_not_fit_is_refused(walk, es_url, names, cli):
    client = Connection(es_url).client()
    features, vectors = names("walk-rf"), names("walk-sv")
    load_es(walk / "enc", client, features, progress=False)
    load_es(walk / "enc", client, vectors, progress=False, field_type="sparse_vector")
    engines = [open_engine("es", connection=Connection(es_url), es_index=i, tokenizer=walk / "enc", hybrid="none")
               for i in (features, vectors)]
    try:
        assert [e.mode.value for e in engines] == ["rank_feature", "sparse_vector"]
        a, b = (e.search("lighthouse keeper lamp", k=10) for e in engines)
        assert a and [h.id for h in a] == [h.id for h in b]
    finally:
        for e in engines:
            e.close()
    tokenizer = ["--tokenizer", walk / "enc"]
    rc, out, _ = cli("search", "--engine", "es", "--es-url", es_url, "--es-index", vectors, *tokenizer, "--json",
                     "lighthouse keeper lamp")
    assert rc == 0 and json.loads(out)
    rc, out, _ = cli("query-dsl", "--es-url", es_url, "--es-index", vectors, *tokenizer, "lighthouse keeper lamp")
    assert rc == 0 and '"sparse_vector"' in out
    for index, mode in ((vectors, "rank_feature"), (features, "sparse_vector")):
        for verb in (["search", "--engine", "es"], ["query-dsl"]):
            rc, _, err = cli(*verb, "--es-url", es_url, "--es-index", index, *tokenizer, "--query-mode", mode, "lamp")
            _one_line_error(rc, err, f"--query-mode {mode} does not fit index '{index}'")
    # --recreate without --field-type makes the index again as it was, sparse_vector included
    load_es(walk / "enc", client, vectors, progress=False, recreate=True)
    field = client.indices.get_mapping(index=vectors)[vectors]["mappings"]["properties"]["weights"]
    assert field["type"] == "sparse_vector", field


@pytest.mark.es
def test_an_index_made_from_the_shipped_mapping_files_loads_and_any_meta_is_one_line(walk, es_url, names, cli):
    """mappings/sparc.json + sparc-settings.json, as a user would PUT them: searching it before any
    load says it was never loaded; loading into it works. No shape of _meta gives a traceback."""
    client = Connection(es_url).client()
    shipped = json.loads((ROOT / "mappings" / "sparc.json").read_text())
    manual = names("walk-manual")
    client.indices.create(index=manual, mappings=shipped,
                          settings=json.loads((ROOT / "mappings" / "sparc-settings.json").read_text()))
    es = ["--es-url", es_url, "--es-index", manual, "--tokenizer", walk / "enc"]
    for verb in (["search", "--engine", "es"], ["query-dsl"]):
        rc, _, err = cli(*verb, *es, "lighthouse")
        _one_line_error(rc, err, f"index '{manual}' was never loaded", "sparc-es index --engine es")
    rc, out, err = cli("index", "--engine", "es", "--input", walk / "enc", *es[:4], "--quiet")
    assert rc == 0 and f"loaded {len(WALK)} sentences" in out, err
    rc, out, err = cli("search", "--engine", "es", *es, "--json", "lighthouse keeper")
    assert rc == 0 and json.loads(out)[0]["id"] == "c2", err
    for n, meta in enumerate(({"sparc_es": 5}, {"sparc_es": ["x"]}, {"sparc_es": {}}, {"sparc_es": {"factor": "x"}},
                              {"sparc_es": {"factor": "5.0"}, "sparc_es_blend": "{not json"},
                              {"sparc_es": {"factor": "5.0"}, "sparc_es_blend": 7})):
        odd = names(f"walk-odd{n}")
        client.indices.create(index=odd, mappings={**shipped, "_meta": meta})
        for verb in (["search", "--engine", "es"], ["query-dsl"]):
            rc, _, err = cli(*verb, "--es-url", es_url, "--es-index", odd, "--tokenizer", walk / "enc", "lamp")
            _one_line_error(rc, err, f"'{odd}'")
        client.indices.delete(index=odd)


@pytest.mark.es
def test_query_dsl_states_the_indexs_own_factor_and_what_each_fusion_shows(walk, es_url, names, cli, tiny_model_dir):
    client = Connection(es_url).client()
    name = names("walk-f10")
    load_es(walk / "enc10", client, name, progress=False)
    es = ["--es-url", es_url, "--es-index", name, "--tokenizer", tiny_model_dir]  # a model folder: no factor in it
    rc, out, err = cli("query-dsl", *es, "--hybrid", "none", "lighthouse keeper")
    assert rc == 0 and out.startswith("# the SPARC search's _score is the integer impact sum, 10 x the score "
                                      f"sparc-es search shows (divide by 10: the quantisation factor of index '{name}'")
    rc, out, err = cli("query-dsl", *es, "--hybrid", "minmax", "lighthouse keeper")
    comment = out.splitlines()[0]
    assert rc == 0 and "min-max normalised to [0, 1], which is the score sparc-es search shows" in comment, err
    assert "10 x the score of sparc-es search --hybrid none" in comment and " 5 x" not in comment
    rc, out, _ = cli("query-dsl", *es, "--hybrid", "rrf", "lighthouse keeper")
    assert rc == 0 and "1 / (60 + rank)" in out and "the _scores only rank each list" in out.splitlines()[0]


@pytest.mark.es
def test_cluster_errors_name_the_url_and_the_cause_on_one_line(es_url, cli, monkeypatch, tmp_path):
    import http.server
    import threading

    from sparc_es.engines.elastic.loopback import free_port

    monkeypatch.delenv("SPARC_ES_INDEX", raising=False)
    port = free_port()
    search = ["search", "--engine", "es", "--es-retries", "0", "--es-index", "x", "question"]
    rc, _, err = cli(*search, "--es-url", f"http://elastic:s3cret@127.0.0.1:{port}")
    _one_line_error(rc, err, f"cannot reach Elasticsearch at http://127.0.0.1:{port}: connection refused")
    assert "s3cret" not in err
    rc, _, err = cli(*search, "--es-url", es_url.replace("http://", "https://"))
    _one_line_error(rc, err, f"cannot reach Elasticsearch at {es_url.replace('http://', 'https://')}: TLS failed")
    class Other(http.server.BaseHTTPRequestHandler):  # a web server, not Elasticsearch
        def do_GET(self):
            body = b'{"version": {"number": "8.15.0"}}'  # even one that looks like it, without its header
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    plain = http.server.HTTPServer(("127.0.0.1", 0), Other)
    threading.Thread(target=plain.serve_forever, daemon=True).start()
    try:
        rc, _, err = cli(*search, "--es-url", f"http://127.0.0.1:{plain.server_port}")
        _one_line_error(rc, err, f"at http://127.0.0.1:{plain.server_port}: it answers, but it is not Elasticsearch")
    finally:
        plain.shutdown()
    for verb in (["search", "--engine", "es"], ["query-dsl"]):
        rc, _, err = cli(*verb, "--es-url", es_url, "--es-index", "nope", "question")
        _one_line_error(rc, err, f"no index 'nope' at {es_url}")
        assert "NotFoundError" not in err
    rc, _, err = cli("query-dsl", "--es-url", es_url, "question")
    _one_line_error(rc, err, "pass --es-index or set SPARC_ES_INDEX")


@pytest.mark.es
def test_loading_says_what_recreate_deletes_and_whose_documents_it_replaces(walk, es_url, names, cli):
    client = Connection(es_url).client()
    theirs, ours = names("walk-theirs"), names("walk-ours")
    client.indices.create(index=theirs, mappings={"properties": {"title": {"type": "text"}}})
    for i in range(3):
        client.index(index=theirs, id=str(i), document={"title": f"note {i}"}, refresh=True)
    rc, _, err = cli("index", "--engine", "es", "--es-url", es_url, "--es-index", theirs, "--input", walk / "enc")
    _one_line_error(rc, err, "was not made by sparc-es", f"--recreate would delete index '{theirs}' and its 3 "
                    "documents", "choose another --es-index")
    client.indices.put_mapping(index=theirs, properties={"weights": {"type": "keyword"}})  # theirs, another type
    rc, _, err = cli("index", "--engine", "es", "--es-url", es_url, "--es-index", theirs, "--field-type",
                     "rank_features", "--input", walk / "enc")
    _one_line_error(rc, err, "was not made by sparc-es")  # said first: not a question of the field's type
    load = ["index", "--engine", "es", "--es-url", es_url, "--es-index", ours, "--quiet", "--input"]
    assert cli(*load, walk / "enc")[0] == 0
    rc, out, err = cli(*load, walk / "enc")
    assert rc == 0 and err == ""  # the same source again: nothing to warn of
    rc, out, err = cli(*load, walk / "other")
    assert rc == 0 and err.count("\n") == 1 and err.startswith("sparc-es: warning: "), err
    assert f"last built from {(walk / 'enc').resolve()} (corpus {walk / 'corpus.jsonl'}" in err, err
    assert str((walk / "other").resolve()) in err and "deleted" in err and "BM25 statistics" in err
    # the other corpus's documents carry its own BM25 statistics, not those of the first load
    from sparc_es.engines import blend
    from sparc_es.engines.elastic.documents import BLEND_META
    from sparc_es.layout.records import iter_vectors

    meta = client.indices.get_mapping(index=ours)[ours]["mappings"]["_meta"]
    assert json.loads(meta[BLEND_META])["counts"] == blend.count(iter_vectors(walk / "other"))[0].to_json()

    # a load never changes the weights field's type: another --field-type is refused, the same one loads
    rc, _, err = cli(*load[:-2], "--field-type", "sparse_vector", "--input", walk / "other")
    _one_line_error(rc, err, f"index '{ours}' stores its weights as rank_features, not sparse_vector",
                    "load with --recreate")
    assert cli(*load[:-2], "--field-type", "rank_features", "--input", walk / "other")[0] == 0


def test_credentials_given_as_flags_win_over_the_environment_and_both_kinds_are_refused():
    from sparc_es.engines.elastic.connection import credentials

    env = {"SPARC_ES_API_KEY": "envkey", "SPARC_ES_USER": "envuser", "SPARC_ES_PASSWORD": "envpass"}
    assert credentials(None, "me", "pw", env) == (None, "me", "pw")  # the flags, not the environment's key
    assert credentials(None, None, "pw", env) == (None, "envuser", "pw")  # the user not given: the environment's
    assert credentials("key", None, None, env) == ("key", None, None)
    assert credentials(None, None, None, env) == ("envkey", "envuser", "envpass")  # the client uses the key
    assert credentials(None, None, None, {"SPARC_ES_USER": "u"}) == (None, "u", None)
    for user, password in (("me", "pw"), ("me", None), (None, "pw")):
        with pytest.raises(SparcError, match="an API key .* or a user and password .*, not both"):
            credentials("key", user, password, {})
    connection = Connection.from_env("http://localhost:9200", api_key=None, username="me", password="pw")
    assert repr(connection).endswith("auth=basic)")
