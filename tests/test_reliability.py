"""Faults and hostile input (issue 12): each row of the table is one test here.

Real processes are killed where the fault is a kill (an encode, a bulk load); disk full is the
one fault simulated (an ``OSError(ENOSPC)`` raised where the write happens), since filling this
machine's disk is not an option in a test.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sparc_es.cli import main
from sparc_es.encode import run as encode_module
from sparc_es.layout.locks import exclusive
from sparc_es.layout.manifest import Manifest
from sparc_es.layout.records import iter_vectors

from tolerance import assert_same_records

SENTENCES = ["Lucene stores integer impacts.", "Questions are bags of tokens.", "Elasticsearch keeps nine bits.",
             "The demo corpus is tiny.", "Sentences are encoded once.", "Scores are sums of stored weights."]


def write_corpus(path: Path, n: int = 6, text=lambda i: SENTENCES[i % len(SENTENCES)] + f" Number {i}.") -> Path:
    path.write_text("".join(json.dumps({"id": f"s{i}", "text": text(i), "context": "A paragraph."}) + "\n"
                            for i in range(n)))
    return path


def counted(lines: bytes) -> tuple:
    """(postings, impact sum, empty vectors, median count of f > 0) of a folder's vectors.jsonl."""
    records = [json.loads(line) for line in lines.splitlines()]
    return (sum(len(r["vector"]) for r in records), sum(sum(r["vector"].values()) for r in records),
            sum(not r["vector"] for r in records), statistics.median(r["stats"][0] for r in records))


def one_line_error(rc: int, err: str) -> bool:
    return rc == 1 and err.startswith("sparc-es: error: ") and err.count("\n") == 1 and "Traceback" not in err


def sparc_es(*args, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sparc_es", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


# --- exclusive output folders --------------------------------------------------------------

def test_a_second_writer_is_refused_at_once(tmp_path, tiny_model_dir, cli, monkeypatch):
    from sparc_es.cli import encode as encode_cli

    loaded: list[int] = []  # refused before the model's seconds of loading, not after
    real = encode_cli.load_model
    monkeypatch.setattr(encode_cli, "load_model", lambda args: loaded.append(1) or real(args))
    corpus = write_corpus(tmp_path / "c.jsonl")
    out = tmp_path / "enc"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from sparc_es.layout.locks import exclusive\n"
                               f"with exclusive({str(out)!r}):\n    print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        rc, _, err = cli("encode", "--corpus", corpus, "--output", out, "--model", tiny_model_dir,
                         "--quiet")
        assert one_line_error(rc, err) and "another sparc-es encode is writing this folder" in err and not loaded
        rc, _, err = cli("index", "--input", out, "--index", out)
        assert rc == 1  # (no encoded folder there either way)
    finally:
        holder.kill()
        holder.wait()
    # the lock went with the killed holder: the same command now works
    rc, _, err = cli("encode", "--corpus", corpus, "--output", out, "--model", tiny_model_dir, "--quiet")
    assert rc == 0, err


def test_lock_is_exclusive_within_one_process_too(tmp_path):
    from sparc_es.errors import StoreError

    with exclusive(tmp_path / "x"):
        with pytest.raises(StoreError, match="another"):
            with exclusive(tmp_path / "x"):
                pass
    with exclusive(tmp_path / "x"):  # released
        pass


@pytest.mark.parametrize("change", ["repeated", "swapped"])
def test_index_checks_ids_not_only_counts(tmp_path, tiny_model, cli, change):
    from sparc_es.encode.run import encode_corpus

    enc = tmp_path / "enc"
    encode_corpus([write_corpus(tmp_path / "c.jsonl")], enc, tiny_model, progress=False, idf=False)
    vectors = enc / "vectors" / "vectors.jsonl"
    lines = vectors.read_text().splitlines(keepends=True)
    if change == "repeated":  # what two writers into one folder produced
        lines += lines[:2]
    else:  # one sentence stored twice and another missing: the counts still agree
        lines[-1] = lines[0]
    vectors.write_text("".join(lines))
    rc, _, err = cli("index", "--input", enc, "--index", tmp_path / "idx", "--quiet")
    assert one_line_error(rc, err) and "do not hold the same sentence ids" in err
    assert f"vectors ({len(lines)} records)" in err and "(6 ids)" in err
    assert not (tmp_path / "idx").exists() and not list(tmp_path.glob(".idx.building*"))


