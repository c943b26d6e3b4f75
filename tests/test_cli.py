"""The CLI end to end in a temporary folder, and its one-line errors for bad input."""

from __future__ import annotations

import json

import pytest

from sparc_es import encode as encode_module
from sparc_es.cli import main
from sparc_es.layout import DEFAULT_FACTOR


@pytest.fixture()
def corpus(tmp_path):
    lines = [{"id": f"s{i}", "text": t, "context": "A paragraph about engines and questions."}
             for i, t in enumerate(["Lucene stores integer impacts.", "Questions are bags of tokens.",
                                    "Elasticsearch keeps nine significant bits.", "The demo corpus is tiny.",
                                    "Sentences are encoded once.", "Scores are sums of stored weights."])]
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.jvm
def test_encode_index_search_run_explain(tmp_path, corpus, tiny_model_dir, capsys):
    enc, idx = tmp_path / "enc", tmp_path / "idx"
    rc, out, err = run_cli(capsys, "encode", "--corpus", corpus, "--output", enc, "--model", tiny_model_dir,
                           "--top-k", 32, "--quiet")
    assert rc == 0 and "encoded 6 sentences" in out, err
    meta = json.loads((enc / "meta.json").read_text())
    assert meta["sentences"] == 6 and meta["top_k"] == 32 and meta["factor"] == DEFAULT_FACTOR
    assert all(len(json.loads(line)["vector"]) <= 32 for line in open(enc / "vectors" / "vectors.jsonl"))

    rc, out, err = run_cli(capsys, "index", "--input", enc, "--index", idx)
    assert rc == 0 and "indexed 6 sentences" in out, err

    rc, out, err = run_cli(capsys, "search", "--index", idx, "--json", "-k", 3, "integer impacts in lucene")
    hits = json.loads(out)
    assert rc == 0 and 0 < len(hits) <= 3
    assert hits == sorted(hits, key=lambda h: -h["score"]) and {"id", "score", "text"} <= set(hits[0])

    rc, out, _ = run_cli(capsys, "search", "--index", idx, "Are questions bags of tokens?")
    assert rc == 0 and out.startswith("Q: Are questions") and "  1. " in out

    topics = tmp_path / "topics.tsv"
    topics.write_text("q1\tintegers in lucene\nq2\tbags of tokens\n")
    rc, out, err = run_cli(capsys, "run", "--index", idx, "--topics", topics, "--output", tmp_path / "run.trec",
                           "-k", 5, "--tag", "tiny")
    assert rc == 0, err
    rows = [line.split() for line in (tmp_path / "run.trec").read_text().splitlines()]
    assert {r[0] for r in rows} == {"q1", "q2"} and all(len(r) == 6 and r[1] == "Q0" and r[5] == "tiny" for r in rows)
    for qid in ("q1", "q2"):
        ranks = [(int(r[3]), float(r[4])) for r in rows if r[0] == qid]
        assert [r for r, _ in ranks] == list(range(1, len(ranks) + 1))
        assert [s for _, s in ranks] == sorted((s for _, s in ranks), reverse=True)

    rc, out, _ = run_cli(capsys, "explain", "--model", tiny_model_dir, "--json", "--top", 5, "Paris is big.")
    pairs = json.loads(out)
    assert rc == 0 and len(pairs) == 5 and pairs[0]["weight"] >= pairs[-1]["weight"] > 0

    for method in ("rrf", "sum"):
        rc, out, err = run_cli(capsys, "search", "--index", idx, "--hybrid", method, "--json", "-k", 6,
                               "integer impacts in lucene")
        hits = json.loads(out)
        assert rc == 0 and hits and hits[0]["id"] == "s0", err  # the one sentence BM25 and SPARC agree on
    rc, _, err = run_cli(capsys, "search", "--index", idx, "--hybrid", "sum", "--hybrid-weight", 2, "lucene")
    assert rc == 1 and "between 0 and 1" in err

    # The BM25 baseline over the same sentences, from the index that `index` built beside the impacts.
    rc, out, err = run_cli(capsys, "search", "--index", idx, "--engine", "bm25", "--json", "integer impacts in lucene")
    hits = json.loads(out)
    assert rc == 0 and hits[0]["id"] == "s0" and hits[0]["text"] == "Lucene stores integer impacts.", err
    rc, out, err = run_cli(capsys, "run", "--index", idx, "--engine", "bm25", "--topics", topics, "--output",
                           tmp_path / "bm25.trec", "--tag", "bm25")
    rows = [line.split() for line in (tmp_path / "bm25.trec").read_text().splitlines()]
    assert rc == 0 and {r[0] for r in rows} == {"q1", "q2"} and all(r[5] == "bm25" for r in rows), err
    rc, _, err = run_cli(capsys, "search", "--index", idx, "--engine", "bm25", "--hybrid", "rrf", "lucene")
    assert rc == 1 and "--engine lucene" in err


