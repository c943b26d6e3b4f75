"""Research code, apart from the product path (encode -> index -> search):

* :mod:`.datasets`: the project's data (``../shared/data``) as evaluation sets under the revised
  MultiReQA protocol, and the SQuAD training slice with its validation articles;
* :mod:`.examples`: the training examples ``sparc-es train`` mines from the SQuAD slice (BM25
  candidates, a cache);
* :mod:`.table`: ``sparc-es table``, systems x domains with every figure cached and recorded.
"""
