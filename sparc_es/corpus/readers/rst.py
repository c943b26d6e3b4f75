"""reStructuredText -> blocks, with docutils.

docutils parses with reporting silenced, no file insertion and no ``raw``. Sphinx's roles and
directives are unknown to docutils; they get permissive fallbacks for the time of a parse
(:func:`rst_doctree`): an unknown role gives its text (``:func:`foo.bar``` -> ``foo.bar``,
``:ref:`Title <label>``` -> ``Title``, ``~a.b`` -> ``b``); an unknown directive is read as code
(``.. code-block::``, ``.. doctest::``, ...), not at all (``.. toctree::``, ``.. index::``, ...) or,
by default, as text led in by its argument (``.. py:function:: f(x)``, ``.. autoclass:: Request``,
``.. tab:: Linux``) or its label (``.. versionchanged:: 2.0`` -> "Changed in version 2.0").
Substitutions are bounded (:class:`_BoundedSubstitutions`), and so is docutils' inline parser on long
paragraphs. Spans come from node line numbers (docutils knows the first line of a paragraph; blocks
it cannot place get a span from the end of the previous block to the end of the file).

docutils is imported with this module, which :func:`sparc_es.corpus.readers.read_blocks` imports only
when it reads a reStructuredText document.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import PurePosixPath

from docutils import nodes, utils
from docutils.core import publish_doctree
from docutils.parsers.rst import Directive, Parser, directives, roles
from docutils.parsers.rst.languages import get_language
from docutils.parsers.rst.states import Inliner, MarkupMismatch
from docutils.transforms import Transform
from docutils.utils import escape2null

from sparc_es.corpus.readers.blocks import (
    BOX_LABELS,
    CODE,
    CODE_ROLES,
    HEADING,
    ITEM,
    LEAD_CHARS,
    PARAGRAPH,
    QUOTE,
    VERSION_LABELS,
    Block,
    Report,
    chain,
    lead_of,
    line_starts,
    locate,
    role_text,
    row_block,
    squash,
)
from sparc_es.errors import InputError

# The characters one reStructuredText substitution may expand to (nested ones included), and all of
# a document's substitutions together: five levels of ten references each make a 370-byte file
# expand to gigabytes. A reference past either is left out and reported.
RST_SUBSTITUTION_CHARS = 10_000
RST_SUBSTITUTIONS_CHARS = 1_000_000

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
# Nothing reported or halted on, nothing read from other files or passed through raw, no config
# files read; the document's own sections are kept as sections (no title promotion). The line
# length limit bounds substitutions only (lines: see _LongLines).
_RST_SETTINGS = {"report_level": 5, "halt_level": 5, "file_insertion_enabled": False, "raw_enabled": False,
                 "doctitle_xform": False, "sectsubtitle_xform": False, "syntax_highlight": "none",
                 "_disable_config": True, "warning_stream": False, "line_length_limit": 100_000}
# Past these (a paragraph's characters, the longest word in it) docutils' inline parser is
# quadratic, and a paragraph keeps its text as it is, inline markup unresolved (see _parse
# below). 10,000 is docutils' own default line-length limit; 400 characters without a
# space are a blob (base64, minified code), not prose, and 300 KB of them still read in seconds.
_RST_INLINE_CHARS = 10_000
_RST_INLINE_WORD = 400
_RST_LOCK = threading.Lock()


def _fallback_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """A Sphinx role docutils does not know: its text (as code for the code-like ones); a ``:ref:``
    without a title keeps its label, so the walker can show a same-file section's title."""
    raw = utils.unescape(text)
    shown = role_text(name, raw)
    base = name.rpartition(":")[2].lower()
    if base in CODE_ROLES:
        return [nodes.literal(rawtext, shown)], []
    node = nodes.inline(rawtext, shown)
    if base == "ref" and not (raw.endswith(">") and raw[:raw.rfind("<")].strip()):
        label = raw[raw.rindex("<") + 1:-1] if raw.endswith(">") and "<" in raw else raw
        node["sparc_es_label"] = " ".join(label.split()).lower()  # as docutils normalises names
    return [node], []


