"""The CLI end to end in a temporary folder, and its one-line errors for bad input."""

from __future__ import annotations

import json
import re
import sys

import pytest

from sparc_es.cli import main
from sparc_es.corpus.sources import sentence_key, split_document
from sparc_es.encode import run as encode_module
from sparc_es.layout.records import DEFAULT_FACTOR


@pytest.fixture()
def corpus(tmp_path):
    lines = [{"id": f"s{i}", "text": t, "context": "A paragraph about engines and questions."}
             for i, t in enumerate(["Lucene stores integer impacts.", "Questions are bags of tokens.",
                                    "Elasticsearch keeps nine significant bits.", "The demo corpus is tiny.",
                                    "Sentences are encoded once.", "Scores are sums of stored weights."])]
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


@pytest.mark.jvm
def test_encode_index_search_run_explain(tmp_path, corpus, tiny_model_dir, cli, monkeypatch):
    from sparc_es.evaluation import runs as runs_module

    enc, idx = tmp_path / "enc", tmp_path / "idx"
    rc, out, err = cli("encode", "--corpus", corpus, "--output", enc, "--model", tiny_model_dir,
                       "--top-k", 32, "--quiet")
    assert rc == 0 and "encoded 6 sentences" in out, err
    meta = json.loads((enc / "meta.json").read_text())
    assert meta["sentences"] == 6 and meta["top_k"] == 32 and meta["factor"] == DEFAULT_FACTOR
    assert all(len(json.loads(line)["vector"]) <= 32 for line in open(enc / "vectors" / "vectors.jsonl"))

    rc, out, err = cli("index", "--input", enc, "--index", idx)
    assert rc == 0 and "indexed 6 sentences" in out, err
    on_disk = sum(p.stat().st_size for p in idx.rglob("*") if p.is_file()) / 1e6  # not the Lucene folder alone
    assert f"; {on_disk:,.1f} MB on disk with the sentence store and the BM25 index)" in out, out

    rc, out, err = cli("search", "--index", idx, "--json", "-k", 3, "integer impacts in lucene")
    hits = json.loads(out)
    assert rc == 0 and 0 < len(hits) <= 3
    assert hits == sorted(hits, key=lambda h: -h["score"]) and {"id", "score", "text"} <= set(hits[0])

    rc, out, _ = cli("search", "--index", idx, "Are questions bags of tokens?")
    assert rc == 0 and out.startswith("Q: Are questions") and "  1. " in out

    topics = tmp_path / "topics.tsv"
    topics.write_text("q1\tintegers in lucene\nq2\tbags of tokens\n")
    rc, out, err = cli("run", "--index", idx, "--topics", topics, "--output", tmp_path / "run.trec",
                       "-k", 5, "--tag", "tiny")
    assert rc == 0, err
    rows = [line.split() for line in (tmp_path / "run.trec").read_text().splitlines()]
    assert {r[0] for r in rows} == {"q1", "q2"} and all(len(r) == 6 and r[1] == "Q0" and r[5] == "tiny" for r in rows)
    for qid in ("q1", "q2"):
        ranks = [(int(r[3]), float(r[4])) for r in rows if r[0] == qid]
        assert [r for r, _ in ranks] == list(range(1, len(ranks) + 1))
        assert [s for _, s in ranks] == sorted((s for _, s in ranks), reverse=True)

    # a second run to the same file says it replaced it; a stopped one keeps it as it was, and says so
    written = (tmp_path / "run.trec").read_text()
    rc, out, err = cli("run", "--index", idx, "--topics", topics, "--output", tmp_path / "run.trec", "-k", 5,
                       "--tag", "tiny")
    assert rc == 0 and f"wrote 2 queries to {tmp_path / 'run.trec'} (replacing the run file there)" in out, out
    from sparc_es.cli import run as run_cli

    monkeypatch.setattr(run_cli, "RUN_BATCH", 1)
    real = runs_module._search_batch
    monkeypatch.setattr(runs_module, "_search_batch", lambda engine, part, *a: (
        real(engine, part, *a) if part[0][0] == "q1" else (_ for _ in ()).throw(KeyboardInterrupt)))
    rc, out, err = cli("run", "--index", idx, "--topics", topics, "--output", tmp_path / "run.trec", "-k", 5,
                       "--tag", "tiny", "--quiet")
    assert rc == 130 and err == ("sparc-es: run stopped after 1 of 2 queries: the run file already there is as it "
                                 "was; run the same command again to search them all\n"), err
    assert (tmp_path / "run.trec").read_text() == written and not (tmp_path / "run.trec.partial").exists()
    monkeypatch.undo()

    rc, out, _ = cli("explain", "--model", tiny_model_dir, "--json", "--top", 5, "Paris is big.")
    pairs = json.loads(out)
    assert rc == 0 and len(pairs) == 5 and pairs[0]["weight"] >= pairs[-1]["weight"] > 0

    for method in ("rrf", "sum", "minmax"):
        rc, out, err = cli("search", "--index", idx, "--hybrid", method, "--json", "-k", 6,
                           "integer impacts in lucene")
        hits = json.loads(out)
        assert rc == 0 and hits and hits[0]["id"] == "s0", err  # the one sentence BM25 and SPARC agree on
    rc, _, err = cli("search", "--index", idx, "--hybrid", "sum", "--hybrid-weight", 2, "lucene")
    assert rc == 1 and "between 0 and 1" in err

    # The BM25 baseline over the same sentences, from the index that `index` built beside the impacts.
    rc, out, err = cli("search", "--index", idx, "--engine", "bm25", "--json", "integer impacts in lucene")
    hits = json.loads(out)
    assert rc == 0 and hits[0]["id"] == "s0" and hits[0]["text"] == "Lucene stores integer impacts.", err
    rc, out, err = cli("run", "--index", idx, "--engine", "bm25", "--topics", topics, "--output",
                       tmp_path / "bm25.trec", "--tag", "bm25")
    rows = [line.split() for line in (tmp_path / "bm25.trec").read_text().splitlines()]
    assert rc == 0 and {r[0] for r in rows} == {"q1", "q2"} and all(r[5] == "bm25" for r in rows), err
    rc, _, err = cli("search", "--index", idx, "--engine", "bm25", "--hybrid", "rrf", "lucene")
    assert rc == 1 and "--engine lucene" in err


