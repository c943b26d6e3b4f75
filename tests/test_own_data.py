"""Evaluating on one's own data from the CLI (issue 14): an MRQA file with its MultiReQA candidates,
a BEIR-style folder, BM25 rows, document-level runs, IDF without re-encoding."""

from __future__ import annotations

import gzip
import json

import pytest

from sparc_es.corpus.sources import sentence_key
from sparc_es.layout.manifest import Manifest
from sparc_es.layout.records import iter_vectors
from sparc_es.model import SparcModel

from shared_data import need_data


@pytest.fixture()
def small_mrqa(tmp_path):
    """The first 12 SQuAD dev contexts as their own MRQA file, with their MultiReQA candidates."""
    root = need_data("mrqa/SQuAD.jsonl.gz", "multireqa/dev/SQuAD/candidates.json.gz")
    with gzip.open(root / "mrqa" / "SQuAD.jsonl.gz", "rt", encoding="utf-8") as f:
        lines = [next(f) for _ in range(13)]  # the header and 12 contexts
    qids = {qa["qid"] for line in lines[1:] for qa in json.loads(line)["qas"]}
    mrqa = tmp_path / "Mine.jsonl.gz"
    with gzip.open(mrqa, "wt", encoding="utf-8") as f:
        f.writelines(lines)
    candidates = tmp_path / "candidates.json.gz"
    with gzip.open(root / "multireqa" / "dev" / "SQuAD" / "candidates.json.gz", "rt", encoding="utf-8") as f, \
            gzip.open(candidates, "wt", encoding="utf-8") as out:
        for line in f:
            head = json.loads(line)["candidate_id"].rpartition("/_")[0]
            if head.split("_", 1)[1].split("/")[0] in qids:
                out.write(line)
    return mrqa, candidates


@pytest.fixture()
def beir(tmp_path):
    folder = tmp_path / "beir-mini"
    (folder / "qrels").mkdir(parents=True)
    docs = [("d1", "Lucene", "Lucene is a search library. It stores integer impacts for learned sparse models."),
            ("d2", "Paris", "Paris is the capital of France. It lies on the Seine."),
            ("d3", "", "Elasticsearch keeps nine significant bits of a rank feature.\n\nIt is a search server."),
            ("d4", "Tea", "Green tea is made from unoxidised leaves.")]
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n"
                                                 for i, t, x in docs))
    queries = [("q1", "What does Lucene store?"), ("q2", "What is the capital of France?"),
               ("q3", "How many bits does Elasticsearch keep?"), ("q9", "An unjudged question")]
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in queries))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t2\nq3\td3\t1\n")
    return folder


@pytest.mark.data
@pytest.mark.jvm
def test_an_mrqa_file_becomes_a_table_domain(tmp_path, small_mrqa, tiny_model_dir, cli):
    mrqa, candidates = small_mrqa
    rc, out, err = cli("evalset", "--mrqa", mrqa, "--candidates", candidates, "--output", tmp_path / "set")
    assert rc == 0 and out.startswith("mine: ") and "sentence judgements" in out, err
    written = [json.loads(line) for line in (tmp_path / "set" / "corpus.jsonl").read_text().splitlines()]
    assert written and all(s["id"].startswith("mine-") for s in written)
    rc, out, err = cli("evalset", "--mrqa", mrqa, "--output", tmp_path / "split", "--name", "mine-split")
    assert rc == 0 and "mine-split: " in out, err  # the project's splitter instead of MultiReQA's boundaries

    systems = f"bm25,sparc-exact:model={tiny_model_dir},sparc:model={tiny_model_dir},hybrid=sum"
    rc, out, err = cli("table", "--domains", tmp_path / "set", "--systems", systems, "--workdir",
                       tmp_path / "runs", "--json", tmp_path / "t.json", "--markdown", tmp_path / "t.md")
    assert rc == 0, err
    rows = json.loads((tmp_path / "t.json").read_text())
    assert [r["system"] for r in rows] == ["bm25", f"sparc-exact:model={tiny_model_dir}",
                                           f"sparc:model={tiny_model_dir},hybrid=sum"]
    assert {r["domain"] for r in rows} == {"mine"} and all(0 <= r["MRR@1000"] <= 100 for r in rows)
    assert rows[0]["MRR@1000"] > 20  # BM25 on 12 passages finds answers


