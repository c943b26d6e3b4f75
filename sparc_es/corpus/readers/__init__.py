"""Document files -> blocks with structure: Markdown, reStructuredText, HTML and plain text.

One owner for reading a document's markup. Each format goes through a real parser, never through
regular expressions over the markup:

* Markdown: markdown-it-py (CommonMark with GFM tables); a YAML front matter block is skipped.
* reStructuredText: docutils, with reporting silenced, no file insertion and no ``raw``. Sphinx's
  roles and directives are unknown to docutils; they get permissive fallbacks for the time of a
  parse (:func:`rst_doctree`): an unknown role gives its text (``:func:`foo.bar``` -> ``foo.bar``,
  ``:ref:`Title <label>``` -> ``Title``, ``~a.b`` -> ``b``); an unknown directive is read as code
  (``.. code-block::``, ``.. doctest::``, ...), not at all (``.. toctree::``, ``.. index::``, ...)
  or, by default, as text led in by its argument (``.. py:function:: f(x)``, ``.. autoclass::
  Request``, ``.. tab:: Linux``) or its label (``.. versionchanged:: 2.0`` -> "Changed in version 2.0").
* HTML: the standard library's ``html.parser``; scripts, styles, navigation, page headers and
  footers, sidebars (Sphinx's ``div.sphinxsidebar``, ``div.related``, ``div.footer``) and the
  ``¶`` header links are left out.
* Plain text: paragraphs are runs of non-blank lines.

A document becomes a stream of :class:`Block`: its clean text (inline markup gone: link text kept
and URLs dropped, inline code kept verbatim, emphasis markers and raw HTML tags removed; in
Markdown and HTML an image gives its alt text inside a sentence and nothing on its own, in
reStructuredText nothing), the titles of the sections it sits in, a lead-in (the paragraph
before a list, a definition's term, a table's header row, an admonition's title), its kind, and
its character span in the original text. Table rows are one
block each (``Header: cell; Header: cell``); code is left out unless ``keep_code``; headings are
blocks of kind ``heading`` (they also go into the heading path of what follows); thematic breaks,
comments and front matter give nothing.

Spans are what the parser knows: exact lines for Markdown (markdown-it's line maps) and plain text,
tag positions for HTML, node line numbers for reStructuredText (docutils knows the first line of a
paragraph; blocks it cannot place get a span from the end of the previous block to the end of the
file). :func:`locate` finds a piece of a block's clean text, such as a sentence, inside its span.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import lru_cache
from html.parser import HTMLParser
from itertools import zip_longest
from pathlib import Path
from typing import TYPE_CHECKING

from sparc_es.corpus.ids import SURROGATE
from sparc_es.errors import InputError

if TYPE_CHECKING:
    import docutils.nodes

PARAGRAPH, ITEM, ROW, HEADING, CODE, QUOTE = "paragraph", "item", "row", "heading", "code", "quote"
FORMATS = ("text", "markdown", "rst", "html")
SUFFIXES = {".txt": "text", ".md": "markdown", ".markdown": "markdown", ".rst": "rst", ".rest": "rst",
            ".html": "html", ".htm": "html"}
LEAD_CHARS = 300  # a longer paragraph before a list gives only its last sentences as the lead-in
Report = Callable[[int | None, str], None]  # report(line, what): a reader cut or bounded something
MAX_RST_CHARS = 2_000_000  # past this, a .rst file is read as plain text: see read_blocks
MARKDOWN_NESTING = 100  # markdown-it's limit (default 20: ten list levels); content deeper is cut and reported
# The characters one reStructuredText substitution may expand to (nested ones included), and all of
# a document's substitutions together: five levels of ten references each make a 370-byte file
# expand to gigabytes. A reference past either is left out and reported.
RST_SUBSTITUTION_CHARS = 10_000
RST_SUBSTITUTIONS_CHARS = 1_000_000


@dataclass(frozen=True)
class Block:
    """One unit of a document: a paragraph, a list item, a table row, a heading or a code block."""

    text: str  # clean text, whitespace collapsed
    headings: tuple[str, ...] = ()  # titles of the enclosing sections, outermost first
    lead: str = ""  # what introduces it: the paragraph before its list, its term, the header row
    kind: str = PARAGRAPH
    start: int = 0  # its span in the original text
    end: int = 0
    level: int = 0  # a heading's level (1 = top)
    # A code block: its text as written (lines kept). A paragraph or list item right before one:
    # that code, the command or example it leads into (":"), shown under the hit (read_blocks).
    code: str = ""


def format_of(path: str | Path) -> str | None:
    """The document format read from a file name's suffix, or None for a file that is not one."""
    return SUFFIXES.get(Path(path).suffix.lower())


def read_blocks(text: str, format: str = "text", keep_code: bool = False, name: str = "<document>",
                report: Report | None = None) -> Iterator[Block]:
    """The blocks of one document, in order. ``format``: one of :data:`FORMATS`; ``keep_code`` keeps
    code blocks (kind ``code``); ``name`` locates errors (:class:`~sparc_es.errors.InputError`);
    ``report(line, what)`` hears of what a reader had to leave out (too deep, too large)."""
    report = report or (lambda line, what: None)
    if format == "text":
        blocks = _text_blocks(text)
    elif format == "markdown":
        blocks = _markdown_blocks(text, report)
    elif format == "rst" and len(text) > MAX_RST_CHARS:
        # docutils holds about 250 times a document's size while it parses nested blocks (5 MB: 1.2 GB)
        report(None, f"reStructuredText of {len(text):,} characters, over {MAX_RST_CHARS:,}: read as plain text")
        blocks = _text_blocks(text)
    elif format == "rst":
        tree = rst_doctree(text, name)
        for line, what in tree.get("sparc_es_cut", ()):
            report(line, what)
        for line, what in _rst_rejected(tree):
            report(line, what)
        blocks = _RstWalker(text).blocks(tree)
    elif format == "html":
        blocks = _html_blocks(text, 0, [], report)
    else:
        raise InputError(name, f"unknown document format {format!r}; choose from {', '.join(FORMATS)}")
    for block in _with_code(blocks):
        if keep_code or block.kind != CODE:
            yield _text_only(block, report)


def _text_only(block: Block, report: Report) -> Block:
    """``block``, a lone surrogate (a reStructuredText ``unicode:: U+D800``, which no encoder can
    write) shown as U+FFFD and reported."""
    parts = (block.text, block.lead, block.code, *block.headings)
    if not any(SURROGATE.search(p) for p in parts):
        return block
    report(None, "a surrogate code point (not a character) shown as U+FFFD")
    clean = lambda t: SURROGATE.sub("\ufffd", t)  # noqa: E731
    return replace(block, text=clean(block.text), lead=clean(block.lead), code=clean(block.code),
                   headings=tuple(map(clean, block.headings)))


MAX_CODE_CHARS = 4_000  # of the code kept with the block that leads into it (shown, not searched)


def _with_code(blocks: Iterator[Block]) -> Iterator[Block]:
    """The blocks, each paragraph or list item that comes right before a code block (nothing between
    them, the same section) given that code: "To upgrade one package:" keeps its command."""
    held: Block | None = None
    for block in blocks:
        if held is not None:
            if block.kind == CODE and block.code and block.headings == held.headings:
                code = block.code if len(block.code) <= MAX_CODE_CHARS else block.code[:MAX_CODE_CHARS] + "\n…"
                held = replace(held, code=code)
            yield held
            held = None
        if block.kind in (PARAGRAPH, ITEM):
            held = block
        else:
            yield block
    if held is not None:
        yield held


