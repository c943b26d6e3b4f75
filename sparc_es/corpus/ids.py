"""What an id may hold: one rule for sentence, document and query ids (corpus files, TREC files)."""

from __future__ import annotations

import re

# What an id in a TREC column may not hold: whitespace separates the columns (trec_eval and
# read_run split on it), control characters are invisible and no terminal shows them faithfully,
# and a lone surrogate (a JSON "\ud800" escape, an undecodable file name) cannot be written as UTF-8.
ID_UNSAFE = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")
SURROGATE = re.compile("[\ud800-\udfff]")


def id_problem(value: str) -> str | None:
    """Why ``value`` cannot be an id in a TREC file (a query, sentence or document id), as the end
    of a sentence (``"contains whitespace (' ')"``), or None when it can."""
    if not value.strip():
        return "is empty"
    if SURROGATE.search(value):
        return "is not valid Unicode (it holds a lone surrogate)"
    bad = ID_UNSAFE.search(value)
    if bad is None:
        return None
    if bad.group().isspace():
        return f"contains whitespace ({bad.group()!r}), which separates the columns of TREC files"
    return f"contains a control character ({bad.group()!r})"


def shown(value: str, most: int = 60) -> str:
    """``value``'s repr for a one-line message, cut to about ``most`` characters."""
    return repr(value) if len(value) <= most else repr(value[:most]) + f"... ({len(value)} characters)"
