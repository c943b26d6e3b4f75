"""The block model every reader shares: :class:`Block` and its kinds, the reader's ``report``, and
the helpers the readers have in common.

* :class:`Block`: one unit of a document (a paragraph, a list item, a table row, a heading, a code
  block) with its clean text, heading path, lead-in, kind and character span.
* Text and offsets: :func:`squash` (whitespace collapsed), :func:`line_starts` (line offsets as
  markdown-it counts lines), :func:`lead_of` (a lead-in's last sentences), :func:`locate` (a piece of
  a block's clean text, such as a sentence, found inside its span).
* What more than one reader builds: :func:`row_block` (a table row), :func:`role_text` (what Sphinx
  shows for a role: reStructuredText's and MyST Markdown's), :func:`text_blocks` (plain text, also
  what an over-long reStructuredText file is read as).
* What :func:`~sparc_es.corpus.readers.read_blocks` does to every reader's blocks: :func:`with_code`
  and :func:`text_only`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from itertools import zip_longest

from sparc_es.corpus.ids import SURROGATE

PARAGRAPH, ITEM, ROW, HEADING, CODE, QUOTE = "paragraph", "item", "row", "heading", "code", "quote"
LEAD_CHARS = 300  # a longer paragraph before a list gives only its last sentences as the lead-in
Report = Callable[[int | None, str], None]  # report(line, what): a reader cut or bounded something


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


def text_only(block: Block, report: Report) -> Block:
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


def with_code(blocks: Iterator[Block]) -> Iterator[Block]:
    """The blocks, each paragraph or list item that comes right before a code block (nothing between
    them, the same section) given that code, and the code blocks right after that one too: "To
    upgrade one package:" keeps its command. A heading of two words or more with code right under
    it ("Install a package from GitHub", then the command) is also a paragraph of its own title,
    with that code: often the how-to has no other words, and where prose follows the code, that
    prose does not lead into it."""
    held: Block | None = None
    codes: list[Block] = []  # the code blocks right after held, which it leads into
    heading: Block | None = None  # the heading just before, nothing between
    for block in blocks:
        code = _bounded_code(block.code)
        if held is not None:
            if block.kind == CODE and block.code and block.headings == held.headings:
                # several in a row (the tree, then the command) are all what it leads into
                held = replace(held, code=_bounded_code(f"{held.code}\n\n{block.code}" if held.code else block.code))
                codes.append(block)
                continue
            yield held
            yield from codes
            held, codes = None, []
        if (heading is not None and block.kind == CODE and block.code and len(heading.text.split()) >= 2
                and block.headings == (*heading.headings, heading.text)):
            yield replace(heading, kind=PARAGRAPH, code=code, level=0)
        heading = block if block.kind == HEADING else None
        if block.kind in (PARAGRAPH, ITEM):
            held = block
        else:
            yield block
    if held is not None:
        yield held
        yield from codes


def _bounded_code(code: str) -> str:
    return code if len(code or "") <= MAX_CODE_CHARS else code[:MAX_CODE_CHARS] + "\n…"


def squash(text: str) -> str:
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


def chain(*parts: str) -> str:
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
        if best is not None and _WORD.fullmatch(best[1]) is None:
            # unless markup splits it where it comes first (`search`'s, then a later `search's`): all
            # of its runs of letters and digits, in order, before the whole word, the first at a word's start
            p, ends = pos, []
            for m in _WORD.finditer(word):
                j = _find(source, m.group(), p, best[0])
                if j < 0 or (not ends and j > 0 and source[j - 1].isalnum()):
                    break
                p = j + len(m.group())
                ends.append(p)
            else:
                if ends:
                    best = None
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

def text_blocks(text: str) -> Iterator[Block]:
    # A paragraph is a run of lines with no blank line inside (the splitter sparc-es always had).
    # Possessive: the plain pattern's backtracking stack took 1.7 GB on a 6 MB line.
    for m in re.finditer(r"\S(?:.++|\n(?!\s*\n))*+", text):
        yield Block(squash(m.group()), start=m.start(), end=m.end())


# --- tables -----------------------------------------------------------------------------------

def row_block(header: list[str], cells: list[str], headings: tuple[str, ...], start: int, end: int
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


# --- boxes -----------------------------------------------------------------------------------

# Sphinx's and docutils' boxes, in reStructuredText (``.. note::``) and in MyST Markdown
# (```` ```{note} ````): a version note leads its text in with "Changed in version 2.0", any
# other box with its label.
VERSION_LABELS = {"versionadded": "New in version", "versionchanged": "Changed in version",
                  "deprecated": "Deprecated since version", "versionremoved": "Removed in version"}
BOX_LABELS = {"seealso": "See also", "todo": "To do", "centered": "", "note": "Note", "warning": "Warning",
              "tip": "Tip", "hint": "Hint", "important": "Important", "caution": "Caution", "danger": "Danger",
              "attention": "Attention", "error": "Error"}


# --- roles -----------------------------------------------------------------------------------

# Roles Sphinx shows as code (reStructuredText's :func:`f`, MyST's {func}`f`).
CODE_ROLES = {"code", "func", "meth", "class", "attr", "mod", "obj", "data", "exc", "const", "option",
              "envvar", "command", "program", "file", "samp", "kbd", "literal", "makevar"}

# Roles whose text Sphinx shows as written: no target to resolve, so no "Title <target>" or "~a.b" form.
SHOWN_AS_WRITTEN = {"file", "samp", "kbd", "command", "program", "makevar", "mailheader", "mimetype", "newsgroup",
                    "regexp", "dfn", "abbr", "code", "literal", "math"}


def role_text(name: str, text: str) -> str:
    """What Sphinx shows for a role it resolves: ``Title <target>`` -> Title, ``~a.b`` -> b,
    ``.Name`` -> Name. A cross-reference to a label or a document whose title is not known here
    gives the label's readable text: ``autoescape-overrides`` -> "autoescape overrides",
    ``/templates`` -> "templates" (:meth:`.rst._RstWalker.text` gives a same-file section's title)."""
    base = name.rpartition(":")[2].lower()
    if base in SHOWN_AS_WRITTEN:  # not cross-references: "~/.config" and "<name>" are part of the text
        if base in ("file", "samp"):  # {variable} parts in italics, braces and backslashes escaped with "\"
            text = re.sub(r"\\([\\{}])|[{}]", lambda m: m.group(1) or "", text)
        return text
    if text.endswith(">") and "<" in text:
        title = text[:text.rindex("<")].rstrip()
        if title:
            return title
        text = text[text.rindex("<") + 1:-1]
    if text[:1] in "~!" and len(text) > 1:
        text = text[1:].rpartition(".")[2] if text[0] == "~" else text[1:]
    if base in CODE_ROLES and text.startswith(".") and len(text) > 1:
        text = text.lstrip(".")  # Sphinx: a target searched by its suffix, shown without the dot
    if base in ("ref", "doc", "numref", "any", "term", "keyword") and not text.startswith("-"):
        text = _readable_label(text, base == "doc")  # an option ({any}`--no-deps`) shows as written
    if base in ("menuselection", "guilabel"):
        text = text.replace("-->", "\u2023").replace("&&", "\0").replace("&", "").replace("\0", "&")
    if base in ("pep", "rfc"):  # as docutils shows them (MyST gives their number alone)
        text = f"{base.upper()} {text.partition('#')[0]}"
    return text


def _readable_label(label: str, document: bool) -> str:
    """A label as words: its last path part for a document (``/usage/templates`` -> "templates"),
    "-" and "_" read as spaces."""
    if document:
        label = label.rstrip("/").rpartition("/")[2] or label
    words = re.sub(r"[-_]+", " ", label).strip()
    return words or label
