"""Evaluation: sets built by the revised MultiReQA protocol, metrics against trec_eval's own outputs,
the paper's BM25 row, and the eval / evalset / table commands."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from sparc_es.cli import main
from sparc_es.corpus.sources import Sentence, sentence_key
from sparc_es.errors import InputError, SparcError
from sparc_es.evaluation.evalsets import build_eval_set, data_dir
from sparc_es.evaluation.measures import compare, evaluate, per_query
from sparc_es.evaluation.table import System
from sparc_es.evaluation.trec import read_qrels, read_run

from shared_data import need_data

TREC_EVAL = {"recip_rank": "RR", "map": "AP", "P_10": "P@10", "ndcg_cut_10": "nDCG@10"}


def trec_eval_dir():
    return need_data("trec_eval/qrels.test") / "trec_eval"


def reference(path) -> dict[tuple[str, str], float]:
    """(measure, query or 'all') -> value from a trec_eval output file."""
    out = {}
    for line in path.read_text().splitlines():
        measure, query, value = line.split()
        if measure in TREC_EVAL:
            out[(measure, query)] = float(value)
    return out


@pytest.mark.parametrize("name", ["out.test", "out.test.a"])
@pytest.mark.data
def test_averages_reproduce_trec_eval(name):
    folder = trec_eval_dir()
    expected = reference(folder / name)
    got = evaluate(read_run(folder / "results.test"), read_qrels(folder / "qrels.test"), TREC_EVAL)
    present = [m for m in TREC_EVAL if (m, "all") in expected]  # out.test lacks ndcg_cut_10
    assert len(present) == (3 if name == "out.test" else 4)
    for measure in present:
        assert round(got[measure], 4) == expected[(measure, "all")], measure


@pytest.mark.data
def test_per_query_values_reproduce_trec_eval():
    folder = trec_eval_dir()
    expected = reference(folder / "out.test.aq")
    run, qrels = read_run(folder / "results.test"), read_qrels(folder / "qrels.test")
    for measure, ours in TREC_EVAL.items():
        values = per_query(run, qrels, ours)
        for qid, value in values.items():
            assert round(value, 4) == expected[(measure, qid)], (measure, qid)


@pytest.mark.data
def test_a_run_with_columns_after_the_tag_is_read_as_trec_eval_reads_it(tmp_path):
    """trec_eval reads a run line's first six columns; results.trunc has words after the tag on five lines
    ("STANDARD more junk at"), which sparc-es refused: "expected 'qid Q0 docid rank score tag'"."""
    from sparc_es.evaluation.measures import evaluate_file, score_file

    folder = trec_eval_dir()
    expected = reference(folder / "out.test.aqc")  # -c: a judged query without results counts 0, as here
    qrels = read_qrels(folder / "qrels.test")
    got = evaluate_file(folder / "results.trunc", qrels, TREC_EVAL)
    assert set(got) == set(TREC_EVAL)
    for measure in TREC_EVAL:
        assert round(got[measure], 4) == expected[(measure, "all")], measure
    values = score_file(folder / "results.trunc", qrels, TREC_EVAL).values
    assert {(m, q): round(v, 4) for m, per in values.items() for q, v in per.items()} == \
        {key: value for key, value in expected.items() if key[1] != "all"}
    (tmp_path / "five.trec").write_text("q1 Q0 d1 1 2.0\n")  # the tag is still needed
    with pytest.raises(InputError, match="five.trec:1: expected 'qid Q0 docid rank score tag'"):
        read_run(tmp_path / "five.trec")


def test_queries_without_results_count_as_zero():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}
    run = {"q1": {"a": 2.0, "x": 1.0}, "q2": {"x": 3.0, "b": 1.0}}  # q3 never answered
    scores = evaluate(run, qrels)
    assert scores["MRR@1000"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert scores["R@1"] == pytest.approx(1 / 3)
    assert evaluate({**run, "q3": {}}, qrels) == scores


def test_compare_pairs_the_queries():
    qrels = {f"q{i}": {"a": 1} for i in range(20)}
    baseline = {q: {"a": 2.0, "x": 1.0} for q in qrels}  # every question answered first
    run = {**baseline, "q0": {"x": 2.0, "a": 1.0}, "q1": {"x": 3.0, "y": 2.0, "a": 1.0}}  # two pushed down
    same = compare(baseline, baseline, qrels)
    assert all(d.delta == d.low == d.high == 0 and d.changed == 0 for d in same)
    diff = {d.measure: d for d in compare(run, baseline, qrels, resamples=500)}
    mrr = diff["MRR@1000"]
    assert mrr.run == pytest.approx(evaluate(run, qrels)["MRR@1000"]) and mrr.baseline == pytest.approx(1.0)
    assert mrr.delta == pytest.approx(((0.5 - 1) + (1 / 3 - 1)) / 20)
    assert mrr.changed == 2 and diff["R@1"].changed == 2 and diff["R@100"].changed == 0
    assert -2 / 3 < mrr.low < mrr.delta < mrr.high <= 0  # within the worst query's loss, never a gain
    assert compare(run, baseline, qrels, resamples=500) == list(diff.values())  # seeded: the same interval


def test_eval_against_a_baseline(tmp_path, capsys):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"q{i} 0 a 1\n" for i in range(10)))
    for name, first in (("base", "a"), ("new", "x")):
        (tmp_path / f"{name}.trec").write_text("".join(
            f"q{i} Q0 {first if i == 0 else 'a'} 1 2.0 t\nq{i} Q0 {'a' if first == 'x' and i == 0 else 'x'} 2 1.0 t\n"
            for i in range(10)))
    args = ["eval", "--run", str(tmp_path / "new.trec"), "--baseline", str(tmp_path / "base.trec"),
            "--qrels", str(qrels)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "MRR@1000    95.00 100.00  -5.00" in out and "paired bootstrap" in out
    assert main(args + ["--json"]) == 0
    measures = {m["measure"]: m for m in json.loads(capsys.readouterr().out)["measures"]}
    assert measures["MRR@1000"]["delta"] == pytest.approx(-0.05) and measures["R@1"]["changed"] == 1


def test_bad_run_and_qrels_lines(tmp_path):
    from sparc_es.errors import InputError

    (tmp_path / "run").write_text("q1 Q0 d1 1 2.5 tag\nq1 Q0 d2 2 high tag\n")
    with pytest.raises(InputError, match="run:2: score 'high' is not a number"):
        read_run(tmp_path / "run")
    (tmp_path / "qrels").write_text("q1 0 d1\n")
    with pytest.raises(InputError, match="qrels:1: expected 'qid iter docid relevance'"):
        read_qrels(tmp_path / "qrels")


@pytest.fixture(scope="module")
def squad():
    need_data("mrqa/SQuAD.jsonl.gz")
    return build_eval_set("squad")


@pytest.mark.data
def test_squad_dev_counts(squad):
    assert len(squad.sentences) == 10_642
    assert len(squad.topics) == 10_472
    assert len({s.id for s in squad.sentences}) == 10_642
    assert all(squad.qrels[qid] for qid, _ in squad.topics)
    merged = [qid for qid, _ in squad.topics if len(squad.qrels[qid]) > 1]
    assert merged  # identical questions and multi-sentence answers give several relevant sentences


@pytest.mark.data
def test_relevant_sentences_contain_the_answer(squad):
    from sparc_es.evaluation.evalsets import read_mrqa

    by_id = {s.id: s for s in squad.sentences}
    checked = 0
    for c in list(read_mrqa(data_dir() / "mrqa" / "SQuAD.jsonl.gz"))[:50]:
        for qa in c["qas"]:
            if qa["qid"] not in squad.qrels:
                continue  # merged into an earlier identical question
            answer = qa["detected_answers"][0]["text"]
            texts = " ".join(by_id[sid].text for sid in squad.qrels[qa["qid"]])
            assert answer.split()[0] in texts
            checked += 1
    assert checked > 200


@pytest.mark.data
def test_newsqa_uses_the_projects_splitter():
    need_data("mrqa/NewsQA.jsonl.gz")
    news = build_eval_set("newsqa")
    assert len(news.sentences) > 10_000 and len(news.topics) > 4_000
    s = news.sentences[0]
    assert s.context[s.start:s.end].split() == s.text.split()


@pytest.mark.data
@pytest.mark.slow
def test_paper_bm25_matches_rank_bm25_and_reproduces_the_paper(squad):
    from sparc_es.engines.bm25 import PaperBM25

    bm25 = PaperBM25(squad.sentences)
    questions = [q for _, q in squad.topics[:25]]
    expected = np.array([bm25.model.get_scores(bm25.tokenize(q)) for q in questions])
    np.testing.assert_allclose(bm25.scores(questions), expected, rtol=1e-12, atol=1e-12)

    results = bm25.batch_search(squad.topics, k=1000)
    run = {qid: {h.id: h.score for h in hits} for qid, hits in results.items()}
    scores = evaluate(run, {q: dict.fromkeys(ids, 1) for q, ids in squad.qrels.items()})
    assert abs(100 * scores["MRR@1000"] - 55.44) <= 0.1  # paper table 1, BM25 row
    assert abs(100 * scores["R@1"] - 48.15) <= 0.1


@pytest.mark.data
def test_eval_and_evalset_commands(tmp_path, capsys):
    folder = trec_eval_dir()
    assert main(["eval", "--run", str(folder / "results.test"), "--qrels", str(folder / "qrels.test"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["queries"] == 3 and round(out["MRR@1000"], 4) == 0.4064
    need_data("mrqa/SQuAD.jsonl.gz")
    assert main(["evalset", "--domain", "squad", "--output", str(tmp_path / "squad")]) == 0
    assert "10642 sentences, 10472 merged queries" in capsys.readouterr().out
    topics = (tmp_path / "squad" / "topics.tsv").read_text().splitlines()
    corpus = (tmp_path / "squad" / "corpus.jsonl").read_text().splitlines()
    assert len(topics) == 10_472 and len(corpus) == 10_642
    assert {"id", "text", "context", "doc", "start", "end"} <= set(json.loads(corpus[0]))


def test_system_specs():
    assert System.parse("sparc:top_k=200,factor=20").options == {"top_k": 200, "factor": 20.0}
    assert System.parse("sparc:k=200").options == {"top_k": 200}  # the old name still reads
    assert System.parse("bm25").kind == "bm25"
    for bad in ("bm26", "sparc:k", "bm25:k=3", "sparc:colour=red", "sparc:k=many"):
        with pytest.raises(SparcError):
            System.parse(bad)


def _small_set(folder):
    """A three-question evaluation set the paper's BM25 searches in memory (no JVM)."""
    from sparc_es.evaluation.evalsets import EvalSet

    words = ["lamp", "java", "tea", "rain", "moon", "bread", "stone", "river"]
    sentences = [Sentence(id=f"d{i}#0", text=f"The {w} is here.", doc=f"d{i}") for i, w in enumerate(words)]
    topics = [("q1", "where is the lamp"), ("q2", "the java"), ("q3", "what about the moon")]
    EvalSet("small", sentences, topics, {"q1": {"d0#0": 1}, "q2": {"d1#0": 1}, "q3": {"d4#0": 1}}).write(folder)
    return folder


