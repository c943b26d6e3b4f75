"""Documents from a cluster: :class:`ElasticSource`, the corpus source of ``encode --from-es``.

The cluster's counterpart of the file source :class:`sparc_es.corpus.sources.Files`: both are a
:class:`~sparc_es.corpus.sources.Source`, giving :class:`~sparc_es.corpus.sources.Sentence` records through
``read`` and what the manifest records as the corpus through ``describe``. Documents are read in
one point in time with :func:`~sparc_es.engines.elastic.connection.scan`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

from sparc_es.corpus.sources import ReadStats, Sentence, document_sentences
from sparc_es.engines.elastic.connection import _cluster_errors, _point_in_time, scan
from sparc_es.errors import EngineError, InputError
from sparc_es.layout.names import ES_SOURCE


@dataclass
class ElasticSource:
    """A corpus read from an existing Elasticsearch index (``encode --from-es``).

    Documents are paged with a point in time and ``search_after`` (a consistent view however long
    encoding takes), each split into sentences with its paragraph as context, as a local text
    document is; sentence ids are ``<document id>#<key>`` (a hash of the text, as for files) and
    ``doc`` is the document id, so a hit points back to its source document. ``id_field`` takes the
    document id from a source field instead of ``_id``; ``query`` (query DSL) selects documents;
    ``title_field`` is put before each paragraph in the context.
    """

    client: object
    index: str
    text_field: str
    id_field: str | None = None
    title_field: str | None = None
    query: dict | None = None
    page: int = 500
    format: str = "text"  # how the text field is written: text, markdown, rst or html (corpus.split_document)

    def describe(self) -> list[str]:
        query = json.dumps(self.query, sort_keys=True) if self.query else ""
        read_as = "" if self.format == "text" else f":{self.format}"  # a resume must read the same way
        return [f"{ES_SOURCE}{self.index}:{self.text_field}:{self.id_field or '_id'}:{self.title_field or ''}"
                f":{query}{read_as}"]

    def documents(self) -> Iterator[tuple[str, dict]]:
        """(document id, source) of every selected document, sorted by document id.

        The same order on every read, whatever the index's own order (which changes when a
        document is edited or segments merge): a resumed encode reads the source again and
        compares it with what it read before. The ids are listed first (only they are held in
        memory), then the documents fetched ``page`` at a time, all in one point in time."""
        fields = [f for f in (self.text_field, self.id_field, self.title_field) if f]
        with _point_in_time(self.client, self.index) as pit:
            listed = []
            for h in scan(self.client, self.index, source=[self.id_field] if self.id_field else False,
                          query=self.query, page=max(self.page, 1000), pit=pit):
                doc_id = h.get("_source", {}).get(self.id_field) if self.id_field else h["_id"]
                if doc_id is None or str(doc_id).strip() == "":
                    raise InputError(f"{self.index}/{h['_id']}", f"no {self.id_field!r} field to take the id from")
                listed.append((str(doc_id), h["_id"]))
            listed.sort()
            for start in range(0, len(listed), self.page):
                part = listed[start:start + self.page]
                with _cluster_errors(f"reading index {self.index!r}"):
                    response = self.client.search(pit=pit, size=len(part), source=fields,
                                                  query={"ids": {"values": [i for _, i in part]}})
                pit["id"] = response.get("pit_id", pit["id"])
                found = {h["_id"]: h.get("_source", {}) for h in response["hits"]["hits"]}
                for doc_id, es_id in part:
                    if es_id not in found:  # listed in this point in time: only a broken server loses it
                        raise EngineError(f"index {self.index!r} lost document {es_id!r} while it was read")
                    yield doc_id, found[es_id]

    def read(self, stats: ReadStats | None = None) -> Iterator[Sentence]:
        seen: set[str] = set()
        count = 0
        for doc_id, src in self.documents():
            where = f"{self.index}/{doc_id}"
            if doc_id in seen:
                raise InputError(where, f"two documents have the id {doc_id!r}")
            seen.add(doc_id)
            text = src.get(self.text_field)
            if text is None:
                continue  # a document without the field has nothing to encode
            if not isinstance(text, str):
                raise InputError(where, f"field {self.text_field!r} is not text")
            title = src.get(self.title_field) if self.title_field else ""
            for sentence in document_sentences(text, doc_id, stats, title if isinstance(title, str) else "",
                                               format=self.format, where=where):
                count += 1
                yield sentence
        if count == 0:
            raise InputError(self.index, f"no sentences: no selected document has text in {self.text_field!r}")