def _squash(text: str) -> str:
    return " ".join(text.split())


def line_starts(text: str) -> list[int]:
    """Offset of each line's start, and len(text) last; lines end as markdown-it ends them."""
    starts = [0]
    starts += [m.end() for m in re.finditer(r"\r\n?|\n", text)]
    starts.append(len(text))
    return starts


def lead_of(text: str, limit: int = LEAD_CHARS) -> str:
    """``text``, or its last sentences that fit in ``limit`` characters (at least the last one)."""
    if len(text) <= limit:
        return text
    import blingfire

    _, spans = blingfire.text_to_sentences_and_offsets(text)
    start = spans[-1][0] if spans else 0
    for a, _b in reversed(spans):
        if len(text) - a > limit:
            break
        start = a
    return text[start:].strip()


def _chain(*parts: str) -> str:
    return " ".join(p for p in parts if p)


# --- locating text in the source ------------------------------------------------------------

_WORD = re.compile(r"[^\W_]+")  # letters and digits: what clean text and its markup share


def _find(source: str, word: str, pos: int, end: int) -> int:
    """First occurrence of ``word`` in source[pos:end], one that starts a word where there is one."""
    first = source.find(word, pos, end)
    i = first
    while i > 0 and word[0].isalnum() and source[i - 1].isalnum():
        i = source.find(word, i + 1, end)
        if i < 0:
            return first
    return i


def locate(source: str, text: str, start: int, end: int, max_gap: int = 2000) -> tuple[int, int]:
    """The span of ``source[start:end]`` that holds ``text``'s words in order.

    Each whitespace-separated word is searched for whole, then without the punctuation around
    it, then (markup can sit inside a word: an escape, an entity, a role) as its runs of letters
    and digits; a word found nowhere within ``max_gap`` characters of the previous one is
    generated text (a substitution, a table header) and is skipped. The span runs from the first
    word found to the end of the last one, with the punctuation that ends the text when the
    source has it there. When no word is found the whole of ``start:end`` is returned.
    """
    first = last = -1
    pos = start
    for word in text.split():
        # the word whole, or without the punctuation around it (a code span may close before it),
        # whichever comes first: "s)," must not skip past "s)`," to the "s)," of a later "docs),"
        best = None
        for token in (word, word.strip(".,;:!?\"'()")):
            i = _find(source, token, pos, min(end, pos + max_gap + len(token))) if token else -1
            if i >= 0 and (best is None or i < best[0]):
                best = (i, token)
        if best is not None:
            i, token = best
            found = [(i, i + len(token))]
        else:
            token, found, p = word, [], pos
            for m in _WORD.finditer(token):
                j = _find(source, m.group(), p, min(end, p + max_gap + len(m.group())))
                if j >= 0:
                    p = j + len(m.group())
                    found.append((j, p))
        if found:
            if first < 0:
                first = found[0][0]
            last = pos = found[-1][1]
    if first < 0:
        return start, end
    tail = text.rstrip()[len(text.rstrip().rstrip(".!?:;)\"'")):]  # closing punctuation of the text
    if tail:
        j = last
        while j < min(end, last + 4) and source[j] in "`*_~\\":  # a code span or emphasis closing first
            j += 1
        if j + len(tail) <= end and source.startswith(tail, j):
            last = j + len(tail)
    return first, last


# --- plain text -------------------------------------------------------------------------------

def _text_blocks(text: str) -> Iterator[Block]:
    # A paragraph is a run of lines with no blank line inside (the splitter sparc-es always had).
    # Possessive: the plain pattern's backtracking stack took 1.7 GB on a 6 MB line.
    for m in re.finditer(r"\S(?:.++|\n(?!\s*\n))*+", text):
        yield Block(_squash(m.group()), start=m.start(), end=m.end())