def test_table_labels_and_outputs_say_the_cutoffs_that_k_makes(tmp_path, cli):
    """-k 5 wrote columns MRR@1000 and R@100 over runs of 5 hits, and neither output said k."""
    folder = _small_set(tmp_path / "set")
    work = tmp_path / "w"
    rc, out, err = cli("table", "--systems", "bm25-paper", "--domains", folder, "--workdir", work, "-k", 5,
                       "--threads", 1)
    assert rc == 0, err
    [row] = json.loads((work / "table.json").read_text())
    assert row["k"] == 5 and {"MRR@5", "R@1", "nDCG@10", "R@5"} <= row.keys(), row
    assert "MRR@1000" not in row and "R@100" not in row
    assert row["MRR@5"] == 100.0 and row["R@5"] == 100.0  # each question's sentence is its top hit
    markdown = (work / "table.md").read_text()
    assert markdown.startswith("| domain | system | MRR@5 | R@1 | nDCG@10 | R@5 | settings |")
    assert "k = 5 hits per query" in markdown and "small    bm25-paper" in out and "MRR@5 100.00" in out
    rc, _, err = cli("table", "--systems", "bm25-paper", "--domains", folder, "--workdir", work, "--threads", 1)
    [row] = json.loads((work / "table.json").read_text())  # the default k: the paper's names, as before
    assert rc == 0 and row["k"] == 1000 and {"MRR@1000", "R@1", "nDCG@10", "R@100"} <= row.keys(), err