def test_top_k_bounds_the_neural_part_and_the_summary_says_what_is_stored(tmp_path, corpus, capsys):
    """With the default model's lexical term a sentence stores K neural tokens plus its own tokens
    (and stem siblings) outside them: the manifest and the summary give the most stored."""
    rc, out, err = run_cli(capsys, "encode", "--corpus", corpus, "--output", tmp_path / "enc", "--top-k", 8,
                           "--keep-floats", "--quiet")
    assert rc == 0, err
    records = [json.loads(line) for line in open(tmp_path / "enc" / "vectors" / "vectors.jsonl")]
    most = max(len(r["weights"]) for r in records)
    meta = json.loads((tmp_path / "enc" / "meta.json").read_text())
    assert meta["max_postings"] == max(len(r["vector"]) for r in records) and most > 8
    assert f"at most {meta['max_postings']} tokens stored per sentence" in out
    for r in records:  # beyond the lexical tokens, at most K
        assert len(set(r["weights"]) - set(r["lexical"])) <= 8
    with pytest.raises(SystemExit):
        main(["encode", "--help"])
    assert "stores up to K plus" in " ".join(capsys.readouterr().out.split())


def test_idf_and_adapt_from_the_cli(tmp_path, corpus, capsys):
    rc, out, err = run_cli(capsys, "adapt", "--model", "splade-bert-tiny", "--corpus", corpus, "--output",
                           tmp_path / "adapted", "--steps", 2, "--batch-size", 4, "--quiet")
    assert rc == 0 and "adapted E on 6 sentences" in out, err
    rc, out, err = run_cli(capsys, "adapt", "--model", "splade-bert-tiny", "--corpus", corpus, "--output",
                           tmp_path / "adapted", "--steps", 2, "--quiet")
    assert rc == 1 and "already holds a model" in err
    rc, out, err = run_cli(capsys, "encode", "--corpus", corpus, "--output", tmp_path / "enc", "--model",
                           tmp_path / "adapted", "--idf", "--quiet")
    assert rc == 0 and "IDF-weighted" in out, err
    meta = json.loads((tmp_path / "enc" / "meta.json").read_text())
    assert meta["idf"] and meta["idf_weighting"]["documents"] == 6 and meta["model"]["adaptation"]["steps"] == 2


def test_encode_resumes_after_interruption(tmp_path, corpus, tiny_model_dir, capsys, monkeypatch):
    args = ["encode", "--corpus", corpus, "--model", tiny_model_dir, "--shard-size", 2, "--quiet"]
    assert run_cli(capsys, *args, "--output", tmp_path / "whole")[0] == 0

    real, calls = encode_module._write_pieces, []

    def dies_on_third_shard(*a, **kw):
        calls.append(1)
        if len(calls) == 3:
            a[0].write(b'{"id": "half a line')  # a shard cut off mid-write
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(encode_module, "_write_pieces", dies_on_third_shard)
    rc, _, err = run_cli(capsys, *args, "--output", tmp_path / "cut")
    assert rc == 130 and "interrupted" in err
    assert not (tmp_path / "cut" / "meta.json").exists()

    monkeypatch.setattr(encode_module, "_write_pieces", lambda *a, **kw: (calls.append(1), real(*a, **kw)))
    calls.clear()
    rc, _, err = run_cli(capsys, *args, "--output", tmp_path / "cut")
    assert rc == 0, err
    assert len(calls) == 1  # only the unfinished third shard was encoded again
    vectors = "vectors/vectors.jsonl"
    assert (tmp_path / "cut" / vectors).read_text() == (tmp_path / "whole" / vectors).read_text()
    assert json.loads((tmp_path / "cut" / "meta.json").read_text())["sentences"] == 6

    rc, _, err = run_cli(capsys, *args, "--output", tmp_path / "cut")
    assert rc == 1 and "--overwrite" in err