@pytest.mark.jvm
def test_a_beir_folder_end_to_end_with_documents(tmp_path, beir, tiny_model_dir, cli):
    rc, out, err = cli("evalset", "--beir", beir, "--output", tmp_path / "set")
    assert rc == 0 and "beir-mini: " in out and "3 queries" in out and "document judgements" in out, err
    corpus = [json.loads(line) for line in (tmp_path / "set" / "corpus.jsonl").read_text().splitlines()]
    assert {s["doc"] for s in corpus} == {"d1", "d2", "d3", "d4"}
    d3 = [s for s in corpus if s["doc"] == "d3"]
    assert len(d3) == 2 and [s["id"] for s in d3] == [f"d3#{sentence_key(s['text'])}" for s in d3]
    assert next(s for s in corpus if s["doc"] == "d1")["context"].startswith("Lucene. Lucene is a search")

    # the BM25 row, the model and a hybrid, scored per document
    rc, _, err = cli("table", "--domains", tmp_path / "set", "--systems",
                     f"bm25,sparc:model={tiny_model_dir},sparc:model={tiny_model_dir},hybrid=rrf", "--workdir",
                     tmp_path / "runs", "--json", tmp_path / "t.json", "--markdown", tmp_path / "t.md")
    assert rc == 0, err
    rows = json.loads((tmp_path / "t.json").read_text())
    assert len(rows) == 3 and all(r["level"] == "document" for r in rows)
    run = (tmp_path / "runs" / "beir-mini" / "runs" / "bm25.trec").read_text().split()
    assert set(run[2::6]) <= {"d1", "d2", "d3", "d4"}  # document ids in the run file
    assert rows[0]["R@1"] == 100.0  # BM25 answers all three

    # the same from run + eval, on an index of the BEIR corpus read directly
    enc, idx = tmp_path / "enc", tmp_path / "idx"
    assert cli("encode", "--corpus", beir / "corpus.jsonl", "--output", enc, "--model", tiny_model_dir,
               "--quiet")[0] == 0
    rc, out, err = cli("index", "--input", enc, "--index", idx)
    assert rc == 0 and "a separate BM25 index of their texts" in out and "BM25 index" in err, err
    rc, _, err = cli("run", "--index", idx, "--engine", "bm25", "--documents", "--topics",
                     tmp_path / "set" / "topics.tsv", "--output", tmp_path / "docs.trec", "-k", 3)
    assert rc == 0, err
    rows = [line.split() for line in (tmp_path / "docs.trec").read_text().splitlines()]
    assert {r[2] for r in rows} <= {"d1", "d2", "d3", "d4"}
    for qid in ("q1", "q2", "q3"):
        docs = [r[2] for r in rows if r[0] == qid]
        assert len(docs) == len(set(docs)) <= 3
    rc, out, _ = cli("eval", "--run", tmp_path / "docs.trec", "--qrels", tmp_path / "set" / "qrels.txt",
                     "--json")
    assert rc == 0 and json.loads(out)["R@1"] == 1.0