def test_table_refuses_a_system_listed_twice_however_spelt(tmp_path, cli):
    """--systems bm25,bm25 failed with a bare 'runs/bm25.trec.partial: No such file or directory'."""
    folder = _small_set(tmp_path / "set")
    for systems, says in (("bm25,bm25", "'bm25' is listed twice"),
                          ("bm25-paper,sparc,sparc:hybrid=none", "'sparc' and 'sparc:hybrid=none' are the same"),
                          ("sparc:top_k=5,idf=1,sparc:idf=1,k=5", "are the same system"),
                          ("default,sparc:idf=1,hybrid=sum", "'default' and 'sparc:idf=1,hybrid=sum' are the same"),
                          ("sparc:hybrid=sum,sparc:hybrid=sum,hybrid_weight=0.35", "are the same system")):
        err = _one_line_error(cli, "table", "--systems", systems, "--domains", folder, "--workdir", tmp_path / "w")
        assert "--systems: " in err and says in err and "list each system once" in err, err
    assert not (tmp_path / "w").exists()


def test_two_systems_never_share_a_run_file():
    """model=a/b and model=a_b were both written to runs/sparc_model-a_b.trec."""
    from sparc_es.evaluation.table import run_names

    systems = [System.parse(s) for s in ("bm25", "sparc:model=a/b", "sparc:model=a_b", "sparc:top_k=5")]
    names = run_names(systems)
    assert len(set(names)) == 4 and names[0] == "bm25" and names[3] == "sparc_top_k-5"  # plain where unique
    assert names[1].startswith("sparc_model-a_b-") and names[2].startswith("sparc_model-a_b-")
    assert run_names(systems[1:3]) == names[1:3]  # the same names in any table


def test_table_default_is_the_cli_default():
    """`sparc` is not what run does by default (no IDF, no BM25 sum); the 'default' system is."""
    from sparc_es.engines.hybrid import BM25_WEIGHT
    from sparc_es.evaluation.table import _tag, split_systems
    from sparc_es.evaluation.trec import run_tag

    assert split_systems("bm25,default,sparc:idf=1,default:model=m") == \
        ["bm25", "default", "sparc:idf=1", "default:model=m"]
    default = System.parse("default")
    assert default.kind == "sparc" and default.key == System.parse("sparc:idf=1,hybrid=sum").key
    assert System.parse("default:model=m").options == {"idf": 1, "hybrid": "sum", "model": "m"}
    assert _tag(default) == run_tag("lucene", "sum", BM25_WEIGHT)  # run's own default tag
    with pytest.raises(SparcError, match="choose from bm25, bm25-paper, sparc, sparc-exact, sparc-int, default"):
        System.parse("defaults")


def test_a_table_system_is_tagged_as_run_tags_it():
    """`sparc:hybrid=none` was tagged sparc-es-lucene-none, where `run --hybrid none` writes sparc-es-lucene."""
    from sparc_es.evaluation.table import _tag
    from sparc_es.evaluation.trec import run_tag

    assert _tag(System.parse("sparc:hybrid=none")) == _tag(System.parse("sparc")) == run_tag("lucene", None) == \
        run_tag("lucene", "none") == "sparc-es-lucene"


def test_eval_counts_the_ranks_that_search_and_run_show_when_scores_tie(tmp_path):
    """trec_eval breaks score ties by docid; the run file's scores must carry the displayed order."""
    from sparc_es.engines.base import Hit
    from sparc_es.evaluation.trec import TrecRunWriter, run_of

    shown = {"q1": [Hit("a", 3.0), Hit("b", 3.0), Hit("c", 2.0)],  # "b", the answer, is shown second
             "q2": [Hit("z", 1.0), Hit("y", 1.0), Hit("x", 1.0)],  # "x", the answer, is shown third
             "q3": [Hit("m", 0.0), Hit("n", -0.5), Hit("o", -0.5)]}
    qrels = {"q1": {"b": 1}, "q2": {"x": 1}, "q3": {"o": 1}}
    with TrecRunWriter(tmp_path / "run.trec") as writer:
        for qid, hits in shown.items():
            writer.write(qid, hits)
    run = read_run(tmp_path / "run.trec")
    assert run == run_of(shown)  # what table evaluates in memory
    for qid, hits in shown.items():
        assert sorted(run[qid], key=lambda d: -run[qid][d]) == [h.id for h in hits]
        assert all(abs(run[qid][h.id] - h.score) < 1e-5 for h in hits)
    assert per_query(run, qrels, "RR@1000") == pytest.approx({"q1": 1 / 2, "q2": 1 / 3, "q3": 1 / 3})


def test_evalset_from_your_own_docs_judges_by_answer_pattern(tmp_path, capsys):
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "sub" / "server.md").write_text("# REST server\n\nThe server listens on port 8081.\n\n"
                                            "The port can be changed with `--port`.\n")
    (docs / "other.md").write_text("# Proxy\n\nThe proxy listens on port 8081 too.\n")
    (docs / "install.txt").write_text("Install with pip. It needs Python 3.11 or newer.\n")
    (tmp_path / "q.tsv").write_text("q1\tWhat port does the REST server use?\nq2\tWhich Python do I need?\n"
                                    "q3\tSomething the docs do not say?\n")
    (tmp_path / "a.tsv").write_text("# qid, pattern, file\nq1\tport 8081\tsub/server.md\nq2\tpython 3\\.11\n"
                                    "q2\tpython 3\\.12\nq3\tnowhere-to-be-found\n")
    argv = ["evalset", "--docs", str(docs), "--questions", str(tmp_path / "q.tsv"), "--answers",
            str(tmp_path / "a.tsv"), "--output", str(tmp_path / "set")]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "1 question(s) left out" in err and "q3" in err
    qrels = read_qrels(tmp_path / "set" / "qrels.txt")
    assert qrels == {"q1": {f"sub/server.md#{sentence_key('The server listens on port 8081.')}": 1},
                     "q2": {f"install.txt#{sentence_key('It needs Python 3.11 or newer.')}": 1}}  # not other.md
    assert (tmp_path / "set" / "topics.tsv").read_text().count("\n") == 2

    (tmp_path / "bad.tsv").write_text("q1\tport (8081\n")
    assert main([*argv[:5], "--answers", str(tmp_path / "bad.tsv"), "--output", str(tmp_path / "x")]) == 1
    assert "bad regular expression" in capsys.readouterr().err
    (docs / "long.txt").write_text("a" * 40 + "!\n")  # (a|aa)+$ backtracks 2^40 ways here: it must not hang
    (tmp_path / "slow.tsv").write_text("q1\tport 8081\nq2\t(a|aa)+$\n")
    assert main([*argv[:5], "--answers", str(tmp_path / "slow.tsv"), "--output", str(tmp_path / "z")]) == 1
    err = capsys.readouterr().err
    assert "slow.tsv:2:" in err and "backtracks without end" in err and err.count("\n") == 1, err
    assert main(["evalset", "--docs", str(docs), "--output", str(tmp_path / "y")]) == 1
    assert "go together" in capsys.readouterr().err