def test_top_k_bounds_the_neural_part_and_the_summary_says_what_is_stored(tmp_path, corpus, cli, capsys):
    """With the default model's lexical term a sentence stores K neural tokens plus its own tokens
    (and stem siblings) outside them: the manifest and the summary give the most stored."""
    rc, out, err = cli("encode", "--corpus", corpus, "--output", tmp_path / "enc", "--top-k", 8,
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


def test_idf_and_adapt_from_the_cli(tmp_path, corpus, cli):
    rc, out, err = cli("adapt", "--model", "splade-bert-tiny", "--corpus", corpus, "--output",
                       tmp_path / "adapted", "--steps", 2, "--batch-size", 4, "--quiet")
    assert rc == 0 and "adapted E on 6 sentences" in out, err
    fit = json.loads((tmp_path / "adapted" / "sparc_config.json").read_text())["adaptation"]["vocabulary_fit"]
    assert f"your corpus: {fit['share']:.1%} of its {fit['words']:,} words are split" in out
    assert "did not tell which" in out and "docs/adaptation.md" in out
    rc, out, err = cli("adapt", "--model", "splade-bert-tiny", "--corpus", corpus, "--output",
                       tmp_path / "adapted", "--steps", 2, "--quiet")
    assert rc == 1 and "already holds a model" in err
    rc, out, err = cli("encode", "--corpus", corpus, "--output", tmp_path / "enc", "--model",
                       tmp_path / "adapted", "--idf", "--quiet")
    assert rc == 0 and "IDF-weighted" in out, err
    meta = json.loads((tmp_path / "enc" / "meta.json").read_text())
    assert meta["idf"] and meta["idf_weighting"]["documents"] == 6 and meta["model"]["adaptation"]["steps"] == 2


def test_encode_resumes_after_interruption(tmp_path, corpus, tiny_model_dir, cli, monkeypatch):
    args = ["encode", "--corpus", corpus, "--model", tiny_model_dir, "--shard-size", 2, "--quiet"]
    assert cli(*args, "--output", tmp_path / "whole")[0] == 0

    real, calls = encode_module._write_pieces, []

    def dies_on_third_shard(*a, **kw):
        calls.append(1)
        if len(calls) == 3:
            a[0].write(b'{"id": "half a line')  # a shard cut off mid-write
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(encode_module, "_write_pieces", dies_on_third_shard)
    rc, _, err = cli(*args, "--output", tmp_path / "cut")
    assert rc == 130 and "interrupted" in err
    assert not (tmp_path / "cut" / "meta.json").exists()

    monkeypatch.setattr(encode_module, "_write_pieces", lambda *a, **kw: (calls.append(1), real(*a, **kw)))
    calls.clear()
    rc, _, err = cli(*args, "--output", tmp_path / "cut")
    assert rc == 0, err
    assert len(calls) == 1  # only the unfinished third shard was encoded again
    vectors = "vectors/vectors.jsonl"
    assert (tmp_path / "cut" / vectors).read_text() == (tmp_path / "whole" / vectors).read_text()
    assert json.loads((tmp_path / "cut" / "meta.json").read_text())["sentences"] == 6

    rc, _, err = cli(*args, "--output", tmp_path / "cut")
    assert rc == 1 and "--overwrite" in err


@pytest.mark.parametrize("content, expected", [
    (b'{"id": "a", "text": "fine"}\n{"id": "b", "text": oops}\n', "corpus.jsonl:2: malformed JSON"),
    (b"\n\n", "empty corpus"),
    (b'{"id": "a", "text": ""}\n', 'corpus.jsonl:1: empty sentence'),
    (b'{"id": "a", "text": "caf\xe9"}\n', "corpus.jsonl:1: not valid UTF-8"),
])
def test_bad_input_is_one_line_and_non_zero(tmp_path, tiny_model_dir, cli, content, expected):
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(content)
    rc, _, err = cli("encode", "--corpus", path, "--output", tmp_path / "enc",
                     "--model", tiny_model_dir, "--quiet")
    assert rc == 1
    assert err.count("\n") == 1 and err.startswith("sparc-es: error: ") and expected in err
    assert "Traceback" not in err


def test_long_sentences_are_truncated_counted_and_reported(tmp_path, tiny_model_dir, cli):
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"id": "long", "text": "many words here " * 20}) + "\n"
                    + json.dumps({"id": "short", "text": "Short."}) + "\n")
    rc, out, err = cli("encode", "--corpus", path, "--output", tmp_path / "enc",
                       "--model", tiny_model_dir, "--max-length", 16, "--quiet")
    assert rc == 0 and "encoded 2 sentences" in out
    assert "warning: 1 sentence was longer than 16 tokens and was truncated (e.g. long); raise --max-length to " \
        "keep it whole" in err
    assert json.loads((tmp_path / "enc" / "meta.json").read_text())["truncated_sentences"] == 1


def test_missing_things_are_clear_errors(tmp_path, cli, capsys):
    rc, _, err = cli("search", "--index", tmp_path / "nothing", "question")
    assert rc == 1 and f"{tmp_path / 'nothing'}: no such folder\n" in err
    rc, _, err = cli("explain", "--model", tmp_path / "nothing", "A sentence.")
    assert rc == 1 and "no such model folder" in err
    rc, _, err = cli("run", "--engine", "bm25", "--index", tmp_path / "nothing", "--topics",
                     tmp_path / "t.tsv", "--output", tmp_path / "r.trec")
    assert rc == 1 and "topics file not found" in err
    with pytest.raises(SystemExit) as e:
        main(["encode", "--output", str(tmp_path)])
    assert e.value.code == 2
    assert "--corpus" in capsys.readouterr().err
    from sparc_es.errors import StoreError
    from sparc_es.model.query import QueryEncoder

    with pytest.raises(StoreError, match="nothing: no such folder"):  # --tokenizer: not a model hub name
        QueryEncoder.load(tmp_path / "nothing")


@pytest.mark.jvm
def test_demo_answers_with_the_default_model(tmp_path, cli):
    rc, out, err = cli("demo", "--workdir", tmp_path / "demo", "--quiet", "-k", 2)
    assert rc == 0, err
    answers: dict[str, list[str]] = {}
    lines = out.splitlines()
    for n, line in enumerate(lines):
        if line.startswith("Q:"):
            question = line.strip()
            answers[question] = []
        elif line.startswith(("  1.", "  2.")):  # rank, score, where; the sentence next, its words marked
            answers[question].append(lines[n + 1].strip().replace("«", "").replace("»", ""))
    assert len(answers) == 4 and all(len(a) == 2 for a in answers.values())
    assert "Pyserini needs Java 21" in answers["Q: Which Java version does Pyserini need?"][0]
    # The current default ranks the section heading "Encoding sentences" first here, the answer second.
    assert "resumes where it stopped" in " ".join(answers["Q: What happens when the encoding is interrupted?"])
    # the encoding's time beside its rate (it gave the indexing's); the hint as this process was started
    assert re.search(r"encoded 43 sentences of demo/ in [\d.]+ s \([\d.]+ sentences/s\), indexed them in", out), out
    assert f"try  {sys.executable} -m sparc_es search --index" in out or "try  sparc-es search --index" in out, out


