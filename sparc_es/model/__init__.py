"""Stage 3, the model: the single owner of what a sentence stores and how a question is read.

* :mod:`~sparc_es.model.config`: :class:`SparcConfig`, every setting of a model (``sparc_config.json``),
  validated, with the fingerprint rule;
* :mod:`~sparc_es.model.neural`: :class:`SparcModel`, the paper's f(v, s) (encoder, head, w) and
  f_P of the passage encoder; loading, saving, the fingerprint;
* :mod:`~sparc_es.model.stored`: :class:`Pipeline`, the composition of f with passage expansion,
  the top-K cut, IDF and the lexical term, in one documented order, for encoding and training;
* :mod:`~sparc_es.model.kernels`: the vocabulary-wide max-products;
* :mod:`~sparc_es.model.lexical`, :mod:`~sparc_es.model.idf`: the lexical term and IDF, from corpus statistics;
* :mod:`~sparc_es.model.query`: :class:`~sparc_es.model.query.QueryEncoder`, a question -> a bag of tokens;
* :mod:`~sparc_es.model.checkpoint`: model folders, weights files and their hashes;
* ``default/``: the shipped model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparc_es.model.config import FORMAT, Head, MaxOver, SparcConfig
    from sparc_es.model.neural import HEAD_FILE, SparcModel, resolve_device, weights_fingerprint
    from sparc_es.model.stored import EncodedSentence, Pipeline, Stages, passage_text, stored_weights

# Each public name's module, imported on first use: the stages below the model (a question's
# tokenizer, IDF, the lexical statistics) import this package's light modules without loading the
# network and its kernels (PEP 562).
_WHERE = {"FORMAT": "config", "Head": "config", "MaxOver": "config", "SparcConfig": "config",
          "HEAD_FILE": "neural", "SparcModel": "neural", "resolve_device": "neural", "weights_fingerprint": "neural",
          "EncodedSentence": "stored", "Pipeline": "stored", "Stages": "stored", "passage_text": "stored",
          "stored_weights": "stored"}

__all__ = ["FORMAT", "HEAD_FILE", "EncodedSentence", "Head", "MaxOver", "Pipeline", "SparcConfig", "SparcModel",
           "Stages", "passage_text", "resolve_device", "stored_weights", "weights_fingerprint"]


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'sparc_es.model' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"sparc_es.model.{module}"), name)
    globals()[name] = value
    return value
