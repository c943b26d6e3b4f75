"""sparc-es: SPARC learned sparse retrieval on a CPU, inside the search engine you already have."""

__version__ = "0.1.0"
