"""Stage 4a, encoding: a corpus -> an encoded folder (top-K integer impacts ready for any engine).

* :mod:`.run`: :func:`encode_corpus`, sharded, resumable, incremental;
* :mod:`.ray`: the same on a Ray cluster (``--backend ray``), byte for byte;
* :mod:`.requantize`: another factor and/or IDF from kept float weights, no re-encoding.
"""

from sparc_es.encode.run import encode_corpus

__all__ = ["encode_corpus"]