def _synthetic_run(path, queries: int, hits: int, seed: int = 0) -> dict[str, dict[str, int]]:
    """A run file of ``queries`` x ``hits`` lines, its qrels (one to three relevant sentences a query,
    some beyond the top 100, some never retrieved) returned."""
    rng = np.random.default_rng(seed)
    qrels = {}
    with open(path, "w") as f:
        for q in range(queries):
            docs = rng.permutation(hits * 2)[:hits]
            for rank, d in enumerate(docs, start=1):
                f.write(f"q{q} Q0 s{d} {rank} {hits - rank + 1.5:.6f} t\n")
            qrels[f"q{q}"] = {f"s{d}": int(rng.integers(1, 3)) for d in rng.choice(hits * 2, rng.integers(1, 4))}
    return qrels


def test_a_run_file_is_scored_query_by_query_as_the_whole_run_is(tmp_path, monkeypatch):
    """evaluate_file streams the file (iter_run) and hands trec_eval's code CHUNK queries at a time:
    every measure is per query, so the means are the whole run's, whatever the chunk."""
    from sparc_es.evaluation import measures as evaluation
    from sparc_es.evaluation.measures import evaluate_file, per_query_file
    from sparc_es.evaluation.trec import iter_run

    qrels = _synthetic_run(tmp_path / "run", queries=23, hits=120)
    qrels["unanswered"] = {"x": 1}  # judged, not in the run: 0
    whole = read_run(tmp_path / "run")
    assert dict(iter_run(tmp_path / "run")) == whole
    expected = evaluate(whole, qrels)
    monkeypatch.setattr(evaluation, "CHUNK", 4)
    assert evaluate_file(tmp_path / "run", qrels) == pytest.approx(expected, abs=1e-12)
    assert evaluate(iter_run(tmp_path / "run"), qrels) == pytest.approx(expected, abs=1e-12)
    assert per_query_file(tmp_path / "run", qrels)["MRR@1000"]["unanswered"] == 0.0
    assert 0 < expected["MRR@1000"] < 1 and 0 < expected["R@100"] < 1


def test_a_run_whose_queries_are_interleaved_is_still_scored(tmp_path):
    """trec_eval takes a run in any line order: one whose queries' lines are not together cannot be
    streamed, and is read whole instead (RunNotGrouped), with the same figures."""
    from sparc_es.evaluation.measures import evaluate_file
    from sparc_es.evaluation.trec import RunNotGrouped, iter_run

    (tmp_path / "run").write_text("q1 Q0 a 1 3.0 t\nq2 Q0 b 1 2.0 t\nq1 Q0 c 2 1.0 t\n")
    qrels = {"q1": {"c": 1}, "q2": {"b": 1}}
    with pytest.raises(RunNotGrouped, match="run:3: the lines of query 'q1' are not all together"):
        list(iter_run(tmp_path / "run"))
    assert evaluate_file(tmp_path / "run", qrels)["MRR@1000"] == pytest.approx((1 / 2 + 1) / 2)
    (tmp_path / "twice").write_text("q1 Q0 a 1 3.0 t\nq1 Q0 a 2 1.0 t\n")
    with pytest.raises(SparcError, match="twice:2: document 'a' is listed twice for query 'q1'"):
        evaluate_file(tmp_path / "twice", qrels)


@pytest.mark.slow
def test_scoring_a_run_file_holds_a_chunk_of_queries_not_the_run(tmp_path, monkeypatch):
    """The memory evaluate_file needs stays about the same for four times the questions (what grows
    is a few numbers per query), while reading the run whole grows with it."""
    import tracemalloc

    from sparc_es.evaluation import measures as evaluation
    from sparc_es.evaluation.measures import evaluate_file

    monkeypatch.setattr(evaluation, "CHUNK", 200)
    peaks = {}
    for n in (800, 3200):
        qrels = _synthetic_run(tmp_path / f"run{n}", queries=n, hits=100, seed=n)
        path = tmp_path / f"run{n}"
        for how, score in (("file", lambda p: evaluate_file(p, qrels)),  # noqa: B023 (called at once)
                           ("whole", lambda p: evaluate(read_run(p), qrels))):  # noqa: B023
            tracemalloc.start()
            score(path)
            peaks[how, n] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    assert peaks["file", 3200] < 1.5 * peaks["file", 800], peaks
    assert peaks["whole", 3200] > 2.5 * peaks["whole", 800] and peaks["whole", 3200] > 3 * peaks["file", 3200], peaks


# --- evaluation inputs that judge nothing: refused in one line naming the file ----------------------

def test_eval_of_an_empty_or_disjoint_run_is_refused(tmp_path, capsys):
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq2 0 d2 1\n")
    (tmp_path / "empty.trec").write_text("")
    (tmp_path / "other.trec").write_text("x1 Q0 d1 1 1.0 t\n")
    (tmp_path / "ok.trec").write_text("q1 Q0 d1 1 1.0 t\nzz Q0 d2 1 1.0 t\n")
    for run, says in (("empty.trec", "empty.trec: an empty run"), ("other.trec", "none of its 1 queries is judged")):
        assert main(["eval", "--run", str(tmp_path / run), "--qrels", str(tmp_path / "qrels.txt")]) == 1
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1, err
    assert main(["eval", "--run", str(tmp_path / "ok.trec"), "--qrels", str(tmp_path / "qrels.txt")]) == 0
    assert "MRR@1000    50.00" in capsys.readouterr().out