# --- docutils made tolerant: directives, the inliner, the parser ------------------------------

class _AnyOption(dict):
    """An option spec that takes every option (Sphinx's :linenos:, :caption:, :noindex: ...)."""

    def __missing__(self, key):
        return directives.unchanged

    def __bool__(self):  # docutils looks for options only when a directive has some
        return True


class _TolerantDirective(Directive):
    """Any argument, content and options: what an unknown Sphinx directive may carry."""

    optional_arguments = 1
    final_argument_whitespace = True
    has_content = True
    option_spec = _AnyOption()


class _Prose(_TolerantDirective):
    """Content read as text, led in by the argument (or by a version note's label)."""

    def run(self):
        node = nodes.container()
        base = self.name.rpartition(":")[2].lower()
        argument = " ".join(self.arguments[0].split()) if self.arguments else ""
        if base in VERSION_LABELS:  # "Changed in version 2.0", then the rest of the line as text
            version, _, argument = argument.partition(" ")
            node["lead"] = f"{VERSION_LABELS[base]} {version}"
        elif base in BOX_LABELS:
            node["lead"] = BOX_LABELS[base]
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


class _Code(_TolerantDirective):
    def run(self):
        text = "\n".join(self.content)
        node = nodes.literal_block(text, text)
        node.line = self.content_offset + 1
        return [node]


class _Drop(_TolerantDirective):
    def run(self):
        return []


_LANGUAGE = get_language("en")


class _TolerantDirectives(dict):
    """docutils' directive registry, answering for names it does not know."""

    def __contains__(self, name):
        return dict.__contains__(self, name) or not (
            name in _LANGUAGE.directives or name in directives._directive_registry)

    def __missing__(self, name):
        base = name.rpartition(":")[2]
        if name in _RST_CODE or base in _RST_CODE:
            return _Code
        if name in _RST_DROP or base in _RST_DROP:
            return _Drop
        return _Prose


# Methods of the inliner, _TolerantInliner below: an unknown role gives its text, and the work of
# the inline parser is bounded.

_NAME = r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*(?:\(\))?"  # a Python object's dotted name
# A leading "." is Sphinx's search by suffix (`.Schema.load`) only before a capital or a dotted name:
# `.gitignore` is a file's name
_XREF = re.compile(rf"[~!]?{_NAME}|\.(?:[A-Z]\w*|\w+\.)[\w.]*(?:\(\))?|[^<>`]*\S\s+<[~!]?{_NAME}>")


def _interpreted(self, rawsource, text, role, lineno):
    if not role and _XREF.fullmatch(utils.unescape(text)):  # `text` without a role, written as a
        # cross-reference: Sphinx projects make their default role one (default_role = "py:obj" or
        # "any"), shown as Sphinx shows it ("Title <a.b>" -> Title, "~a.b" -> b); anything else
        # (`~/.config/x.toml`, `Vec<T>`) is docutils' default, a title reference, shown as written
        return _fallback_role("obj", rawsource, text, lineno, self)
    fn, _ = roles.role(role, self.language, lineno, self.reporter)
    return (fn or _fallback_role)(role, rawsource, text, lineno, self)


def _parse(self, text, lineno, memo, parent):
    # docutils' inline patterns are quadratic on long input: a name pattern tried from every
    # "-", ":" or "/" of a long word ("a-a-a-...": 20 KB took 22 s), an end-string searched to
    # the paragraph's end from every unmatched "`" or "*", a reference list scanned once per
    # reference. A paragraph past these bounds keeps its text, inline markup unresolved.
    if len(text) > _RST_INLINE_CHARS or any(len(word) > _RST_INLINE_WORD for word in text.split()):
        return [nodes.Text(escape2null(text))], []  # backslash escapes kept as docutils keeps them
    return Inliner.parse(self, text, lineno, memo, parent)


def _implicit_inline(self, text, lineno):
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
_TolerantInliner = type("TolerantInliner", (Inliner,), {
    **{k: v for k, v in vars(Inliner).items() if not k.startswith("__")},
    "interpreted": _interpreted, "parse": _parse, "implicit_inline": _implicit_inline})


