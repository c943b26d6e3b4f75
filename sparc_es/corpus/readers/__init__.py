"""Document files -> blocks with structure: Markdown, reStructuredText, HTML and plain text.

One owner for reading a document's markup. Each format goes through a real parser, never through
regular expressions over the markup, one module each:

* :mod:`.markdown`: markdown-it-py (CommonMark with GFM tables) with the MkDocs-Material extensions;
  a YAML front matter block is skipped.
* :mod:`.rst`: docutils, with reporting silenced, no file insertion and no ``raw``; Sphinx's roles and
  directives get permissive fallbacks for the time of a parse (:func:`.rst.rst_doctree`).
* :mod:`.html`: the standard library's ``html.parser``; page furniture (scripts, navigation, headers,
  footers, sidebars, ``¶`` header links) is left out.
* Plain text (:func:`.blocks.text_blocks`): paragraphs are runs of non-blank lines.

A document becomes a stream of :class:`~.blocks.Block` (:mod:`.blocks`, which the readers share): its
clean text (inline markup gone: link text kept and URLs dropped, inline code kept verbatim, emphasis
markers and raw HTML tags removed; in Markdown and HTML an image gives its alt text inside a sentence
and nothing on its own, in reStructuredText nothing), the titles of the sections it sits in, a lead-in
(the paragraph before a list, a definition's term, a table's header row, an admonition's title), its
kind, and its character span in the original text. Table rows are one block each (``Header: cell;
Header: cell``); code is left out unless ``keep_code``; headings are blocks of kind ``heading`` (they
also go into the heading path of what follows); thematic breaks, comments and front matter give
nothing.

Spans are what the parser knows: exact lines for Markdown (markdown-it's line maps) and plain text,
tag positions for HTML, node line numbers for reStructuredText (docutils knows the first line of a
paragraph; blocks it cannot place get a span from the end of the previous block to the end of the
file). :func:`~.blocks.locate` finds a piece of a block's clean text, such as a sentence, inside its
span.

:func:`read_blocks` picks the reader by format and imports it then: importing this package imports
neither markdown-it nor docutils.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from sparc_es.corpus.readers.blocks import (
    CODE,
    HEADING,
    ITEM,
    PARAGRAPH,
    QUOTE,
    ROW,
    Block,
    Report,
    lead_of,
    line_starts,
    locate,
    text_blocks,
    text_only,
    with_code,
)
from sparc_es.errors import InputError

if TYPE_CHECKING:
    from sparc_es.corpus.readers.rst import rst_doctree

__all__ = ["CODE", "FORMATS", "HEADING", "ITEM", "MAX_RST_CHARS", "PARAGRAPH", "QUOTE", "ROW", "SUFFIXES", "Block",
           "Report", "format_of", "lead_of", "line_starts", "locate", "read_blocks", "rst_doctree"]

FORMATS = ("text", "markdown", "rst", "html")
SUFFIXES = {".txt": "text", ".md": "markdown", ".markdown": "markdown", ".rst": "rst", ".rest": "rst",
            ".html": "html", ".htm": "html"}
MAX_RST_CHARS = 2_000_000  # past this, a .rst file is read as plain text: see read_blocks


def format_of(path: str | Path) -> str | None:
    """The document format read from a file name's suffix, or None for a file that is not one. A
    file another one includes (``about.rst.inc``, ``usage.md.inc``) is read as the suffix before
    ``.inc`` says."""
    path = Path(path)
    if path.suffix.lower() == ".inc":
        path = Path(path.stem)
    return SUFFIXES.get(path.suffix.lower())


def read_blocks(text: str, format: str = "text", keep_code: bool = False, name: str = "<document>",
                report: Report | None = None) -> Iterator[Block]:
    """The blocks of one document, in order. ``format``: one of :data:`FORMATS`; ``keep_code`` keeps
    code blocks (kind ``code``); ``name`` locates errors (:class:`~sparc_es.errors.InputError`);
    ``report(line, what)`` hears of what a reader had to leave out (too deep, too large)."""
    report = report or (lambda line, what: None)
    if format == "text":
        blocks = text_blocks(text)
    elif format == "markdown":
        from sparc_es.corpus.readers.markdown import markdown_blocks

        blocks = markdown_blocks(text, report)
    elif format == "rst" and len(text) > MAX_RST_CHARS:
        # docutils holds about 250 times a document's size while it parses nested blocks (5 MB: 1.2 GB)
        report(None, f"reStructuredText of {len(text):,} characters, over {MAX_RST_CHARS:,}: read as plain text")
        blocks = text_blocks(text)
    elif format == "rst":
        from sparc_es.corpus.readers.rst import rst_blocks

        blocks = rst_blocks(text, name, report)
    elif format == "html":
        from sparc_es.corpus.readers.html import html_blocks

        blocks = html_blocks(text, 0, [], report)
    else:
        raise InputError(name, f"unknown document format {format!r}; choose from {', '.join(FORMATS)}")
    for block in with_code(blocks):
        if keep_code or block.kind != CODE:
            yield text_only(block, report)


def __getattr__(name: str):
    """:func:`~.rst.rst_doctree`, still importable from here, imported (docutils with it) when asked for."""
    if name == "rst_doctree":
        from sparc_es.corpus.readers.rst import rst_doctree

        return rst_doctree
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
