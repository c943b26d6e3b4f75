"""Stage 5a, answers: what a user sees of a hit, on every surface.

* :mod:`.show`: the one presenter (terminal, ``--json``, the API, the page);
* :mod:`.explain`: why a hit scored what it did, token by token;
* :mod:`.server`: ``sparc-es serve``, the HTTP API, the search page and the document view.
"""