def test_evaluate_in_memory_refuses_what_eval_refuses(tmp_path):
    """evaluate(run, {}) was a ZeroDivisionError, and an empty or disjoint run scored 0.0 where
    evaluate_file and `sparc-es eval` refuse it."""
    from sparc_es.evaluation.measures import evaluate_file

    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    (tmp_path / "run.trec").write_text("q1 Q0 d1 1 1.0 t\n")
    for refused, says in ((lambda: evaluate({"q1": {"d1": 1.0}}, {}), "no qrels"),
                          (lambda: evaluate_file(tmp_path / "run.trec", {}), "no qrels"),
                          (lambda: evaluate({}, qrels), "the run: an empty run"),
                          (lambda: evaluate({"q1": {}}, qrels), "the run: an empty run"),
                          (lambda: evaluate({"x1": {"d1": 1.0}}, qrels), "the run: none of its 1 queries is judged"),
                          (lambda: evaluate({"q1": {"x": 1.0}}, qrels), "the run: none of the documents it ranks")):
        with pytest.raises(SparcError, match=says) as e:
            refused()
        assert not isinstance(e.value, InputError) or "run.trec" in str(e.value)
    assert evaluate({"q1": {"d1": 1.0}}, qrels)["MRR@1000"] == pytest.approx(0.5)  # q2 unanswered: 0, as before


def test_evaluate_takes_an_engines_hits_as_the_run_file_holds_them():
    """evaluate({qid: [Hit, ...]}, qrels), batch_search's shape, was a TypeError deep in ir_measures."""
    from sparc_es.engines.base import Hit
    from sparc_es.evaluation.trec import run_of

    qrels = {"q1": {"b": 1}, "q2": {"c": 1}}
    hits = {"q1": [Hit("a", 2.0), Hit("b", 2.0)], "q2": [Hit("c", 1.0)]}  # a tie, ranked as shown
    assert evaluate(hits, qrels) == evaluate(run_of(hits), qrels)
    assert evaluate(hits, qrels)["MRR@1000"] == pytest.approx((1 / 2 + 1) / 2)
    assert per_query(hits, qrels, "RR@1000") == {"q1": 0.5, "q2": 1.0}
    with pytest.raises(SparcError, match="the run's query 'q1': expected its documents' scores"):
        evaluate({"q1": [("a", 2.0)]}, qrels)


def test_a_relevance_past_trec_evals_integer_is_refused_at_its_line(tmp_path):
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq1 0 d2 99999999999999999999\n")
    with pytest.raises(InputError, match=r"qrels.txt:2: relevance 99999999999999999999 is out of range"):
        read_qrels(tmp_path / "qrels.txt")


def test_an_evaluation_set_that_judges_nothing_is_refused(tmp_path, capsys):
    from sparc_es.evaluation.evalsets import EvalSet

    folder = tmp_path / "set"
    EvalSet("x", [Sentence(id="a#0", text="One.", doc="a")], [("q1", "what?")], {"q1": {"a#0": 1}}).write(folder)
    assert len(EvalSet.read(folder).topics) == 1
    (folder / "topics.tsv").write_text("")
    with pytest.raises(InputError, match="no questions"):
        EvalSet.read(folder)
    (folder / "topics.tsv").write_text("q1\twhat?\n")
    (folder / "qrels.txt").write_text("q1 0 other#0 1\n")
    with pytest.raises(InputError, match=r"set: the qrels judge no sentence of the corpus relevant \(e.g. 'other#0'\)"):
        EvalSet.read(folder)
    assert main(["table", "--systems", "bm25", "--domains", str(folder), "--workdir", str(tmp_path / "w")]) == 1
    assert "judge no sentence of the corpus" in capsys.readouterr().err