# --- Markdown ---------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _markdown():
    """CommonMark with GFM tables and the Python-Markdown extensions MkDocs-Material sites use:
    admonitions and collapsible blocks (``!!!``, ``???``, ``???+``: mdit-py-plugins), content tabs
    (``=== "Label"``: :func:`_tabs`), block attribute lists (``{ .annotate }``: mdit-py-plugins)."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.admon import admon_plugin
    from mdit_py_plugins.attrs import attrs_block_plugin

    md = MarkdownIt("commonmark", {"maxNesting": MARKDOWN_NESTING}).enable("table")
    md.use(admon_plugin).use(attrs_block_plugin)
    md.block.ruler.before("fence", "tabs", _tabs, {"alt": ["paragraph", "reference", "blockquote", "list"]})
    return md


# pymdownx.tabbed: === "Label" (===! starts a new set of tabs, ===+ selects one), its body indented.
_TAB = re.compile(r'===[!+]{0,2}[ \t]+"([^"\n]*)"[ \t]*$')
TAB_INDENT = 4


def _tabs(state, start_line: int, end_line: int, silent: bool) -> bool:
    """A markdown-it block rule for a content tab: ``tab_open`` (its label in ``meta``), the body's
    blocks, ``tab_close``. Its body runs while lines are indented or blank, as pymdownx.tabbed reads it."""
    if state.sCount[start_line] - state.blkIndent >= 4:  # an indented code block
        return False
    start = state.bMarks[start_line] + state.tShift[start_line]
    found = _TAB.match(state.src[start:state.eMarks[start_line]])
    if found is None:
        return False
    if silent:
        return True
    indent = state.blkIndent + TAB_INDENT
    line, blank = start_line + 1, False
    while line < end_line:
        empty = state.bMarks[line] + state.tShift[line] >= state.eMarks[line]
        if not empty and state.sCount[line] < indent:
            break
        if empty and blank:  # two blank lines close it, as they close an admonition
            break
        blank, line = empty, line + 1
    old = state.parentType, state.lineMax, state.blkIndent
    state.parentType, state.lineMax, state.blkIndent = "tab", line, indent
    token = state.push("tab_open", "div", 1)
    token.meta, token.map, token.block = {"label": found.group(1).strip()}, [start_line, line], True
    state.md.block.tokenize(state, start_line + 1, line)
    token = state.push("tab_close", "div", -1)
    token.block = True
    state.parentType, state.lineMax, state.blkIndent = old
    state.line = line
    return True


# Python-Markdown's attribute list after a heading or a paragraph ({: #anchor .class key=value },
# the colon optional), and the lines of other extensions that are markup, not text: abbreviation
# definitions (*[HTML]: ...), snippet includes (--8<-- "file"), [TOC].
_ATTR_LIST = re.compile(r'\s*\{:?(?:\s*(?:[#.][^\s{}]+|[\w-]+=(?:"[^"]*"|\'[^\']*\'|[^\s}]+)))+\s*:?\}\s*$')
_INLINE_ATTR_LIST = re.compile(r'\{:(?:\s*(?:[#.][^\s{}]+|[\w-]+=(?:"[^"]*"|\'[^\']*\'|[^\s}]+)))+\s*\}')
# MkDocs-Material's icon shortcodes (:octicons-heart-fill-16:, :material-github:): images, not words.
_ICON = re.compile(r"(?<![\w:]):(?:octicons|fontawesome|material|simple)-[a-z0-9-]+:(?![\w:])")
_MARKUP_LINE = re.compile(r'\*\[[^\]]+\]:.*|-{1,}8<-{1,}.*|;-{1,}8<-{1,}.*|\[TOC\]')


def _strip_markup(text: str, source: str = "") -> str:
    """A heading's or paragraph's ``text`` without a trailing attribute list; "" when every line of
    its ``source`` is extension markup (abbreviation definitions, snippet markers, [TOC])."""
    lines = [line.strip() for line in source.split("\n") if line.strip()]
    if lines and all(_MARKUP_LINE.fullmatch(line) for line in lines):
        return ""
    return _squash(_ICON.sub("", _INLINE_ATTR_LIST.sub("", _ATTR_LIST.sub("", text))))


def _front_matter_lines(text: str, lines: list[int]) -> int:
    """How many lines a YAML front matter block (``---`` ... ``---`` or ``...``) takes, or 0."""
    if not text.startswith("---"):
        return 0
    for n in range(len(lines) - 1):
        line = text[lines[n]:lines[n + 1]].rstrip()
        if n == 0 and line != "---":
            return 0
        if n and line in ("---", "..."):
            return n + 1
    return 0


_MYST_ROLE = re.compile(r"\{[a-zA-Z][\w:+-]*\}$")


_INLINE_HILITE = re.compile(r"^#!\w[\w+-]*\s+")


def _inline(token) -> str:
    """The clean text of a markdown-it inline token: text, code spans, link text, image alts.

    A run of images with no other text (a row of badges) gives nothing."""
    parts, has_text = [], False
    for child in token.children or ():
        kind = child.type
        content = child.content
        if kind == "code_inline" and parts and _MYST_ROLE.search(parts[-1]):
            # A MyST role, {ref}`Title <target>`: the role's name is markup, its title (or target) the text.
            parts[-1] = _MYST_ROLE.sub("", parts[-1])
            content = _role_text("", content)
        if kind == "code_inline":
            content = _INLINE_HILITE.sub("", content)  # pymdownx.inlinehilite's `#!python x` shows x
        if kind in ("text", "code_inline"):
            parts.append(content)
            has_text = has_text or bool(content.strip())
        elif kind in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif kind == "image":
            parts.append(child.content)  # the alt text, already plain
        elif kind == "html_inline":
            # Tags and comments are markup; a line break or a block tag still separates words.
            tag = child.content[1:].lstrip("/").split(None, 1)[0].rstrip("/>").lower() if child.content else ""
            if tag in ("br", "p", "div", "li", "td", "th", "tr", "hr"):
                parts.append(" ")
        # link_open/close, em/strong open/close: markup only
    return _squash("".join(parts)) if has_text else ""


def _markdown_blocks(text: str, report: Report) -> Iterator[Block]:
    lines = line_starts(text)
    front = _front_matter_lines(text, lines)
    # The front matter's lines are blanked, not cut: line numbers (and so spans) stay the file's.
    body = "\n" * front + text[lines[front]:] if front else text
    tokens = _markdown().parse(body)
    deepest = max(tokens, key=lambda t: t.level, default=None)
    if deepest is not None and deepest.level >= MARKDOWN_NESTING - 1:  # markdown-it stopped reading there
        report(deepest.map[0] + 1 if deepest.map else None,
               f"lists and quotes nested deeper than {MARKDOWN_NESTING} levels: what is inside left out")

    def span(token) -> tuple[int, int]:
        a, b = token.map
        return lines[min(a, len(lines) - 1)], lines[min(b, len(lines) - 1)]

    heads: list[tuple[int, str]] = []  # (level, title) of the open sections
    leads: list[str] = []  # the lead-in of each open list, innermost last
    containers: list[str] = []  # "item" / "quote", innermost last
    boxes: list[list[tuple[int, str]]] = []  # the sections open when each admonition or tab opened
    prev: Block | None = None  # the block just before, while nothing else came in between
    i = 0
    while i < len(tokens):
        t = tokens[i]
        kind = t.type
        headings = tuple(h for _, h in heads)
        if kind == "heading_open":
            level = int(t.tag[1])
            title = _strip_markup(_inline(tokens[i + 1]))
            while heads and heads[-1][0] >= level:
                heads.pop()
            if title:
                a, b = span(t)
                yield Block(title, tuple(h for _, h in heads), kind=HEADING, start=a, end=b, level=level)
                heads.append((level, title))
            prev = None
            i += 3
            continue
        if kind in ("bullet_list_open", "ordered_list_open"):
            lead = ""
            if prev is not None and tokens[i - 1].type == "paragraph_close":
                lead = _chain(prev.lead, prev.text) if prev.kind == ITEM else lead_of(prev.text)
            leads.append(lead or (leads[-1] if leads and containers and containers[-1] == "item" else ""))
            prev = None
        elif kind in ("bullet_list_close", "ordered_list_close"):
            leads.pop()
            prev = None
        elif kind == "list_item_open":
            containers.append("item")
        elif kind == "blockquote_open":
            containers.append("quote")
        elif kind in ("list_item_close", "blockquote_close"):
            containers.pop()
        elif kind in ("admonition_open", "tab_open"):  # the box's title or the tab's label: context
            boxes.append(heads[:])
            label = t.content if kind == "admonition_open" else t.meta["label"]
            if label:
                heads.append((7, _squash(label)))  # below every heading level
            prev = None
            if kind == "admonition_open":
                i += 4 if i + 1 < len(tokens) and tokens[i + 1].type == "admonition_title_open" else 1
                continue
        elif kind in ("admonition_close", "tab_close"):
            heads[:] = boxes.pop()
            prev = None
        elif kind == "paragraph_open":
            a, b = span(t)
            content = _strip_markup(_inline(tokens[i + 1]), body[a:b])
            if content:
                where = containers[-1] if containers else ""
                block_kind = ITEM if where == "item" else QUOTE if where == "quote" else PARAGRAPH
                lead = leads[-1] if block_kind == ITEM and leads else ""
                prev = Block(content, headings, lead, block_kind, a, b)
                yield prev
            i += 3
            continue
        elif kind == "table_open":
            i = yield from _markdown_table(tokens, i, headings, span)
            prev = None
            continue
        elif kind in ("fence", "code_block"):
            if kind == "fence" and t.map and t.map[1] >= body.count("\n") and not _closes(t, body):
                report(t.map[0] + 1, f"a code fence ({t.markup}) left open: the rest of the file "
                                     f"({t.map[1] - t.map[0]:,} lines) is read as code")
            if t.content.strip():
                a, b = span(t)
                yield Block(_squash(t.content), headings, kind=CODE, start=a, end=b, code=t.content.strip("\n"))
            prev = None
        elif kind == "html_block":
            a, b = span(t)
            stack = list(heads)
            for block in _html_blocks(t.content, a, stack, report, t.map[0] if t.map else 0):
                yield replace(block, end=min(block.end, b))
            heads[:] = stack  # an HTML heading (<h1 align="center">) opens a section as # does
            prev = None
        elif kind == "hr":
            prev = None
        i += 1


def _closes(fence, body: str) -> bool:
    """Whether a fence token's last line is its closing fence (markdown-it runs an open one to the end)."""
    lines = body.split("\n")[fence.map[0]:fence.map[1]]
    last = next((line.strip() for line in reversed(lines) if line.strip()), "")
    return len(lines) > 1 and last.startswith(fence.markup) and not last.strip(fence.markup[0]).strip()