@pytest.mark.parametrize("content, expected", [
    (b'{"id": "a", "text": "fine"}\n{"id": "b", "text": oops}\n', "corpus.jsonl:2: malformed JSON"),
    (b"\n\n", "empty corpus"),
    (b'{"id": "a", "text": ""}\n', 'corpus.jsonl:1: empty sentence'),
    (b'{"id": "a", "text": "caf\xe9"}\n', "corpus.jsonl:1: not valid UTF-8"),
])
def test_bad_input_is_one_line_and_non_zero(tmp_path, tiny_model_dir, capsys, content, expected):
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(content)
    rc, _, err = run_cli(capsys, "encode", "--corpus", path, "--output", tmp_path / "enc",
                         "--model", tiny_model_dir, "--quiet")
    assert rc == 1
    assert err.count("\n") == 1 and err.startswith("sparc-es: error: ") and expected in err
    assert "Traceback" not in err


def test_long_sentences_are_truncated_counted_and_reported(tmp_path, tiny_model_dir, capsys):
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"id": "long", "text": "many words here " * 20}) + "\n"
                    + json.dumps({"id": "short", "text": "Short."}) + "\n")
    rc, out, err = run_cli(capsys, "encode", "--corpus", path, "--output", tmp_path / "enc",
                           "--model", tiny_model_dir, "--max-length", 16, "--quiet")
    assert rc == 0 and "encoded 2 sentences" in out
    assert "warning: 1 sentences were longer than 16 tokens and were truncated (e.g. long)" in err
    assert json.loads((tmp_path / "enc" / "meta.json").read_text())["truncated_sentences"] == 1


def test_missing_things_are_clear_errors(tmp_path, capsys):
    rc, _, err = run_cli(capsys, "search", "--index", tmp_path / "nothing", "question")
    assert rc == 1 and "not a finished sparc-es encoded folder or index" in err
    rc, _, err = run_cli(capsys, "explain", "--model", tmp_path / "nothing", "A sentence.")
    assert rc == 1 and "no such model folder" in err
    rc, _, err = run_cli(capsys, "run", "--engine", "bm25", "--index", tmp_path / "nothing", "--topics",
                         tmp_path / "t.tsv", "--output", tmp_path / "r.trec")
    assert rc == 1 and "topics file not found" in err
    with pytest.raises(SystemExit) as e:
        main(["encode", "--output", str(tmp_path)])
    assert e.value.code == 2
    assert "--corpus" in capsys.readouterr().err


@pytest.mark.jvm
def test_demo_answers_with_the_default_model(tmp_path, capsys):
    rc, out, err = run_cli(capsys, "demo", "--workdir", tmp_path / "demo", "--quiet", "-k", 2)
    assert rc == 0, err
    answers: dict[str, list[str]] = {}
    for line in out.splitlines():
        if line.startswith("Q:"):
            question = line.strip()
            answers[question] = []
        elif line.startswith(("  1.", "  2.")):
            answers[question].append(line.strip())
    assert len(answers) == 4 and all(len(a) == 2 for a in answers.values())
    assert "Pyserini needs Java 21" in answers["Q: Which Java version does Pyserini need?"][0]
    # The current default ranks the section heading "Encoding sentences" first here, the answer second.
    assert "resumes where it stopped" in " ".join(answers["Q: What happens when the encoding is interrupted?"])