@pytest.mark.parametrize("content, says", [
    (gzip.compress(b'{"header": {"dataset": "x"}}\n'), "no questions"),
    (gzip.compress(b'{"header": 1}\n{"context": "x"}\n')[:-12], "not a readable gzip file"),
    (b"plain text, not gzip", ":1: not JSON"),
    (gzip.compress(b'{"header": 1}\n{"context": "x", bad\n'), ":2: not JSON"),
    (gzip.compress(b'{"header": 1}\n\xff\xfe\n'), ":2: not valid UTF-8"),
    (gzip.compress(b'{"header": 1}\n{"context": "x"}\n'), ":2: expected an MRQA record"),
])
def test_a_bad_mrqa_file_is_one_line_naming_it(tmp_path, capsys, content, says):
    path = tmp_path / "set.jsonl.gz"
    path.write_bytes(content)
    assert main(["evalset", "--mrqa", str(path), "--output", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "set.jsonl.gz" in err and says in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_a_beir_folder_says_what_it_left_out(tmp_path, capsys):
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text('{"_id": "d1", "title": "T", "text": "The answer is here."}\n')
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "where is it?"}\n')
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td9\t1\nq7\td1\t1\n")
    assert main(["evalset", "--beir", str(beir), "--output", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "1 judged queries of test.tsv not in queries.jsonl left out" in err
    assert "1 judgements of documents not in corpus.jsonl left out" in err
    assert read_qrels(tmp_path / "out" / "qrels.txt") == {"q1": {"d1": 1}}


# --- the walkthrough's evaluation inputs: runs that cannot be scored, coverage, sets written ------------------

def _one_line_error(cli, *argv) -> str:
    rc, _, err = cli(*argv)
    assert rc == 1 and err.count("\n") == 1, (rc, err)
    return err


def test_a_run_of_sentences_against_document_qrels_is_refused_and_says_run_documents(tmp_path, cli):
    from sparc_es.evaluation.measures import score_file

    (tmp_path / "qrels.txt").write_text("q1 0 Super_Bowl-0 1\nq2 0 Super_Bowl-1 1\nq2 0 Other-3 0\n")
    (tmp_path / "sentences.trec").write_text("q1 Q0 Super_Bowl-0#3c75 1 0.5 t\nq1 Q0 Other-3#d722 2 0.4 t\n"
                                             "q2 Q0 Super_Bowl-1#2e4b 1 0.5 t\n")
    err = _one_line_error(cli, "eval", "--run", tmp_path / "sentences.trec", "--qrels", tmp_path / "qrels.txt")
    assert "sentences.trec: it ranks sentences (e.g. 'Super_Bowl-0#3c75')" in err and "judge documents" in err
    assert "sparc-es run --documents" in err and "0.00" in err
    # the reverse: documents against qrels of sentences
    (tmp_path / "sq.txt").write_text("q1 0 Super_Bowl-0#3c75 1\n")
    (tmp_path / "documents.trec").write_text("q1 Q0 Super_Bowl-0 1 0.5 t\n")
    err = _one_line_error(cli, "eval", "--run", tmp_path / "documents.trec", "--qrels", tmp_path / "sq.txt")
    assert "ranks documents (e.g. 'Super_Bowl-0') and the qrels judge sentences" in err and "without --documents" in err
    # ids of another collection altogether, with --baseline too
    (tmp_path / "other.trec").write_text("q1 Q0 x9 1 0.5 t\nq2 Q0 x8 1 0.5 t\n")
    for argv in (["--run", tmp_path / "other.trec"],
                 ["--run", tmp_path / "sentences.trec", "--baseline", tmp_path / "other.trec"]):
        err = _one_line_error(cli, "eval", *argv, "--qrels", tmp_path / "qrels.txt")
        assert "none of the documents it ranks for the 2 queries the qrels judge is judged there" in err or \
            "it ranks sentences" in err, err
    with pytest.raises(InputError, match="other.trec: none of the documents it ranks"):
        score_file(tmp_path / "other.trec", read_qrels(tmp_path / "qrels.txt"))
    # a run of the qrels' documents that finds no relevant one is a real 0.00, scored: the ids are judged
    (tmp_path / "poor.trec").write_text("q1 Q0 Other-3 1 0.5 t\nq2 Q0 Other-3 1 0.5 t\n")
    rc, out, _ = cli("eval", "--run", tmp_path / "poor.trec", "--qrels", tmp_path / "qrels.txt")
    assert rc == 0 and "MRR@1000     0.00" in out


@pytest.mark.parametrize("document, sentence", [("a.md", "a.md#1a2b3c4d"), ("a.md", "a.md#1a2b3c4d-2"),
                                                ("squadsmall-0", "squadsmall-0-1"),
                                                ("docsqa-3", "docsqa-3-1a2b3c4d-2")],
                         ids=["corpus", "corpus, repeated sentence", "mrqa set", "set of a splitter's sentences"])
def test_a_run_of_documents_against_sentence_qrels_says_rank_sentences(tmp_path, cli, document, sentence):
    """Only doc#key qrels gave the hint: an evaluation set's (squadsmall-0-1) gave "different collections?"."""
    (tmp_path / "qrels.txt").write_text(f"q1 0 {sentence} 1\nq1 0 other-9 0\n")
    (tmp_path / "documents.trec").write_text(f"q1 Q0 {document} 1 0.5 t\nq1 Q0 elsewhere 2 0.4 t\n")
    err = _one_line_error(cli, "eval", "--run", tmp_path / "documents.trec", "--qrels", tmp_path / "qrels.txt")
    assert f"it ranks documents (e.g. '{document}') and the qrels judge sentences (e.g. '{sentence}')" in err
    assert "without --documents" in err
    with pytest.raises(SparcError, match="the run: it ranks documents"):
        evaluate({"q1": {document: 1.0}}, {"q1": {sentence: 1}})
    # a run id that a judged id continues otherwise is no document of it: the general message
    with pytest.raises(SparcError, match="different collections"):
        evaluate({"q1": {document[:-1]: 1.0}}, {"q1": {sentence: 1}})


def test_eval_says_how_many_judged_queries_a_run_leaves_out(tmp_path, cli):
    (tmp_path / "qrels.txt").write_text("".join(f"q{i} 0 d{i} 1\n" for i in range(6)))
    (tmp_path / "all.trec").write_text("".join(f"q{i} Q0 d{i} 1 1.0 t\n" for i in range(6)))
    (tmp_path / "four.trec").write_text("".join(f"q{i} Q0 d{i} 1 1.0 t\n" for i in range(4)))
    rc, out, err = cli("eval", "--run", tmp_path / "all.trec", "--qrels", tmp_path / "qrels.txt")
    assert rc == 0 and err == ""
    rc, out, err = cli("eval", "--run", tmp_path / "four.trec", "--qrels", tmp_path / "qrels.txt")
    assert rc == 0 and "MRR@1000    66.67" in out
    four = tmp_path / "four.trec"
    assert err == f"sparc-es: warning: 2 of 6 judged queries have no results in {four} (counted as 0)\n"
    rc, out, _ = cli("eval", "--run", tmp_path / "four.trec", "--qrels", tmp_path / "qrels.txt", "--json")
    assert json.loads(out)["unanswered"] == 2
    # against a baseline of other queries: each run's count, and that they differ
    rc, out, err = cli("eval", "--run", tmp_path / "four.trec", "--baseline", tmp_path / "all.trec",
                       "--qrels", tmp_path / "qrels.txt")
    assert rc == 0 and "MRR@1000    66.67 100.00 -33.33" in out
    lines = err.splitlines()
    assert len(lines) == 2 and "2 of 6 judged queries have no results in" in lines[0], err
    assert "answer different queries (4 and 6 of the 6 judged; 0 only in the run, 2 only in the baseline)" in lines[1]
    rc, out, err = cli("eval", "--run", tmp_path / "all.trec", "--baseline", tmp_path / "all.trec",
                       "--qrels", tmp_path / "qrels.txt")
    assert rc == 0 and err == ""


class _Sentences:
    """An engine of ``sentences`` hits in ``documents`` documents for every question, whatever it asks
    for: a corpus of that size."""

    def __init__(self, sentences: int, documents: int) -> None:
        self.sentences, self.documents = sentences, documents

    def batch_search(self, topics, k=1000, threads=1):
        from sparc_es.engines.base import Hit

        return {qid: [Hit(id=f"d{i % self.documents}#{i}", score=100.0 - i, doc=f"d{i % self.documents}")
                      for i in range(self.sentences)][:k] for qid, _ in topics}


def test_documents_short_of_k_are_counted_only_where_a_deeper_search_could_find_more(tmp_path):
    from sparc_es.evaluation.runs import RunFile, hit_documents, write_runs

    topics = [(f"q{i}", "what") for i in range(3)]
    # the whole corpus (140 sentences in 30 documents) is fewer than the depth: no deeper search helps
    [written] = write_runs([RunFile(_Sentences(140, 30), tmp_path / "small.trec")], topics, 1000, batch=2,
                           depth=1000, documents=hit_documents)
    assert written.short == 0 and (tmp_path / "small.trec").read_text().count("\n") == 3 * 30
    # a full depth of sentences in fewer documents than k: a deeper search could find more
    [written] = write_runs([RunFile(_Sentences(5000, 300), tmp_path / "big.trec")], topics, 1000, batch=2,
                           depth=1000, documents=hit_documents)
    assert written.short == 3
    # min_score cut the sentences: what is below it is below it deeper too
    [written] = write_runs([RunFile(_Sentences(5000, 300), tmp_path / "cut.trec")], topics, 1000, batch=2,
                           depth=1000, min_score=50.0, documents=hit_documents)
    assert written.short == 0


class _Answers:
    """An engine that finds one hit for the questions that name a word of ``corpus``, none otherwise."""

    def __init__(self, *corpus: str) -> None:
        self.corpus = corpus

    def batch_search(self, topics, k=1000, threads=1):
        from sparc_es.engines.base import Hit

        return {qid: [Hit(id=w, score=1.0) for w in self.corpus if w in question.split()][:k]
                for qid, question in topics if any(w in question.split() for w in self.corpus)}

    def describe(self):
        from sparc_es.engines.base import Description

        return Description("lucene")

    def close(self) -> None:
        pass


def test_run_says_which_topics_had_no_hit(tmp_path, cli, monkeypatch):
    """A topic without a hit writes no line, as in TREC runs, but the summary counted it as written."""
    from sparc_es.cli import run as run_verb

    monkeypatch.setattr(run_verb, "open_engine", lambda args: _Answers("lamp", "java"))
    topics = tmp_path / "topics.tsv"
    topics.write_text("q1\twhere is the lamp\nempty1\tnothing here\nq3\twhich java\nq7\tnor here\n")
    rc, out, err = cli("run", "--topics", topics, "--output", tmp_path / "run.trec", "--threads", 1, "--quiet")
    assert rc == 0, err
    assert out.startswith(f"wrote 4 queries to {tmp_path / 'run.trec'} in ") and \
        out.endswith("; 2 topics had no hit: empty1, q7\n"), out
    assert [line.split()[0] for line in (tmp_path / "run.trec").read_text().splitlines()] == ["q1", "q3"]
    topics.write_text("".join(f"n{i}\tnothing {i}\n" for i in range(7)) + "q1\tthe lamp\n")
    rc, out, _ = cli("run", "--topics", topics, "--output", tmp_path / "run.trec", "--threads", 1, "--quiet")
    assert rc == 0 and out.endswith("; 7 topics had no hit: n0, n1, n2, n3, n4, ...\n"), out
    topics.write_text("q1\tthe lamp\nq2\tthe java\n")  # every topic answered: nothing more said
    rc, out, _ = cli("run", "--topics", topics, "--output", tmp_path / "run.trec", "--threads", 1, "--quiet")
    assert rc == 0 and out.endswith("ms/query)\n") and "no hit" not in out, out


def test_evalset_data_that_does_not_exist_is_named(tmp_path, cli, monkeypatch):
    monkeypatch.setenv("SPARC_ES_DATA", str(tmp_path))  # not the folder the flag names
    missing = tmp_path / "nonexist"
    err = _one_line_error(cli, "evalset", "--domain", "squad", "--data", missing, "--output", tmp_path / "out")
    assert f"{missing}: --data: the data folder does not exist" in err and "SPARC_ES_DATA" not in err
    err = _one_line_error(cli, "table", "--data", missing, "--workdir", tmp_path / "w")
    assert "--data: the data folder does not exist" in err
    with pytest.raises(InputError, match="the data folder does not exist"):
        build_eval_set("newsqa", missing)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"NewsQA.jsonl.gz: not found in the data folder .*empty$"):
        build_eval_set("newsqa", tmp_path / "empty")
    err = _one_line_error(cli, "evalset", "--mrqa", tmp_path / "none.jsonl.gz", "--output", tmp_path / "out")
    assert "none.jsonl.gz: MRQA file not found" in err and "SPARC_ES_DATA" not in err
    assert not (tmp_path / "out").exists()


MRQA = (b'{"header": {"dataset": "x"}}\n'
        b'{"context": "Paris is the capital of France. It is large.", "qas": [{"qid": "q1", '
        b'"question": "What is the capital of France?", "detected_answers": [{"text": "Paris", '
        b'"char_spans": [[0, 4]]}]}]}\n')


def test_evalset_reads_an_mrqa_file_gzipped_or_not(tmp_path, cli):
    (tmp_path / "plain.jsonl").write_bytes(MRQA)
    (tmp_path / "zipped.jsonl.gz").write_bytes(gzip.compress(MRQA))
    (tmp_path / "misnamed.jsonl.gz").write_bytes(MRQA)  # the bytes decide, not the name
    sets = [tmp_path / f"set-{n}" for n in range(3)]
    for name, folder in zip(("plain.jsonl", "zipped.jsonl.gz", "misnamed.jsonl.gz"), sets):
        rc, out, err = cli("evalset", "--mrqa", tmp_path / name, "--name", "x", "--output", folder)
        assert rc == 0 and "2 sentences, 1 merged queries, 1 sentence judgements" in out, err
    assert len({(s / "corpus.jsonl").read_bytes() for s in sets}) == 1
    assert len({(s / "qrels.txt").read_bytes() for s in sets}) == 1


def test_evalset_refuses_a_flag_its_source_ignores(tmp_path, cli):
    """--split with --mrqa and --name with --domain were ignored without a word (the set came out as squad)."""
    (tmp_path / "qa.jsonl").write_bytes(MRQA)
    err = _one_line_error(cli, "evalset", "--mrqa", tmp_path / "qa.jsonl", "--split", "dev", "--output", tmp_path / "o")
    assert "--split goes with --beir" in err
    err = _one_line_error(cli, "evalset", "--domain", "squad", "--name", "mine", "--output", tmp_path / "o")
    assert "--name goes with --mrqa, --beir or --docs: the project's set 'squad' keeps its name" in err
    assert not (tmp_path / "o").exists()
    rc, out, err = cli("evalset", "--mrqa", tmp_path / "qa.jsonl", "--name", "mine", "--output", tmp_path / "o")
    assert rc == 0 and out.startswith("mine: ") and (tmp_path / "o" / "qrels.txt").read_text().startswith("q1 0 mine-")


def test_evalset_refuses_an_existing_folder_and_replaces_only_its_own(tmp_path, cli):
    (tmp_path / "qa.jsonl").write_bytes(MRQA)
    out = tmp_path / "set"
    argv = ["evalset", "--mrqa", tmp_path / "qa.jsonl", "--output", out]
    rc, _, _ = cli(*argv)
    assert rc == 0 and (out / ".sparc-es").is_file()  # marked, as every folder sparc-es makes
    (out / "qrels.txt").write_text("edited by hand\n")
    err = _one_line_error(cli, *argv)
    assert f"{out}: already exists; pass --overwrite" in err
    assert (out / "qrels.txt").read_text() == "edited by hand\n"
    rc, _, _ = cli(*argv, "--overwrite")
    assert rc == 0 and (out / "qrels.txt").read_text().startswith("q1 0 qa-0-") and (out / ".sparc-es").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["qa.jsonl", "set"]  # nothing left beside it
    # a folder sparc-es did not make is never deleted, --overwrite or not
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me\n")
    err = _one_line_error(cli, "evalset", "--mrqa", tmp_path / "qa.jsonl", "--output", mine, "--overwrite")
    assert "was not made by sparc-es" in err and (mine / "notes.txt").read_text() == "keep me\n"
    # an empty folder is written into; a set written before folders were marked is replaced
    (tmp_path / "empty").mkdir()
    assert cli("evalset", "--mrqa", tmp_path / "qa.jsonl", "--output", tmp_path / "empty")[0] == 0
    (out / ".sparc-es").unlink()
    assert cli(*argv, "--overwrite")[0] == 0 and (out / ".sparc-es").is_file()


def test_run_tag_takes_describes_enums():
    """run_tag(..., engine.describe().hybrid) gave "sparc-es-lucene-HybridMethod.SUM0.35"."""
    from sparc_es.engines.base import EngineKind, HybridMethod
    from sparc_es.evaluation.trec import run_tag

    assert run_tag(EngineKind.LUCENE, HybridMethod.SUM, 0.35) == run_tag("lucene", "sum", 0.35) == \
        "sparc-es-lucene-sum0.35"


def test_a_topics_files_header_line_is_not_a_question(tmp_path):
    """A 'qid<TAB>question' first line became query "qid" in the run, its top hit scoring 1.000."""
    from sparc_es.evaluation.trec import read_topics

    path = tmp_path / "t.tsv"
    path.write_text("qid\tquestion\nq1\tWhich Java?\nq2\tWhere is the lamp?\n")
    assert list(read_topics(path)) == [("q1", "Which Java?"), ("q2", "Where is the lamp?")]
    path.write_text("q1\tWhich Java?\nqid\tquestion\n")  # past the first line, a query like any other
    assert list(read_topics(path)) == [("q1", "Which Java?"), ("qid", "question")]


@pytest.mark.parametrize("header", ["qid\tquery_text", "id\ttitle", "_id\ttext", "query-id\tquery",
                                    "Topic_ID\tQuestion", "number\ttopic"])
def test_a_topics_header_of_usual_column_names_is_not_a_question(tmp_path, header):
    """Only 'qid<TAB>question' and 'query_id<TAB>text' were headers: 'id<TAB>title' was searched as query 'id'."""
    from sparc_es.evaluation.trec import read_topics

    path = tmp_path / "t.tsv"
    path.write_text(f"{header}\nq1\tWhich Java?\n")
    assert list(read_topics(path)) == [("q1", "Which Java?")]


@pytest.mark.parametrize("first", ["id\tWhich Java?", "qid\ttitle of the page", "question\tquery", "7\ttext"])
def test_a_first_topic_is_never_taken_for_a_header(tmp_path, first):
    from sparc_es.evaluation.trec import read_topics

    path = tmp_path / "t.tsv"
    path.write_text(f"{first}\nq1\tWhich Java?\n")
    assert list(read_topics(path)) == [tuple(first.split("\t")), ("q1", "Which Java?")]


def test_a_topics_line_with_a_third_column_is_refused_at_its_line(tmp_path):
    """'q1<TAB>Who won?<TAB>Denver Broncos' was searched as 'Who won?\tDenver Broncos': the answer leaked in."""
    from sparc_es.evaluation.trec import read_topics

    path = tmp_path / "t.tsv"
    path.write_text("q0\tWho lost?\nq1\tWho won?\tDenver Broncos\n")
    with pytest.raises(InputError, match=r"t.tsv:2: expected 'qid<TAB>question', not 3 columns"):
        list(read_topics(path))
    path.write_text("qid\tquestion\tanswer\nq1\tWho won?\tDenver Broncos\n")  # a header does not excuse it
    with pytest.raises(InputError, match=r"t.tsv:1: expected 'qid<TAB>question', not 3 columns"):
        list(read_topics(path))
    path.write_text("q1\tWho won?\t\r\n")  # an empty last column, as spreadsheets leave: nothing is added
    assert list(read_topics(path)) == [("q1", "Who won?")]


def test_a_run_writer_used_outside_its_with_says_how_to_use_it(tmp_path):
    from sparc_es.engines.base import Hit
    from sparc_es.errors import SparcError
    from sparc_es.evaluation.trec import TrecRunWriter

    with pytest.raises(SparcError, match="writes inside its with"):  # was AttributeError on None
        TrecRunWriter(tmp_path / "r.trec").write("q1", [Hit("a", 1.0)])