def _markdown_table(tokens, i: int, headings: tuple[str, ...], span):
    """Yield a GFM table's body rows as blocks; return the index after ``table_close``."""
    header: list[str] = []
    cells: list[str] = []
    in_head = False
    row = None
    while tokens[i].type != "table_close":
        t = tokens[i]
        if t.type == "thead_open":
            in_head = True
        elif t.type == "thead_close":
            in_head = False
        elif t.type == "tr_open":
            cells, row = [], t
        elif t.type in ("th_open", "td_open"):
            cells.append(_inline(tokens[i + 1]))
        elif t.type == "tr_close":
            if in_head:
                header = cells
            else:
                block = _row_block(header, cells, headings, *span(row))
                if block:
                    yield block
        i += 1
    return i + 1


def _row_block(header: list[str], cells: list[str], headings: tuple[str, ...], start: int, end: int
               ) -> Block | None:
    """A table row as ``Header: cell; Header: cell``, its header row as the lead-in."""
    parts = []
    for name, cell in zip_longest(header, cells, fillvalue=""):
        name = name.rstrip(":").strip()
        if cell:
            parts.append(f"{name}: {cell}" if name else cell)
    if not parts:
        return None
    return Block("; ".join(parts), headings, "; ".join(h for h in header if h), ROW, start, end)


# --- HTML ---------------------------------------------------------------------------------------

_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
         "track", "wbr"}
_SKIP_TAGS = {"head", "script", "style", "noscript", "template", "nav", "svg", "math", "button", "form",
              "select", "textarea", "iframe", "object", "canvas", "audio", "video", "map", "dialog"}
# Page furniture, by class: Sphinx's sidebar, relation bars, footer and header links; the navigation
# of the Read the Docs, Furo and Material themes; footnote references and labels.
_SKIP_CLASSES = {"sphinxsidebar", "sphinxsidebarwrapper", "related", "footer", "headerlink", "navigation",
                 "navbar", "breadcrumbs", "wy-breadcrumbs", "wy-nav-side", "rst-versions", "sidebar-drawer",
                 "toc-drawer", "md-sidebar", "md-header", "md-footer", "skip-link", "footnote-reference",
                 "citation-reference", "fn-backref", "fn-bracket", "viewcode-link", "toctree-wrapper",
                 "system-message", "problematic"}