@pytest.mark.jvm
def test_a_changed_corpus_is_not_scored_with_the_cached_index_of_the_old_one(tmp_path, beir, cli):
    """The table's caches are keyed by model and settings; a set rebuilt under the same name (a
    reader's change) must not be scored with the index of its old corpus."""
    def table():
        assert cli("evalset", "--beir", beir, "--output", tmp_path / "set", "--overwrite")[0] == 0
        rc, _, err = cli("table", "--domains", tmp_path / "set", "--systems", "bm25", "--workdir",
                         tmp_path / "runs", "--json", tmp_path / "t.json", "--markdown", tmp_path / "t.md")
        assert rc == 0, err
        return json.loads((tmp_path / "t.json").read_text())[0]["R@1"], err

    assert table() == (100.0, "")
    # q2's answer moves to a new document: the old corpus's index has no such document
    lines = (beir / "corpus.jsonl").read_text().splitlines()
    lines[1] = json.dumps({"_id": "d5", "title": "France", "text": "The capital of France is Paris."})
    (beir / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td5\t2\nq3\td3\t1\n")
    r1, err = table()
    assert r1 == 100.0 and "beir-mini: the corpus is not the one its 2 cached" in err, err
    assert table() == (r1, "")  # cached again, for the new corpus


def test_idf_and_factor_without_re_encoding(tmp_path, beir, cli):
    model = ["--model", "splade-bert-tiny", "--quiet"]
    corpus = beir / "corpus.jsonl"
    assert cli("encode", "--corpus", corpus, "--output", tmp_path / "floats", "--keep-floats", "--no-idf",
               *model)[0] == 0
    assert cli("encode", "--corpus", corpus, "--output", tmp_path / "direct", "--idf", *model)[0] == 0
    rc, out, err = cli("requantize", "--input", tmp_path / "floats", "--output", tmp_path / "derived",
                       "--idf")
    assert rc == 0 and "IDF-weighted" in out, err
    direct = {r["id"]: r["vector"] for r in iter_vectors(tmp_path / "direct")}
    derived = {r["id"]: r["vector"] for r in iter_vectors(tmp_path / "derived")}
    assert direct.keys() == derived.keys()
    differ = postings = 0
    for sid, vector in direct.items():  # the same impacts, give or take a rounding at .5
        assert vector.keys() ^ derived[sid].keys() <= {t for t, v in vector.items() if v <= 1} | \
            {t for t, v in derived[sid].items() if v <= 1}
        assert all(abs(vector[t] - derived[sid][t]) <= 1 for t in vector.keys() & derived[sid].keys())
        differ += sum(vector.get(t, 0) != derived[sid].get(t, 0) for t in vector.keys() | derived[sid].keys())
        postings += len(vector)
    # float32 noise reaches a .5 boundary rarely: a systematic difference (another rounding, another IDF) would not
    assert postings > 100 and differ <= max(2, 0.01 * postings), (differ, postings)
    assert Manifest.read(tmp_path / "derived").idf_weighting["documents"] == \
        Manifest.read(tmp_path / "direct").idf_weighting["documents"]
    rc, _, err = cli("requantize", "--input", tmp_path / "derived", "--output", tmp_path / "twice", "--idf")
    assert rc == 1 and "IDF-weighted already" in err
    rc, _, err = cli("requantize", "--input", tmp_path / "direct", "--output", tmp_path / "x",
                     "--factor", 5)
    assert rc == 1 and "--keep-floats" in err
    rc, _, err = cli("requantize", "--input", tmp_path / "floats", "--output", tmp_path / "f20",
                     "--factor", 20)
    assert rc == 0 and Manifest.read(tmp_path / "f20").factor == 20, err


@pytest.mark.jvm
def test_static_pruning_keeps_the_large_impacts_and_lucene_scores_what_is_kept(tmp_path, beir, cli):
    """requantize --min-impact N: each sentence keeps exactly its impacts of at least N (the same
    values), the manifest says N, and the Lucene index of the pruned folder scores the questions
    as the brute-force sums over what was kept."""
    from sparc_es.encode.requantize import requantize
    from sparc_es.engines.lucene import LuceneEngine
    from sparc_es.errors import SparcError

    assert cli("encode", "--corpus", beir / "corpus.jsonl", "--output", tmp_path / "floats", "--keep-floats",
               "--model", "splade-bert-tiny", "--quiet")[0] == 0
    full = {r["id"]: r["vector"] for r in iter_vectors(tmp_path / "floats")}
    impacts = sorted(v for vector in full.values() for v in vector.values())
    floor = impacts[len(impacts) // 2]  # about half the postings go
    assert floor > 1
    rc, out, err = cli("requantize", "--input", tmp_path / "floats", "--output", tmp_path / "pruned",
                       "--min-impact", floor)
    assert rc == 0 and f"impacts of at least {floor}" in out, err
    pruned = {r["id"]: r["vector"] for r in iter_vectors(tmp_path / "pruned")}
    assert pruned == {sid: {t: v for t, v in vector.items() if v >= floor} for sid, vector in full.items()}
    manifest = Manifest.read(tmp_path / "pruned")
    assert manifest.min_impact == floor and manifest.postings == sum(map(len, pruned.values()))
    assert 0 < manifest.postings < Manifest.read(tmp_path / "floats").postings
    # pruning again from the pruned folder keeps its floor unless told otherwise
    assert cli("requantize", "--input", tmp_path / "pruned", "--output", tmp_path / "f10", "--factor", 10)[0] == 0
    assert Manifest.read(tmp_path / "f10").min_impact == floor
    with pytest.raises(SparcError, match="minimum impact"):
        requantize(tmp_path / "floats", tmp_path / "zero", min_impact=0)

    # encode --min-impact stores the same as pruning afterwards, and an update keeps to its floor
    rc, out, err = cli("encode", "--corpus", beir / "corpus.jsonl", "--output", tmp_path / "direct",
                       "--keep-floats", "--model", "splade-bert-tiny", "--quiet", "--min-impact", floor)
    assert rc == 0 and f"impacts of at least {floor}" in out, err
    direct = {r["id"]: r["vector"] for r in iter_vectors(tmp_path / "direct")}
    # compared with its own floats quantised without a floor (two encodes need not agree to the last bit)
    requantize(tmp_path / "direct", tmp_path / "direct-all", min_impact=1)
    unpruned = {r["id"]: r["vector"] for r in iter_vectors(tmp_path / "direct-all")}
    assert direct == {sid: {t: v for t, v in vector.items() if v >= floor} for sid, vector in unpruned.items()}
    assert sum(map(len, unpruned.values())) > sum(map(len, direct.values())) > 0
    assert Manifest.read(tmp_path / "direct").min_impact == floor
    rc, _, err = cli("encode", "--corpus", beir / "corpus.jsonl", "--output", tmp_path / "direct", "--update",
                     "--keep-floats", "--model", "splade-bert-tiny", "--quiet")
    assert rc == 1 and "--min-impact" in err, err

    assert cli("index", "--input", tmp_path / "pruned", "--index", tmp_path / "idx", "--no-bm25")[0] == 0
    engine = LuceneEngine(tmp_path / "idx")
    for question in ("what is the capital", "sparse retrieval with impacts", "zzzz"):
        bag = engine.queries.bag(question)
        expected = sorted(((sid, sum(n * vector.get(t, 0) for t, n in bag.items())) for sid, vector in pruned.items()),
                          key=lambda x: -x[1])
        expected = {sid: score for sid, score in expected if score > 0}
        hits = engine.search(question, k=len(pruned))
        assert {h.id: h.impact for h in hits} == expected, question


@pytest.mark.slow
@pytest.mark.data
def test_requantize_idf_stores_what_encode_idf_stores_with_the_lexical_term(tmp_path, squad_sample, cli):
    """The default model has a lexical term, which IDF leaves alone: re-weighting kept floats gives
    exactly the impacts that encoding with IDF stores, for every sentence."""
    sentences, _ = squad_sample
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(s.to_json()) + "\n" for s in sentences))
    assert SparcModel.load("default").config.lexical_weight > 0
    assert cli("encode", "--corpus", corpus, "--output", tmp_path / "floats", "--keep-floats",
               "--no-idf", "--quiet")[0] == 0
    assert cli("encode", "--corpus", corpus, "--output", tmp_path / "direct", "--idf", "--quiet")[0] == 0
    rc, _, err = cli("requantize", "--input", tmp_path / "floats", "--output", tmp_path / "derived",
                     "--idf")
    assert rc == 0, err
    kept = list(iter_vectors(tmp_path / "floats"))
    assert sum("lexical" in r for r in kept) == len(kept)  # every sentence has lexical tokens
    direct = {r["id"]: r["vector"] for r in iter_vectors(tmp_path / "direct")}
    derived = {r["id"]: r["vector"] for r in iter_vectors(tmp_path / "derived")}
    assert len(direct) == len(sentences)
    assert [sid for sid in direct if direct[sid] != derived[sid]] == []
    plain = {r["id"]: r["vector"] for r in kept}
    assert sum(plain[sid] != direct[sid] for sid in direct) > 0.9 * len(direct)  # IDF did change them