def test_the_commands_suggested_are_those_the_user_typed(monkeypatch):
    """The demo said "try  sparc-es search": not on PATH for a README reader, who runs .venv/bin/sparc-es."""
    from sparc_es.cli.output import invoked_as

    for argv0, expected in ((".venv/bin/sparc-es", ".venv/bin/sparc-es"), ("sparc-es", "sparc-es"),
                            ("/x/sparc_es/__main__.py", f"{sys.executable} -m sparc_es")):
        monkeypatch.setattr(sys, "argv", [argv0])
        assert invoked_as() == expected


@pytest.mark.parametrize("flag, value, expected", [
    ("--factor", "nan", "factor must be a finite number above 0"),
    ("--factor", "inf", "factor must be a finite number above 0"),
    ("--factor", "-1", "factor must be a finite number above 0"),
    ("--factor", "1e12", "more than Lucene can store"),
    ("--top-k", "0", "top-K must be at least 1"),
    ("--max-length", "4", "at least 8 tokens"),
])
def test_bad_numbers_are_refused_by_the_library(tmp_path, corpus, tiny_model_dir, cli, flag, value, expected):
    rc, _, err = cli("encode", "--corpus", corpus, "--output", tmp_path / "enc", "--model",
                     tiny_model_dir, flag, value, "--quiet")
    assert rc == 1 and expected in err and err.count("\n") == 1, err


@pytest.mark.jvm
def test_search_defaults_to_the_hybrid_and_says_when_it_cannot(tmp_path, corpus, tiny_model_dir, cli):
    enc = tmp_path / "enc"
    assert cli("encode", "--corpus", corpus, "--output", enc, "--model", tiny_model_dir, "--quiet")[0] == 0
    assert cli("index", "--input", enc, "--index", tmp_path / "idx")[0] == 0
    question = "integer impacts in lucene"

    def hits(*flags, index=tmp_path / "idx"):
        rc, out, err = cli("search", "--index", index, "--json", "-k", 6, *flags, question)
        assert rc == 0, err
        return [(h["id"], round(h["score"], 9)) for h in json.loads(out)], err

    from sparc_es.engines.hybrid import BM25_WEIGHT

    default, _ = hits()
    assert default == hits("--hybrid", "sum", "--hybrid-weight", BM25_WEIGHT)[0]
    alone, _ = hits("--hybrid", "none")
    assert alone != default and all(s > 1 for _, s in alone)  # SPARC's own scores, not fused ones in [0, 1]
    assert all(0 <= s <= 1 for _, s in default)

    assert cli("index", "--input", enc, "--index", tmp_path / "nobm25", "--no-bm25")[0] == 0
    got, err = hits(index=tmp_path / "nobm25")
    assert got == default and not err  # the default sums the BM25 terms of the impact index: no BM25 index needed
    rc, _, err = cli("search", "--index", tmp_path / "nobm25", "--hybrid", "minmax", question)
    assert rc == 1 and "no BM25 index" in err  # the client-side fusion does need it: said, not silent

    for flags in (("--hybrid", "none", "--hybrid-weight", 0.5), ("--hybrid", "rrf", "--hybrid-weight", 0.5)):
        rc, _, err = cli("search", "--index", tmp_path / "idx", *flags, question)
        assert rc == 1 and "--hybrid-weight" in err


def test_encode_weighs_by_idf_by_default_and_an_update_keeps_its_statistics(tmp_path, tiny_model_dir, cli):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Lucene stores integer impacts. Questions are bags of tokens.\n")
    (docs / "b.txt").write_text("Elasticsearch keeps nine significant bits.\n")
    enc, model = tmp_path / "enc", ("--model", tiny_model_dir, "--quiet")
    assert cli("encode", "--corpus", docs, "--output", enc, *model)[0] == 0
    meta = json.loads((enc / "meta.json").read_text())
    assert meta["idf"] is True and meta["idf_weighting"]["documents"] == 3
    before = {json.loads(line)["id"]: line for line in open(enc / "vectors" / "vectors.jsonl")}

    (docs / "c.txt").write_text("A new file about tokens.\n")
    assert cli("encode", "--corpus", docs, "--output", enc, "--update", *model)[0] == 0
    after = {json.loads(line)["id"]: line for line in open(enc / "vectors" / "vectors.jsonl")}
    assert after.keys() == before.keys() | {f"c.txt#{sentence_key('A new file about tokens.')}"}
    assert all(after[i] == line for i, line in before.items())  # the first encode's statistics, kept
    assert json.loads((enc / "meta.json").read_text())["idf_weighting"]["documents"] == 3

    rc, _, err = cli("encode", "--corpus", docs, "--output", enc, "--update", "--no-idf", *model)
    assert rc == 1 and "with IDF weighting" in err
    assert cli("encode", "--corpus", docs, "--output", tmp_path / "plain", "--no-idf", *model)[0] == 0
    assert json.loads((tmp_path / "plain" / "meta.json").read_text())["idf"] is False


def test_requantize_says_only_what_it_changed(tmp_path, tiny_model_dir, cli):
    """encode's warnings (truncated sentences and contexts, control characters) are said by encode;
    requantize, which reads the same sentences, says only what its factor changes: empty vectors."""
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"id": "long", "text": "many words here\u0007 " * 20, "context": "context " * 40}) + "\n"
                    + json.dumps({"id": "short", "text": "Short.", "context": "more context words " * 20}) + "\n")
    rc, _, err = cli("encode", "--corpus", path, "--output", tmp_path / "enc", "--model", tiny_model_dir,
                     "--max-length", 16, "--keep-floats", "--no-idf", "--quiet")
    assert rc == 0 and "was truncated" in err and "contexts were cut" in err and "control characters" in err, err
    rc, out, err = cli("requantize", "--input", tmp_path / "enc", "--output", tmp_path / "f10",
                       "--factor", 10)
    assert rc == 0 and "wrote 2 sentences" in out and err == "", err
    rc, _, err = cli("requantize", "--input", tmp_path / "enc", "--output", tmp_path / "f0",
                     "--factor", 0.001)
    assert rc == 0 and err == "sparc-es: warning: 2 sentences have no token weight above 0.5/factor and cannot be " \
                              "retrieved; raise --factor\n", err


