"""Trust: a resume never mixes two versions of the input, and sparc-es deletes only its own folders.

Kills are real (SIGKILL of a real ``sparc-es encode`` process), and so are the changes of input
between the kill and the rerun (a file added to the corpus folder, a source document edited in
the loopback Elasticsearch API).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from processes import kill_midway

from sparc_es.cli import main
from sparc_es.layout.manifest import Manifest
from sparc_es.layout.records import iter_vectors

SENTENCES = ["Lucene stores integer impacts.", "Questions are bags of tokens.", "Elasticsearch keeps nine bits.",
             "The demo corpus is tiny.", "Sentences are encoded once.", "Scores are sums of stored weights."]


def write_jsonl(path: Path, ids: range, prefix: str = "s") -> Path:
    path.write_text("".join(json.dumps({"id": f"{prefix}{i}", "text": SENTENCES[i % 6] + f" Number {i}.",
                                        "context": "A paragraph."}) + "\n" for i in ids))
    return path


def one_line_error(rc: int, err: str) -> bool:
    return rc == 1 and err.startswith("sparc-es: error: ") and err.count("\n") == 1


def rerun(args: list) -> str:
    done = subprocess.run([sys.executable, "-m", "sparc_es", *map(str, args)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stderr


def records(folder: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for r in iter_vectors(folder):
        assert r["id"] not in out, f"{r['id']} stored twice"
        out[r["id"]] = r["contents"]
    return out


@pytest.mark.parametrize("idf", ["--idf", "--no-idf"])
@pytest.mark.slow
def test_a_file_added_before_the_kill_point_restarts_the_encode(tmp_path, tiny_model_dir, idf):
    """Killed midway, a file that sorts first added to the corpus folder: the rerun must not skip
    by count (which stored one sentence twice and lost the new one); it starts again and says so.
    With --no-idf no corpus statistics change: the fingerprint of what was read catches it."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_jsonl(corpus / "b.jsonl", range(3000))
    out = tmp_path / "enc"
    args = ["encode", "--corpus", corpus, "--output", out, "--model", tiny_model_dir, "--shard-size", 100,
            "--batch-size", 16, "--quiet", "--threads", 1, idf]
    done = kill_midway(args, out / "progress.json", 200)
    assert 0 < done < 3000
    write_jsonl(corpus / "a.jsonl", range(1), prefix="new")
    err = rerun(args)
    stored = records(out)
    assert list(stored) == ["new0", *(f"s{i}" for i in range(3000))]  # every sentence once, in input order
    assert Manifest.read(out).sentences == 3001
    assert "corpus changed since the interrupted encode" in err and "starting again" in err


