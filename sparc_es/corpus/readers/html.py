"""HTML -> blocks, with the standard library's ``html.parser``.

Scripts, styles, navigation, page headers and footers, sidebars (Sphinx's ``div.sphinxsidebar``,
``div.related``, ``div.footer``), skip links and the ``¶`` header links are left out; an image gives
its alt text inside a sentence and nothing on its own. A redirecting page (``<meta http-equiv=
"refresh">``) gives nothing. MkDocs-Material's content tabs: each label is the heading of its
body. Spans are tag positions. Markdown reads its HTML blocks with :func:`html_blocks` too, sharing
its heading path with them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape
from html.parser import HTMLParser

from sparc_es.corpus.readers.blocks import (
    CODE,
    HEADING,
    ITEM,
    LEAD_CHARS,
    PARAGRAPH,
    QUOTE,
    Block,
    Report,
    chain,
    lead_of,
    row_block,
    squash,
)

MAX_HTML_DEPTH = 512  # open elements: as deep as browsers build a page

_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
         "track", "wbr"}
_SKIP_TAGS = {"head", "script", "style", "noscript", "template", "nav", "svg", "math", "button", "form",
              "select", "textarea", "iframe", "object", "canvas", "audio", "video", "map", "dialog"}
# Page furniture, by class: Sphinx's sidebar, relation bars, footer and header links; the navigation
# of the Read the Docs, Furo and Material themes; footnote references and labels.
_SKIP_CLASSES = {"sphinxsidebar", "sphinxsidebarwrapper", "related", "footer", "headerlink", "navigation",
                 "navbar", "breadcrumbs", "wy-breadcrumbs", "wy-nav-side", "rst-versions", "sidebar-drawer",
                 "toc-drawer", "md-sidebar", "md-header", "md-footer", "skip-link", "md-skip", "footnote-reference",
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

    __slots__ = ("tag", "skip", "lead", "classes", "heads")

    def __init__(self, tag: str, skip: bool, classes: set[str], lead: str = "") -> None:
        self.tag, self.skip, self.classes, self.lead = tag, skip, classes, lead
        self.heads: list[tuple[int, str]] | None = None  # a content tab's: the heading path before it


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
        self.redirect = False  # a page that sends the browser elsewhere (<meta http-equiv="refresh">)
        self.tabs: list[list[str]] = []  # MkDocs-Material's content tabs: each open set's labels, in order

    def line(self) -> int:
        return self.getpos()[0] + self.base_line

    base_line = 0  # lines before this fragment in its document (an HTML block inside Markdown)

    def pos(self) -> int:
        line, col = self.getpos()
        return self.base + self.lines[min(line - 1, len(self.lines) - 1)] + col

    # -- the element stack

    def _inside(self, tag: str) -> bool:
        return any(e.tag == tag for e in self.stack)

    def _in_class(self, name: str) -> bool:
        return any(name in e.classes for e in self.stack)

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
        if tag == "meta" and a.get("http-equiv", "").lower() == "refresh" and "url=" in a.get("content", "").lower():
            self.redirect = True  # mkdocs-redirects' and Sphinx's stubs: "You're being redirected"
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
        if "tabbed-set" in classes:
            self.tabs.append([])
        elif "tabbed-block" in classes and self.tabs and self.tabs[-1]:  # a tab's body, its label above it
            el.heads = list(self.heads)
            self.heads.append((7, self.tabs[-1].pop(0)))  # below every heading level
        elif tag == "label" and self._in_class("tabbed-labels"):
            self._flush()
        if tag in ("ul", "ol") and not skip:
            prev = self.prev
            if prev is not None:
                el.lead = chain(prev.lead, prev.text) if prev.kind == ITEM else lead_of(prev.text)
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
        if tag in _BLOCK or (tag == "label" and self._in_class("tabbed-labels")):
            self._flush()
        self.stack.pop()
        if el.heads is not None:
            self.heads[:] = el.heads
        elif "tabbed-set" in el.classes and self.tabs:
            self.tabs.pop()
        if tag in ("ul", "ol", "table"):
            self.prev = None
        if tag == "table" and self.tables:
            self.tables.pop()
        elif tag == "thead" and self.tables:
            self.tables[-1].in_head = False
        elif tag in ("td", "th") and self.tables and self.tables[-1].cell is not None:
            t = self.tables[-1]
            t.cells.append(squash(" ".join(t.cell)))
            t.cell = None
        elif tag == "tr" and self.tables:
            t = self.tables[-1]
            if (t.in_head or t.all_th) and not t.header:
                t.header = t.cells
            else:
                block = row_block(t.header, t.cells, self._headings(), t.row_start, self.pos())
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
        text = squash(raw) if self.has_text else ""
        start, self.buf, self.has_text, self.buf_start = self.buf_start, [], False, -1
        if not text or self.redirect:
            return
        if self.tabs and self._in_class("tabbed-labels"):  # a content tab's label: the heading of its body
            self.tabs[-1].append(text)
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
        carriers = [el for el in self.stack if el.lead]
        lead = carriers[-1].lead if carriers else ""
        for el in reversed(carriers[:-1]):  # a definition inside a definition (Sphinx's "Returns:" of a
            # method): the outer term too (its signature), where it fits
            if el.tag == "dd" and el.lead not in lead and len(el.lead) + len(lead) < LEAD_CHARS:
                lead = chain(el.lead, lead)
        block = Block(text, self._headings(), lead, kind, start, end, code=raw.strip("\n") if kind == CODE else "")
        self.out.append(block)
        self.prev = block if kind in (PARAGRAPH, ITEM) else None


def html_blocks(text: str, base: int, heads: list[tuple[int, str]], report: Report | None = None,
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