def test_an_update_says_how_many_sentences_it_removed(tmp_path, tiny_model_dir, cli):
    """removed: the old folder's sentences whose ids the corpus no longer has (an edited sentence is
    encoded again, not removed; a sentence under a new id is new, and its old id removed)."""
    def write(rows):
        path = tmp_path / "corpus.jsonl"
        path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in rows))
        return path

    texts = ["Lucene stores integer impacts.", "Questions are bags of tokens.", "The demo corpus is tiny.",
             "Sentences are encoded once.", "Scores are sums of stored weights.", "Elasticsearch keeps nine bits."]
    args = ["--output", tmp_path / "enc", "--model", tiny_model_dir, "--quiet"]
    assert cli("encode", "--corpus", write([(f"s{i}", t) for i, t in enumerate(texts)]), *args)[0] == 0
    rows = [("s0", texts[0]), ("s1", texts[1] + " Edited."), ("s3", texts[3]), ("renamed", texts[4]),
            ("new", "A new sentence.")]  # s2 and s5 gone, s4 under a new id
    rc, out, err = cli("encode", "--corpus", write(rows), *args, "--update")
    assert rc == 0, err
    # the sentence under a new id is kept, not encoded again, and not counted as unchanged (its old id is removed)
    assert "2 encoded, 2 unchanged kept, 1 kept under a new id, 3 removed; 5 sentences in all" in out, out
    assert f"sparc-es encode: an index built from {tmp_path / 'enc'} before this update still holds its old " \
        f"sentences: build it again (sparc-es index --input {tmp_path / 'enc'} --index DIR --overwrite;" in err, err
    assert json.loads((tmp_path / "enc" / "meta.json").read_text())["removed"] == 3
    rc, out, err = cli("encode", "--corpus", write(rows), *args, "--update")
    assert rc == 0 and "0 encoded, 5 unchanged kept, 0 removed" in out and "still holds" not in out + err, out