@pytest.mark.parametrize("damage", ["vectors cut", "store cut"])
def test_a_damaged_encoded_folder_is_named_with_its_file(tmp_path, tiny_model, cli, damage):
    """A vectors file cut mid-line said "JSONDecodeError: unexpected end of data: line 1 column 1992",
    a truncated sentence store "DatabaseError: database disk image is malformed": neither named a file."""
    from sparc_es.encode.run import encode_corpus

    enc = tmp_path / "enc"
    encode_corpus([write_corpus(tmp_path / "c.jsonl")], enc, tiny_model, progress=False, idf=False)
    damaged = enc / ("vectors/vectors.jsonl" if damage == "vectors cut" else "sentences.sqlite")
    data = damaged.read_bytes()
    damaged.write_bytes(data[:len(data) - 40] if damage == "vectors cut" else data[:len(data) // 2])
    rc, _, err = cli("index", "--input", enc, "--index", tmp_path / "idx", "--quiet")
    assert one_line_error(rc, err) and str(damaged) in err and "damaged" in err, err
    if damage == "vectors cut":
        assert f"{damaged}:6: not a whole record" in err, err
    assert not (tmp_path / "idx").exists()


# --- resuming from any point ---------------------------------------------------------------

def test_encode_killed_before_its_first_shard_resumes(tmp_path, tiny_model_dir, cli, monkeypatch):
    corpus = write_corpus(tmp_path / "c.jsonl")
    args = ["encode", "--corpus", corpus, "--model", tiny_model_dir, "--quiet"]
    assert cli(*args, "--output", tmp_path / "whole")[0] == 0

    def killed(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(encode_module, "_write_pieces", killed)
    rc, _, err = cli(*args, "--output", tmp_path / "cut")
    assert rc == 130 and "resume" in err
    monkeypatch.undo()
    rc, _, err = cli(*args, "--output", tmp_path / "cut")
    assert rc == 0, err
    cut, whole = tmp_path / "cut/vectors/vectors.jsonl", tmp_path / "whole/vectors/vectors.jsonl"
    assert cut.read_bytes() == whole.read_bytes()


def test_update_copies_kept_records_and_reads_older_folders(tmp_path, tiny_model_dir, cli):
    """An update keeps unchanged records byte for byte, re-encodes the edited ones, and gives what a
    fresh encode gives, also from a folder written by an earlier version (spaced JSON, three stats).
    Without IDF: with it, an update weighs by the first encode's statistics (test_cli)."""
    args = ["--model", tiny_model_dir, "--quiet", "--no-idf"]
    write_corpus(tmp_path / "old.jsonl", n=8)
    edited = write_corpus(tmp_path / "new.jsonl", n=9, text=lambda i: (SENTENCES[i % len(SENTENCES)] + f" Number {i}."
                                                                       + (" Edited." if i == 3 else "")))
    assert cli("encode", "--corpus", edited, "--output", tmp_path / "fresh", *args)[0] == 0
    fresh = (tmp_path / "fresh/vectors/vectors.jsonl").read_bytes()
    for name, older in (("current", False), ("older", True)):
        enc = tmp_path / name
        assert cli("encode", "--corpus", tmp_path / "old.jsonl", "--output", enc, *args)[0] == 0
        vectors = enc / "vectors/vectors.jsonl"
        if older:
            vectors.write_text("".join(json.dumps({**r, "stats": r["stats"][:3]}, ensure_ascii=False) + "\n"
                                       for r in iter_vectors(enc)))
        before = vectors.read_bytes().splitlines()
        assert cli("encode", "--corpus", edited, "--output", enc, "--update", *args)[0] == 0
        after = vectors.read_bytes()
        # s3 and s8 were encoded in a batch of two, the fresh encode's in one batch of nine: the
        # same records but for float noise (an impact at a .5 boundary, a near-tie at the cut)
        assert_same_records(after.splitlines(), fresh.splitlines(), what=name)
        manifest, scratch = Manifest.read(enc), Manifest.read(tmp_path / "fresh")
        assert manifest.reused == 7  # s3 was edited, s8 is new
        for m, lines in ((manifest, after), (scratch, fresh)):  # kept records counted as well as new ones
            assert (m.postings, m.impact_sum, m.empty_vectors, m.median_nonzero_before_top_k) == counted(lines), name
        kept = set(before) & set(after.splitlines())
        assert len(kept) == (0 if older else 7)  # copied as they stood, or rewritten in the current form


def test_an_update_reuses_the_passage_of_an_edited_sentence(tmp_path, tiny_model_dir, monkeypatch):
    """With passage expansion, a sentence edited while its passage stays as it was is encoded again
    but its passage is not (``encoded.PassageCache``); a new passage is; the result is what a fresh
    encode gives; the updated cache holds the corpus's passages only; a record cut off is dropped."""
    from sparc_es.encode.run import encode_corpus
    from sparc_es.layout.names import PASSAGES
    from sparc_es.layout.passages import PassageCache
    from sparc_es.model import SparcModel

    model = SparcModel.load(tiny_model_dir, passage_weight=1.0)
    paragraphs = [" ".join(SENTENCES[2 * p: 2 * p + 2]) for p in range(3)]

    def corpus(path: Path, edit: bool) -> Path:
        rows = [{"id": f"p{p}s{i}", "text": t + (" Edited." if edit and (p, i) == (0, 1) else ""), "context": c}
                for p, c in enumerate(paragraphs[:2] if edit else paragraphs) for i, t in enumerate(c.split(". "))]
        if edit:
            rows.append({"id": "new", "text": "A new passage.", "context": "A new passage. With two sentences."})
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    enc = tmp_path / "enc"
    encode_corpus([corpus(tmp_path / "old.jsonl", False)], enc, model, progress=False, idf=False)
    assert len(PassageCache(enc / PASSAGES, write=False)) == 3
    computed: list[str] = []
    passage_scores = model.passage_scores
    monkeypatch.setattr(model, "passage_scores", lambda texts: computed.extend(texts) or passage_scores(texts))
    edited = corpus(tmp_path / "new.jsonl", True)
    manifest = encode_corpus([edited], enc, model, progress=False, idf=False, update=True)
    assert computed == ["A new passage. With two sentences."]
    assert (manifest.sentences, manifest.reused) == (5, 3)
    encode_corpus([edited], tmp_path / "fresh", model, progress=False, idf=False)
    # two sentences (one passage from the cache) against five in one batch: equal but for float noise
    assert_same_records((enc / "vectors/vectors.jsonl").read_bytes().splitlines(),
                        (tmp_path / "fresh/vectors/vectors.jsonl").read_bytes().splitlines())
    data = (enc / PASSAGES).read_bytes()
    assert len(PassageCache(enc / PASSAGES, write=False)) == 3  # paragraph 2 went with its sentences
    (enc / PASSAGES).write_bytes(data[:-5])
    with PassageCache(enc / PASSAGES) as cut:
        assert len(cut) == 2
    assert data.startswith((enc / PASSAGES).read_bytes()) and len(data) > (enc / PASSAGES).stat().st_size + 5


def test_an_update_stopped_by_a_bad_line_keeps_the_old_folder(tmp_path, tiny_model_dir, cli):
    """An update reads the corpus once (no validation pass): a bad line stops it with a one-line
    error naming the line, the old folder stands as it was, and the fixed corpus then updates it."""
    args = ["--model", tiny_model_dir, "--quiet", "--batch-size", 2, "--shard-size", 2, "--no-idf"]
    enc = tmp_path / "enc"
    corpus = write_corpus(tmp_path / "c.jsonl", n=8)
    assert cli("encode", "--corpus", corpus, "--output", enc, *args)[0] == 0
    before = {p.name: p.read_bytes() for p in enc.rglob("*") if p.is_file()}
    lines = write_corpus(tmp_path / "new.jsonl", n=9).read_text().splitlines()
    (tmp_path / "new.jsonl").write_text("\n".join(lines[:6] + ['{"id": "bad", "text": 3}'] + lines[6:]) + "\n")
    rc, _, err = cli("encode", "--corpus", tmp_path / "new.jsonl", "--output", enc, "--update", *args)
    assert one_line_error(rc, err) and ":7" in err
    assert {p.name: p.read_bytes() for p in enc.rglob("*") if p.is_file()} == before
    (tmp_path / "new.jsonl").write_text("\n".join(lines) + "\n")
    assert cli("encode", "--corpus", tmp_path / "new.jsonl", "--output", enc, "--update", *args)[0] == 0
    assert cli("encode", "--corpus", tmp_path / "new.jsonl", "--output", tmp_path / "fresh", *args)[0] == 0
    assert (enc / "vectors/vectors.jsonl").read_bytes() == (tmp_path / "fresh/vectors/vectors.jsonl").read_bytes()
    assert Manifest.read(enc).reused == 8 and not list(tmp_path.glob(".enc.*"))


def test_a_failed_encode_leaves_nothing_in_the_way(tmp_path, tiny_model_dir, cli):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "text": "fine"}\n{"id": "b", "text": oops}\n')
    out = tmp_path / "enc"
    rc, _, err = cli("encode", "--corpus", corpus, "--output", out, "--model", tiny_model_dir, "--quiet")
    assert one_line_error(rc, err) and not out.exists()
    rc, _, err = cli("encode", "--corpus", tmp_path / "missing.jsonl", "--output", out, "--model",
                     tiny_model_dir, "--quiet")
    assert one_line_error(rc, err) and not out.exists()
    write_corpus(corpus)
    rc, _, err = cli("encode", "--corpus", corpus, "--output", out, "--model", tiny_model_dir, "--quiet")
    assert rc == 0, err


@pytest.mark.slow
def test_a_real_encode_killed_midway_resumes_with_every_record_once(tmp_path, tiny_model_dir):
    n = 6000
    corpus = write_corpus(tmp_path / "c.jsonl", n)
    out = tmp_path / "enc"
    args = ["encode", "--corpus", corpus, "--output", out, "--model", tiny_model_dir, "--shard-size", 100,
            "--batch-size", 16, "--quiet", "--threads", 1]
    proc = sparc_es(*args)
    progress = out / "progress.json"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        try:
            if json.loads(progress.read_text())["sentences"] >= 300:
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.02)
    assert proc.poll() is None, "the encode finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "meta.json").exists()
    done = json.loads(progress.read_text())["sentences"]
    assert 0 < done < n
    rerun = sparc_es(*args)
    _, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    ids = [r["id"] for r in iter_vectors(out)]
    assert ids == [f"s{i}" for i in range(n)]  # every record exactly once, in input order
    assert Manifest.read(out).sentences == n


# --- validation at the door ----------------------------------------------------------------

def test_bom_and_crlf_are_read(tmp_path, tiny_model_dir, capsys):
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_bytes(b"\xef\xbb\xbf" + b'{"id": "a", "text": "First line."}\r\n{"id": "b", "text": "Second."}\r\n')
    text = tmp_path / "doc.txt"
    text.write_bytes(b"\xef\xbb\xbfA first paragraph. It has two sentences.\r\n\r\nA second paragraph.\r\n")
    topics = tmp_path / "t.tsv"
    topics.write_bytes(b"\xef\xbb\xbfq1\tfirst line\r\nq2\tsecond\r\n")
    from sparc_es.corpus.sources import read_corpus
    from sparc_es.evaluation.trec import read_topics

    sentences = list(read_corpus([jsonl, text]))
    assert [s.id for s in sentences[:2]] == ["a", "b"]
    assert [s.text for s in sentences[2:]] == ["A first paragraph.", "It has two sentences.", "A second paragraph."]
    # offsets count characters of the text as read, the byte-order mark left out
    assert text.read_bytes().decode("utf-8-sig")[sentences[2].start: sentences[2].end] == "A first paragraph."
    assert list(read_topics(topics)) == [("q1", "first line"), ("q2", "second")]


def test_duplicate_ids_name_both_lines(tmp_path, tiny_model_dir, cli):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "text": "One."}\n{"id": "b", "text": "Two."}\n{"id": "a", "text": "Three."}\n')
    rc, _, err = cli("encode", "--corpus", corpus, "--output", tmp_path / "enc", "--model",
                     tiny_model_dir, "--quiet")
    assert one_line_error(rc, err) and "c.jsonl:3: duplicate sentence id 'a' (first seen at" in err
    assert "c.jsonl:1)" in err


