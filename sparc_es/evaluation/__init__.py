"""Stage 5b, evaluation: runs, judgements and measures.

* :mod:`.trec`: TREC topics, runs and qrels, read and written;
* :mod:`.runs`: the one search loop and run writer (``run`` and ``table`` both call it);
* :mod:`.measures`: MRR@1000, R@1, nDCG@10, R@100 through trec_eval's code; paired comparisons;
* :mod:`.evalsets`: the project's data as evaluation sets (revised MultiReQA), and the SQuAD
  training slice with its validation articles;
* :mod:`.table`: ``sparc-es table``, systems x domains, cached by fingerprint.
"""