def test_an_update_of_a_sentence_repeated_word_for_word_keeps_each_copy_under_its_own_id(tmp_path, tiny_model_dir,
                                                                                          cli):
    """Two copies of one sentence in one paragraph have the same text and context (one content hash)
    and two ids (#key, #key-2): an update with nothing changed said "1 kept under a new id" every
    time, the one record found for the hash being the other copy's."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "keys.md").write_text("# Keys\n\nPress Enter. Then type the name. Press Enter.\n")
    args = ["encode", "--corpus", tmp_path / "docs", "--output", tmp_path / "enc", "--model", tiny_model_dir,
            "--quiet"]
    assert cli(*args)[0] == 0
    ids = [json.loads(line)["id"] for line in open(tmp_path / "enc" / "vectors" / "vectors.jsonl")]
    assert len(ids) == 3 and ids[2] == ids[0] + "-2"
    for _ in range(2):
        rc, out, err = cli(*args, "--update")
        assert rc == 0 and "0 encoded, 3 unchanged kept, 0 removed" in out and "new id" not in out, out + err
    assert [json.loads(line)["id"] for line in open(tmp_path / "enc" / "vectors" / "vectors.jsonl")] == ids


# Every option that does not apply to the engine or mode chosen is a one-line error, never ignored
# (issue 30): (command line, what the error names). Checked before any engine starts.
INAPPLICABLE = [
    *[(["search", "--index", "IDX", flag, value, "q"], f"{flag} applies to --engine es only")
      for flag, value in (("--es-url", "http://127.0.0.1:9"), ("--es-index", "x"), ("--es-api-key", "k"),
                          ("--es-user", "u"), ("--es-password", "p"), ("--es-ca-certs", "ca.pem"),
                          ("--es-timeout", "5"), ("--es-retries", "0"), ("--tokenizer", "DIR"),
                          ("--query-mode", "sparse_vector"))],
    (["search", "--index", "IDX", "--engine", "bm25", "--es-url", "http://127.0.0.1:9", "q"],
     "--es-url applies to --engine es only, not --engine bm25"),
    (["search", "--index", "IDX", "--engine", "bm25", "--hybrid", "sum", "q"], "--hybrid fuses SPARC with BM25"),
    (["search", "--index", "IDX", "--engine", "bm25", "--hybrid", "none", "q"], "--hybrid fuses SPARC with BM25"),
    (["search", "--index", "IDX", "--engine", "bm25", "--hybrid-weight", "0.5", "q"], "--hybrid-weight fuses"),
    (["search", "--index", "IDX", "--hybrid", "rrf", "--hybrid-weight", "0.5", "q"],
     "--hybrid-weight is BM25's share of a hybrid sum: it does not apply to --hybrid rrf"),
    (["search", "--index", "IDX", "--hybrid", "none", "--hybrid-weight", "0.5", "q"],
     "does not apply to --hybrid none"),
    (["search", "--engine", "es", "--es-index", "x", "--hybrid", "rrf", "--hybrid-weight", "0.5", "q"],
     "does not apply to --hybrid rrf"),
    (["search", "--index", "IDX", "--bm25-weight", "0.5", "q"], "use --hybrid sum --hybrid-weight W"),
    (["search", "--engine", "es", "--es-index", "x", "--bm25-weight", "0.5", "q"], "--bm25-weight is gone"),
    (["serve", "--index", "IDX", "--port", "0", "--es-index", "x"], "--es-index applies to --engine es only"),
    (["serve", "--index", "IDX", "--port", "0", "--engine", "bm25", "--hybrid", "rrf"], "--hybrid fuses"),
    (["serve", "--index", "IDX", "--port", "0", "--hybrid", "rrf", "--hybrid-weight", "0.1"], "--hybrid rrf"),
    (["run", "--index", "IDX", "--topics", "TOPICS", "--output", "RUN", "--depth", "50"],
     "--depth is how many sentences are grouped into documents: it applies with --documents only"),
    (["run", "--engine", "es", "--es-index", "x", "--topics", "TOPICS", "--output", "RUN", "--threads", "2"],
     "--threads applies to the Lucene engines only"),
    (["run", "--index", "IDX", "--topics", "TOPICS", "--output", "RUN", "--query-mode", "rank_feature"],
     "--query-mode applies to --engine es only"),
    (["run", "--index", "IDX", "--engine", "bm25", "--topics", "TOPICS", "--output", "RUN", "--hybrid", "sum"],
     "--hybrid fuses"),
    (["run", "--index", "IDX", "--topics", "TOPICS", "--output", "RUN", "--bm25-weight", "1"], "--bm25-weight"),
    (["run", "--index", "IDX", "--topics", "TOPICS", "--output", "RUN", "--min-score", "1.5"],
     "--min-score 1.5 drops every hit: the scores of the default search are fractions"),
    (["query-dsl", "--index", "IDX", "q"], "no Elasticsearch index name (the request's GET /INDEX/_search line "
                                            "names it, also with --index): pass --es-index"),
    (["explain", "--index", "IDX", "--top", "3", "q", "1"], "--top is how many tokens of a sentence explained alone"),
    (["explain", "--no-collapse", "A sentence."], "--no-collapse ranks the hits of --index: it needs --index"),
    (["run", "--index", "IDX", "--topics", "TOPICS", "--output", "RUN", "--tag", "two words"], "one word"),
    *[(["index", "--input", "ENC", "--engine", "es", "--es-index", "x", *flag], f"{flag[0]} applies to --engine "
       "lucene only") for flag in (["--index", "IDX"], ["--overwrite"], ["--no-bm25"])],
    *[(["index", "--input", "ENC", "--index", "IDX", *flag], f"{flag[0]} applies to --engine es only")
      for flag in (["--recreate"], ["--chunk-size", "10"], ["--field-type", "sparse_vector"], ["--es-index", "x"],
                   ["--es-url", "http://127.0.0.1:9"], ["--es-retries", "1"])],
    (["query-dsl", "--hybrid", "rrf", "--hybrid-weight", "0.2", "q"], "does not apply to --hybrid rrf"),
    (["query-dsl", "--hybrid", "none", "--hybrid-weight", "0.2", "q"], "does not apply to --hybrid none"),
    (["query-dsl", "--hybrid-weight", "1.5", "q"], "between 0 and 1"),
    (["search", "--index", "IDX", "--engine", "bm25", "--min-score", "0.2", "q"], "--min-score applies to the SPARC"),
    (["query-dsl", "--bm25-weight", "1", "q"], "--bm25-weight is gone"),
]


@pytest.mark.parametrize("argv, expected", INAPPLICABLE, ids=[" ".join(a) for a, _ in INAPPLICABLE])
def test_an_option_that_does_not_apply_is_a_one_line_error(tmp_path, cli, argv, expected):
    (tmp_path / "topics.tsv").write_text("q1\tquestion\n")
    paths = {"IDX": tmp_path / "idx", "ENC": tmp_path / "enc", "DIR": tmp_path, "TOPICS": tmp_path / "topics.tsv",
             "RUN": tmp_path / "run.trec"}
    rc, out, err = cli(*[paths.get(a, a) for a in argv])
    assert rc == 1 and err.startswith("sparc-es: error: ") and err.count("\n") == 1 and expected in err, err
    assert not (tmp_path / "run.trec").exists() and not (tmp_path / "idx").exists()


def test_sparc_es_alone_prints_its_help(capsys):
    from sparc_es.cli import main

    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: sparc-es ") and "encode" in err and "query-dsl" in err, err


@pytest.mark.parametrize("argv, expected", [
    (["search", "--index", "IDX", "--bogus", "3", "q"], "sparc-es search: error: unrecognized arguments: --bogus"),
    (["search", "--index", "IDX", "-k", "0", "q"], "sparc-es search: error: argument -k: must be at least 1"),
    (["run", "--index", "IDX"], "sparc-es run: error: the following arguments are required: --topics"),
    (["serch", "q"], "sparc-es: error: argument COMMAND: invalid choice: 'serch'"),
    (["serve", "--port", "abc"], "sparc-es serve: error: argument --port: 'abc' is not a port number"),  # "_port"
    (["serve", "--allow-host", "http://a.example"], "sparc-es serve: error: argument --allow-host: 'http://a.example'"),
    (["serve", "--allow-host", "*.example.com"], "sparc-es serve: error: argument --allow-host: '*.example.com'"),
])
def test_a_wrong_argument_is_one_line_naming_the_verb_and_its_help(capsys, argv, expected):
    """No usage block above the error (15 lines for search): the message, and where the options are."""
    from sparc_es.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith(expected) and err.count("\n") == 1, err
    assert err.rstrip().endswith("--help lists the options)"), err


def test_query_dsl_prints_what_search_on_elasticsearch_sends(cli):
    """The client-side fusions: an _msearch of the SPARC search and the BM25 match search, each to
    the fusion depth, with a # line (a Kibana console comment) saying how sparc-es fuses them; rrf
    also in the one-request retriever form, labelled as needing an Enterprise licence. (The
    default, one _search, is tests/test_one_request.py's: it needs an index's maxima.)"""
    from sparc_es.engines.hybrid import BM25_WEIGHT, DEPTH

    rc, out, err = cli("query-dsl", "--es-index", "notes", "--hybrid", "minmax", "Which Java version?")
    lines = out.splitlines()
    assert rc == 0 and lines[0].startswith(f"# sparc-es fuses the two lists client-side: {BM25_WEIGHT:g} x BM25' + "
                                           f"{1 - BM25_WEIGHT:g} x SPARC'")
    assert lines[1] == "GET /notes/_msearch" and lines[2] == lines[4] == "{}" and len(lines) == 6, out
    sparc, bm25 = json.loads(lines[3]), json.loads(lines[5])
    assert sparc["size"] == bm25["size"] == DEPTH and "rank_feature" in sparc["query"]["bool"]["should"][0]
    assert bm25["query"] == {"match": {"text": {"query": "Which Java version?"}}}
    rc, out, _ = cli("query-dsl", "--es-index", "sparc", "--hybrid", "rrf", "-k", 2000, "Which Java version?")
    assert rc == 0 and "reciprocal-rank fusion" in out and json.loads(out.splitlines()[5])["size"] == 2000
    enterprise = out.split("Enterprise licence", 1)[1].split("\n", 2)
    assert enterprise[1] == "GET /sparc/_search"
    retriever = json.loads(enterprise[2])["retriever"]["rrf"]
    assert [r["standard"]["query"] for r in retriever["retrievers"]] == [sparc["query"], bm25["query"]]
    rc, out, _ = cli("query-dsl", "--hybrid", "none", "--es-index", "notes", "Which Java version?")
    comment, head, body = out.split("\n", 2)  # the # line: the factor between _score and search's score
    assert rc == 0 and comment.startswith("# the SPARC search's _score is the integer impact sum, 5 x")
    assert head == "GET /notes/_search" and json.loads(body)["size"] == 10
    rc, _, err = cli("query-dsl", "  ")
    assert rc == 1 and "empty question" in err
    rc, _, err = cli("query-dsl", "\x01\u200b")  # no character to show: it was a search for nothing
    assert rc == 1 and "the question '\\x01\\u200b' has no character to show" in err


@pytest.mark.jvm
def test_run_tags_say_engine_and_hybrid_and_runs_are_written_a_batch_at_a_time(tmp_path, corpus, tiny_model_dir,
                                                                               cli, monkeypatch):
    from sparc_es.cli import run as run_verb
    from sparc_es.engines.hybrid import BM25_WEIGHT

    enc, idx = tmp_path / "enc", tmp_path / "idx"
    assert cli("encode", "--corpus", corpus, "--output", enc, "--model", tiny_model_dir, "--quiet")[0] == 0
    assert cli("index", "--input", enc, "--index", idx)[0] == 0
    topics = tmp_path / "topics.tsv"
    topics.write_text("".join(f"q{i}\t{q}\n" for i, q in enumerate(["integers in lucene", "bags of tokens",
                                                                     "nine bits", "stored weights", "the demo"])))

    def run(*flags, name="run.trec"):
        rc, _, err = cli("run", "--index", idx, "--topics", topics, "--output", tmp_path / name, *flags)
        assert rc == 0, err
        rows = [line.split() for line in (tmp_path / name).read_text().splitlines()]
        return {r[5] for r in rows}, [r[:5] for r in rows]

    for flags, tag in ((), f"sparc-es-lucene-sum{BM25_WEIGHT:g}"), \
            (("--hybrid-weight", 0.5), "sparc-es-lucene-sum0.5"), \
            (("--hybrid", "minmax"), f"sparc-es-lucene-minmax{BM25_WEIGHT:g}"), \
            (("--hybrid", "rrf"), "sparc-es-lucene-rrf"), (("--hybrid", "none"), "sparc-es-lucene"), \
            (("--engine", "bm25"), "sparc-es-bm25"), (("--tag", "mine"), "mine"):
        assert run(*flags)[0] == {tag}, flags
    whole = run(name="whole.trec")[1]
    monkeypatch.setattr(run_verb, "RUN_BATCH", 2)  # three batches: the same run file
    assert run(name="batched.trec")[1] == whole
    assert not list(tmp_path.glob("*.partial"))


def test_removed_control_characters_are_named_as_found(tmp_path, tiny_model_dir, cli):
    """The warning names the characters that were removed (a C1 control is not "NUL, ESC, ..."),
    from JSONL records and documents alike; tab and line ends are text, not controls."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.jsonl").write_text(json.dumps({"id": "x", "text": "Price\x80 list\x1b[0m and\ttab.",
                                              "context": "Escaped\x1b context."}) + "\n")
    (docs / "b.txt").write_text("A plain\x9b document.\r\nWith two lines.\n")
    rc, _, err = cli("encode", "--corpus", docs, "--output", tmp_path / "enc", "--model", tiny_model_dir,
                     "--quiet")
    assert rc == 0, err
    assert ("warning: removed 4 control characters from the corpus text: U+001B (ESC) x 2, U+0080 (C1 control), "
            "U+009B (C1 control); e.g. in x, b.txt\n") in err, err
    assert "NUL" not in err
    meta = json.loads((tmp_path / "enc" / "meta.json").read_text())
    assert meta["control_characters_removed"] == 4
    assert meta["control_character_kinds"] == {"U+001B": 2, "U+0080": 1, "U+009B": 1}


