"""``--device``: where the model runs. The GPU parity test runs where torch sees a CUDA device
(none on the CPU-only machines this project is built on: it is skipped there, saying so)."""

from __future__ import annotations

import pytest

from sparc_es.cli import main
from sparc_es.model import resolve_device


def test_auto_is_the_cpu_without_a_gpu_and_a_missing_gpu_is_one_line(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        assert resolve_device("auto") == "cuda:0"
    else:
        assert resolve_device("auto") == "cpu"
        corpus = tmp_path / "c.txt"
        corpus.write_text("One sentence. Another one.\n")
        rc = main(["encode", "--corpus", str(corpus), "--output", str(tmp_path / "enc"), "--device", "cuda:0",
                   "--quiet"])
        err = capsys.readouterr().err
        assert rc == 1 and err.count("\n") == 1 and "torch sees 0 CUDA devices" in err
        assert not (tmp_path / "enc").exists()
    assert resolve_device("cpu") == "cpu"
    with pytest.raises(Exception, match="choose auto, cpu, cuda or cuda:N"):
        resolve_device("gpu")


def test_the_gpu_stores_what_the_cpu_stores():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here: the GPU path is untested on this machine")
    from sparc_es.layout.records import quantize
    from sparc_es.model import SparcModel

    pairs = [(f"Sentence number {i} is about Lucene impacts and rank features.", "A paragraph.") for i in range(64)]
    cpu = [quantize(e.tokens, e.weights, 5.0) for e in SparcModel.load().encode(pairs)]
    gpu = [quantize(e.tokens, e.weights, 5.0) for e in SparcModel.load().to("cuda:0").encode(pairs, batch_size=64)]
    steps = tokens = 0
    for a, b in zip(cpu, gpu, strict=True):
        tokens += len(a.keys() ^ b.keys())
        steps += sum(abs(a.get(t, 0) - b.get(t, 0)) > 1 for t in a.keys() | b.keys())
    assert steps == 0  # at most one quantisation step apart
    assert tokens <= 2 * len(pairs)  # only near-ties at the cut may swap