@pytest.mark.slow
def test_a_file_added_after_the_kill_point_is_simply_read(tmp_path, tiny_model_dir):
    """Without corpus statistics (--no-idf), sentences added after what was committed change
    nothing already encoded: the resume goes on, and reads them."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_jsonl(corpus / "a.jsonl", range(3000))
    out = tmp_path / "enc"
    args = ["encode", "--corpus", corpus, "--output", out, "--model", tiny_model_dir, "--shard-size", 100,
            "--batch-size", 16, "--quiet", "--threads", 1, "--no-idf"]
    kill_midway(args, out / "progress.json", 200)
    write_jsonl(corpus / "z.jsonl", range(2), prefix="new")
    err = rerun(args)
    assert "starting again" not in err
    assert list(records(out)) == [*(f"s{i}" for i in range(3000)), "new0", "new1"]


@pytest.mark.es
@pytest.mark.slow
def test_an_edited_source_document_restarts_an_encode_from_elasticsearch(tmp_path, tiny_model_dir, es_url):
    """``--from-es``: killed midway, a document already encoded is edited in the source index; the
    rerun starts again and stores what the index holds now (it used to keep stale sentences)."""
    from elasticsearch import helpers

    from sparc_es.corpus.sources import document_sentences
    from sparc_es.engines.elastic import Connection

    client = Connection(es_url).client()
    src = f"resume-src-{os.getpid()}"
    docs = {f"d{i:03d}": " ".join(f"{SENTENCES[(i + j) % 6]} Document {i} sentence {j}." for j in range(8))
            for i in range(400)}
    client.indices.create(index=src, mappings={"properties": {"body": {"type": "text"}}})
    try:
        helpers.bulk(client, ({"_index": src, "_id": i, "_source": {"body": t}} for i, t in docs.items()),
                     refresh=True)
        out = tmp_path / "enc"
        args = ["encode", "--from-es", src, "--text-field", "body", "--es-url", es_url, "--output", out,
                "--model", tiny_model_dir, "--shard-size", 100, "--batch-size", 16, "--quiet", "--threads", 1,
                "--no-idf"]
        done = kill_midway(args, out / "progress.json", 200)
        assert 0 < done < 3200
        first = next(iter_vectors(out))["id"].split("#")[0]  # a document whose sentences were committed
        client.index(index=src, id=first, document={"body": "An edited document. It has two sentences now."},
                     refresh=True)
        err = rerun(args)
        stored = records(out)
        edited = {s.id: s.text for s in document_sentences("An edited document. It has two sentences now.", first)}
        assert sorted(edited.values()) == ["An edited document.", "It has two sentences now."]
        assert {i: stored.get(i) for i in edited} == edited  # what the index holds now, nothing stale
        expected = {s.id: s.text for d, t in docs.items() if d != first for s in document_sentences(t, d)}
        expected.update(edited)
        assert stored == expected and Manifest.read(out).sentences == len(expected)
        assert "corpus changed since the interrupted encode" in err
    finally:
        client.indices.delete(index=src, ignore_unavailable=True)


# --- an update: killed, rerun, or asked for with --overwrite ----------------------------------

def test_update_and_overwrite_together_are_refused(tmp_path, tiny_model_dir, cli):
    corpus = write_jsonl(tmp_path / "c.jsonl", range(6))
    out = tmp_path / "enc"
    rc, _, err = cli("encode", "--corpus", corpus, "--output", out, "--model", tiny_model_dir,
                     "--quiet", "--update", "--overwrite")
    assert one_line_error(rc, err) and "pass one of them" in err and not out.exists()


def test_an_update_killed_between_its_renames_is_completed_by_the_rerun(tmp_path, tiny_model_dir, cli, capsys,
                                                                       monkeypatch):
    corpus = write_jsonl(tmp_path / "c.jsonl", range(20))
    out = tmp_path / "enc"
    common = ["encode", "--corpus", corpus, "--output", out, "--model", tiny_model_dir, "--quiet"]
    assert cli(*common)[0] == 0
    write_jsonl(corpus, range(2, 22))  # two sentences gone, two new
    rename = Path.rename

    def killed_after_the_first(self, target):  # the old folder moved aside, the new one not yet in place
        result = rename(self, target)
        if Path(target).name == ".enc.old":
            raise KeyboardInterrupt
        return result

    monkeypatch.setattr(Path, "rename", killed_after_the_first)
    assert main([str(a) for a in [*common, "--update"]]) == 130  # what Ctrl-C exits with
    monkeypatch.undo()
    assert not out.exists() and (tmp_path / ".enc.old").exists()
    capsys.readouterr()
    rc, out_text, err = cli(*common, "--update")
    assert rc == 0, err
    assert "completed the encode (--update or --overwrite) that was interrupted" in err
    manifest = Manifest.read(out)
    assert manifest.sentences == 20 and list(records(out)) == [f"s{i}" for i in range(2, 22)]
    assert not (tmp_path / ".enc.old").exists() and not (tmp_path / ".enc.update").exists()
    # and the next update still works, keeping the first encode's statistics
    write_jsonl(corpus, range(2, 23))
    rc, _, err = cli(*common, "--update")
    assert rc == 0, err and Manifest.read(out).reused == 20


def _killed_after_two_shards(monkeypatch) -> None:
    """The next encode stops as on Ctrl-C when it writes its third shard (two committed)."""
    from sparc_es.encode import run as encode_module

    shards, real = 0, encode_module._write_pieces

    def killed(*a, **kw):
        nonlocal shards
        shards += 1
        if shards > 2:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(encode_module, "_write_pieces", killed)


def test_an_interrupted_update_resumes_with_the_path_written_another_way(tmp_path, tiny_model_dir, cli, capsys,
                                                                         monkeypatch):
    """``./data/x`` for ``data/x`` after a killed update used to be refused, and the advised
    --overwrite was ignored with --update."""
    corpus = write_jsonl(tmp_path / "c.jsonl", range(300))
    out = tmp_path / "enc"
    model = ["--model", tiny_model_dir, "--quiet", "--shard-size", 50, "--batch-size", 16]
    assert cli("encode", "--corpus", corpus, "--output", out, *model)[0] == 0
    write_jsonl(corpus, range(300), prefix="t")  # new ids: every sentence is written again
    _killed_after_two_shards(monkeypatch)
    assert main([str(a) for a in ["encode", "--corpus", corpus, "--output", out, *model, "--update"]]) == 130
    monkeypatch.undo()
    assert json.loads((tmp_path / ".enc.update" / "progress.json").read_text())["sentences"] > 0
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    rc, _, err = cli("encode", "--corpus", "./c.jsonl", "--output", "./enc", *model, "--update")
    assert rc == 0, err
    assert "starting again" not in err
    assert list(records(out)) == [f"t{i}" for i in range(300)]


# --- sparc-es deletes only its own folders ------------------------------------------------------

def users_folder(path: Path) -> Path:
    path.mkdir()
    (path / "thesis.tex").write_text("years of work")
    return path


def test_encode_overwrite_refuses_a_folder_sparc_es_did_not_make(tmp_path, tiny_model_dir, cli):
    corpus = write_jsonl(tmp_path / "c.jsonl", range(6))
    mine = users_folder(tmp_path / "mine")
    rc, _, err = cli("encode", "--corpus", corpus, "--output", mine, "--model", tiny_model_dir,
                     "--quiet", "--overwrite")
    assert one_line_error(rc, err) and "was not made by sparc-es" in err
    assert (mine / "thesis.tex").read_text() == "years of work"
    out = tmp_path / "enc"  # sparc-es's own folder is replaced
    for _ in range(2):
        rc, _, err = cli("encode", "--corpus", corpus, "--output", out, "--model", tiny_model_dir,
                         "--quiet", "--overwrite")
        assert rc == 0, err


@pytest.mark.jvm
def test_index_overwrite_refuses_a_folder_sparc_es_did_not_make(tmp_path, tiny_model_dir, cli):
    corpus = write_jsonl(tmp_path / "c.jsonl", range(6))
    enc = tmp_path / "enc"
    assert cli("encode", "--corpus", corpus, "--output", enc, "--model", tiny_model_dir, "--quiet")[0] == 0
    mine = users_folder(tmp_path / "mine")
    rc, _, err = cli("index", "--input", enc, "--index", mine, "--overwrite", "--quiet")
    assert one_line_error(rc, err) and "was not made by sparc-es" in err
    assert (mine / "thesis.tex").exists() and not list(tmp_path.glob(".mine.building*"))
    index = tmp_path / "index"
    for _ in range(2):
        rc, _, err = cli("index", "--input", enc, "--index", index, "--overwrite", "--quiet")
        assert rc == 0, err


def test_an_interrupted_overwrite_keeps_the_finished_encode_and_its_rerun_resumes(tmp_path, tiny_model_dir, cli,
                                                                                 capsys, monkeypatch):
    """``encode --overwrite`` deleted the finished folder first: a Ctrl-C then left half an encode and
    lost the whole one, and "run the same command again to resume" started from 0."""
    from sparc_es.encode import run as encode_module

    corpus = write_jsonl(tmp_path / "c.jsonl", range(300))
    out, fresh = tmp_path / "enc", tmp_path / "fresh"
    model = ["--model", tiny_model_dir, "--quiet", "--shard-size", 50, "--batch-size", 16]
    assert cli("encode", "--corpus", corpus, "--output", out, *model)[0] == 0
    before = records(out)
    write_jsonl(corpus, range(300), prefix="t")
    assert cli("encode", "--corpus", corpus, "--output", fresh, *model)[0] == 0
    real = encode_module._write_pieces
    _killed_after_two_shards(monkeypatch)
    assert main([str(a) for a in ["encode", "--corpus", corpus, "--output", out, *model, "--overwrite"]]) == 130
    monkeypatch.undo()
    assert records(out) == before and Manifest.read(out).sentences == 300  # the finished encode, whole
    committed = json.loads((tmp_path / ".enc.update" / "progress.json").read_text())["sentences"]
    assert committed > 0
    capsys.readouterr()
    written = []
    monkeypatch.setattr(encode_module, "_write_pieces", lambda *a, **kw: written.append(1) or real(*a, **kw))
    rc, text, err = cli("encode", "--corpus", corpus, "--output", out, *model, "--overwrite")
    assert rc == 0 and "starting again" not in err, err
    assert f"resuming the interrupted encode: {committed} of 300 sentences were encoded before it stopped" in err
    assert re.search(r"encoded 300 sentences into .* in [\d.]+ s of encoding, [\d.]+ sentences/s; [\d.]+ MB on disk",
                     text), text
    assert records(out) == records(fresh) and not (tmp_path / ".enc.update").exists()
    assert len(written) < 300 // 50  # resumed: fewer shards than the whole corpus's (at most 50 sentences each)


@pytest.mark.jvm
def test_overwrite_replaces_a_folder_only_with_one_of_its_kind(tmp_path, tiny_model_dir, cli):
    """``index --overwrite`` onto an encoded folder replaced hours of encoding with an index, and
    ``encode --overwrite`` onto an index replaced it with an encoded folder."""
    corpus = write_jsonl(tmp_path / "c.jsonl", range(6))
    enc, other, index = tmp_path / "enc", tmp_path / "other", tmp_path / "index"
    for folder in (enc, other):
        assert cli("encode", "--corpus", corpus, "--output", folder, "--model", tiny_model_dir, "--quiet")[0] == 0
    assert cli("index", "--input", enc, "--index", index, "--quiet")[0] == 0
    rc, _, err = cli("index", "--input", enc, "--index", other, "--overwrite", "--quiet")
    assert one_line_error(rc, err) and "holds an encoded folder (made by sparc-es encode), not an index" in err
    assert Manifest.read(other).sentences == 6 and not list(tmp_path.glob(".other.*"))
    rc, _, err = cli("encode", "--corpus", corpus, "--output", index, "--model", tiny_model_dir, "--quiet",
                     "--overwrite")
    assert one_line_error(rc, err) and "holds an index (made by sparc-es index), not an encoded folder" in err
    assert (index / "lucene").is_dir()


def test_demo_refuses_a_workdir_it_did_not_make(tmp_path, cli):
    mine = users_folder(tmp_path / "mine")
    rc, _, err = cli("demo", "--workdir", mine, "--quiet")
    assert one_line_error(rc, err) and "was not made by sparc-es" in err
    assert (mine / "thesis.tex").exists()


# --- a reader sees one generation of an encoded folder ------------------------------------------

@pytest.mark.jvm
def test_an_index_built_while_an_update_swaps_its_input_fails_cleanly(tmp_path, tiny_model, cli, monkeypatch):
    """The impact index read from the old folder, texts and BM25 from the new: refused, nothing left."""
    from sparc_es.encode.run import encode_corpus
    from sparc_es.engines import lucene

    corpus = write_jsonl(tmp_path / "c.jsonl", range(10))
    enc = tmp_path / "enc"
    encode_corpus([corpus], enc, tiny_model, progress=False, idf=False)
    real = lucene.write_impact_index

    def meanwhile_an_update_finishes(*a, **kw):
        import logging

        result = real(*a, **kw)
        write_jsonl(corpus, range(10), prefix="t")
        logging.disable(logging.WARNING)  # the update's own notice, another process's in truth
        try:
            encode_corpus([corpus], enc, tiny_model, progress=False, idf=False, update=True)
        finally:
            logging.disable(logging.NOTSET)
        return result

    monkeypatch.setattr(lucene, "write_impact_index", meanwhile_an_update_finishes)
    rc, _, err = cli("index", "--input", enc, "--index", tmp_path / "index", "--quiet")
    assert one_line_error(rc, err) and "was replaced while it was read" in err
    assert not (tmp_path / "index").exists() and not list(tmp_path.glob(".index.building*"))
    monkeypatch.undo()
    rc, _, err = cli("index", "--input", enc, "--index", tmp_path / "index", "--quiet")
    assert rc == 0, err


def test_the_first_pass_counts_the_sentences_it_reads(tmp_path, tiny_model):
    """It returned 0 with a model: the tuple read the count before the pass ran (a wrong bar total)."""
    from sparc_es.corpus.sources import Files
    from sparc_es.encode.backend import first_pass as _first_pass

    corpus = write_jsonl(tmp_path / "c.jsonl", range(7))
    total, statistics = _first_pass(Files((str(corpus),)), tiny_model)
    assert total == 7 == statistics.sentences


# --- an update from other corpus folders, or into no folder ---------------------------------------

def test_an_update_from_other_corpus_folders_is_refused_naming_both(tmp_path, tiny_model_dir, cli):
    """First --corpus corpus-up, then --corpus corpus-up/pip --update renamed every id silently
    ("78 unchanged kept, 0 encoded, 294 removed"): ids are paths inside the folders given."""
    corpus = tmp_path / "corpus-up"
    (corpus / "pip").mkdir(parents=True)
    (corpus / "pip" / "install.md").write_text("Install it with pip.\n")
    (corpus / "other.md").write_text("Another page.\n")
    out = tmp_path / "enc"
    model = ["--model", tiny_model_dir, "--quiet"]
    assert cli("encode", "--corpus", corpus, "--output", out, *model)[0] == 0
    before = (out / "meta.json").read_text()
    rc, _, err = cli("encode", "--corpus", corpus / "pip", "--output", out, *model, "--update")
    assert one_line_error(rc, err), err
    assert (f"{out}: was encoded from {corpus}, not {corpus / 'pip'}; sentence ids are paths inside the corpus "
            "folders") in err and "--overwrite" in err
    assert (out / "meta.json").read_text() == before
    rc, out_text, err = cli("encode", "--corpus", corpus / "pip", "--output", out, *model, "--overwrite")
    assert rc == 0 and "encoded 1 sentence into" in out_text, err
    (corpus / "pip" / "more.md").write_text("A new page.\n")  # the same folder, written another way
    rc, out_text, err = cli("encode", "--corpus", f"{corpus}/./pip/", "--output", out, *model, "--update")
    assert rc == 0 and "1 encoded, 1 unchanged kept, 0 removed" in out_text, err


def test_an_update_into_no_folder_encodes_the_whole_corpus_and_says_so(tmp_path, tiny_model_dir, cli):
    corpus = write_jsonl(tmp_path / "c.jsonl", range(3))
    out = tmp_path / "enc"
    rc, text, err = cli("encode", "--corpus", corpus, "--output", out, "--model", tiny_model_dir, "--quiet",
                        "--update")
    assert rc == 0 and "encoded 3 sentences" in text, err
    assert err == f"sparc-es encode: {out}: no such folder, so nothing to update: encoding the whole corpus\n"
    assert Manifest.read(out).sentences == 3


def test_the_librarys_notices_go_through_logging_and_the_cli_prints_them_as_its_lines(tmp_path, tiny_model, caplog):
    """encode_corpus(update=True) into no folder printed "sparc-es encode: ..." on standard error,
    out of a Python caller's reach: it is a logging record now, which the CLI prints as before."""
    import logging

    from sparc_es.encode.run import encode_corpus

    corpus = write_jsonl(tmp_path / "c.jsonl", range(3))
    with caplog.at_level(logging.WARNING, logger="sparc_es.notice"):
        encode_corpus([corpus], tmp_path / "enc", tiny_model, progress=False, update=True)
    [record] = [r for r in caplog.records if r.name == "sparc_es.notice.encode"]
    assert record.getMessage() == f"{tmp_path / 'enc'}: no such folder, so nothing to update: encoding the whole corpus"
    caplog.clear()
    corpus = write_jsonl(tmp_path / "c.jsonl", range(4))  # one more sentence: an index of the old folder is stale
    with caplog.at_level(logging.WARNING, logger="sparc_es.notice"):
        encode_corpus([corpus], tmp_path / "enc", tiny_model, progress=False, update=True)
    [record] = [r for r in caplog.records if r.name == "sparc_es.notice.encode"]  # the CLI alone said it
    assert record.getMessage().startswith(f"an index built from {tmp_path / 'enc'} before this update still holds "
                                          f"its old sentences: build it again (build_index('{tmp_path / 'enc'}', DIR, "
                                          "overwrite=True); on Elasticsearch, sparc_es.engines.elastic.build_index")
