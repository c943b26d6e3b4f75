"""Stage 4a, encoding: a corpus -> an encoded folder (top-K integer impacts ready for any engine).

* :mod:`.run`: :func:`encode_corpus`, one run object whose named steps read as the function:
  sharded, resumable, incremental;
* :mod:`.backend`: where the two passes run (the :class:`~.backend.Backend` protocol, :class:`~.backend.Local`);
* :mod:`.ray`: the same passes on a Ray cluster (``encode --ray``), byte for byte;
* :mod:`.requantize`: another factor and/or IDF from kept float weights, no re-encoding.
"""

from sparc_es.encode.run import encode_corpus

__all__ = ["encode_corpus"]