@pytest.mark.jvm
def test_table_streams_runs_a_batch_at_a_time_into_its_workdir(tmp_path, beir, tiny_model_dir, cli):
    """table searches a batch of questions at a time and scores the run files: one question per
    batch gives the table and the runs of one batch for all; table.json and table.md go into the
    workdir; each run's tag names the engine and the hybrid."""
    assert cli("evalset", "--beir", beir, "--output", tmp_path / "set")[0] == 0
    systems = f"bm25,sparc:model={tiny_model_dir},sparc:model={tiny_model_dir},hybrid=sum,hybrid_weight=0.5," \
              f"sparc:model={tiny_model_dir},hybrid=rrf"
    tables = {}
    for batch in (1, 1000):
        work = tmp_path / f"work{batch}"
        rc, out, err = cli("table", "--domains", tmp_path / "set", "--systems", systems, "--workdir", work,
                           "--batch", batch)
        assert rc == 0 and f"wrote {work / 'table.json'} and {work / 'table.md'}" in out, err
        assert (work / "table.md").read_text().startswith("| domain | system |")
        rows = json.loads((work / "table.json").read_text())
        runs = {r["system"]: (work / "beir-mini" / "runs" / r["run"].rpartition("/")[2]).read_text() for r in rows}
        tables[batch] = ([(r["system"], r["queries"], [r[m] for m in ("MRR@1000", "R@1", "nDCG@10", "R@100")])
                          for r in rows], runs)
    assert tables[1] == tables[1000]
    tags = [{line.split()[5] for line in run.splitlines()} for run in tables[1][1].values()]
    assert tags == [{"sparc-es-bm25"}, {"sparc-es-lucene"}, {"sparc-es-lucene-sum0.5"}, {"sparc-es-lucene-rrf"}]
    assert not (tmp_path / "runs").exists()


