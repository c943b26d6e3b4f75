"""Encoding on Ray (``sparc_es.encode.ray``): the encoded folder is the single process's, byte for byte.

On a real corpus (``tests/data/docs``, read with the shipped default model, IDF on as the CLI has it)
and a local Ray of 2 CPUs with 2 actors of 1 thread each, against ``encode_corpus`` with the
``Local`` backend at 1 thread: the records (``vectors.jsonl``), the corpus statistics (``lexical.json``:
the map-reduce's merge equals the single-process count), the passage cache, the sentence store's
rows and the manifest (but its timings and generation id) are the same. A small batch size makes
many pieces, so passages shared by two pieces (a paragraph across a piece boundary) are covered.
A run of the CLI killed with SIGKILL resumes to the same folder. The Ray tests skip, with the
reason, only where ray is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from processes import kill_midway

from sparc_es.model.lexical import CorpusStatistics

DOCS = Path(__file__).parent / "data" / "docs"
BATCH = 4  # pieces of 32 sentences: eight of them in the 238 sentences of tests/data/docs
TIMING = ("seconds", "sentences_per_second", "generation")
needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="ray is not installed: pip install 'sparc-es[ray]'")


# --- the reduce: exact sums (no Ray needed) ---------------------------------------------------

def test_merged_statistics_are_the_statistics_of_the_whole():
    token_ids = [[1, 2, 2, 3], [2, 5], [7], [1, 1, 1], [3, 9, 2]]
    stems = [["run", "fast"], ["run"], [], ["jump", "run"], ["fast", "fast"]]
    words = [["v1.2"], [], ["8081", "v1.2"], [], ["8081"]]
    whole = CorpusStatistics(stem_df={}, word_df={})
    whole.add(token_ids, stems, words)
    for cut in range(len(token_ids) + 1):
        a, b = CorpusStatistics(stem_df={}, word_df={}), CorpusStatistics(stem_df={}, word_df={})
        a.add(token_ids[:cut], stems[:cut], words[:cut])
        b.add(token_ids[cut:], stems[cut:], words[cut:])
        assert a.merge(b) == whole
    assert whole.sentences == 5 and whole.words == 7 and whole.stem_df == {"run": 3, "fast": 2, "jump": 1}
    assert CorpusStatistics().merge(whole) == whole  # the empty statistics: the identity, on either side
    assert CorpusStatistics(3, 4, {1: 3}).merge(CorpusStatistics(stem_df={})) == CorpusStatistics(3, 4, {1: 3})
    with pytest.raises(ValueError, match="stem_df"):
        CorpusStatistics(3, 4, {1: 3}).merge(whole)  # counted without stems and with: not one count


def test_ray_options_need_ray(capsys, tmp_path):
    from sparc_es.cli import main

    assert main(["encode", "--corpus", str(DOCS), "--output", str(tmp_path / "x"), "--ray-actors", "2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("sparc-es: error: ") and "--ray" in err and err.count("\n") == 1


def test_without_ray_installed_the_error_says_what_to_install(monkeypatch):
    import sparc_es.encode.ray as distributed
    from sparc_es.errors import SparcError

    monkeypatch.setattr(distributed, "ray", None)
    with pytest.raises(SparcError, match=r"pip install 'sparc-es\[ray\]'"):
        distributed.RayBackend()


def test_a_cluster_address_nobody_answers_is_one_line_at_once(capsys, tmp_path):
    """Ray retries an address with nothing behind it for minutes; encode says so in one line."""
    import socket

    from sparc_es.cli import main

    with socket.socket() as taken:  # a free port, closed again: nothing listens there
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
    for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        assert main(["encode", "--corpus", str(DOCS), "--output", str(tmp_path / "x"), "--ray", address]) == 1
        err = capsys.readouterr().err
        assert err == f"sparc-es: error: cannot reach the Ray cluster at {address}: Connection refused\n", err
    assert not (tmp_path / "x").exists()


# --- Ray ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def model():
    import torch

    from sparc_es.model import SparcModel

    before = torch.get_num_threads()
    torch.set_num_threads(1)  # the actors' arithmetic: 1 thread each
    yield SparcModel.load("default")
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def reference(model, tmp_path_factory) -> Path:
    """The single-process encode of tests/data/docs at 1 thread."""
    from sparc_es.encode.backend import Local
    from sparc_es.encode.run import encode_corpus

    out = tmp_path_factory.mktemp("local") / "encoded"
    encode_corpus([str(DOCS)], out, model, batch_size=BATCH, idf=True, progress=False, backend=Local())
    return out


def assert_same_folder(got: Path, want: Path, passages: bool = True) -> None:
    for name in ["vectors/vectors.jsonl", "lexical.json"] + (["passages.bin"] if passages else []):
        assert (got / name).read_bytes() == (want / name).read_bytes(), name
    meta = [{k: v for k, v in json.loads((f / "meta.json").read_text()).items() if k not in TIMING}
            for f in (got, want)]
    assert meta[0] == meta[1]
    assert _rows(got) == _rows(want)
    lines = (got / "vectors/vectors.jsonl").read_bytes().splitlines()
    ids = [json.loads(line)["id"] for line in lines]
    assert len(ids) == len(set(ids)) == meta[0]["sentences"]  # every record once


def _rows(folder: Path) -> list:
    db = sqlite3.connect(folder / "sentences.sqlite")
    try:
        return [db.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall() for table in ("sentences", "contexts")]
    finally:
        db.close()


@needs_ray
@pytest.mark.slow
def test_a_ray_encode_is_the_single_process_encode(model, reference, tmp_path):
    from sparc_es.corpus.sources import as_source
    from sparc_es.encode.backend import first_pass as _first_pass
    from sparc_es.encode.ray import RayBackend
    from sparc_es.encode.run import encode_corpus

    # Blocks of 64 texts: the statistics are counted in four parts, on both actors, and merged.
    with RayBackend(actors=2, threads=1, count_block=64) as backend:
        assert backend.pieces_at_once == 8 and backend.actors == 2  # the first connects
        sentences, merged = backend.count(as_source([str(DOCS)]), model)
        _, counted = _first_pass(as_source([str(DOCS)]), model)
        assert sentences == 238 and merged == counted  # the reduce is exact: equal dataclasses

        out = tmp_path / "ray"
        manifest = encode_corpus([str(DOCS)], out, model, batch_size=BATCH, idf=True, progress=False,
                                 backend=backend)
        assert manifest.sentences == 238
        assert_same_folder(out, reference)


@needs_ray
@pytest.mark.slow
def test_ray_workers_with_another_model_fail_on_one_line(model, tmp_path):
    from sparc_es.encode.ray import RayBackend
    from sparc_es.encode.run import encode_corpus
    from sparc_es.errors import ModelError

    # The actors load another model than the one being encoded: refused before anything is encoded.
    with RayBackend(actors=1, threads=1, model_path="splade-bert-tiny") as backend:
        with pytest.raises(ModelError, match="Ray worker on") as failed:
            encode_corpus([str(DOCS)], tmp_path / "out", model, batch_size=BATCH, idf=True, progress=False,
                          backend=backend)
    assert "\n" not in str(failed.value) and "--model" in str(failed.value)
    assert not (tmp_path / "out").exists()  # failed in the first pass: the folder was never touched


@needs_ray
@pytest.mark.slow
def test_a_ray_worker_that_dies_is_one_line_without_rays_tracebacks(tmp_path):
    """SIGKILL of the encoding actor's process (as the OOM killer does): the command ends with one
    line, and none of Ray's or Ray Data's own tracebacks comes before it."""
    import os
    import signal
    import time

    def attempt(out: Path) -> tuple[subprocess.Popen, str, str | None]:
        args = ["encode", "--corpus", str(DOCS), "--output", str(out), "--ray", "--ray-actors", "1",
                "--threads", "1", "--batch-size", str(BATCH), "--quiet"]
        proc = subprocess.Popen([sys.executable, "-m", "sparc_es", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        killed, deadline = None, time.time() + 300
        while killed is None and time.time() < deadline and proc.poll() is None:
            for pid in subprocess.run(["pgrep", "-f", "ray::"], capture_output=True, text=True).stdout.split():
                try:
                    if "_Worker" in Path(f"/proc/{pid}/cmdline").read_text():
                        os.kill(int(pid), signal.SIGKILL)
                        killed = pid
                except (OSError, ProcessLookupError):
                    pass
            time.sleep(0.2)
        _, err = proc.communicate(timeout=300)
        return proc, err, killed

    # On a loaded machine the kill can land after the worker's last batch, and the encode then ends
    # well: tried again (at most three times) until the worker dies with work left.
    for n in range(3):
        proc, err, killed = attempt(tmp_path / f"out{n}")
        assert killed is not None, err
        if proc.returncode != 0:
            break
    assert proc.returncode == 1, err
    assert err.strip().splitlines()[-1].startswith("sparc-es: error: a Ray worker died (ActorDiedError")
    assert "Traceback" not in err and "ERROR" not in err, err


@needs_ray
@pytest.mark.slow
def test_a_killed_ray_encode_resumes_to_the_same_folder(reference, tmp_path):
    out = tmp_path / "encoded"
    # Shards of 64 sentences: two whole pieces each, so the pieces are the reference's.
    args = ["encode", "--corpus", str(DOCS), "--output", out, "--ray", "--ray-actors", "2", "--threads", "1",
            "--shard-size", "64", "--batch-size", BATCH, "--quiet"]
    done = kill_midway(args, out / "progress.json", 64, timeout=400)
    assert 64 <= done < 238
    rerun = subprocess.run([sys.executable, "-m", "sparc_es", *map(str, args)], capture_output=True, text=True,
                           timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert "encoded 238 sentences" in rerun.stdout
    assert_same_folder(out, reference, passages=False)



@needs_ray
@pytest.mark.slow
def test_more_actors_than_this_machine_has_cpus_is_said(capsys):
    import os

    from sparc_es.encode.ray import RayBackend

    many = (os.cpu_count() or 1) + 1
    with RayBackend(actors=many, threads=1) as backend:
        assert backend.pieces_at_once > 0  # connected: a local Ray of that many (logical) CPUs
    err = capsys.readouterr().err
    assert f"{many} actors of 1 thread ask for {many} CPUs of this machine's {os.cpu_count()}: they share them" \
        in err, err


@needs_ray
@pytest.mark.slow
def test_a_ctrl_c_while_ray_shuts_down_is_said_and_the_shutdown_finishes(capsys, monkeypatch):
    """A run over (its work committed): a first Ctrl-C during Ray's shutdown would leave Ray's
    processes running and say "run the same command again to resume"; it is said and ignored, and
    a second stops, saying what may still run."""
    import signal

    import ray

    from sparc_es.encode.ray import RayBackend

    real, handler = ray.shutdown, signal.getsignal(signal.SIGINT)
    for presses in (1, 2):
        def pressed(*args, presses=presses, **kwargs):
            for _ in range(presses):
                signal.raise_signal(signal.SIGINT)
            return real(*args, **kwargs)

        monkeypatch.setattr(ray, "shutdown", pressed)
        backend = RayBackend(actors=1, threads=1)
        assert backend.pieces_at_once > 0  # a local Ray, started for this backend
        if presses == 1:
            backend.close()
            assert not ray.is_initialized()
            assert "stopping Ray (a few seconds; Ctrl-C again leaves it running)" in capsys.readouterr().err
        else:
            with pytest.raises(KeyboardInterrupt, match="while Ray was shutting down: its processes may still run"):
                backend.close()
            real()
    assert signal.getsignal(signal.SIGINT) == handler and not ray.is_initialized()  # the handler put back


@needs_ray
@pytest.mark.slow
def test_sigterm_under_the_command_is_ctrl_c_with_ray_too(capsys, monkeypatch):
    """ray.init puts its own SIGTERM handler in (sys.exit(15): no message, exit 15); the command's,
    which takes SIGTERM as Ctrl-C, is put back, and a SIGTERM during Ray's shutdown is waited
    through as a first Ctrl-C is."""
    import signal

    import ray

    from sparc_es.cli import _Terminated
    from sparc_es.encode.ray import RayBackend

    mine, real = _Terminated(), ray.shutdown
    before = signal.signal(signal.SIGTERM, mine)
    try:
        def terminated(*args, **kwargs):
            signal.raise_signal(signal.SIGTERM)
            return real(*args, **kwargs)

        backend = RayBackend(actors=1, threads=1)
        assert backend.pieces_at_once > 0  # a local Ray, started for this backend
        assert signal.getsignal(signal.SIGTERM) is mine
        monkeypatch.setattr(ray, "shutdown", terminated)
        backend.close()
        assert mine.received and not ray.is_initialized()
        assert "stopping Ray (a few seconds; Ctrl-C again leaves it running)" in capsys.readouterr().err
    finally:
        signal.signal(signal.SIGTERM, before)


@needs_ray
@pytest.mark.slow
def test_a_local_ray_refuses_clients_without_a_token():
    """Ray listens on every interface, and an unauthenticated Ray is code execution for whoever
    reaches it: the local Ray sparc-es starts (Ray 2.52+, token authentication by default) refuses a
    client that sends no token."""
    import os

    import ray

    from sparc_es.encode.ray import RayBackend

    if os.environ.get("RAY_AUTH_MODE", "token") != "token":
        pytest.skip(f"RAY_AUTH_MODE={os.environ['RAY_AUTH_MODE']} is set: the user's Ray settings are kept")
    with RayBackend(actors=1, threads=1) as backend:
        backend.connect()
        gcs = ray.get_runtime_context().gcs_address
        outsider = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        outsider["RAY_AUTH_MODE"] = "disabled"  # a client that sends no token
        tried = subprocess.run([sys.executable, "-c", f"import ray; ray.init(address={gcs!r}); print('IN')"],
                               env=outsider, capture_output=True, text=True, timeout=180)
    assert "IN" not in tried.stdout and tried.returncode != 0
    assert "Authentication token is missing or incorrect" in tried.stderr, tried.stderr[-2000:]