def test_help_names_what_a_user_can_read_and_adapt_says_how_long_it_takes(capsys):
    """No help text points at the project's private notes ("paper 000", DESIGN.md): papers by title."""
    import re

    from sparc_es.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    texts = {}
    for name in ["", *commands]:
        with pytest.raises(SystemExit):
            main([name, "--help"] if name else ["--help"])
        texts[name] = " ".join(capsys.readouterr().out.split())
    for name, text in texts.items():
        for private in ("paper 0", "Paper 0", "DESIGN.md", "shared/papers"):
            assert private not in text, (name, private)
    assert "Sparse Neural Retrieval Model for Efficient Cross-Domain Retrieval-Based Question Answering" \
        in texts["adapt"]
    assert "Unsupervised Domain Adaptation for Sparse Retrieval" in texts["encode"]
    assert re.search(r"[\d.]+ s a step at two threads .* the default 500 steps took \d+ s", texts["adapt"])


def test_run_of_an_empty_topics_file_is_refused(tmp_path, cli):
    """Issue 36, item 12: it exited 0 with an empty run, which scores 0 without a word."""
    topics = tmp_path / "topics.tsv"
    topics.write_text("\n")
    rc, _, err = cli("run", "--index", tmp_path / "idx", "--topics", topics,
                     "--output", tmp_path / "r.trec")
    assert rc == 1 and "no topics in it" in err and err.count("\n") == 1, err
    assert not (tmp_path / "r.trec").exists()


def test_an_index_finds_its_documents_from_any_working_directory_and_when_moved(tmp_path, tiny_model_dir,
                                                                                  monkeypatch, cli):
    """The corpus is recorded absolutely and relative to the folder: a relative --corpus typed in one
    folder is found from another, and from a copy of both moved elsewhere; a corpus that is gone is said,
    and its hits keep their heading path."""
    import shutil

    from sparc_es.answers.show import Places
    from sparc_es.layout.manifest import Manifest

    project = tmp_path / "project"
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "guide.md").write_text("# Guide\n\nThe port is 8081 by default.\n")
    monkeypatch.chdir(project)
    assert cli("encode", "--corpus", "../project/docs", "--output", "enc", "--model", tiny_model_dir,
               "--quiet")[0] == 0
    monkeypatch.chdir(tmp_path)
    manifest = Manifest.read(project / "enc")
    assert manifest.corpus == (str(project / "docs"),) and manifest.corpus_relative == ("../docs",)
    sentence = next(iter(read_vectors_ids(project / "enc")))
    for folder in (project, tmp_path / "moved"):
        if folder != project:
            shutil.move(project, folder)
        places = Places(Manifest.read(folder / "enc").corpus_roots(folder / "enc"))
        assert places.gone() == [] and places.file("guide.md") == folder / "docs" / "guide.md"
        assert places.of(sentence).line == 3 and places.of(sentence).headings == ("Guide",)
    shutil.rmtree(tmp_path / "moved" / "docs")
    places = Places(Manifest.read(tmp_path / "moved" / "enc").corpus_roots(tmp_path / "moved" / "enc"))
    assert places.gone() == [project / "docs"] and places.of(sentence).line is None
    assert places.of(sentence).headings == ("Guide",)  # the path encode stored: the file is not needed