@pytest.mark.jvm
def test_table_rebuilds_a_cached_index_whose_bm25_terms_have_other_settings(tmp_path, beir, tiny_model_dir, cli):
    """An index cached in the workdir by a sparc-es that stored its BM25 terms with other settings (k1
    0.9 before 2026-11-28) is rebuilt by table, not refused, and gives a fresh index's figures."""
    from sparc_es.engines.blend import BLEND_FILE, K1

    assert cli("evalset", "--beir", beir, "--output", tmp_path / "set")[0] == 0
    work = tmp_path / "work"
    args = ("table", "--domains", tmp_path / "set", "--systems", f"sparc:model={tiny_model_dir},hybrid=sum",
            "--workdir", work)
    rc, _, err = cli(*args)
    assert rc == 0, err
    fresh = json.loads((work / "table.json").read_text())
    (stored,) = work.glob(f"*/index-*/{BLEND_FILE}")
    record = json.loads(stored.read_text())
    stored.write_text(json.dumps({**record, "k1": 0.9}))
    rc, _, err = cli(*args)
    assert rc == 0, err
    assert json.loads(stored.read_text())["k1"] == K1
    again = json.loads((work / "table.json").read_text())
    assert [r["MRR@1000"] for r in again] == [r["MRR@1000"] for r in fresh]