class _BoundedSubstitutions(Transform):
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


class _LongLines(Parser):
    """docutils' parser, reading lines of any length: with a line over ``line_length_limit``
    docutils drops the whole document, silently (a system message). Substitutions are bounded
    by :class:`_BoundedSubstitutions`; the inliner above bounds its own work."""

    def get_transforms(self):
        return [*super().get_transforms(), _BoundedSubstitutions]

    def parse(self, inputstring, document):
        limit = document.settings.line_length_limit
        document.settings.line_length_limit = len(inputstring)
        try:
            super().parse(inputstring, document)
        finally:
            document.settings.line_length_limit = limit


# Any Sphinx option, no pygments; and ``class`` as Sphinx reads it, the Python domain's class (the
# default domain), not docutils' class attribute (which Sphinx calls ``rst-class``, dropped).
_OVERRIDES = {"code-block": _Code, "sourcecode": _Code, "code": _Code, "class": _Prose}


class _Include(_TolerantDirective):
    """``.. include:: path``: nothing read in place (each file is read once, on its own, where it is in
    the corpus folders: ``about.rst.inc`` beside the page is). An include from outside the page's
    folder (``../CHANGELOG.rst``, ``<standard>``) or of a file no reader reads is noted in the
    document's ``sparc_es_cut``, so the user hears that its text is not under this page."""

    def run(self):
        from sparc_es.corpus.readers import format_of

        target = " ".join(self.arguments[0].split()) if self.arguments else ""
        parts = PurePosixPath(target.replace("\\", "/")).parts
        outside = not parts or target.startswith(("<", "/")) or ".." in parts
        if outside or format_of(target) is None:
            why = ("sparc-es reads each file on its own, from the corpus folders given: give the folder that holds "
                   "it" if format_of(target) else "not a .rst, .md, .txt or .html file, or one of them with .inc")
            self.state.document.setdefault("sparc_es_cut", []).append(
                (self.lineno, f"include of {target} not read here ({why})"))
        return []


_OVERRIDES["include"] = _Include


# Sphinx's info fields (sphinx.domains.python's doc fields) by the label its page shows them under.
_RETURNS = {"returns", "return"}
_RAISES = {"raises", "raise", "except", "exception"}
_TYPES = {"type", "paramtype", "vartype"}  # a parameter's or variable's type, shown with it
_INFO_FIELDS = {**dict.fromkeys(("param", "parameter", "arg", "argument", "keyword", "kwarg", "kwparam"), "Parameters"),
                **dict.fromkeys(("var", "ivar", "cvar"), "Variables"), **dict.fromkeys(_RETURNS, "Returns"),
                **dict.fromkeys(_RAISES, "Raises"), "rtype": "Return type", **dict.fromkeys(_TYPES, "Type"),
                "meta": ""}


def _nested(outer: str, inner: str) -> str:
    """The lead-in of a box inside another: both, so that a note or an attribute inside
    ``.. autoclass:: FileStorage`` still names FileStorage (the inner one alone past LEAD_CHARS)."""
    both = chain(outer, inner)
    return both if len(both) <= LEAD_CHARS else inner or outer


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
    with _RST_LOCK:
        saved = directives._directives
        directives._directives = _TolerantDirectives({**saved, **_OVERRIDES})
        try:
            yield
        finally:
            directives._directives = saved


def rst_doctree(text: str, name: str = "<document>") -> nodes.document:
    """Parse reStructuredText as sparc-es reads it: no reports, no file insertion, no ``raw``,
    Sphinx roles and directives tolerated. Returns the docutils document (a node tree)."""
    with _tolerant_directives():
        try:
            return publish_doctree(text, source_path=name, parser=_LongLines(inliner=_TolerantInliner()),
                                   settings_overrides=_RST_SETTINGS)
        except Exception as e:  # docutils gives up on some input (too deep nesting, ...): say where
            line = getattr(e, "line", None)
            raise InputError(name, f"cannot read reStructuredText: {e}".splitlines()[0], line) from None


