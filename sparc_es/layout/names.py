"""Every file and folder name of an encoded folder or index, here and nowhere else.

Layout::

    ENCODED/meta.json             the manifest: model provenance, K, quantisation factor, counts
    ENCODED/tokenizer/            the tokenizer questions are split with at search time
    ENCODED/sentences.sqlite      id -> text, context, document, offsets (shown with hits)
    ENCODED/vectors/vectors.jsonl Pyserini JsonVectorCollection, integer weights, input order
    ENCODED/passages.bin          with passage expansion: each passage's f_P, for updates
    INDEX/lucene/, INDEX/bm25/    an index's Lucene impact index and BM25 index

An index built from an encoded folder keeps the same manifest (plus what the build recorded), its
tokenizer and its sentence store (:func:`sparc_es.layout.manifest.copy_into`).
"""

META = "meta.json"  # the manifest
VECTORS = "vectors"  # the folder Anserini indexes ...
VECTORS_FILE = "vectors.jsonl"  # ... and the file in it: one record per sentence, input order
SENTENCES = "sentences.sqlite"  # the sentence store (sparc_es.layout.store)
TOKENIZER = "tokenizer"  # the question tokenizer (sparc_es.model.query)
LEXICAL_FILE = "lexical.json"  # the corpus statistics of IDF and the lexical term (sparc_es.model.lexical)
PASSAGES = "passages.bin"  # each passage's f_P, for updates (PassageCache)
PROGRESS = "progress.json"  # an unfinished encode's progress (sparc_es.encode.run)
LUCENE = "lucene"  # an index's Lucene impact index (sparc_es.engines.lucene)
BM25 = "bm25"  # an index's BM25 index of the same texts (sparc_es.engines.bm25)


def es_failures(index: str) -> str:
    """The report of the ids an Elasticsearch load of this folder into ``index`` could not write."""
    return f"es-failures-{index}.jsonl"

# The manifest's format: a folder written by another format is refused, not misread.
FORMAT = "sparc-es-encoded/1"

# How a manifest records a corpus read from an Elasticsearch index (encode --from-es), not a path:
# nothing on disk to open, so nothing to say is gone.
ES_SOURCE = "elasticsearch:"