def test_control_characters_are_removed_counted_and_never_printed(tmp_path, tiny_model_dir, cli):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "x", "text": "Bell\x07 and escape \x1b[31mred\x1b[0m and nul\x00 here."}) + "\n"
                      + json.dumps({"id": "y", "text": "A clean sentence about red."}) + "\n")
    rc, _, err = cli("encode", "--corpus", corpus, "--output", tmp_path / "enc", "--model",
                     tiny_model_dir, "--quiet")
    assert rc == 0 and "removed 4 control characters" in err and "e.g. in x" in err  # BEL, 2 x ESC, NUL
    assert Manifest.read(tmp_path / "enc").control_characters_removed == 4
    stored = {r["id"]: r["contents"] for r in iter_vectors(tmp_path / "enc")}
    assert stored["x"] == "Bell and escape [31mred[0m and nul here."
    # an index made before this check (or by hand) still never sends escape codes to the terminal
    from sparc_es.answers.show import Shown, render
    from sparc_es.engines import Hit

    out = render(Shown(Hit(id="old", score=1.0, text="an \x1b[2J old \x07 text", doc="d\x1b"), rank=1,
                       context="a \x1b[1m paragraph \x00"), "old text", color=False)
    assert "an \ufffd[2J old \ufffd text" in out and not any(c in out for c in "\x00\x07\x1b")


