"""Markdown -> blocks, with markdown-it-py (CommonMark with GFM tables) and mdit-py-plugins.

The Python-Markdown extensions MkDocs-Material sites use are read as they show: admonitions and
collapsible blocks (their title is context, like a heading), content tabs (their label likewise),
attribute lists, abbreviation definitions, snippet markers and ``[TOC]`` (markup, left out), icon
shortcodes and emoji shortcodes (images, left out), inline-highlight prefixes, MyST roles and reference links whose
label the file does not define (their text, as the site shows it). A definition list's term leads
into its definitions, as a paragraph leads into a list. MyST directives whose body
is prose (```` ```{note} ````, ```` ````{admonition} Title ````, ``:::{versionchanged} 2.0``, tabs,
dropdowns) are read as Sphinx renders them: their body is text under their label, as an
admonition's is; other directives stay code blocks. A YAML front matter block is skipped; HTML
blocks go to :mod:`sparc_es.corpus.readers.html`. Spans are exact lines (markdown-it's line maps).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import lru_cache

from markdown_it import MarkdownIt
from mdit_py_plugins.admon import admon_plugin
from mdit_py_plugins.attrs import attrs_block_plugin
from mdit_py_plugins.deflist import deflist_plugin
from mdit_py_plugins.footnote import footnote_plugin

from sparc_es.corpus.readers.blocks import (
    BOX_LABELS,
    CODE,
    HEADING,
    ITEM,
    PARAGRAPH,
    QUOTE,
    VERSION_LABELS,
    Block,
    Report,
    chain,
    lead_of,
    line_starts,
    role_text,
    row_block,
    squash,
)
from sparc_es.corpus.readers.html import html_blocks

MARKDOWN_NESTING = 100  # markdown-it's limit (default 20: ten list levels); content deeper is cut and reported


@lru_cache(maxsize=1)
def _markdown():
    """CommonMark with GFM tables and the Python-Markdown extensions MkDocs-Material sites use:
    admonitions and collapsible blocks (``!!!``, ``???``, ``???+``: mdit-py-plugins), content tabs
    (``=== "Label"``: :func:`_tabs`), block attribute lists (``{ .annotate }``: mdit-py-plugins),
    definition lists (``Term`` then ``: Definition``: Python-Markdown's def_list, MyST's deflist),
    footnotes (``[^1]`` marks nothing; ``[^1]: text`` is read where it is written, under its
    section; Python-Markdown has no inline footnotes, and pymdown's ``^[†](#fn)^`` is a link)."""
    # text_join off: an escaped bracket (\[) stays its own token, so _inline can tell it from a link's
    md = MarkdownIt("commonmark", {"maxNesting": MARKDOWN_NESTING}).enable("table").disable("text_join")
    md.use(admon_plugin).use(attrs_block_plugin).use(deflist_plugin)
    md.use(footnote_plugin, inline=False, move_to_end=False)
    interrupts = {"alt": ["paragraph", "reference", "blockquote", "list"]}
    md.block.ruler.before("fence", "tabs", _tabs, interrupts)
    md.block.ruler.before("fence", "directive", _directive, interrupts)
    md.block.ruler.before("fence", "pymdown_block", _pymdown_block, interrupts)
    return md


# A MyST directive written as a fence: ```{name} argument (backticks, tildes, or colons with MyST's
# colon_fence). Those below have a prose body, as Sphinx renders them; those in LEFT_OUT_DIRECTIVES
# show no text of the page (navigation, other files, images); any other (code-block, eval-rst, a
# project's own) stays what markdown-it makes of it.
_DIRECTIVE = re.compile(r"(`{3,}|~{3,}|:{3,})\{([A-Za-z][\w:-]*)\}[ \t]*(.*?)[ \t]*$")
_TITLED = {"admonition", "tab", "tab-item", "dropdown", "card", "grid-item-card", "topic", "sidebar", "margin"}
_CONTAINERS = {"tab-set", "grid", "grid-item", "card-carousel", "container", "div"}  # no label of their own
PROSE_DIRECTIVES = set(BOX_LABELS) | set(VERSION_LABELS) | _TITLED | _CONTAINERS
LEFT_OUT_DIRECTIVES = {"toctree", "contents", "include", "literalinclude", "image", "program-output",
                       "command-output", "autosummary"}
_OPTION = re.compile(r":[\w-]+:(?:\s.*)?$")  # a directive's option line, :class: dropdown


def _directive(state, start_line: int, end_line: int, silent: bool) -> bool:
    """A markdown-it block rule for a MyST directive with a prose body: ``directive_open`` (its label
    in ``meta``), the text its first line holds, the body's blocks, ``directive_close``. The body
    runs to a closing fence of the same character, at least as long (as markdown-it closes a fence),
    or to the end of the enclosing block; its option lines (``:key: value``, or a ``---`` block) are
    left out. A directive of :data:`LEFT_OUT_DIRECTIVES` is one ``directive_left_out`` token."""
    found = _opening(state, start_line, _DIRECTIVE)
    if found is None or found.group(2).rpartition(":")[2].lower() not in PROSE_DIRECTIVES | LEFT_OUT_DIRECTIVES:
        return False
    if silent:
        return True
    marker, name, argument = found.group(1), found.group(2).rpartition(":")[2].lower(), found.group(3)
    line, closed = _closing(state, start_line, end_line, lambda text: text.startswith(marker[0] * len(marker))
                            and not text.rstrip().strip(marker[0]))
    if name in LEFT_OUT_DIRECTIVES:
        token = state.push("directive_left_out", "", 0)
        token.map, token.meta = [start_line, line + closed], {"name": name, "closed": closed}
        state.line = line + closed
        return True

    def lines(n: int) -> str:
        return state.src[state.bMarks[n] + state.tShift[n]:state.eMarks[n]]

    body = start_line + 1
    if body < line and lines(body) == "---":  # options as a YAML block
        end = next((n for n in range(body + 1, line) if lines(n) == "---"), None)
        body = body if end is None else end + 1
    while body < line and _OPTION.match(lines(body)):
        body += 1
    text = ""  # what the first line holds beyond the label: text of the page
    if name in VERSION_LABELS:
        version, _, text = argument.partition(" ")
        label = f"{VERSION_LABELS[name]} {version}".strip()
    elif name in BOX_LABELS:
        label, text = BOX_LABELS[name], argument
    else:
        label = "" if name in _CONTAINERS else argument
    if name in VERSION_LABELS and not text and all(not lines(n).strip() for n in range(body, line)):
        text, label = label + ".", ""  # a version note with no body still says so, as its own sentence
    _box(state, start_line, body, line, closed, label, text)
    return True


def _opening(state, start_line: int, pattern: re.Pattern) -> re.Match | None:
    """``pattern`` matched on ``start_line``'s text; None where it does not match or the line is
    indented code."""
    if state.sCount[start_line] - state.blkIndent >= 4:
        return None
    start = state.bMarks[start_line] + state.tShift[start_line]
    return pattern.match(state.src[start:state.eMarks[start_line]])


def _closing(state, start_line: int, end_line: int, closes: Callable[[str], bool]) -> tuple[int, bool]:
    """(the line a block opened on ``start_line`` ends at, whether a line that ``closes`` it is
    there); without one, it runs to the end of the list item or quote that holds it."""
    for line in range(start_line + 1, end_line):
        text = state.src[state.bMarks[line] + state.tShift[line]:state.eMarks[line]]
        if text and state.sCount[line] < state.blkIndent:  # the list item or quote holding it ended
            return line, False
        if state.sCount[line] - state.blkIndent < 4 and closes(text):
            return line, True
    return max(end_line, start_line + 1), False


def _box(state, start_line: int, body: int, line: int, closed: bool, label: str, text: str = "") -> None:
    """``directive_open`` (``label`` in ``meta``), a paragraph of ``text`` (what the first line
    holds), the blocks of lines ``body`` to ``line``, ``directive_close``; reading goes on after
    the closing line when ``closed``."""
    old = state.parentType, state.lineMax
    token = state.push("directive_open", "div", 1)
    token.meta, token.map, token.block = {"label": label}, [start_line, line + closed], True
    if text:
        _push_paragraph(state, text, start_line)
    state.parentType, state.lineMax = "directive", line
    state.md.block.tokenize(state, body, line)
    token = state.push("directive_close", "div", -1)
    token.block = True
    state.parentType, state.lineMax = old
    state.line = line + closed


# pymdownx.blocks (/// admonition | Title, //// tab | Label, /// details | Summary, /// note): a
# header of three or more slashes, the block's name and, after a bar, its title; options indented
# under it; the body up to a line of the same slashes (a block inside another has fewer).
_PYMDOWN_BLOCK = re.compile(r"(/{3,})[ \t]*([A-Za-z][\w-]*)[ \t]*(?:\|[ \t]*(.*?))?[ \t]*$")
_UNTITLED_BLOCKS = {"html", "caption", "definition"}  # a container or the text's own part: no label


def _pymdown_block(state, start_line: int, end_line: int, silent: bool) -> bool:
    """A markdown-it block rule for a pymdownx.blocks block: ``directive_open`` (its title, or an
    admonition's type as the page shows it, in ``meta``), the body's blocks, ``directive_close``,
    as :func:`_directive` reads a MyST directive. The body runs to the closing slashes, or to the
    end of the enclosing block; the indented option lines under the header are left out."""
    found = _opening(state, start_line, _PYMDOWN_BLOCK)
    if found is None:
        return False
    if silent:
        return True
    marker, name, title = found.group(1), found.group(2).lower(), found.group(3) or ""
    line, closed = _closing(state, start_line, end_line, lambda text: text.rstrip() == marker)
    body = start_line + 1
    while body < line and state.sCount[body] - state.blkIndent >= 4:  # options: type: warning, open: true
        body += 1
    if name in _UNTITLED_BLOCKS:
        label = ""
    elif name in ("admonition", "details", "tab"):
        label = title.strip()
    else:  # an admonition named by its type (/// note, /// warning | Title)
        label = title.strip() or BOX_LABELS.get(name, name.capitalize())
    _box(state, start_line, body, line, closed, label)
    return True


def _push_paragraph(state, text: str, line: int) -> None:
    """A paragraph of ``text`` on ``line``, as markdown-it's paragraph rule makes one (its inline
    children are parsed later, with the others)."""
    state.push("paragraph_open", "p", 1).map = [line, line + 1]
    inline = state.push("inline", "", 0)
    inline.content, inline.map, inline.children = text, [line, line + 1], []
    state.push("paragraph_close", "p", -1)


# pymdownx.tabbed: === "Label" (===! starts a new set of tabs, ===+ selects one), its body indented.
_TAB = re.compile(r'===[!+]{0,2}[ \t]+"([^"\n]*)"[ \t]*$')
TAB_INDENT = 4


def _tabs(state, start_line: int, end_line: int, silent: bool) -> bool:
    """A markdown-it block rule for a content tab: ``tab_open`` (its label in ``meta``), the body's
    blocks, ``tab_close``. Its body runs while lines are indented or blank, as pymdownx.tabbed reads it."""
    found = _opening(state, start_line, _TAB)
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
# {: #id .class key=value} anywhere; without the colon only right after an inline element (a link,
# emphasis, an image: [a](x){.cls}), which _inline sees (a code span's {.a,b} is text)
_ATTRS = r'(?:\s*(?:[#.][^\s{}]+|[\w-]+=(?:"[^"]*"|\'[^\']*\'|[^\s}]+)))+\s*\}'
_INLINE_ATTR_LIST = re.compile(r'\{:' + _ATTRS)
_BARE_ATTR_LIST = re.compile(r'\{' + _ATTRS)
# MkDocs-Material's icon shortcodes (:octicons-heart-fill-16:, :material-github:): images, not words.
# An icon's attribute list goes with it (:material-clock-fast:{ .lg .middle }).
_ICON = re.compile(r"(?<![\w:]):(?:octicons|fontawesome|material|simple)-[a-z0-9-]+:(?![\w:])"
                   r"(?:\{" + _ATTRS + ")?")
# (label)= is a MyST target: the name a cross-reference gives the heading after it; ::: alone closes
# a Pandoc or MyST colon block.
_MARKUP_LINE = re.compile(r'\*\[[^\]]+\]:.*|-{1,}8<-{1,}.*|;-{1,}8<-{1,}.*|\[TOC\]|\([^()\s][^()]*\)=|:{3,}')


_ANNOTATION = re.compile(r"(?<!\S)\(\d+\)(?=\s|$)")  # MkDocs-Material's annotation markers
# mkdocstrings' ::: package.module: the API documentation its handler writes there, from the code.
# A paragraph of it, with its indented options, is no text of the page; a heading of it (# ::: x)
# is the object's heading, which shows its path.
_AUTODOC = re.compile(r":::[ \t]+([A-Za-z_][\w.:-]*)")


def _strip_markup(text: str, source: str = "") -> str:
    """A heading's or paragraph's ``text`` without a trailing attribute list; "" when every line of
    its ``source`` is extension markup (abbreviation definitions, snippet markers, [TOC], MyST
    targets) or it is an mkdocstrings ``::: identifier`` with its options."""
    raw = [line for line in source.split("\n") if line.strip()]
    lines = [line.strip() for line in raw]
    if lines and all(_MARKUP_LINE.fullmatch(line) for line in lines):
        return ""
    if raw and _AUTODOC.fullmatch(raw[0].strip()) and all(line[:1] in " \t" for line in raw[1:]):
        return ""
    autodoc = _AUTODOC.fullmatch(text.strip()) if not source else None
    if autodoc is not None:
        return autodoc.group(1)
    if lines and _MARKUP_LINE.fullmatch(lines[0]) and lines[0].endswith(")="):  # (label)= right above the text
        text = text[len(lines[0]):] if text.startswith(lines[0]) else text
    if not lines or lines[-1].endswith("}"):  # not a code span's braces (`cp .env{.example,}`)
        attributes = _ATTR_LIST.search(text)
        if attributes is not None:
            text = text[:attributes.start()]
            if ".annotate" in attributes.group().split():  # MkDocs-Material's (1) markers open annotations
                text = _ANNOTATION.sub("", text)
    return squash(_ICON.sub("", _INLINE_ATTR_LIST.sub("", text)))


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

# A reference link whose definition is not in the file ([text][label], [text][], an image's
# ![alt][label]): MkDocs sites define such labels in a snippet appended to every page, so the page
# shows the link's text. Not after a word, a bracket, a parenthesis or code (a[i][j], `x`[0][1],
# f(x)[0][1]: indexing), and not with a number for a label ([1][2]: citations).
_UNRESOLVED_REFERENCE = re.compile(r"(?<![\w\])\ue001])(!?)\[([^\[\]]*)\]\[(?!\d+\])[^\[\]]*\]")
_HELD = re.compile("\ue000(\\d+)\ue001")  # what is held out of the text while references are resolved
# pymdown-extensions' inline markup, which MkDocs-Material sites enable: keys (++ctrl+alt+del++,
# ++ctrl+"My Key"++), mark (==text==), insert (^^text^^), delete (~~text~~), superscript (H^2^O,
# n^th^) and subscript (CH~3~). The page shows the text. As pymdown's "smart" markers: never
# inside a word, with a word right inside them, so Django==4.2, g++/clang++, a == b, x^2+y^2 and
# HEAD~1 stay as written; a lone ^ or ~ only around one short word (sub~scripts~, n^th^, H^2^O, CSS^†^).
_KEYS = re.compile(r'(?<![\w+])\+\+((?:"[^"\n]+"|[\w-]+)(?:\+(?:"[^"\n]+"|[\w-]+))*)\+\+(?![\w+])')
# An emoji shortcode (:warning:, :+1:), which GitHub and pymdownx.emoji show as an image: no text,
# as an icon is none. Only known names: :param: or :class: in a page is text. Not inside brackets,
# quotes or between words (a[:x:], alt=":heart:", 1:x:2). The space before one goes with it where
# punctuation follows ("move on :smile:.").
_SHORTCODE = re.compile(r"""(\s*)(?<![\w:\[("']):([\w+-]+):(?![\w:\])"'])(?=(\s*[.,;!?]|\s*$)?)""")


@lru_cache(maxsize=1)
def _emoji_names() -> frozenset[str]:
    """Every emoji's English name and aliases, without their colons (the emoji package's data)."""
    from emoji import EMOJI_DATA

    return frozenset(name.strip(":") for data in EMOJI_DATA.values()
                     for name in (data["en"], *data.get("alias", ())))


def _without_emoji(text: str) -> str:
    """``text`` without its emoji shortcodes."""
    if ":" not in text:
        return text
    def drop(m: re.Match) -> str:
        if m.group(2) not in _emoji_names():
            return m.group(0)
        return "" if m.group(3) is not None else m.group(1)

    return _SHORTCODE.sub(drop, text)


_PAIRED = re.compile(r"(?<![\w=^~])(==|\^\^|~~)(?=[\w\ue000])(.+?)(?<=[^\s=^~])\1(?![\w=^~])"
                     r"|(?<=\w)([\^~])([A-Za-z0-9]{1,12}|[^\x00-\x7f\s])\3")
_ESCAPED = frozenset("[]^~=+")  # escaped, they are text: no reference link and no pymdown marker
# what a bare attribute list may follow: a link, emphasis, an image, a code span (`True`{ title="x" })
_ELEMENT_CLOSE = frozenset(("link_close", "em_close", "strong_close", "s_close", "image", "code_inline"))


def _inline(token) -> str:
    """The clean text of a markdown-it inline token: text, code spans, link text, image alts.

    A run of images with no other text (a row of badges) gives nothing."""
    parts, has_text = [], False
    held: list[str] = []  # code spans, escaped brackets (\[) and resolved images' alts, out of the regex's way
    images: set[int] = set()  # which of them are images

    def hold(content: str) -> str:
        held.append(content)
        return f"\ue000{len(held) - 1}\ue001"

    def resolve(m: re.Match) -> str:
        if m.group(1):  # an image: its alt text, as an image whose label is defined gives
            images.add(len(held))
            return hold(m.group(2))
        return m.group(2)

    previous = ""
    for child in token.children or ():
        kind, content = child.type, child.content
        role = _MYST_ROLE.search(parts[-1]) if kind == "code_inline" and parts else None
        if role is not None:
            # A MyST role, {ref}`Title <target>`: the role's name is markup, its title (or target) the text.
            parts[-1] = parts[-1][:role.start()]
            content = role_text(role.group(0)[1:-1], content)
        if kind == "code_inline":
            content = _INLINE_HILITE.sub("", content)  # pymdownx.inlinehilite's `#!python x` shows x
        if kind == "text" and previous in _ELEMENT_CLOSE:  # [a](x){.cls}: the attribute list of the link
            content = _BARE_ATTR_LIST.sub("", content, count=1) if content.startswith("{") else content
        if kind in ("text", "text_special", "code_inline"):  # text_special: an escape or an entity
            has_text = has_text or bool(content.strip())
            escaped = kind == "text_special" and child.info == "escape" and content in _ESCAPED
            parts.append(hold(content) if kind == "code_inline" or escaped else content.replace("\ue000", ""))
        elif kind in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif kind == "image":
            parts.append(content)  # the alt text, already plain
        elif kind == "html_inline":
            # Tags and comments are markup; a line break or a block tag still separates words.
            tag = content[1:].lstrip("/").split(None, 1)[0].rstrip("/>").lower() if content else ""
            if tag in ("br", "p", "div", "li", "td", "th", "tr", "hr"):
                parts.append(" ")
        # link_open/close, em/strong open/close: markup only
        previous = kind
    if not has_text:
        return ""
    text = "".join(parts)
    for _ in range(3):  # [![PyPI][badge]][pypi]: the image first, then the link around it
        text, found = _UNRESOLVED_REFERENCE.subn(resolve, text)
        if not found:
            break
    if images and not _HELD.sub(lambda m: "" if int(m.group(1)) in images else "x", text).strip():
        return ""  # images alone: badges
    text = _KEYS.sub(lambda m: m.group(1).replace('"', ""), text)
    text = _PAIRED.sub(lambda m: m.group(2) if m.group(1) else m.group(4), text)
    text = _without_emoji(text)
    return squash(_HELD.sub(lambda m: held[int(m.group(1))], text) if held else text)


def markdown_blocks(text: str, report: Report) -> Iterator[Block]:
    """The blocks of a Markdown document, in order; ``report(line, what)`` hears of what was cut."""
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
    leads: list[str] = []  # the lead-in of each open list (a definition's term), innermost last
    term = ""  # the term of the definition list item being read
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
                lead = chain(prev.lead, prev.text) if prev.kind == ITEM else lead_of(prev.text)
            leads.append(lead or (leads[-1] if leads and containers and containers[-1] == "item" else ""))
            prev = None
        elif kind in ("bullet_list_close", "ordered_list_close"):
            leads.pop()
            prev = None
        elif kind == "list_item_open":
            containers.append("item")
        elif kind == "dt_open":  # a definition's term leads into its definitions, as in reStructuredText
            term = _strip_markup(_inline(tokens[i + 1]))
            prev = None
            i += 3
            continue
        elif kind == "dd_open":
            containers.append("item")
            leads.append(term)
            prev = None
        elif kind == "dd_close":
            containers.pop()
            leads.pop()
            prev = None
        elif kind == "blockquote_open":
            containers.append("quote")
        elif kind in ("list_item_close", "blockquote_close"):
            containers.pop()
        elif kind in ("admonition_open", "tab_open", "directive_open"):  # its title or label: context
            boxes.append(heads[:])
            label = t.content if kind == "admonition_open" else t.meta["label"]
            if label:
                heads.append((7, squash(label)))  # below every heading level
            prev = None
            if kind == "admonition_open":
                i += 4 if i + 1 < len(tokens) and tokens[i + 1].type == "admonition_title_open" else 1
                continue
        elif kind in ("admonition_close", "tab_close", "directive_close"):
            heads[:] = boxes.pop()
            prev = None
        elif kind in ("footnote_reference_open", "footnote_reference_close"):
            prev = None
        elif kind == "paragraph_open":
            a, b = span(t)
            content = _strip_markup(_inline(tokens[i + 1]), text[a:b])  # spans are the file's
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
                yield Block(squash(t.content), headings, kind=CODE, start=a, end=b, code=t.content.strip("\n"))
            prev = None
        elif kind == "html_block":
            a, b = span(t)
            stack = list(heads)
            for block in html_blocks(t.content, a, stack, report, t.map[0] if t.map else 0):
                yield replace(block, end=min(block.end, b))
            heads[:] = stack  # an HTML heading (<h1 align="center">) opens a section as # does
            prev = None
        elif kind == "directive_left_out":
            if not t.meta["closed"] and t.map[1] >= body.count("\n"):
                report(t.map[0] + 1, f"a {{{t.meta['name']}}} directive left open: the rest of the file "
                                     f"({t.map[1] - t.map[0]:,} lines) is left out with it")
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
            cells.append(squash(_ICON.sub("", _inline(tokens[i + 1]))))  # an icon is no text
        elif t.type == "tr_close":
            if in_head:
                header = cells
            else:
                block = row_block(header, cells, headings, *span(row))
                if block:
                    yield block
        i += 1
    return i + 1
