"""Stage 1, the corpus: what a user's text becomes before anything is encoded.

* :mod:`.sources`: :class:`Sentence` records read as a stream from JSONL, BEIR JSONL or documents
  (the :class:`Source` protocol; :class:`Files`), with located errors and skipped files counted;
* :mod:`.readers`: a document (Markdown, reStructuredText, HTML, text) -> blocks with heading path,
  lead-in, kind and span in the file;
* :mod:`.ids`: what a sentence id may be, and the content-hash ids of document sentences.
"""

from sparc_es.corpus.sources import Files, ReadStats, Sentence, Source, as_source, read_corpus, read_document

__all__ = ["Files", "ReadStats", "Sentence", "Source", "as_source", "read_corpus", "read_document"]