_SKIP_ROLES = {"navigation", "banner", "contentinfo", "search", "complementary"}
_BLOCK = {"address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "details", "dir",
          "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "h1", "h2", "h3", "h4", "h5", "h6",
          "header", "hgroup", "hr", "html", "legend", "li", "main", "menu", "ol", "p", "pre", "section",
          "summary", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul"}
_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
_TITLE_CLASSES = {"admonition-title", "sidebar-title", "topic-title", "rubric"}  # a lead-in, not a sentence
_RESET = _HEADINGS | {"li", "dt", "dd", "table", "pre", "blockquote"}  # start something new: no lead-in
# For a tag that closes implicitly: the tags that close it, and the tag that bounds the search.
_IMPLICIT = {"li": ({"li"}, {"ul", "ol"}), "dt": ({"dt", "dd"}, {"dl"}), "dd": ({"dt", "dd"}, {"dl"}),
             "tr": ({"tr"}, {"table"}), "td": ({"td", "th"}, {"tr", "table"}),
             "th": ({"td", "th"}, {"tr", "table"}), "p": ({"p"}, set())}


class _El:
    """An open HTML element: its tag, whether its content is left out, the lead-in it gives."""

    __slots__ = ("tag", "skip", "lead", "classes")

    def __init__(self, tag: str, skip: bool, classes: set[str], lead: str = "") -> None:
        self.tag, self.skip, self.classes, self.lead = tag, skip, classes, lead


class _Table:
    __slots__ = ("header", "cells", "cell", "row_start", "in_head", "all_th")

    def __init__(self) -> None:
        self.header: list[str] = []
        self.cells: list[str] = []
        self.cell: list[str] | None = None
        self.row_start = 0
        self.in_head = False
        self.all_th = True


class _Html(HTMLParser):
    """HTML -> blocks, with offsets into the text it is fed (plus ``base``)."""

    def __init__(self, text: str, base: int, heads: list[tuple[int, str]]) -> None:
        super().__init__(convert_charrefs=True)
        self.lines = [0] + [m.end() for m in re.finditer("\n", text)]  # getpos() counts "\n" only
        self.base = base
        self.heads = heads  # shared with a Markdown document an HTML block sits in
        self.stack: list[_El] = []
        self.skipping = 0
        self.buf: list[str] = []
        self.has_text = False
        self.buf_start = -1
        self.out: list[Block] = []
        self.prev: Block | None = None
        self.term = ""
        self.tables: list[_Table] = []
        self.cuts: list[tuple[int | None, str]] = []  # (line, what) the reader left out or bounded
        self.too_deep = False

    def line(self) -> int:
        return self.getpos()[0] + self.base_line

    base_line = 0  # lines before this fragment in its document (an HTML block inside Markdown)

    def pos(self) -> int:
        line, col = self.getpos()
        return self.base + self.lines[min(line - 1, len(self.lines) - 1)] + col

    # -- the element stack

    def _inside(self, tag: str) -> bool:
        return any(e.tag == tag for e in self.stack)

    def _close_to(self, index: int) -> None:
        while len(self.stack) > index:
            self._end(self.stack[-1].tag)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if len(self.stack) >= MAX_HTML_DEPTH and tag not in _VOID:
            # Every start and end tag looks down the open elements: 60,000 open <div><p> took minutes.
            # Past the depth browsers build (512), an element is read as part of the one it is in.
            if not self.too_deep:
                self.too_deep = True
                self.cuts.append((self.line(), f"elements nested deeper than {MAX_HTML_DEPTH} levels: read as "
                                               "part of the element they are in"))
            if tag in _BLOCK:
                self._flush()
            return
        a = {k: v or "" for k, v in attrs}
        if tag in _IMPLICIT or (tag in _BLOCK and self.stack and self.stack[-1].tag == "p"):
            closes, bound = _IMPLICIT.get(tag, ({"p"}, set()))
            for n in range(len(self.stack) - 1, -1, -1):
                if self.stack[n].tag in bound:
                    break
                if self.stack[n].tag in closes:
                    self._close_to(n)
                    break
        if self.skipping:
            if tag not in _VOID:
                self.stack.append(_El(tag, True, set()))
                self.skipping += 1
            return
        classes = set(a.get("class", "").split())
        skip = (tag in _SKIP_TAGS or bool(classes & _SKIP_CLASSES) or a.get("role", "") in _SKIP_ROLES
                or a.get("aria-hidden") == "true" or {"contents", "topic"} <= classes  # a docutils TOC
                or (tag in ("header", "footer") and not (self._inside("article") or self._inside("main"))))
        if tag in _BLOCK or tag == "br":
            self._flush()
        if tag in _RESET:
            self.prev = None
        if tag == "img" and not skip:
            self.buf.append(a.get("alt", ""))
            if self.buf_start < 0:
                self.buf_start = self.pos()
            return
        if tag in _VOID:
            if tag == "br":
                self.buf.append(" ")
            return
        el = _El(tag, skip, classes)
        if tag in ("ul", "ol") and not skip:
            prev = self.prev
            if prev is not None:
                el.lead = _chain(prev.lead, prev.text) if prev.kind == ITEM else lead_of(prev.text)
            self.prev = None
        elif tag == "dd":
            el.lead = self.term
        elif tag == "dl":
            self.term = ""
        elif tag == "table" and not skip:
            self.tables.append(_Table())
        elif tag == "tr" and self.tables:
            t = self.tables[-1]
            t.cells, t.all_th, t.row_start = [], True, self.pos()
        elif tag in ("td", "th") and self.tables:
            self.tables[-1].cell = []
            self.tables[-1].all_th &= tag == "th"
        elif tag == "thead" and self.tables:
            self.tables[-1].in_head = True
        self.stack.append(el)
        if skip:
            self.skipping += 1

    def handle_endtag(self, tag: str) -> None:
        for n in range(len(self.stack) - 1, -1, -1):
            if self.stack[n].tag == tag:
                self._close_to(n)
                return
        if tag == "p":  # </p> with no <p>: an empty paragraph, a break all the same
            self._flush()

    def _end(self, tag: str) -> None:
        el = self.stack[-1]
        if el.skip:
            self.stack.pop()
            self.skipping -= 1
            return
        if tag in _BLOCK:
            self._flush()
        self.stack.pop()
        if tag in ("ul", "ol", "table"):
            self.prev = None
        if tag == "table" and self.tables:
            self.tables.pop()
        elif tag == "thead" and self.tables:
            self.tables[-1].in_head = False
        elif tag in ("td", "th") and self.tables and self.tables[-1].cell is not None:
            t = self.tables[-1]
            t.cells.append(_squash(" ".join(t.cell)))
            t.cell = None
        elif tag == "tr" and self.tables:
            t = self.tables[-1]
            if (t.in_head or t.all_th) and not t.header:
                t.header = t.cells
            else:
                block = _row_block(t.header, t.cells, self._headings(), t.row_start, self.pos())
                if block:
                    self.out.append(block)
            t.cells = []

    def handle_data(self, data: str) -> None:
        if self.skipping or not data:
            return
        if data.strip():
            self.has_text = True
            if self.buf_start < 0:
                self.buf_start = self.pos() + len(data) - len(data.lstrip())
        self.buf.append(data)

    def close(self) -> None:
        # At the end of its input, Python's HTMLParser (before 3.13.4: CVE-2025-6069) reads an
        # unterminated "<..." to the end of the text, gives up on it, turns its "<" into text and
        # starts again at the next "<": a 300 KB line of "<p " or "<a b=" took minutes. Every tag,
        # comment, declaration and processing instruction ends with ">", so after the text's last
        # ">" none can be complete: the parser would make all of it text, which is done here at once.
        rest = self.rawdata
        opened = rest.find("<!--")
        if opened >= 0 and "-->" not in rest[opened + 4:]:  # HTML5: a comment left open runs to the end
            hidden = rest[opened:]
            if hidden[4:].strip():
                line = self.line() + rest.count("\n", 0, opened)
                self.cuts.append((line, f"an HTML comment left open hides the rest of the file ({len(hidden):,} "
                                        f"characters, {hidden.count(chr(10)) + 1:,} lines)"))
            rest = self.rawdata = rest[:opened]
        cut = rest.rfind(">") + 1
        if self.cdata_elem is None and "<" in rest[cut:]:
            from html import unescape

            self.rawdata = rest[:cut]
            super().close()
            self.rawdata = rest[cut:]
            self.handle_data(unescape(self.rawdata))
            self.updatepos(0, len(self.rawdata))  # blocks end where the text ends
            self.rawdata = ""
        else:
            super().close()
        self._close_to(0)
        self._flush()

    def parse_marked_section(self, i: int, report: int = 1) -> int:
        # "<![" without a known keyword after it ("<![<![", "<![foo[") makes _markupbase raise
        # AssertionError; HTML5 reads it as a bogus comment, up to the next ">", and so does this.
        try:
            return super().parse_marked_section(i, report)
        except AssertionError:
            return self.parse_bogus_comment(i)

    # -- blocks

    def _headings(self) -> tuple[str, ...]:
        return tuple(h for _, h in self.heads)

    def _flush(self) -> None:
        raw = "".join(self.buf)
        text = _squash(raw) if self.has_text else ""
        start, self.buf, self.has_text, self.buf_start = self.buf_start, [], False, -1
        if not text:
            return
        where = PARAGRAPH
        for el in reversed(self.stack):
            if el.tag in _HEADINGS or el.tag in ("li", "dd", "dt", "pre", "td", "th", "blockquote") \
                    or el.classes & _TITLE_CLASSES:
                where = "title" if el.classes & _TITLE_CLASSES else el.tag
                break
        if where in ("td", "th"):
            if self.tables and self.tables[-1].cell is not None:
                self.tables[-1].cell.append(text)
            return
        if where == "dt":
            self.term = text.rstrip("¶").strip()
            return
        if where == "title":  # an admonition's "Note": the lead-in of what follows in its box
            for el in reversed(self.stack[:-1]):
                if el.tag not in ("p", "span", "strong", "em", "b", "i"):
                    el.lead = text
                    break
            return
        end = self.pos()
        if where in _HEADINGS:
            level = int(where[1])
            title = text.rstrip("¶").strip()
            while self.heads and self.heads[-1][0] >= level:
                self.heads.pop()
            self.out.append(Block(title, self._headings(), kind=HEADING, start=start, end=end, level=level))
            self.heads.append((level, title))
            self.prev = None
            return
        kind = {"li": ITEM, "dd": ITEM, "pre": CODE, "blockquote": QUOTE}.get(where, PARAGRAPH)
        lead = next((el.lead for el in reversed(self.stack) if el.lead), "")
        block = Block(text, self._headings(), lead, kind, start, end, code=raw.strip("\n") if kind == CODE else "")
        self.out.append(block)
        self.prev = block if kind in (PARAGRAPH, ITEM) else None


MAX_HTML_DEPTH = 512  # open elements: as deep as browsers build a page


def _html_blocks(text: str, base: int, heads: list[tuple[int, str]], report: Report | None = None,
                 line: int = 0) -> Iterator[Block]:
    """The blocks of an HTML document or fragment (``line`` lines into its document); ``heads``
    (level, title) is updated in place; what was left out goes to ``report``."""
    parser = _Html(text, base, heads)
    parser.base_line = line
    # Fed in pieces so blocks stream out of a large page instead of piling up.
    step = 1 << 16
    for i in range(0, len(text), step):
        parser.feed(text[i:i + step])
        yield from parser.out
        parser.out = []
    parser.close()
    yield from parser.out
    for at, what in parser.cuts if report is not None else ():
        report(at, what)


# --- reStructuredText -------------------------------------------------------------------------

# Sphinx directives docutils does not know, by what their content is. A name is looked up as it
# is ("click:example") and without its domain ("py:function" -> "function"). Any other unknown
# directive has its content read as text, with its argument (a signature, a tab's label) as the
# content's lead-in.
_RST_CODE = {"code-block", "sourcecode", "code", "doctest", "testcode", "testoutput", "testsetup",
             "testcleanup", "ipython", "jupyter-execute", "productionlist", "graphviz", "digraph", "graph",
             "plantuml", "mermaid", "plot", "exec", "runblock", "prompt", "code-tab", "literalinclude",
             "program-output", "command-output", "click:example", "click:run"}
# Autodoc directives (autoclass, automethod, ...) are read like the py: ones: their hand-written
# content is text, led in by the documented object's name.
_RST_DROP = {"toctree", "autosummary", "index", "highlight", "currentmodule", "module",
             "default-domain", "tabularcolumns", "sectionauthor",
             "moduleauthor", "codeauthor", "rst-class", "cssclass", "autoprogram", "click",
             "spelling:word-list"}
_RST_VERSION = {"versionadded": "New in version", "versionchanged": "Changed in version",
                "deprecated": "Deprecated since version", "versionremoved": "Removed in version"}
# Directives whose argument is text of the page, after their label (Sphinx's and docutils' boxes).
_RST_LABEL = {"seealso": "See also", "todo": "To do", "centered": "", "note": "Note", "warning": "Warning",
              "tip": "Tip", "hint": "Hint", "important": "Important", "caution": "Caution", "danger": "Danger",
              "attention": "Attention", "error": "Error"}
# Nothing reported or halted on, nothing read from other files or passed through raw, no config
# files read; the document's own sections are kept as sections (no title promotion). The line
# length limit bounds substitutions only (lines: see LongLines in _rst_classes).
_RST_SETTINGS = {"report_level": 5, "halt_level": 5, "file_insertion_enabled": False, "raw_enabled": False,
                 "doctitle_xform": False, "sectsubtitle_xform": False, "syntax_highlight": "none",
                 "_disable_config": True, "warning_stream": False, "line_length_limit": 100_000}
# Past these (a paragraph's characters, the longest word in it) docutils' inline parser is
# quadratic, and a paragraph keeps its text as it is, inline markup unresolved (see parse in
# _rst_classes). 10,000 is docutils' own default line-length limit; 400 characters without a
# space are a blob (base64, minified code), not prose, and 300 KB of them still read in seconds.
_RST_INLINE_CHARS = 10_000
_RST_INLINE_WORD = 400
_CODE_ROLES = {"code", "func", "meth", "class", "attr", "mod", "obj", "data", "exc", "const", "option",
               "envvar", "command", "program", "file", "samp", "kbd", "literal", "makevar"}
_RST_LOCK = threading.Lock()


def _role_text(name: str, text: str) -> str:
    """What Sphinx shows for a role it resolves: ``Title <target>`` -> Title, ``~a.b`` -> b,
    ``.Name`` -> Name. A cross-reference to a label or a document whose title is not known here
    gives the label's readable text: ``autoescape-overrides`` -> "autoescape overrides",
    ``/templates`` -> "templates" (:meth:`_RstWalker.text` gives a same-file section's title)."""
    base = name.rpartition(":")[2].lower()
    if text.endswith(">") and "<" in text:
        title = text[:text.rindex("<")].rstrip()
        if title:
            return title
        text = text[text.rindex("<") + 1:-1]
    if text[:1] in "~!" and len(text) > 1:
        text = text[1:].rpartition(".")[2] if text[0] == "~" else text[1:]
    if base in _CODE_ROLES and text.startswith(".") and len(text) > 1:
        text = text.lstrip(".")  # Sphinx: a target searched by its suffix, shown without the dot
    if base in ("ref", "doc", "numref", "any", "term", "keyword"):
        text = _readable_label(text, base == "doc")
    if base in ("menuselection", "guilabel"):
        text = text.replace("-->", "\u2023").replace("&&", "\0").replace("&", "").replace("\0", "&")
    return text


def _readable_label(label: str, document: bool) -> str:
    """A label as words: its last path part for a document (``/usage/templates`` -> "templates"),
    "-" and "_" read as spaces."""
    if document:
        label = label.rstrip("/").rpartition("/")[2] or label
    words = re.sub(r"[-_]+", " ", label).strip()
    return words or label


def _fallback_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """A Sphinx role docutils does not know: its text (as code for the code-like ones); a ``:ref:``
    without a title keeps its label, so the walker can show a same-file section's title."""
    from docutils import nodes, utils

    raw = utils.unescape(text)
    shown = _role_text(name, raw)
    base = name.rpartition(":")[2].lower()
    if base in _CODE_ROLES:
        return [nodes.literal(rawtext, shown)], []
    node = nodes.inline(rawtext, shown)
    if base == "ref" and not (raw.endswith(">") and raw[:raw.rfind("<")].strip()):
        label = raw[raw.rindex("<") + 1:-1] if raw.endswith(">") and "<" in raw else raw
        node["sparc_es_label"] = " ".join(label.split()).lower()  # as docutils normalises names
    return [node], []


@lru_cache(maxsize=1)
def _rst_classes():
    """Directive classes, the inliner and the parser, built once docutils is imported."""
    from docutils import nodes
    from docutils.parsers.rst import Directive, Parser, directives, roles
    from docutils.parsers.rst.languages import get_language
    from docutils.parsers.rst.states import Inliner, MarkupMismatch
    from docutils.transforms import Transform
    from docutils.utils import escape2null

    class AnyOption(dict):
        """An option spec that takes every option (Sphinx's :linenos:, :caption:, :noindex: ...)."""

        def __missing__(self, key):
            return directives.unchanged

        def __bool__(self):  # docutils looks for options only when a directive has some
            return True

    class Tolerant(Directive):
        """Any argument, content and options: what an unknown Sphinx directive may carry."""

        optional_arguments = 1
        final_argument_whitespace = True
        has_content = True
        option_spec = AnyOption()

    class Prose(Tolerant):
        """Content read as text, led in by the argument (or by a version note's label)."""

        def run(self):
            node = nodes.container()
            base = self.name.rpartition(":")[2].lower()
            argument = " ".join(self.arguments[0].split()) if self.arguments else ""
            if base in _RST_VERSION:  # "Changed in version 2.0", then the rest of the line as text
                version, _, argument = argument.partition(" ")
                node["lead"] = f"{_RST_VERSION[base]} {version}"
            elif base in _RST_LABEL:
                node["lead"] = _RST_LABEL[base]
            else:  # a signature, a tab's label: what the content is about, not a sentence
                node["lead"], argument = argument, ""
            if argument:
                inline, _ = self.state.inline_text(argument, self.lineno)
                # rawsource: the directive's lines up to its content, so the span covers the argument
                para = nodes.paragraph(self.block_text.split("\n\n", 1)[0], "", *inline)
                para.line = self.lineno
                node += para
            self.state.nested_parse(self.content, self.content_offset, node)
            return [node]

    class Code(Tolerant):
        def run(self):
            text = "\n".join(self.content)
            node = nodes.literal_block(text, text)
            node.line = self.content_offset + 1
            return [node]

    class Drop(Tolerant):
        def run(self):
            return []

    language = get_language("en")

    class Tolerant(dict):
        """docutils' directive registry, answering for names it does not know."""

        def __contains__(self, name):
            return dict.__contains__(self, name) or not (
                name in language.directives or name in directives._directive_registry)

        def __missing__(self, name):
            base = name.rpartition(":")[2]
            if name in _RST_CODE or base in _RST_CODE:
                return Code
            if name in _RST_DROP or base in _RST_DROP:
                return Drop
            return Prose

    def interpreted(self, rawsource, text, role, lineno):
        fn, _ = roles.role(role, self.language, lineno, self.reporter)
        return (fn or _fallback_role)(role, rawsource, text, lineno, self)

    def parse(self, text, lineno, memo, parent):
        # docutils' inline patterns are quadratic on long input: a name pattern tried from every
        # "-", ":" or "/" of a long word ("a-a-a-...": 20 KB took 22 s), an end-string searched to
        # the paragraph's end from every unmatched "`" or "*", a reference list scanned once per
        # reference. A paragraph past these bounds keeps its text, inline markup unresolved.
        if len(text) > _RST_INLINE_CHARS or any(len(word) > _RST_INLINE_WORD for word in text.split()):
            return [nodes.Text(escape2null(text))], []  # backslash escapes kept as docutils keeps them
        return Inliner.parse(self, text, lineno, memo, parent)

    def implicit_inline(self, text, lineno):
        # docutils' own recurses once per standalone URI or e-mail address: a paragraph of a
        # thousand of them overflowed the stack. The same pieces in the same order, with a stack.
        out, todo = [], [text]
        while todo:
            piece = todo.pop()
            if not isinstance(piece, str):
                out.extend(piece)
                continue
            for pattern, method in self.implicit_dispatch if piece else ():
                match = pattern.search(piece)
                if match:
                    try:
                        found = method(match, lineno)
                    except MarkupMismatch:
                        continue
                    todo += [piece[match.end():], found, piece[:match.start()]]
                    break
            else:
                if piece:
                    out.append(nodes.Text(piece))
        return out

    # Inliner builds its patterns from vars(type(self)): a subclass must carry Inliner's own.
    shared = {k: v for k, v in vars(Inliner).items() if not k.startswith("__")}
    TolerantInliner = type("TolerantInliner", (Inliner,), {**shared, "interpreted": interpreted, "parse": parse,
                                                          "implicit_inline": implicit_inline})

    class BoundedSubstitutions(Transform):
        """Before docutils expands substitutions (priority 220): a reference whose expansion, nested
        ones included, is over ``RST_SUBSTITUTION_CHARS``, or would take the document's expansions
        over ``RST_SUBSTITUTIONS_CHARS``, is left out (a ``problematic`` node, which the reader
        skips), and noted in the document's ``sparc_es_cut`` as (line, what)."""

        default_priority = 219

        def apply(self) -> None:
            document = self.document
            defs, normed = document.substitution_defs, document.substitution_names
            sizes: dict[str, int] = {}
            cut = document.setdefault("sparc_es_cut", [])

            def key(ref) -> str | None:
                name = ref["refname"]
                return name if name in defs else normed.get(name.lower())

            def size(name: str, open_: set[str]) -> int:  # characters of a definition, expanded
                if name not in sizes:
                    if name in open_:  # circular: docutils reports it
                        return 0
                    open_.add(name)
                    total = len(defs[name].astext())
                    for ref in defs[name].findall(nodes.substitution_reference):
                        inner = key(ref)
                        n = size(inner, open_) if inner is not None else 0
                        total += n if n <= RST_SUBSTITUTION_CHARS else 0  # cut below
                    open_.discard(name)
                    sizes[name] = total
                return sizes[name]

            budget, reported = RST_SUBSTITUTIONS_CHARS, set()
            for ref in list(document.findall(nodes.substitution_reference)):
                name = key(ref)
                if name is None:
                    continue
                try:
                    n = size(name, set())
                except RecursionError:  # a chain of thousands of definitions
                    n = RST_SUBSTITUTIONS_CHARS + 1
                inside = any(isinstance(a, nodes.substitution_definition) for a in _ancestors(ref))
                if n > RST_SUBSTITUTION_CHARS or (not inside and n > budget):
                    line = next((a.line for a in _ancestors(ref) if a.line), None)
                    what = "over" if n > RST_SUBSTITUTION_CHARS else "taking the document's substitutions over"
                    limit = RST_SUBSTITUTION_CHARS if n > RST_SUBSTITUTION_CHARS else RST_SUBSTITUTIONS_CHARS
                    if ref["refname"] not in reported:
                        reported.add(ref["refname"])
                        cut.append((line, f"substitution |{ref['refname']}| left out: its expansion is {what} "
                                          f"{limit:,} characters"))
                    ref.replace_self(nodes.problematic(ref.rawsource, ref.rawsource))
                elif not inside:
                    budget -= n

    class LongLines(Parser):
        """docutils' parser, reading lines of any length: with a line over ``line_length_limit``
        docutils drops the whole document, silently (a system message). Substitutions are bounded
        by :class:`BoundedSubstitutions`; the inliner above bounds its own work."""

        def get_transforms(self):
            return [*super().get_transforms(), BoundedSubstitutions]

        def parse(self, inputstring, document):
            limit = document.settings.line_length_limit
            document.settings.line_length_limit = len(inputstring)
            try:
                super().parse(inputstring, document)
            finally:
                document.settings.line_length_limit = limit

    overrides = {"code-block": Code, "sourcecode": Code, "code": Code}  # any Sphinx option, no pygments
    return Tolerant, TolerantInliner, overrides, LongLines


def _ancestors(node):
    """A node's parents, nearest first."""
    node = node.parent
    while node is not None:
        yield node
        node = node.parent


@contextmanager
def _tolerant_directives():
    """docutils' directive registry made tolerant for the time of one parse (as Sphinx swaps it
    for its own namespace); a lock keeps two threads from swapping it at once."""
    from docutils.parsers.rst import directives

    tolerant, _, overrides, _ = _rst_classes()
    with _RST_LOCK:
        saved = directives._directives
        directives._directives = tolerant({**saved, **overrides})
        try:
            yield
        finally:
            directives._directives = saved


def rst_doctree(text: str, name: str = "<document>") -> docutils.nodes.document:
    """Parse reStructuredText as sparc-es reads it: no reports, no file insertion, no ``raw``,
    Sphinx roles and directives tolerated. Returns the docutils document (a node tree)."""
    from docutils.core import publish_doctree

    _, inliner, _, parser = _rst_classes()
    with _tolerant_directives():
        try:
            return publish_doctree(text, source_path=name, parser=parser(inliner=inliner()),
                                   settings_overrides=_RST_SETTINGS)
        except Exception as e:  # docutils gives up on some input (too deep nesting, ...): say where
            line = getattr(e, "line", None)
            raise InputError(name, f"cannot read reStructuredText: {e}".splitlines()[0], line) from None


def _rst_rejected(document) -> Iterator[tuple[int | None, str]]:
    """(line, what) of each block docutils could not read (a malformed table, a csv-table with a
    stray quote): an error message that carries the block's source, which is all that is left of it."""
    from docutils import nodes

    for message in document.findall(nodes.system_message):
        if message.get("level", 0) >= 3 and any(isinstance(c, nodes.literal_block) for c in message.children):
            why = " ".join(message.children[0].astext().split()) if message.children else "unreadable"
            yield message.get("line"), f"reStructuredText docutils could not read, left out: {why[:120]}"


class _RstWalker:
    """A docutils document tree -> blocks."""

    def __init__(self, text: str) -> None:
        from docutils import nodes

        self.nodes = nodes
        self.source = text
        self.lines = line_starts(text)
        self.titles: dict[str, str] = {}  # section titles by label (blocks() fills it)
        self.cursor = 0  # end of the last block placed: where a block with no line number may start
        self.start = 0  # start of the last block placed: the blocks come in the file's order
        self.skip = (nodes.system_message, nodes.problematic, nodes.comment, nodes.target,
                     nodes.substitution_definition, nodes.footnote_reference, nodes.citation_reference,
                     nodes.image, nodes.raw, nodes.pending, nodes.label, nodes.attribution, nodes.rubric,
                     nodes.transition, nodes.colspec, nodes.generated)  # generated: section numbers

    # -- text and spans

    def text(self, node) -> str:
        """A node's clean text: inline markup resolved, references to footnotes and images left out."""
        out: list[str] = []

        def walk(n) -> None:
            for child in n.children:
                if isinstance(child, self.nodes.Text):
                    out.append(child.astext())  # backslash escapes undone (the node keeps them as NUL)
                elif isinstance(child, self.nodes.inline) and child.get("sparc_es_label") in self.titles:
                    out.append(self.titles[child["sparc_es_label"]])  # :ref: to a section of this file
                elif not isinstance(child, self.skip):
                    walk(child)
                    if isinstance(child, (self.nodes.paragraph, self.nodes.line, self.nodes.term)):
                        out.append(" ")

        walk(node)
        return _squash("".join(out))

    def span(self, node, lines: int | None = None) -> tuple[int, int]:
        """Where a node sits: from its first line for as many lines as its source has."""
        line = getattr(node, "line", None)
        if not line:
            return self.cursor, len(self.source)
        return self.line_span(line, lines if lines is not None else node.rawsource.count("\n") + 1)

    def line_span(self, line: int, count: int) -> tuple[int, int]:
        """The span of ``count`` lines from ``line`` (1-based); later blocks start after it."""
        last = len(self.lines) - 1
        start, end = self.lines[min(max(line, 1) - 1, last)], self.lines[min(max(line, 1) - 1 + count, last)]
        if start < self.start:  # a line number behind the block before: not this file's numbering
            return self.cursor, len(self.source)
        self.start, self.cursor = start, max(self.cursor, end)
        return start, end

    # -- structure

    def blocks(self, document) -> Iterator[Block]:
        # The sections of this file by label (.. _label: before a section names it too): what a
        # :ref: without a title shows, as Sphinx shows the section's title.
        for name, node_id in document.nameids.items():
            section = document.ids.get(node_id)
            if isinstance(section, self.nodes.section):
                title = next((c for c in section.children if isinstance(c, self.nodes.title)), None)
                if title is not None:
                    self.titles[name] = self.text(title)
        yield from self.children(document, (), "", PARAGRAPH)

    def children(self, node, headings: tuple[str, ...], lead: str, kind: str) -> Iterator[Block]:
        prev: Block | None = None
        for child in node.children:
            for block in self.node(child, headings, lead, kind, prev):
                yield block
                prev = block if block.kind in (PARAGRAPH, ITEM, QUOTE) else None
            if not isinstance(child, self.nodes.paragraph):
                prev = None

    def node(self, n, headings: tuple[str, ...], lead: str, kind: str, prev: Block | None) -> Iterator[Block]:
        nodes = self.nodes
        if isinstance(n, self.skip) or isinstance(n, nodes.Text):
            return
        if isinstance(n, nodes.section):
            title = next((c for c in n.children if isinstance(c, nodes.title)), None)
            name = self.text(title) if title is not None else ""
            if name:
                # docutils numbers a title by its underline: the text is the line above
                a, b = self.line_span(title.line - 1, 2) if title.line else (self.cursor, len(self.source))
                yield Block(name, headings, kind=HEADING, start=a, end=b, level=len(headings) + 1)
            inner = headings + (name,) if name else headings
            yield from self.children(n, inner, "", PARAGRAPH)
        elif isinstance(n, nodes.title):
            return  # a section's (above) or a box's (its lead-in, below)
        elif isinstance(n, (nodes.paragraph, nodes.line_block)):
            text = self.text(n) if isinstance(n, nodes.paragraph) else _squash(n.astext())
            if text:
                start, end = self.span(n, None if isinstance(n, nodes.paragraph) else
                                       n.astext().count("\n") + 1)
                yield Block(text, headings, lead if kind == ITEM or lead else "", kind, start, end)
        elif isinstance(n, (nodes.bullet_list, nodes.enumerated_list)):
            inner = lead
            if prev is not None:
                inner = _chain(prev.lead, prev.text) if prev.kind == ITEM else lead_of(prev.text)
            for item in n.children:
                yield from self.children(item, headings, inner or lead, ITEM)
        elif isinstance(n, nodes.definition_list):
            for item in n.children:
                term = " ".join(self.text(c) for c in item.children
                                if isinstance(c, (nodes.term, nodes.classifier)))
                for c in item.children:
                    if isinstance(c, nodes.definition):
                        yield from self.children(c, headings, term or lead, ITEM)
        elif isinstance(n, nodes.field_list):
            for field in n.children:
                name = next((self.text(c) for c in field.children if isinstance(c, nodes.field_name)), "")
                for c in field.children:
                    if isinstance(c, nodes.field_body):
                        yield from self.children(c, headings, name or lead, ITEM)
        elif isinstance(n, nodes.option_list):
            for item in n.children:
                options = next((c.astext() for c in item.children if isinstance(c, nodes.option_group)), "")
                for c in item.children:
                    if isinstance(c, nodes.description):
                        yield from self.children(c, headings, options or lead, ITEM)
        elif isinstance(n, (nodes.literal_block, nodes.doctest_block, nodes.math_block)):
            text = _squash(n.astext())
            if text:
                start, end = self.span(n)
                yield Block(text, headings, kind=CODE, start=start, end=end, code=n.astext().strip("\n"))
        elif isinstance(n, nodes.table):
            yield from self.table(n, headings)
        elif isinstance(n, nodes.block_quote):
            yield from self.children(n, headings, lead, QUOTE)
        elif isinstance(n, nodes.topic) and "contents" in n["classes"]:
            return  # a table of contents: the headings again
        elif isinstance(n, (nodes.Admonition, nodes.topic, nodes.sidebar)):
            title = next((self.text(c) for c in n.children if isinstance(c, nodes.title)), "")
            label = title or _RST_LABEL.get(n.tagname) or n.tagname.capitalize()
            yield from self.children(n, headings, label, PARAGRAPH)
        elif isinstance(n, nodes.figure):
            for c in n.children:
                if isinstance(c, nodes.caption):
                    yield from self.caption(c, headings)
                elif isinstance(c, nodes.legend):
                    yield from self.children(c, headings, lead, kind)
        elif isinstance(n, nodes.Element):
            # containers (ours included: a version note's lead-in), footnotes, compound, glossary ...
            inner = n.get("lead", "") or lead
            yield from self.children(n, headings, inner, kind)

    def caption(self, c, headings: tuple[str, ...]) -> Iterator[Block]:
        text = self.text(c)
        if text:
            start, end = self.span(c)
            yield Block(text, headings, "", PARAGRAPH, start, end)

    def table(self, table, headings: tuple[str, ...]) -> Iterator[Block]:
        nodes = self.nodes
        header: list[str] = []
        for group in table.findall(nodes.tgroup):
            for part in group.children:
                for row in part.children if isinstance(part, (nodes.thead, nodes.tbody)) else ():
                    cells = [self.text(e) for e in row.children if isinstance(e, nodes.entry)]
                    if isinstance(part, nodes.thead):
                        header = header or cells
                        continue
                    lines = [(p.line, p.rawsource.count("\n") + 1) for p in row.findall(nodes.paragraph)
                             if p.line]
                    first = min((line for line, _ in lines), default=0)
                    if lines and self.lines[min(first - 1, len(self.lines) - 1)] >= self.start:
                        last = max(line + n for line, n in lines)
                        start, end = self.line_span(first, last - first)
                    else:  # no line numbers, or ones relative to a directive (csv-table): find the cells
                        start, end = locate(self.source, " ".join(cells), self.cursor, len(self.source))
                        self.cursor = max(self.cursor, end)
                    block = _row_block(header, cells, headings, start, end)
                    if block:
                        yield block
