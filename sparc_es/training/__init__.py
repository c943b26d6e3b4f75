"""Stage 6, training: a model from examples, and a model adapted to a user's corpus.

* :mod:`.train`: :class:`~.train.TrainConfig`, :class:`~.train.Trainer` (resumable, seeded);
* :mod:`.examples`: the SQuAD training examples ``sparc-es train`` mines (BM25 candidates, cached);
* :mod:`.adapt`: embedding replacement on a target corpus (CPU, resumable).
"""