def test_broken_model_folders_are_one_line_errors(tmp_path, tiny_model_dir, cli):
    import shutil

    def broken(name: str, damage) -> Path:
        folder = tmp_path / name
        shutil.copytree(tiny_model_dir, folder)
        damage(folder)
        return folder

    def truncate(folder):
        weights = folder / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:1000])

    def mistype(folder):
        config = json.loads((folder / "sparc_config.json").read_text())
        config["top_k"] = "many"
        (folder / "sparc_config.json").write_text(json.dumps(config))

    def no_tokenizer(folder):
        for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
            (folder / name).unlink(missing_ok=True)

    for name, damage, expected in [("truncated", truncate, "cannot load the checkpoint"),
                                   ("mistyped", mistype, "field 'top_k' is 'many'; it must be int"),
                                   ("no-tokenizer", no_tokenizer, "tokenizer")]:
        rc, _, err = cli("explain", "--model", broken(name, damage), "A sentence.")
        assert one_line_error(rc, err) and expected in err, err


@pytest.mark.jvm
def test_long_questions_do_not_warn(tmp_path, tiny_model, cli):
    from sparc_es.encode.run import encode_corpus
    from sparc_es.engines.lucene import build_index

    encode_corpus([write_corpus(tmp_path / "c.jsonl")], tmp_path / "enc", tiny_model, progress=False, idf=False)
    build_index(tmp_path / "enc", tmp_path / "idx")
    rc, out, err = cli("search", "--index", tmp_path / "idx", "--json", "stored weights " * 1300)  # 2,600 tokens
    assert rc == 0 and json.loads(out) and err == ""