@pytest.mark.parametrize("columns", ["id, text, doc, start, end, context", "id, text, doc, start, end, context, code"])
def test_a_sentence_store_of_an_older_sparc_es_is_read_and_resumed_into(tmp_path, columns):
    """A store written before sentences kept their code, or their heading path, is read (the
    missing fields None), and a resumed encode into it adds the column rather than failing."""
    import sqlite3

    from sparc_es.corpus.sources import Sentence
    from sparc_es.layout.store import SentenceStore

    path = tmp_path / "sentences.sqlite"
    db = sqlite3.connect(path)
    db.execute(f"CREATE TABLE sentences ({columns.replace(', ', ' TEXT, ')} TEXT)")
    db.execute("CREATE TABLE contexts (key TEXT PRIMARY KEY, text TEXT NOT NULL)")
    db.execute(f"INSERT INTO sentences VALUES ({', '.join('?' * len(columns.split(', ')))})",
               ("a", "Old.", "d.md", 0, 4, None, None)[:len(columns.split(", "))])
    db.commit()
    db.close()
    old = SentenceStore(path).get(["a"])["a"]
    assert (old.text, old.code, old.headings) == ("Old.", None, None)
    store = SentenceStore(path, create=True)
    store.add([Sentence("b", "New.", "Guide > Setup. New.", "d.md", 5, 9, headings="Guide > Setup")])
    got = store.get(["a", "b"], context=True)
    store.close()
    assert got["a"].headings is None and got["b"].headings == "Guide > Setup"
    assert got["b"].context == "Guide > Setup. New."


@pytest.mark.jvm
def test_errors_name_the_flag_on_the_command_line_and_the_keyword_from_python(docs_index, cli):
    """The same refusal names what its user types: ``--overwrite`` to the command, ``overwrite=True``
    to a program calling the library (which has no flags)."""
    from sparc_es.engines import open_engine
    from sparc_es.engines.lucene import build_index
    from sparc_es.errors import SparcError

    index = docs_index({"guide.md": "# Guide\n\nThe port is 8081 by default.\n"})
    encoded = index.parent / "enc"
    with pytest.raises(SparcError) as raised:
        build_index(encoded, index)
    assert "pass overwrite=True to rebuild it" in str(raised.value) and "--" not in str(raised.value)
    rc, _, err = cli("index", "--input", encoded, "--index", index)
    assert rc == 1 and "pass --overwrite to rebuild it" in err, err
    with pytest.raises(SparcError, match=r"^hybrid_weight is BM25's share of a hybrid sum: it does not apply to "
                                         r"hybrid=rrf$"):
        open_engine("lucene", index, hybrid="rrf", hybrid_weight=0.2)
    rc, _, err = cli("search", "--index", index, "--hybrid", "rrf", "--hybrid-weight", "0.2", "q")
    assert rc == 1 and "--hybrid-weight is BM25's share of a hybrid sum: it does not apply to --hybrid rrf" in err


@pytest.mark.jvm
def test_a_hit_whose_file_is_gone_still_shows_its_heading_path(docs_index, cli):
    """The presenter takes the heading path the sentence store kept when the document is not there
    to read it from (a corpus folder removed; documents read from a cluster never had one)."""
    import shutil

    index = docs_index({"guide.md": "# Guide\n\nThe port is 8081 by default.\n"})
    shutil.rmtree(index.parent / "docs")
    rc, out, err = cli("search", "--index", index, "--json", "-k", "1", "Which port is the default?")
    assert rc == 0, err
    [hit] = json.loads(out)  # one question: its list of hits
    assert hit["text"] == "The port is 8081 by default." and hit["headings"] == ["Guide"], hit


def test_a_file_edited_since_its_encode_shows_each_unchanged_sentence_at_its_line_now(tmp_path):
    """Lines added above a sentence moved it; its stored offsets still fell on words enough like
    its own to pass for it, so hits named a line two off. A sentence's id is its text's: the file,
    split again as encode splits it, tells where it is now; an edited sentence has no line."""
    from sparc_es.answers.show import Places
    from sparc_es.corpus.sources import Sentence

    text = "# Details\n\nThe summary is always shown.\n\nThe body shows when the box is open.\n"
    (tmp_path / "details.md").write_text(text)
    encoded = list(split_document(text, "details.md", "markdown"))
    places = Places([tmp_path])  # one, as a server holds it while the documents are edited
    assert [places.of(s).line for s in encoded] == [3, 5]
    (tmp_path / "details.md").write_text("# Details\n\nNew first lines.\n\n" + text.split("\n\n", 1)[1]
                                         .replace("when the box is open", "once opened"))
    now = [places.of(s) for s in encoded]
    assert now[0].line == 5 and now[0].headings == ("Details",)
    assert now[1].line is None  # edited: not there any more, its offsets not taken for it
    # read by an older reader (another text, so another id) from a file that did not change: its line stands
    text = "# Links\n\nBuilt with [MkDocs][mkdocs] and a theme of its own.\n"
    (tmp_path / "links.md").write_text(text)
    old = "Built with [MkDocs][mkdocs] and a theme of its own."
    start = text.index(old)
    older = Sentence(f"links.md#{sentence_key(old)}", old, old, "links.md", start, start + len(old))
    assert Places([tmp_path]).of(older).line == 3


@pytest.mark.parametrize("existing", [False, True])
def test_a_stopped_index_says_what_is_left_not_resume(tmp_path, cli, monkeypatch, existing):
    """``index`` builds aside and renames into place, so a Ctrl-C or SIGTERM leaves nothing to resume:
    it said "run the same command again to resume"; it says what is left."""
    from sparc_es.engines import lucene

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(lucene, "build_index", stopped)
    if existing:
        (tmp_path / "idx").mkdir()
    rc, _, err = cli("index", "--input", tmp_path / "enc", "--index", tmp_path / "idx", "--overwrite")
    kept = "the index already there is as it was" if existing else "nothing was written"
    assert rc == 130 and err == f"sparc-es: index stopped before it was complete: {kept}; run the same command " \
                                "again to build it\n", err


def test_a_stopped_search_or_server_has_nothing_to_resume(cli, monkeypatch):
    """A Ctrl-C of search or serve said "run the same command again to resume"."""
    from sparc_es.cli import search as search_module

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(search_module, "command", stopped)
    rc, _, err = cli("search", "--index", "x", "a question")
    assert rc == 130 and err == "sparc-es: interrupted\n", err


def test_a_stopped_encode_ends_its_progress_line_before_the_message(tmp_path, corpus, tiny_model_dir, cli,
                                                                    monkeypatch):
    """The message of a stop came glued to the end of the progress bar's line, and the bar was
    drawn again under it when the process exited."""
    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(encode_module._EncodeRun, "_commit", stopped)
    rc, _, err = cli("encode", "--corpus", corpus, "--output", tmp_path / "enc", "--model", tiny_model_dir)
    lines = err.replace("\r", "\n").rstrip("\n").split("\n")
    assert rc == 130 and lines[-1] == "sparc-es: interrupted; run the same command again to resume", err
    assert err.endswith("\nsparc-es: interrupted; run the same command again to resume\n")  # its own line, last