@pytest.mark.parametrize("flag, value, expected", [
    ("--factor", "nan", "factor must be a finite number above 0"),
    ("--factor", "inf", "factor must be a finite number above 0"),
    ("--factor", "-1", "factor must be a finite number above 0"),
    ("--factor", "1e12", "more than Lucene can store"),
    ("--top-k", "0", "top-K must be at least 1"),
    ("--max-length", "4", "at least 8 tokens"),
])
def test_bad_numbers_are_refused_by_the_library(tmp_path, corpus, tiny_model_dir, capsys, flag, value, expected):
    rc, _, err = run_cli(capsys, "encode", "--corpus", corpus, "--output", tmp_path / "enc", "--model",
                         tiny_model_dir, flag, value, "--quiet")
    assert rc == 1 and expected in err and err.count("\n") == 1, err


@pytest.mark.jvm
def test_search_defaults_to_the_hybrid_and_says_when_it_cannot(tmp_path, corpus, tiny_model_dir, capsys):
    enc = tmp_path / "enc"
    assert run_cli(capsys, "encode", "--corpus", corpus, "--output", enc, "--model", tiny_model_dir, "--quiet")[0] == 0
    assert run_cli(capsys, "index", "--input", enc, "--index", tmp_path / "idx")[0] == 0
    question = "integer impacts in lucene"

    def hits(*flags, index=tmp_path / "idx"):
        rc, out, err = run_cli(capsys, "search", "--index", index, "--json", "-k", 6, *flags, question)
        assert rc == 0, err
        return [(h["id"], round(h["score"], 9)) for h in json.loads(out)], err

    from sparc_es.engines.hybrid import BM25_WEIGHT

    default, _ = hits()
    assert default == hits("--hybrid", "sum", "--hybrid-weight", BM25_WEIGHT)[0]
    alone, _ = hits("--hybrid", "none")
    assert alone != default and all(s > 1 for _, s in alone)  # SPARC's own scores, not fused ones in [0, 1]
    assert all(0 <= s <= 1 for _, s in default)

    assert run_cli(capsys, "index", "--input", enc, "--index", tmp_path / "nobm25", "--no-bm25")[0] == 0
    got, err = hits(index=tmp_path / "nobm25")
    assert got == alone and "no BM25 index" in err  # said, not silent

    for flags in (("--hybrid", "none", "--hybrid-weight", 0.5), ("--hybrid", "rrf", "--hybrid-weight", 0.5)):
        rc, _, err = run_cli(capsys, "search", "--index", tmp_path / "idx", *flags, question)
        assert rc == 1 and "--hybrid-weight" in err


def test_encode_weighs_by_idf_by_default_and_an_update_keeps_its_statistics(tmp_path, tiny_model_dir, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Lucene stores integer impacts. Questions are bags of tokens.\n")
    (docs / "b.txt").write_text("Elasticsearch keeps nine significant bits.\n")
    enc, model = tmp_path / "enc", ("--model", tiny_model_dir, "--quiet")
    assert run_cli(capsys, "encode", "--corpus", docs, "--output", enc, *model)[0] == 0
    meta = json.loads((enc / "meta.json").read_text())
    assert meta["idf"] is True and meta["idf_weighting"]["documents"] == 3
    before = {json.loads(line)["id"]: line for line in open(enc / "vectors" / "vectors.jsonl")}

    (docs / "c.txt").write_text("A new file about tokens.\n")
    assert run_cli(capsys, "encode", "--corpus", docs, "--output", enc, "--update", *model)[0] == 0
    after = {json.loads(line)["id"]: line for line in open(enc / "vectors" / "vectors.jsonl")}
    assert after.keys() == before.keys() | {"c.txt#0"}
    assert all(after[i] == line for i, line in before.items())  # the first encode's statistics, kept
    assert json.loads((enc / "meta.json").read_text())["idf_weighting"]["documents"] == 3

    rc, _, err = run_cli(capsys, "encode", "--corpus", docs, "--output", enc, "--update", "--no-idf", *model)
    assert rc == 1 and "with IDF weighting" in err
    assert run_cli(capsys, "encode", "--corpus", docs, "--output", tmp_path / "plain", "--no-idf", *model)[0] == 0
    assert json.loads((tmp_path / "plain" / "meta.json").read_text())["idf"] is False