@pytest.mark.jvm
def test_search_json_is_one_document(tmp_path, tiny_model, cli):
    from sparc_es.encode.run import encode_corpus
    from sparc_es.engines.lucene import build_index

    encode_corpus([write_corpus(tmp_path / "c.jsonl")], tmp_path / "enc", tiny_model, progress=False, idf=False)
    build_index(tmp_path / "enc", tmp_path / "idx")
    rc, out, _ = cli("search", "--index", tmp_path / "idx", "--json", "-k", 2, "tokens", "weights")
    answers = json.loads(out)
    assert rc == 0 and [a["question"] for a in answers] == ["tokens", "weights"]
    assert all(len(a["hits"]) <= 2 for a in answers)


# --- environment faults --------------------------------------------------------------------

def test_disk_full_while_encoding_names_the_folder_and_resumes(tmp_path, tiny_model_dir, cli, monkeypatch):
    corpus = write_corpus(tmp_path / "c.jsonl")
    args = ["encode", "--corpus", corpus, "--model", tiny_model_dir, "--shard-size", 2, "--quiet"]
    real, calls = encode_module._write_pieces, []

    def full(*a, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*a, **kw)

    monkeypatch.setattr(encode_module, "_write_pieces", full)
    rc, _, err = cli(*args, "--output", tmp_path / "enc")
    assert one_line_error(rc, err) and f"{tmp_path / 'enc'}: No space left on device" in err and "resume" in err
    monkeypatch.undo()
    rc, _, err = cli(*args, "--output", tmp_path / "enc")
    assert rc == 0 and Manifest.read(tmp_path / "enc").sentences == 6, err