@pytest.mark.jvm
def test_a_stop_while_the_replaced_index_is_removed_leaves_the_new_one_and_says_so(docs_index, cli, monkeypatch):
    """index --overwrite renames the old index aside, the new one in, then removes the old one: a
    Ctrl-C during that removal said "stopped before it was complete" of a complete index, whose
    predecessor it had half deleted. The new index is in place, it says so, and the next build
    removes the rest."""
    import shutil

    from sparc_es.engines import lucene

    index = docs_index({"guide.md": "# Guide\n\nThe port is 8081 by default.\n"})
    retired, real = index.parent / f".{index.name}.old", shutil.rmtree

    def slow_removal(path, *args, **kwargs):
        if path == retired and retired.exists():
            raise KeyboardInterrupt
        return real(path, *args, **kwargs)

    monkeypatch.setattr(lucene.shutil, "rmtree", slow_removal)
    rc, _, err = cli("index", "--input", index.parent / "enc", "--index", index, "--overwrite", "--quiet")
    assert rc == 130 and f"sparc-es: index built into {index}; the previous index, moved aside to {retired}" in err
    assert retired.is_dir() and (index / "meta.json").is_file()
    monkeypatch.setattr(lucene.shutil, "rmtree", real)
    rc, out, err = cli("search", "--index", index, "-k", "1", "Which port?")
    assert rc == 0 and "8081" in out, err
    assert cli("index", "--input", index.parent / "enc", "--index", index, "--overwrite", "--quiet")[0] == 0
    assert not retired.exists()


def read_vectors_ids(folder):
    from sparc_es.layout.store import SentenceStore

    store = SentenceStore(folder / "sentences.sqlite")
    try:
        ids = [json.loads(line)["id"] for line in open(folder / "vectors" / "vectors.jsonl")]
        return list(store.get(ids, context=True).values())
    finally:
        store.close()


def test_a_reader_that_stops_early_is_not_an_error():
    """``sparc-es ... | head``: the closed pipe stops the command quietly, no "Broken pipe" line."""
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)  # the reader has gone before the first write (head -1 after a long output's first line)
    process = subprocess.Popen([sys.executable, "-m", "sparc_es", "explain", "The capital of France is Paris."],
                               stdout=write, stderr=subprocess.PIPE)
    os.close(write)
    err = process.stderr.read().decode()
    assert process.wait(timeout=300) == 1, err
    assert "Broken pipe" not in err and "Traceback" not in err and "Exception ignored" not in err, err


@pytest.mark.parametrize("before", [True, False], ids=["before the verb", "after it"])
def test_debug_shows_the_traceback_wherever_it_is_written(tmp_path, before):
    from sparc_es.errors import InputError

    verb = ["encode", "--corpus", str(tmp_path / "nothing"), "--output", str(tmp_path / "out")]
    with pytest.raises(InputError, match="no such file or folder"):  # raised, not a one-line error
        main(["--debug", *verb] if before else [*verb, "--debug"])


def test_a_failed_requantize_leaves_nothing_in_the_way_of_the_corrected_rerun(tmp_path, tiny_model_dir, cli):
    """A factor whose impacts Lucene cannot hold is found while the copy is written: the run says which
    sentence and leaves nothing behind, not the output nor the folders above it it made, so the
    corrected rerun works. --overwrite replaces only a folder sparc-es made, and the old one stays
    when the new one fails."""
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"id": "a", "text": "Lucene stores integer impacts of many tokens."}) + "\n")
    rc, _, err = cli("encode", "--corpus", path, "--output", tmp_path / "enc", "--model", tiny_model_dir,
                     "--keep-floats", "--no-idf", "--quiet")
    assert rc == 0, err
    work = tmp_path / "work"
    work.mkdir()
    for out in (work / "x4", work / "deeper" / "still" / "x4"):
        rc, _, err = cli("requantize", "--input", tmp_path / "enc", "--output", out, "--factor", 16_000_000)
        assert rc == 1 and err.count("\n") == 1, err
        assert "sentence a: factor 1.6e+07 makes a sentence's impacts sum to" in err and "lower --factor" in err, err
        assert f"nothing was written to {out}" in err
        assert list(work.iterdir()) == [], list(work.iterdir())
    rc, out, err = cli("requantize", "--input", tmp_path / "enc", "--output", work / "x4", "--factor", 10)
    assert rc == 0 and "factor=10" in out, err
    rc, _, err = cli("requantize", "--input", tmp_path / "enc", "--output", work / "x4", "--factor", 20)
    assert rc == 1 and "already exists; choose a new folder or pass --overwrite" in err, err
    rc, _, err = cli("requantize", "--input", tmp_path / "enc", "--output", work / "x4", "--factor", 16_000_000,
                     "--overwrite")
    assert rc == 1 and json.loads((work / "x4" / "meta.json").read_text())["factor"] == 10, err
    rc, out, err = cli("requantize", "--input", tmp_path / "enc", "--output", work / "x4", "--factor", 20,
                       "--overwrite")
    assert rc == 0 and json.loads((work / "x4" / "meta.json").read_text())["factor"] == 20, err
    assert sorted(p.name for p in work.iterdir()) == ["x4"]  # no building folder, no lock left
    mine = work / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine\n")
    rc, _, err = cli("requantize", "--input", tmp_path / "enc", "--output", mine, "--overwrite")
    assert rc == 1 and "was not made by sparc-es" in err and (mine / "notes.txt").is_file(), err


def test_search_pointed_at_an_encoded_folder_says_so_and_how_to_index_it(tmp_path, tiny_model, cli):
    """It first warned that the folder "stores no BM25 terms (built by an older sparc-es)" and then
    that it is "not a sparc-es Lucene index": only the second was true, and neither said what it is."""
    from sparc_es.encode.run import encode_corpus

    (tmp_path / "a.md").write_text("Pyserini needs Java 21 to run.\n")
    (tmp_path / "t.tsv").write_text("q1\tWhich Java?\n")
    encode_corpus([tmp_path / "a.md"], tmp_path / "enc", tiny_model, progress=False)
    for command in (["search", "--index", tmp_path / "enc", "Which Java?"],
                    ["run", "--index", tmp_path / "enc", "--topics", tmp_path / "t.tsv", "--output", tmp_path / "r"]):
        rc, _, err = cli(*command)
        assert rc == 1 and err.strip() == (f"sparc-es: error: {tmp_path / 'enc'}: an encoded folder, not an index: "
                                           f"make one of it with sparc-es index --input {tmp_path / 'enc'} --index DIR")
