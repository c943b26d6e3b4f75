"""The benchmark's cuts of an encoded folder (scripts/bench.py: a smaller K, a floor) are reused
only while their source is the folder they were cut from."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from sparc_es.encode.run import encode_corpus
from sparc_es.layout.manifest import Manifest
from sparc_es.layout.records import iter_vectors

SCRIPTS = Path(__file__).parents[1] / "scripts"


def _bench():
    sys.path.insert(0, str(SCRIPTS))  # bench.py imports its neighbours
    spec = importlib.util.spec_from_file_location("bench", SCRIPTS / "bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_cut_is_made_again_when_its_source_is_encoded_again(tmp_path, tiny_model):
    bench = _bench()
    corpus = tmp_path / "corpus.jsonl"
    texts = ["Lucene stores integer impacts in its postings.", "Paris is the capital of France.",
             "Green tea is made from unoxidised leaves of the tea plant."]
    corpus.write_text("".join(json.dumps({"id": f"s{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    encoded = tmp_path / "encoded"
    encode_corpus([corpus], encoded, tiny_model, factor=100, progress=False, idf=False)

    cut = bench.keep_top(encoded, tmp_path / "top2", 2)
    assert [len(r["vector"]) for r in iter_vectors(cut)] == [2, 2, 2]
    made = (cut / "meta.json").stat().st_mtime_ns
    assert bench.keep_top(encoded, cut, 2) == cut and (cut / "meta.json").stat().st_mtime_ns == made  # reused

    # the source encoded again, from another corpus: the cut must follow it
    corpus.write_text(json.dumps({"id": "other", "text": "A different corpus of one sentence."}) + "\n")
    encode_corpus([corpus], encoded, tiny_model, factor=100, progress=False, idf=False, overwrite=True)
    cut = bench.keep_top(encoded, cut, 2)
    assert [r["id"] for r in iter_vectors(cut)] == ["other"]
    assert Manifest.read(cut).generation == Manifest.read(encoded).generation
    floor = bench.keep_at_least(encoded, tmp_path / "min1", 1)
    assert [r["id"] for r in iter_vectors(floor)] == ["other"]


def test_a_gpu_times_encoding_only_and_a_missing_package_has_no_version(capsys):
    import torch

    bench = _bench()
    with pytest.raises(SystemExit) as stopped:
        bench.main(["--device", "cuda"])
    said = "--device times encoding only" if torch.cuda.is_available() else "torch sees 0 CUDA devices"
    assert stopped.value.code == 2 and said in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:
        bench.main(["--encoding-only", "--batch-size", "0"])
    assert stopped.value.code == 2 and "--batch-size must be at least 1" in capsys.readouterr().err
    assert bench.gpu_name("cpu") is None
    assert bench.installed("sparc-es-no-such-package") is None and bench.installed("numpy")