@pytest.mark.jvm
def test_disk_full_while_indexing_keeps_the_old_index(tmp_path, tiny_model, cli, monkeypatch):
    from sparc_es.encode.run import encode_corpus
    from sparc_es.engines import lucene

    encode_corpus([write_corpus(tmp_path / "c.jsonl")], tmp_path / "enc", tiny_model, progress=False, idf=False)
    assert cli("index", "--input", tmp_path / "enc", "--index", tmp_path / "idx")[0] == 0
    before = sorted(p.name for p in (tmp_path / "idx").iterdir())

    def full(encoded, index):
        raise OSError(errno.ENOSPC, "No space left on device", str(index / "sentences.sqlite"))

    monkeypatch.setattr(lucene, "copy_into", full)
    rc, _, err = cli("index", "--input", tmp_path / "enc", "--index", tmp_path / "idx", "--overwrite",
                     "--quiet")
    assert one_line_error(rc, err) and "No space left on device" in err and "nothing was changed" in err
    assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == before
    assert not list(tmp_path.glob(".idx.building*"))


def test_unexpected_errors_are_one_line_unless_debugging(tmp_path, cli, monkeypatch):
    from sparc_es.cli import eval as eval_verb

    def boom(args):
        raise RuntimeError("something\nunforeseen")

    monkeypatch.setattr(eval_verb, "command", boom)
    rc, _, err = cli("eval", "--run", "r", "--qrels", "q")
    assert one_line_error(rc, err) and "RuntimeError: something unforeseen (rerun with --debug" in err
    with pytest.raises(RuntimeError):
        main(["--debug", "eval", "--run", "r", "--qrels", "q"])
    monkeypatch.setenv("SPARC_ES_DEBUG", "1")
    with pytest.raises(RuntimeError):
        main(["eval", "--run", "r", "--qrels", "q"])


def test_the_one_line_of_an_error_says_what_and_where_and_no_more():
    from sparc_es.errors import InputError, SparcError, one_line

    assert one_line(InputError("a.jsonl", "empty sentence", 3)) == "a.jsonl:3: empty sentence"
    assert one_line(OSError(errno.ENOSPC, "No space left on device", "/d/x")) == "/d/x: No space left on device"
    assert one_line(RuntimeError("some\n  thing"), hint=" (see more)") == "RuntimeError: some thing (see more)"
    # for another machine's reader: the first line (a stack follows it), and a bounded one
    stack = RuntimeError("it failed\n\tat org.apache.lucene.search.IndexSearcher.search")
    assert one_line(stack, most=300) == "RuntimeError: it failed"
    assert one_line(SparcError("x" * 400), most=300) == "x" * 297 + "..."


