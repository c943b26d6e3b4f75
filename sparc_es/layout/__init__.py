"""Stage 2, the encoded folder and the index on disk: what each file is called and holds.

* :mod:`.manifest`: every file name, the typed :class:`~.manifest.Manifest`, quantisation, the
  vector-record codec, :class:`~.manifest.PassageCache`, ``copy_into`` an index;
* :mod:`.store`: :class:`~.store.SentenceStore`, id -> text, context, document, offsets (SQLite);
* :mod:`.ownership`: the ``.sparc-es`` marker: sparc-es deletes only folders it made;
* :mod:`.locks`: one writer per output folder.
"""