def _rst_rejected(document) -> Iterator[tuple[int | None, str]]:
    """(line, what) of each block docutils could not read (a malformed table, a csv-table with a
    stray quote): an error message that carries the block's source, which is all that is left of it."""
    for message in document.findall(nodes.system_message):
        if message.get("level", 0) >= 3 and any(isinstance(c, nodes.literal_block) for c in message.children):
            why = " ".join(message.children[0].astext().split()) if message.children else "unreadable"
            yield message.get("line"), f"reStructuredText docutils could not read, left out: {why[:120]}"


def rst_blocks(text: str, name: str, report: Report) -> Iterator[Block]:
    """The blocks of a reStructuredText document, in order. The document is parsed now (an
    :class:`~sparc_es.errors.InputError` where docutils gives up), and ``report(line, what)`` hears at
    once of what was cut (substitutions too large) and of the blocks docutils could not read."""
    tree = rst_doctree(text, name)
    for line, what in tree.get("sparc_es_cut", ()):
        report(line, what)
    for line, what in _rst_rejected(tree):
        report(line, what)
    return _RstWalker(text).blocks(tree)


# Nodes the walker leaves out, text and all (generated: section numbers).
_SKIP = (nodes.system_message, nodes.problematic, nodes.comment, nodes.target, nodes.substitution_definition,
         nodes.footnote_reference, nodes.citation_reference, nodes.image, nodes.raw, nodes.pending, nodes.label,
         nodes.attribution, nodes.rubric, nodes.transition, nodes.colspec, nodes.generated)