class _Words:
    """An engine whose hits are a question's words (id WORD#i, document WORD, scores 10, 9, ...);
    its ``fail_at``-th batch fails."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.batches, self.fail_at = [], fail_at

    def batch_search(self, topics, k=1000, threads=1):
        from sparc_es.engines.base import Hit

        topics = list(topics)
        self.batches.append([qid for qid, _ in topics])
        if len(self.batches) == self.fail_at:
            raise RuntimeError("the engine died")
        return {qid: [Hit(id=f"{w}#{i}", score=10.0 - i, doc=w) for i, w in enumerate(text.split())][:k]
                for qid, text in topics}


def test_a_run_is_searched_a_batch_at_a_time_and_appears_only_when_complete(tmp_path):
    from sparc_es.evaluation.runs import RunFile, hit_documents, write_runs
    from sparc_es.evaluation.trec import TrecRunWriter

    topics = [(f"q{i}", "alpha beta alpha gamma") for i in range(5)]
    engine, done = _Words(), []
    [written] = write_runs([RunFile(engine, tmp_path / "run.trec", "t")], iter(topics), 3, batch=2,
                           progress=done.append)
    assert engine.batches == [["q0", "q1"], ["q2", "q3"], ["q4"]] and done == [2, 4, 5] and written.queries == 5
    with TrecRunWriter(tmp_path / "whole.trec", tag="t") as whole:  # the same bytes as one writer of it all
        for qid, hits in _Words().batch_search(topics, k=3).items():
            whole.write(qid, hits)
    assert (tmp_path / "run.trec").read_bytes() == (tmp_path / "whole.trec").read_bytes()

    # documents: each one's best sentence among the top depth, k of them (three exist: all short of 4)
    [written] = write_runs([RunFile(_Words(), tmp_path / "docs.trec")], topics, 4, batch=2, depth=4,
                           documents=hit_documents)
    rows = [line.split() for line in (tmp_path / "docs.trec").read_text().splitlines()]
    assert [r[2] for r in rows[:3]] == ["alpha", "beta", "gamma"] and written.short == 5
    write_runs([RunFile(_Words(), tmp_path / "above.trec")], topics, 3, batch=2, min_score=9.5)
    assert len((tmp_path / "above.trec").read_text().splitlines()) == 5  # one hit each scores 9.5 or more

    # an engine that fails: the file already there is left as it was, and no partial file stays
    before = (tmp_path / "run.trec").read_bytes()
    with pytest.raises(RuntimeError, match="the engine died"):
        write_runs([RunFile(_Words(), tmp_path / "other.trec"), RunFile(_Words(fail_at=2), tmp_path / "run.trec")],
                   topics, 3, batch=2)
    assert (tmp_path / "run.trec").read_bytes() == before and not (tmp_path / "other.trec").exists()
    assert not list(tmp_path.glob("*.partial"))

    # a path as a string, as everywhere else (an AttributeError), and a batch of 0 (a bare ValueError)
    write_runs([RunFile(_Words(), str(tmp_path / "named.trec"), "t")], topics, 3, batch=2)
    assert (tmp_path / "named.trec").read_bytes() == (tmp_path / "whole.trec").read_bytes()
    from sparc_es.errors import SparcError

    with pytest.raises(SparcError, match="batch is how many questions are searched at once, 1 or more, not 0"):
        write_runs([RunFile(_Words(), tmp_path / "none.trec")], topics, 3, batch=0)


def test_es_urls_and_index_names_are_checked(tmp_path, cli):
    rc, _, err = cli("search", "--engine", "es", "--es-url", "localhost:9200", "--es-index", "x", "q")
    assert one_line_error(rc, err) and "needs its scheme" in err
    (tmp_path / "enc").mkdir()
    rc, _, err = cli("index", "--engine", "es", "--es-url", "http://127.0.0.1:9", "--es-index",
                     "Bad Name", "--input", tmp_path / "enc")
    assert one_line_error(rc, err) and "invalid Elasticsearch index name 'Bad Name'" in err


def test_a_slow_cluster_times_out_in_one_line(tmp_path, cli):
    """A server that accepts connections and never answers: the search gives up after --es-timeout."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        started = time.time()
        rc, _, err = cli("search", "--engine", "es", "--es-url", url, "--es-index", "x",
                         "--es-timeout", 0.5, "--es-retries", 0, "question")
        assert one_line_error(rc, err) and "Elasticsearch" in err and time.time() - started < 30
    finally:
        stop.set()
        thread.join()
        for s in held:
            s.close()
        server.close()


# --- concurrency ---------------------------------------------------------------------------

@pytest.mark.data
@pytest.mark.jvm
def test_many_threads_get_the_same_answers_as_one(squad_sample, tiny_model, tmp_path):
    from sparc_es.encode.run import encode_corpus
    from sparc_es.engines import open_engine
    from sparc_es.engines.lucene import build_index

    sentences, questions = squad_sample
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(s.to_json()) + "\n" for s in sentences))
    encode_corpus([corpus], tmp_path / "enc", tiny_model, progress=False, idf=False)
    build_index(tmp_path / "enc", tmp_path / "idx")
    engine = open_engine("lucene", tmp_path / "idx")
    try:
        one = [engine.search(q, 10) for q in questions]
        for _ in range(3):  # unserialised, 8 threads lost query terms in about 1% of questions
            with ThreadPoolExecutor(max_workers=8) as pool:
                many = list(pool.map(lambda q: engine.search(q, 10), questions))
            assert many == one
        topics = [(f"q{i}", q) for i, q in enumerate(questions)]
        assert engine.batch_search(topics, k=20, threads=4) == engine.batch_search(topics, k=20, threads=1)
    finally:
        engine.close()


if os.name != "posix":  # flock and SIGKILL
    pytestmark = pytest.mark.skip("POSIX only")