class _RstWalker:
    """A docutils document tree -> blocks."""

    def __init__(self, text: str) -> None:
        self.source = text
        self.lines = line_starts(text)
        self.titles: dict[str, str] = {}  # section titles by label (blocks() fills it)
        self.cursor = 0  # end of the last block placed: where a block with no line number may start
        self.start = 0  # start of the last block placed: the blocks come in the file's order

    # -- text and spans

    def text(self, node) -> str:
        """A node's clean text: inline markup resolved, references to footnotes and images left out."""
        out: list[str] = []

        def walk(n) -> None:
            for child in n.children:
                if isinstance(child, nodes.Text):
                    out.append(child.astext())  # backslash escapes undone (the node keeps them as NUL)
                elif isinstance(child, nodes.inline) and child.get("sparc_es_label") in self.titles:
                    out.append(self.titles[child["sparc_es_label"]])  # :ref: to a section of this file
                elif not isinstance(child, _SKIP):
                    walk(child)
                    if isinstance(child, (nodes.paragraph, nodes.line, nodes.term)):
                        out.append(" ")

        walk(node)
        return squash("".join(out))

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
            if isinstance(section, nodes.section):
                title = next((c for c in section.children if isinstance(c, nodes.title)), None)
                if title is not None:
                    self.titles[name] = self.text(title)
        yield from self.children(document, (), "", PARAGRAPH)

    def children(self, node, headings: tuple[str, ...], lead: str, kind: str) -> Iterator[Block]:
        prev: Block | None = None
        for child in node.children:
            for block in self.node(child, headings, lead, kind, prev):
                yield block
                prev = block if block.kind in (PARAGRAPH, ITEM, QUOTE) else None
            if not isinstance(child, nodes.paragraph):
                prev = None

    def node(self, n, headings: tuple[str, ...], lead: str, kind: str, prev: Block | None) -> Iterator[Block]:
        if isinstance(n, _SKIP) or isinstance(n, nodes.Text):
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
            text = self.text(n) if isinstance(n, nodes.paragraph) else squash(n.astext())
            if text:
                start, end = self.span(n, None if isinstance(n, nodes.paragraph) else
                                       n.astext().count("\n") + 1)
                yield Block(text, headings, lead if kind == ITEM or lead else "", kind, start, end)
        elif isinstance(n, (nodes.bullet_list, nodes.enumerated_list)):
            inner = lead
            if prev is not None:
                inner = chain(prev.lead, prev.text) if prev.kind == ITEM else lead_of(prev.text)
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
            yield from self.fields(n, headings, lead)
        elif isinstance(n, nodes.option_list):
            for item in n.children:
                options = next((c.astext() for c in item.children if isinstance(c, nodes.option_group)), "")
                for c in item.children:
                    if isinstance(c, nodes.description):
                        yield from self.children(c, headings, options or lead, ITEM)
        elif isinstance(n, (nodes.literal_block, nodes.doctest_block, nodes.math_block)):
            text = squash(n.astext())
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
            label = title or BOX_LABELS.get(n.tagname) or n.tagname.capitalize()
            yield from self.children(n, headings, _nested(lead, label), PARAGRAPH)
        elif isinstance(n, nodes.figure):
            for c in n.children:
                if isinstance(c, nodes.caption):
                    yield from self.caption(c, headings)
                elif isinstance(c, nodes.legend):
                    yield from self.children(c, headings, lead, kind)
        elif isinstance(n, nodes.Element):
            # containers (ours included: a version note's lead-in), footnotes, compound, glossary ...
            inner = _nested(lead, n.get("lead", ""))
            yield from self.children(n, headings, inner, kind)

    def fields(self, n, headings: tuple[str, ...], lead: str) -> Iterator[Block]:
        """A field list. Inside an object's directive (``lead``: its signature), Sphinx's info fields
        (``:param int port:``, ``:type port:``, ``:returns:``, ``:rtype:``, ``:raises E:``, by their
        exact names) read as its page shows them: "connect(host, port). Parameters: port (int): The
        TCP port."; any other field (and every field outside a directive: a docinfo block's
        ``:Key: value``) by its name."""
        named = [(next((self.text(c) for c in f.children if isinstance(c, nodes.field_name)), ""),
                  next((c for c in f.children if isinstance(c, nodes.field_body)), None)) for f in n.children]
        info = {name: name.split() for name, _ in named if lead and name.split()
                and name.split()[0] in _INFO_FIELDS}  # Sphinx's names are matched as written
        types = {parts[1]: self.text(body) for name, body in named if body is not None
                 for parts in [info.get(name)] if parts and len(parts) == 2 and parts[0] in _TYPES}
        rtype = next((self.text(b) for m, b in named if b is not None and info.get(m) == ["rtype"]), "")
        returns = any(parts[0] in _RETURNS for parts in info.values())
        for name, body in named:
            if body is None:
                continue
            parts = info.get(name)
            if parts is None:
                yield from self.children(body, headings, _nested(lead, name) if name else lead, ITEM)
                continue
            kind, label = parts[0], _INFO_FIELDS[parts[0]]
            if kind == "meta" or (kind in _TYPES and len(parts) == 2) or (kind == "rtype" and returns):
                continue  # :meta private: shows nothing; a type is told with its parameter, :rtype: with :returns:
            if kind in _TYPES or kind == "rtype":
                text = self.text(body)  # "Return type: Connection", "Type: HookCaller": one line of the page
                para = next(body.findall(nodes.paragraph), None)
                if text and para is not None:
                    start, end = self.span(para)
                    yield Block(f"{label}: {text}", headings, lead, ITEM, start, end)
                continue
            if kind in _RETURNS:
                shown = f"{label} ({rtype})" if rtype else label
            elif kind in _RAISES:
                shown = f"{label} {' '.join(parts[1:])}" if len(parts) > 1 else label
            elif len(parts) > 1:  # a parameter or variable: its name, and its type where one is given
                given = " ".join(parts[1:-1]) or types.get(parts[-1], "")
                shown = f"{label}: {parts[-1]}" + (f" ({given})" if given else "")
            else:
                shown = label
            yield from self.children(body, headings, _nested(lead, shown), ITEM)

    def caption(self, c, headings: tuple[str, ...]) -> Iterator[Block]:
        text = self.text(c)
        if text:
            start, end = self.span(c)
            yield Block(text, headings, "", PARAGRAPH, start, end)

    def table(self, table, headings: tuple[str, ...]) -> Iterator[Block]:
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
                    block = row_block(header, cells, headings, start, end)
                    if block:
                        yield block
