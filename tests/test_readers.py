"""Structure-aware document readers (Markdown, reStructuredText, HTML) on real documents.

The real documents: this repository's README.md, docs/*.md and sparc_es/demo/*.md; two pages of
Click's documentation (tests/data/docs, BSD-3-Clause), the HTML docutils' html5 writer makes from
them, and the Sphinx build of one of them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sparc_es import cli
from sparc_es.corpus.readers import format_of, read_blocks
from sparc_es.corpus.readers.blocks import CODE, HEADING, ITEM, ROW, locate
from sparc_es.corpus.readers.rst import rst_doctree
from sparc_es.corpus.sources import ReadStats, corpus_files, read_corpus, sentence_key, split_document
from sparc_es.errors import InputError, SparcError

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data" / "docs"
MARKDOWN_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
                 *sorted((ROOT / "sparc_es" / "demo").glob("*.md"))]
RST_DOCS = sorted(DATA.glob("*.rst"))
SPHINX_PAGE = DATA / "parameters.html"


def rst_html(text: str) -> str:
    """HTML from docutils' html5 writer, over the tree sparc-es parses (Sphinx roles resolved)."""
    from docutils.core import publish_from_doctree
    from docutils.writers.html5_polyglot import Writer

    return publish_from_doctree(rst_doctree(text), writer=Writer(),
                                settings_overrides={"_disable_config": True, "report_level": 5}).decode("utf-8")


def real_documents() -> list[tuple[str, str, str]]:
    """(name, text, format) of every real document the tests read."""
    docs = [(p.relative_to(ROOT).as_posix(), p.read_text(encoding="utf-8"), format_of(p))
            for p in MARKDOWN_DOCS + RST_DOCS + [SPHINX_PAGE]]
    docs += [(f"{p.name} (html5)", rst_html(p.read_text(encoding="utf-8")), "html") for p in RST_DOCS]
    return docs


DOCUMENTS = real_documents()
IDS = [name for name, _, _ in DOCUMENTS]

# Markup a reader must never leave in a sentence or a context.
_TAGS = ("a|abbr|b|blockquote|br|code|details|div|em|h[1-6]|hr|i|img|kbd|li|ol|p|pre|section|span|strong|"
         "sub|summary|sup|table|td|th|tr|ul|script|style|!--")
DEBRIS = {
    "a Markdown link": re.compile(r"\]\("),
    "an HTML tag": re.compile(rf"</?(?:{_TAGS})(?:[\s/>]|$)", re.I),
    "an HTML comment end": re.compile(r"-->"),
    "a literal-block marker": re.compile(r"::"),
    "a backtick": re.compile(r"`"),
    "strong emphasis": re.compile(r"\*\*"),
    "an explicit markup start": re.compile(r"(^|\s)\.\. "),
    "a Sphinx role": re.compile(r":[\w.+-]+:`?|:ref:"),
    "a rule line": re.compile(r"^[-=*_~^#+\s]{3,}$"),
    "a header link": re.compile(r"¶"),
}


def debris(text: str) -> list[str]:
    found = [name for name, pattern in DEBRIS.items() if pattern.search(text)]
    if text.count("[") != text.count("]"):
        found.append("an unbalanced bracket")
    return found


def words(text: str) -> list[str]:
    return re.findall(r"[^\W_]+", text)


def in_order(needles: list[str], haystack: str) -> bool:
    pos = 0
    for w in needles:
        pos = haystack.find(w, pos)
        if pos < 0:
            return False
        pos += len(w)
    return True


def sentences_by_block(text: str, format: str, keep_code: bool = False):
    """(block, its sentences) pairs, so a check can tell a table row from prose."""
    from sparc_es.corpus.sources import _block_sentences

    for block in read_blocks(text, format, keep_code):
        if block.kind != HEADING:
            yield block, [(s, a, b) for s, a, b, _ in _block_sentences(block, text, format)]


# --- every real document --------------------------------------------------------------------

@pytest.mark.parametrize("name, text, format", DOCUMENTS, ids=IDS)
def test_no_markup_debris_in_any_sentence_or_context(name, text, format):
    got = list(split_document(text, name, format))
    assert len(got) >= 5, name
    bad = [(s.id, what, d) for s in got for what, t in (("text", s.text), ("context", s.context))
           for d in debris(t)]
    assert not bad, bad[:5]
    assert all(s.text.strip() and s.context for s in got)


@pytest.mark.parametrize("name, text, format", DOCUMENTS, ids=IDS)
def test_offsets_hold_the_sentence_words_in_order(name, text, format):
    checked = 0
    for block, sentences in sentences_by_block(text, format, keep_code=True):
        for sentence, start, end in sentences:
            assert block.start <= start <= end <= block.end <= len(text)
            source = text[start:end]
            if block.kind == ROW:
                # A row's header names come from the header row; its cells sit in the row, in order.
                cells = [part.split(": ", 1)[-1] for part in sentence.split("; ")]
                assert in_order(words(" ".join(cells)), source), (sentence, source)
            else:
                assert in_order(words(sentence), source), (sentence, source)
            checked += 1
    assert checked


@pytest.mark.parametrize("name, text, format", DOCUMENTS, ids=IDS)
def test_code_is_left_out_unless_kept(name, text, format):
    plain = list(read_blocks(text, format))
    kept = list(read_blocks(text, format, keep_code=True))
    assert not any(b.kind == CODE for b in plain)
    code = [b for b in kept if b.kind == CODE]
    assert [b for b in kept if b.kind != CODE] == plain
    if name.endswith((".rst", "(html5)", ".html")) or "README" in name:
        assert code, "these documents all show code"


def test_reading_is_fast_next_to_encoding():
    import time

    total = sum(len(t) for _, t, _ in DOCUMENTS)
    start = time.perf_counter()
    n = sum(1 for name, text, format in DOCUMENTS for _ in split_document(text, name, format))
    seconds = time.perf_counter() - start
    # Encoding runs at ~55 sentences/s; reading must be a rounding error beside it (~3,000/s on a
    # busy 2-core machine, docutils the slowest).
    assert n / seconds > 300, f"{n} sentences from {total} characters in {seconds:.2f} s"


# --- Markdown ----------------------------------------------------------------------------------

def test_readme_structure():
    readme = ROOT / "README.md"
    got = list(split_document(readme.read_text(encoding="utf-8"), "README.md", "markdown"))
    # A list item under "Failure behaviour" carries the section path in its context.
    item = next(s for s in got if s.text.startswith("Errors are one line"))
    assert item.context.startswith("sparc-es > Using it > Failure behaviour. Errors are one line")
    # The README's results table: one sentence per row, header names with each cell.
    row = next(s for s in got if s.text.startswith("Lucene BM25; SQuAD dev: "))
    assert "NewsQA dev: " in row.text and row.context.startswith("sparc-es > Using it > The model. ")
    assert not any(s.text in ("sparc-es", "Two commands") for s in got)  # headings are in contexts only


SERVER = """\
---
title: Serving
tags: [rest]
---
# REST server

Options:

- Port: 8081
- Host: `localhost`
  - Bind to all interfaces with `0.0.0.0`.

Install with `pip install sparc-es[es]`, then read `hits[0]`; see [the guide](https://example.org/guide "Guide")
and ![the architecture diagram](docs/arch.png).

[![Build](https://example.org/badge.svg)](https://example.org/ci) ![PyPI](https://example.org/pypi.svg)

---

<details>
<summary>Advanced settings</summary>

<!-- hidden note: not for the index -->
<img src="shot.png" alt="screenshot">

Set **timeouts** and *retries* here.

</details>

| Engine | Index | Notes |
|--------|:-----:|-------|
| lucene | impact | in-process |
| es     | rank_features | needs a cluster |

```python
print("never a sentence")
```

    indented code, never a sentence either
"""


def test_markdown_list_items_know_their_section_and_lead_in():
    got = {s.text: s for s in split_document(SERVER, "server.md", "markdown")}
    assert got["Port: 8081"].context == "REST server. Options: Port: 8081"
    assert got["Host: localhost"].context == "REST server. Options: Host: localhost"
    # A nested list's lead-in is its parent item, after the parent's own lead-in.
    assert got["Bind to all interfaces with 0.0.0.0."].context == (
        "REST server. Options: Host: localhost: Bind to all interfaces with 0.0.0.0.")


def test_markdown_inline_markup_leaves_clean_text():
    got = [s.text for s in split_document(SERVER, "server.md", "markdown")]
    assert ("Install with pip install sparc-es[es], then read hits[0]; see the guide and "
            "the architecture diagram.") in got  # code verbatim, link text kept, URL and title dropped
    assert not any("Build" in t or "PyPI" in t for t in got)  # a row of badges says nothing
    assert not any("title:" in t or "tags" in t for t in got)  # front matter
    assert "Advanced settings" in got and "Set timeouts and retries here." in got
    assert not any("hidden note" in t or "screenshot" in t or "never a sentence" in t for t in got)


def test_markdown_table_rows_are_sentences_with_their_header():
    got = [s for s in split_document(SERVER, "server.md", "markdown") if "Engine:" in s.text]
    assert [s.text for s in got] == ["Engine: lucene; Index: impact; Notes: in-process",
                                     "Engine: es; Index: rank_features; Notes: needs a cluster"]
    assert got[0].context == ("REST server. Engine; Index; Notes: Engine: lucene; Index: impact; "
                              "Notes: in-process")
    assert SERVER[got[1].start:got[1].end] == "| es     | rank_features | needs a cluster |"


def test_markdown_code_blocks_kept_on_request():
    code = [b for b in read_blocks(SERVER, "markdown", keep_code=True) if b.kind == CODE]
    assert [b.text for b in code] == ['print("never a sentence")', "indented code, never a sentence either"]
    kept = [s.text for s in split_document(SERVER, "s.md", "markdown", keep_code=True)]
    assert 'print("never a sentence")' in kept


def test_markdown_headings_and_html_headings_make_the_path():
    text = "<h1 align=\"center\">Project</h1>\n\nIntro text here.\n\n## Usage\n\nRun it.\n\n# Other\n\nDone.\n"
    blocks = [b for b in read_blocks(text, "markdown")]
    assert [(b.kind, b.headings, b.text) for b in blocks] == [
        (HEADING, (), "Project"), ("paragraph", ("Project",), "Intro text here."),
        (HEADING, ("Project",), "Usage"), ("paragraph", ("Project", "Usage"), "Run it."),
        (HEADING, (), "Other"), ("paragraph", ("Other",), "Done.")]


def test_markdown_spans_follow_crlf_and_front_matter():
    text = "---\r\na: 1\r\n---\r\n# T\r\n\r\nOne two.\r\n\r\n* three four\r\n"
    got = list(split_document(text, "c.md", "markdown"))
    assert [(s.text, text[s.start:s.end]) for s in got] == [("One two.", "One two."),
                                                           ("three four", "three four")]


MKDOCS_PAGE = """---
title: Members
hide:
- navigation
---

# Members options

--8<-- "docs/.glossary.md"

*[API]: Application Programming Interface

## Sorting

//// tab | With alphabetical order
/// admonition | Preview
    type: preview

Members are sorted by name when `members_order` is `alphabetical`{ title="the default value" }.
///
////

/// note
A plain note body.
///

/// details | Source code in package/module.py
    type: quote

The source is shown collapsed.
///

Lorem ipsum dolor sit amet, (1) consectetur adipiscing elit.
{ .annotate }

1.  An annotation.

:material-clock-fast:{ .lg .middle } Set up in 5 minutes

| Method | Description |
|---|---|
| `GET` | :material-check: Fetch `cp .env{.example,}` |

Types changed in version two[^1].

[^1]: Previously, some types had two names.

With a little CSS^[†](#_fn_1)^, icons show in front.

## Loading

To build with the package in a subfolder:

```tree
root/
    src/
```

```bash
PYTHONPATH=src mkdocs build
```

# ::: griffe.Loader
    options:
        show_root_heading: true

::: griffe.load
    options:
      heading_level: 2
"""


def test_mkdocs_material_pages_read_as_the_site_shows_them():
    """pymdownx.blocks, attribute lists after code and icons, icons in table cells, annotations,
    footnotes (and a superscript link, no inline footnote), mkdocstrings' ::: lines, several code
    blocks after one lead-in; and a front matter changes none of it (its lines had shifted every
    paragraph's source, so snippet markers and abbreviations were text)."""
    got = {s.text: s for s in split_document(MKDOCS_PAGE, "members.md", "markdown")}
    assert list(got) == [
        "Members are sorted by name when members_order is alphabetical.", "A plain note body.",
        "The source is shown collapsed.", "Lorem ipsum dolor sit amet, consectetur adipiscing elit.",
        "An annotation.", "Set up in 5 minutes", "Method: GET; Description: Fetch cp .env{.example,}",
        "Types changed in version two.",
        "Previously, some types had two names.", "With a little CSS†, icons show in front.",
        "To build with the package in a subfolder:"]
    assert got["Members are sorted by name when members_order is alphabetical."].headings == (
        "Members options > Sorting > With alphabetical order > Preview")
    assert got["A plain note body."].headings == "Members options > Sorting > Note"
    assert got["The source is shown collapsed."].headings == (
        "Members options > Sorting > Source code in package/module.py")
    assert got["Previously, some types had two names."].headings == "Members options > Sorting"
    assert got["To build with the package in a subfolder:"].code == "root/\n    src/\n\nPYTHONPATH=src mkdocs build"
    for s in got.values():
        assert s.text.split()[-1].rstrip(".:") in MKDOCS_PAGE[s.start:s.end], s
    headings = [b.text for b in read_blocks(MKDOCS_PAGE, "markdown") if b.kind == HEADING]
    assert headings == ["Members options", "Sorting", "Loading", "griffe.Loader"]


def test_emoji_shortcodes_are_images_not_words():
    """:warning: in a heading was part of every heading path under it; names that are no emoji
    (:param:), code spans and shortcodes between brackets or words stay as written."""
    page = ("# :warning: Breaking changes :tada:\n\nWorks :+1: here, `:x:` and :param: and a[:x:] and 1:x:2.\n\n"
            "| Check | Status |\n|---|---|\n| lint | :white_check_mark: passed |\n")
    got = [(s.text, s.headings) for s in split_document(page, "changes.md", "markdown")]
    assert got == [("Works here, :x: and :param: and a[:x:] and 1:x:2.", "Breaking changes"),
                   ("Check: lint; Status: passed", "Breaking changes")]


MATERIAL_HTML = """<html><head><title>x</title></head><body>
<a href="#members" class="md-skip">Skip to content</a>
<article class="md-content__inner">
<h1 id="members">Members</h1>
<div class="tabbed-set tabbed-alternate" data-tabs="1:2">
<input checked="checked" id="__tabbed_1_1" name="__tabbed_1" type="radio" />
<input id="__tabbed_1_2" name="__tabbed_1" type="radio" /><div class="tabbed-labels">
<label for="__tabbed_1_1">With inspection</label><label for="__tabbed_1_2">Without inspection</label>
</div>
<div class="tabbed-content">
<div class="tabbed-block">
<p>Members are found by importing the module.</p>
</div>
<div class="tabbed-block">
<p>Members are found by reading the source.</p>
</div>
</div>
</div>
<p>After the tabs.</p>
</article></body></html>
"""


def test_a_built_mkdocs_material_page_reads_its_tabs_under_their_labels_and_no_skip_link():
    """The label bar ("With inspectionWithout inspection") was a sentence, each body had no label, and
    "Skip to content" was a sentence of every page; a redirect stub gives nothing."""
    got = [(s.text, s.headings) for s in split_document(MATERIAL_HTML, "members/index.html", "html")]
    assert got == [("Members are found by importing the module.", "Members > With inspection"),
                   ("Members are found by reading the source.", "Members > Without inspection"),
                   ("After the tabs.", "Members")]
    stub = ('<!doctype html><html><head><meta http-equiv="refresh" content="0; url=../new/"></head>'
            "<body>You're being redirected to a new destination.</body></html>")
    assert list(split_document(stub, "old/index.html", "html")) == []


# --- reStructuredText ------------------------------------------------------------------------

def test_click_parameters_rst_structure():
    text = (DATA / "parameters.rst").read_text(encoding="utf-8")
    got = {s.text: s for s in split_document(text, "parameters.rst", "rst")}
    item = got["automatic prompting for missing input"]
    assert item.context == ("Parameters > Differences. Arguments can do less than options. The following "
                            "features are only available for options: automatic prompting for missing input")
    # roles give their text: :ref:`this is intentional <documenting-arguments>` -> "this is intentional"
    assert any("arguments are not (this is intentional as arguments might be too specific" in t for t in got)
    # a definition's term is its lead-in
    assert got["A parameter that only accepts integers."].context == (
        "Parameters > Parameter Types. int / click.INT: A parameter that only accepts integers.")
    assert any(t.startswith("Override the convert method") for t in got)  # :meth:`~ParamType.convert`
    assert not any("autoclass" in t or "noindex" in t or "currentmodule" in t for t in got)
    assert not any("BasedIntParamType" in t for t in got)  # the .. code-block::


def test_click_utils_rst_notes_and_literal_blocks():
    text = (DATA / "utils.rst").read_text(encoding="utf-8")
    got = list(split_document(text, "utils.rst", "rst"))
    note = next(s for s in got if s.text.startswith("If you find that you have requirements"))
    assert note.context.startswith("Utilities > Showing Progress Bars. Note: If you find")
    assert not any("click.echo('Hello World!')" in s.text for s in got)  # literal blocks (::)
    assert any(s.text == "Example:" for s in got)  # "Example::" keeps its text, without the marker
    kept = list(split_document(text, "utils.rst", "rst", keep_code=True))
    assert any("click.echo('Hello World!')" in s.text for s in kept)
    assert any("click.secho('Hello World!', fg='green')" in s.text for s in kept)  # .. click:example::


SPHINX_RST = """\
Guide
=====

.. toctree::
   :maxdepth: 2

   install
   usage

.. currentmodule:: mypkg

Call :func:`mypkg.run` or :py:meth:`~mypkg.Runner.start`; see :ref:`Getting started <start>`,
:doc:`install` and :kbd:`Ctrl+C`.

.. autofunction:: mypkg.run

.. versionchanged:: 2.0
   The timeout is in seconds.

.. tabs::

   .. tab:: Linux

      Install the package first.

.. code-block:: python
   :emphasize-lines: 1
   :caption: example.py

   run(fast=True)

.. unknowndirective:: with an argument
   :someoption: x

   Content of an unknown directive, read as text.

.. note:: A one-line note.

+--------+----------------+
| Option | Meaning        |
+========+================+
| -v     | verbose output |
+--------+----------------+
| -q     | quiet          |
+--------+----------------+

.. raw:: html

   <b>raw html is never read</b>

.. include:: /etc/passwd
"""


def test_sphinx_directives_and_roles_do_not_crash_or_leave_debris():
    got = list(split_document(SPHINX_RST, "guide.rst", "rst"))
    texts = [s.text for s in got]
    assert texts[0] == ("Call mypkg.run or start; see Getting started, install and Ctrl+C.")
    by_text = {s.text: s for s in got}
    assert by_text["The timeout is in seconds."].context == (
        "Guide. Changed in version 2.0: The timeout is in seconds.")
    assert by_text["Install the package first."].context == "Guide. Linux: Install the package first."
    assert by_text["A one-line note."].context == "Guide. Note: A one-line note."
    assert by_text["Content of an unknown directive, read as text."].context == (
        "Guide. with an argument: Content of an unknown directive, read as text.")
    assert by_text["Option: -v; Meaning: verbose output"].context == (
        "Guide. Option; Meaning: Option: -v; Meaning: verbose output")
    joined = " ".join(texts)
    for absent in ("install usage", "maxdepth", "autofunction", "run(fast=True)", "raw html", "root:"):
        assert absent not in joined
    for s in got:
        assert not debris(s.text) and not debris(s.context), s
        assert in_order(words(s.text.split("; ")[0].split(": ")[-1]), SPHINX_RST[s.start:s.end])
    code = [b.text for b in read_blocks(SPHINX_RST, "rst", keep_code=True) if b.kind == CODE]
    assert code == ["run(fast=True)"]


def test_rst_parsing_leaves_docutils_as_it_was():
    from docutils.core import publish_doctree
    from docutils.parsers.rst import directives

    before = directives._directives
    rst_doctree(SPHINX_RST)
    assert directives._directives is before
    tree = publish_doctree(".. toctree::\n\n   a\n", settings_overrides={"report_level": 5,
                                                                       "_disable_config": True})
    assert "Unknown directive type" in tree.astext()  # plain docutils is still plain docutils


# --- HTML --------------------------------------------------------------------------------------

def test_sphinx_page_leaves_out_the_page_furniture():
    text = SPHINX_PAGE.read_text(encoding="utf-8")
    blocks = list(read_blocks(text, "html"))
    joined = " ".join(b.text + " " + b.lead for b in blocks)
    for furniture in ("Quick search", "Navigation", "Powered by", "Sphinx", "Related Topics", "©",
                      "Click 8.1.7 documentation", "¶"):
        assert furniture not in joined, furniture
    headings = [b.text for b in blocks if b.kind == HEADING]
    assert headings == ["Parameters", "Differences", "Parameter Types", "Parameter Names",
                        "Implementing Custom Types"]
    items = {b.text: b for b in blocks if b.kind == ITEM}
    assert items["automatic prompting for missing input"].lead.endswith("only available for options:")
    assert items["A parameter that only accepts integers."].lead == "int / click.INT:"
    # autodoc: a class's description has its signature as lead-in; its parameters their field name
    # under that signature (a "Returns:" named no method)
    choice = next(b for b in blocks if b.text.startswith("The choice type allows a value"))
    assert choice.lead.startswith("class click.Choice(choices")
    assert choice.headings == ("Parameters", "Parameter Types")
    param = next(b for b in blocks if b.text.startswith("case_sensitive"))
    assert param.lead.startswith("class click.Choice(choices") and param.lead.endswith(") Parameters:"), param.lead
    assert not any("BasedIntParamType" in b.text for b in blocks)
    assert any("BasedIntParamType" in b.text for b in read_blocks(text, "html", keep_code=True))


def test_html_from_docutils_matches_the_rst_it_came_from():
    for path in RST_DOCS:
        text = path.read_text(encoding="utf-8")
        from_rst = [(b.kind, b.headings, b.text) for b in read_blocks(text, "rst") if b.kind != HEADING]
        from_html = [(b.kind, b.headings, b.text) for b in read_blocks(rst_html(text), "html")
                     if b.kind != HEADING]
        assert from_html == from_rst, path.name


def test_html_tables_lists_and_skipped_parts():
    page = """<html><head><title>T</title><style>p {color: red}</style></head><body>
    <nav><a href="/">Home</a></nav>
    <header><p>Site banner</p></header>
    <main><h1>Guide<a class="headerlink" href="#guide">¶</a></h1>
    <p>Options:
    <ul><li>Port: 8081<li>Host &amp; name</ul>
    <table><thead><tr><th>Engine<th>Index</thead>
    <tbody><tr><td>lucene<td>impact<tr><td>es<td>rank_features</tbody></table>
    <pre>print("code")</pre>
    <p>Text with <code>hits[0]</code> and <img src="x.png" alt="a diagram"> inline.</p>
    <p><img src="badge.svg" alt="Build passing"></p>
    <script>var never = "a sentence";</script>
    </main><footer><p>Copyright</p></footer></body></html>"""
    got = {s.text: s for s in split_document(page, "p.html", "html")}
    assert list(got) == ["Options:", "Port: 8081", "Host & name", "Engine: lucene; Index: impact",
                         "Engine: es; Index: rank_features", "Text with hits[0] and a diagram inline."]
    assert got["Port: 8081"].context == "Guide. Options: Port: 8081"
    assert page[got["Engine: es; Index: rank_features"].start:].startswith("<tr><td>es")
    assert page[got["Host & name"].start:got["Host & name"].end] == "Host &amp; name"


# --- any input --------------------------------------------------------------------------------

_PIECES = ["word", "Two words.", " ", "\n", "\n\n", "\r\n", "\t", "-", "* ", "1. ", "#", "> ", "|", "`", "``",
           "**", "_", "[", "]", "(", ")", "<", ">", "/", "!", ":", "::", ".. ", "=====", "----", "\\", "&amp;",
           "&#x1F600;", "é", "<p>", "</p>", "<div class=\"related\">", "</div>", "<!--", "-->", "```", "    ",
           ":ref:`x <y>`", ".. note::", ".. code-block:: python", "<table><tr><th>", "<td>",
           "| a | b |\n|---|---|\n| c | d |\n", "<script>", "</script>", "---\n"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PIECES), max_size=40), st.sampled_from(["markdown", "rst", "html", "text"]))
def test_any_markup_is_read_with_offsets_inside_the_text(pieces, format):
    text = "".join(pieces)
    seen: dict[str, int] = {}
    for s in split_document(text, "d", format, keep_code=True):
        seen[s.text] = seen.get(s.text, 0) + 1  # a repeat of the same text gets "-2", "-3", ...
        key = sentence_key(s.text) + (f"-{seen[s.text]}" if seen[s.text] > 1 else "")
        assert s.text == s.text.strip() != "" and s.id == f"d#{key}"
        assert 0 <= s.start <= s.end <= len(text)


# --- locating text --------------------------------------------------------------------------

def test_locate_finds_words_through_markup():
    source = "Intro. Use `pip install x[y]` and **bold** words_here, then `z`.\nNext."
    start, end = locate(source, "Use pip install x[y] and bold words_here, then z.", 0, len(source))
    assert source[start:end] == "Use `pip install x[y]` and **bold** words_here, then `z`."
    assert locate(source, "nothing matches", 3, 9) == (3, 9)


# --- corpus folders: every file read or reported ----------------------------------------------

def make_folder(root: Path) -> Path:
    docs = root / "docs"
    (docs / "img").mkdir(parents=True)
    (docs / ".git" / "objects").mkdir(parents=True)
    (docs / "guide.md").write_text("# Guide\n\nRead me first.\n")
    (docs / "api.rst").write_text("API\n===\n\nCall :func:`run`.\n")
    (docs / "page.html").write_text("<h1>Page</h1><p>Hello there.</p>")
    (docs / "notes.txt").write_text("Plain notes.\n")
    for name in ("a.png", "b.png", "img/c.png", "conf.py", "setup.py", "mkdocs.yml", "Makefile"):
        (docs / name).write_bytes(b"\x89PNG" if name.endswith(".png") else b"x = 1\n")
    (docs / ".git" / "objects" / "ab").write_bytes(b"\x00\x01")
    (docs / ".DS_Store").write_bytes(b"\x00")
    return docs


def test_folder_files_are_read_or_counted(tmp_path):
    docs = make_folder(tmp_path)
    stats = ReadStats()
    files = corpus_files([docs], stats)
    assert [doc for _, doc in files] == ["api.rst", "guide.md", "notes.txt", "page.html"]
    assert stats.skipped_files == {".png": 3, ".py": 2, "(no suffix)": 1, ".yml": 1}
    assert stats.hidden_files == 2  # .git (not descended into) and .DS_Store
    assert stats.skipped_notice() == ("skipped 7 files: 3 .png, 2 .py, 1 (no suffix), 1 .yml "
                                      "(only .jsonl, .txt, .md/.markdown, .rst/.rest or .html/.htm files are read); "
                                      "left out 2 hidden files and folders (names that start with '.')")
    got = {s.text: s.context for s in read_corpus([docs], stats)}
    assert got == {"Call run.": "API. Call run.", "Read me first.": "Guide. Read me first.",
                   "Plain notes.": "Plain notes.", "Hello there.": "Page. Hello there."}
    assert stats.skipped_files[".png"] == 3  # listed again, not counted twice


def test_encode_prints_the_skipped_files_notice(tmp_path, monkeypatch, capsys):
    docs = make_folder(tmp_path)

    def no_model(args):  # the notice comes before the model is loaded: stop there
        raise SparcError("model not loaded in this test")

    import sparc_es.cli.encode

    monkeypatch.setattr(sparc_es.cli.encode, "load_model", no_model)
    assert cli.main(["encode", "--corpus", str(docs), "--output", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == ["sparc-es: warning: skipped 7 files: 3 .png, 2 .py, 1 (no suffix), 1 .yml "
                   "(only .jsonl, .txt, .md/.markdown, .rst/.rest or .html/.htm files are read); "
                   "left out 2 hidden files and folders (names that start with '.')",
                   "sparc-es: error: model not loaded in this test"]


def test_bad_format_and_broken_rst_are_located():
    with pytest.raises(InputError, match="unknown document format 'pdf'"):
        list(split_document("x", "d", "pdf"))
    # Malformed markup is read as well as it can be, never raised on.
    assert [s.text for s in split_document("Title\n===\n\n*unclosed emphasis and `tick\n", "d", "rst")]


# --- documents from Elasticsearch ------------------------------------------------------------

class _Cluster:
    """Just enough of a client for ElasticSource: the ids in one page (then none), then the
    documents asked for by id. (The real API is tested against the loopback server in
    test_elastic.py; this checks the formats alone.)"""

    def __init__(self, docs: list[dict]) -> None:
        self.docs = {str(n): d for n, d in enumerate(docs)}
        self.pages = [[{"_id": i, "sort": [n]} for n, i in enumerate(self.docs)], []]

    def open_point_in_time(self, **_):
        return {"id": "pit"}

    def search(self, query=None, **_):
        if query and "ids" in query:
            return {"hits": {"hits": [{"_id": i, "_source": self.docs[i]} for i in query["ids"]["values"]]}}
        return {"hits": {"hits": self.pages.pop(0)}}

    def close_point_in_time(self, **_):
        pass


def test_es_documents_read_in_their_format():
    from sparc_es.engines.elastic import ElasticSource

    doc = {"title": "Manual", "body": "# Install\n\nSteps:\n\n- Run `pip install sparc-es[es]`.\n"}
    got = list(ElasticSource(_Cluster([doc]), "docs", "body", title_field="title", format="markdown").read())
    assert [(s.id, s.text, s.context) for s in got] == [
        (f"0#{sentence_key('Steps:')}", "Steps:", "Manual. Install. Steps:"),
        (f"0#{sentence_key('Run pip install sparc-es[es].')}", "Run pip install sparc-es[es].",
         "Manual. Install. Steps: Run pip install sparc-es[es].")]
    assert doc["body"][got[1].start:got[1].end] == "Run `pip install sparc-es[es]`."
    plain = list(ElasticSource(_Cluster([doc]), "docs", "body").read())
    assert plain[0].text == "# Install" and plain[0].context == "# Install"  # text: as it always was
    assert ElasticSource(None, "docs", "body").describe() == ["elasticsearch:docs:body:_id::"]
    assert ElasticSource(None, "docs", "body", format="html").describe() == ["elasticsearch:docs:body:_id:::html"]


def test_encode_from_es_takes_a_format():
    args = cli.build_parser().parse_args(["encode", "--from-es", "docs", "--text-field", "body", "--output", "o",
                                          "--format", "rst"])
    assert args.format == "rst"
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["encode", "--from-es", "d", "--text-field", "b", "--output", "o",
                                       "--format", "pdf"])


def test_myst_targets_peps_and_file_roles_read_as_sphinx_renders_them():
    """pip's docs: a MyST target ``(label)=`` names the heading after it and shows nothing (it was
    a sentence, and the first hit for the words of its label); ``{pep}`518``` shows "PEP 518" as
    :pep: does in reStructuredText; ``{file}``/``{samp}`` show one backslash and no braces."""
    text = ("(Hash-checking mode)=\n\n# Hash-checking mode\n\nIntroduced in {pep}`518`, see {rfc}`7230#section-3`.\n\n"
            "It reads {file}`C:\\\\ProgramData\\\\pip\\\\pip.ini` and runs {samp}`python -m {module}`.\n")
    got = [(s.text, s.headings) for s in split_document(text, "x.md", "markdown")]
    assert got == [("Introduced in PEP 518, see RFC 7230.", "Hash-checking mode"),
                   ("It reads C:\\ProgramData\\pip\\pip.ini and runs python -m module.", "Hash-checking mode")]
    [right_above] = split_document("(my-label)=\nSome text right under its target.\n", "x.md", "markdown")
    assert right_above.text == "Some text right under its target."
    [rst] = split_document("Introduced in :pep:`518`.\n", "x.rst", "rst")
    assert rst.text == "Introduced in PEP 518."  # docutils' own rendering, which the MyST one now matches


def test_default_role_cross_references_and_paths_read_as_sphinx_renders_them():
    """marshmallow's docs (default_role = "py:obj"): `Schema <marshmallow.Schema>` shows "Schema"
    and `~marshmallow.fields.Nested` "Nested" (they kept the target, tilde and all); a path in
    :file:`~/.config/x.toml` is a path, not a Python name to shorten (it showed "toml")."""
    text = ("Pass arguments to the `Schema <marshmallow.Schema>` constructor, or use `~marshmallow.fields.Nested`.\n\n"
            "Edit :file:`~/.widgetry/config.toml` and :samp:`pip install <pkg>`. "
            "A plain `book title` stays.\n")
    assert [s.text for s in split_document(text, "x.rst", "rst")] == [
        "Pass arguments to the Schema constructor, or use Nested.",
        "Edit ~/.widgetry/config.toml and pip install <pkg>.", "A plain book title stays."]
    [md] = split_document("Edit {file}`~/.pip/pip.conf` and {samp}`pip install <pkg>`.\n", "x.md", "markdown")
    assert md.text == "Edit ~/.pip/pip.conf and pip install <pkg>."
    # backticks without a role around what is no cross-reference: docutils' title reference, as written
    [plain] = split_document("Put `~/.widgetry/config.toml` in `.gitignore`; it returns `Vec<T>`, see "
                             "`.Schema.load`.\n", "x.rst", "rst")
    assert plain.text == "Put ~/.widgetry/config.toml in .gitignore; it returns Vec<T>, see Schema.load."


def test_sphinx_info_fields_read_as_the_page_shows_them_under_their_object():
    """``:param int port:`` and ``:type port: int`` are one line of the page, "Parameters: port (int)",
    under the function's signature; they gave contexts of markup ("param int port:") without the
    function's name, and lone sentences "int", "Connection"."""
    text = ("API\n===\n\n.. py:function:: connect(host, port=8080)\n\n   Open a connection.\n\n"
            "   :param str host: The host name.\n   :param port: The TCP port.\n   :type port: int\n"
            "   :returns: An open connection.\n   :rtype: Connection\n"
            "   :raises ConnectionError: When the server cannot be reached.\n   :meta private:\n\n"
            ".. data:: hook_name\n\n   :type: HookCaller\n\n.. function:: close()\n\n   :rtype: None\n\n"
            ":Author: Jane Doe, who wrote it.\n")
    got = [(s.text, s.context) for s in split_document(text, "api.rst", "rst")]
    signature = "API. connect(host, port=8080)"
    assert got == [
        ("Open a connection.", f"{signature}: Open a connection."),
        ("The host name.", f"{signature} Parameters: host (str): The host name."),
        ("The TCP port.", f"{signature} Parameters: port (int): The TCP port."),
        ("An open connection.", f"{signature} Returns (Connection): An open connection."),
        ("When the server cannot be reached.", f"{signature} Raises ConnectionError: When the server cannot be "
                                               "reached."),
        ("Type: HookCaller", "API. hook_name: Type: HookCaller"),
        ("Return type: None", "API. close(): Return type: None"),
        ("Jane Doe, who wrote it.", "API. Author: Jane Doe, who wrote it.")]
    # Sphinx's other names (:kwarg:, :paramtype:), matched as written, inside an object's directive only
    text = (".. py:function:: f(timeout)\n\n   :kwarg retries: How often.\n   :param timeout: How long.\n"
            "   :paramtype timeout: float\n   :Param x: As written.\n\nSome words.\n\n:param y: Outside.\n")
    assert [(s.text, s.context) for s in split_document(text, "api.rst", "rst")] == [
        ("How often.", "f(timeout) Parameters: retries: How often."),
        ("How long.", "f(timeout) Parameters: timeout (float): How long."),
        ("As written.", "f(timeout) Param x: As written."), ("Some words.", "Some words."),
        ("Outside.", "param y: Outside.")]


def test_includes_are_read_where_they_are_and_those_from_elsewhere_are_reported(tmp_path):
    """marshmallow's index.rst includes about.rst.inc (its landing text, which was never read: .inc
    was skipped) and changelog.rst includes ../CHANGELOG.rst (1,248 sentences lost without a word)."""
    from sparc_es.corpus.sources import ReadStats, read_corpus

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.rst").write_text("Home\n====\n\n.. include:: about.rst.inc\n\nThe rest of the home page.\n")
    (docs / "about.rst.inc").write_text("marshmallow converts complex objects to and from Python types.\n")
    (docs / "changelog.rst").write_text("Changelog\n=========\n\n.. include:: ../CHANGELOG.rst\n\n"
                                        ".. include:: snippet.inc\n")
    stats = ReadStats()
    assert [(s.doc, s.text) for s in read_corpus([docs], stats)] == [
        ("about.rst.inc", "marshmallow converts complex objects to and from Python types."),
        ("index.rst", "The rest of the home page.")]
    assert [e.split("/docs/")[1] for e in stats.cut_examples] == [
        "changelog.rst:4: include of ../CHANGELOG.rst not read here (sparc-es reads each file on its own, from the "
        "corpus folders given: give the folder that holds it)",
        "changelog.rst:6: include of snippet.inc not read here (not a .rst, .md, .txt or .html file, or one of them "
        "with .inc)"]
    assert [s.text for s in read_corpus([docs / "about.rst.inc"])] == [
        "marshmallow converts complex objects to and from Python types."]


def test_myst_roles_leave_their_text():
    from sparc_es.corpus.readers import read_blocks

    [block] = read_blocks("Introduced in {pep}`518`; see {ref}`pip install <pip-install>` and `hits[0]`.",
                          "markdown")
    assert block.text == "Introduced in PEP 518; see pip install and hits[0]."


def test_a_word_before_a_closing_code_span_is_located_where_it_is():
    """"s)," of `f(word, s)`, must not be matched in the "docs)," of a later sentence."""
    from sparc_es.corpus.sources import split_document

    text = "* One with `f(word, s)`, and more, in both engines. Two lost on the docs), so it is off.\n"
    got = list(split_document(text, "t.md", format="markdown"))
    assert [s.text for s in got] == ["One with f(word, s), and more, in both engines.",
                                     "Two lost on the docs), so it is off."]
    assert text[got[0].start:got[0].end] == "One with `f(word, s)`, and more, in both engines."
    assert text[got[1].start:got[1].end] == "Two lost on the docs), so it is off."


# --- the code a sentence leads into ----------------------------------------------------------------

@pytest.mark.parametrize("format, text", [
    ("markdown", "# Lock\n\nTo upgrade a single package, keeping the others locked:\n\n"
                 "```console\n$ uv lock --upgrade-package requests\n```\n\nAnother paragraph.\n"),
    ("rst", "Lock\n====\n\nTo upgrade a single package, keeping the others locked::\n\n"
            "    $ uv lock --upgrade-package requests\n\nAnother paragraph.\n"),
    ("html", "<h1>Lock</h1><p>To upgrade a single package, keeping the others locked:</p>"
             "<pre>$ uv lock --upgrade-package requests\n</pre><p>Another paragraph.</p>"),
])
def test_the_sentence_before_a_code_block_keeps_its_code(format, text):
    got = list(split_document(text, "lock", format))
    lead = next(s for s in got if s.text.startswith("To upgrade"))
    assert lead.code == "$ uv lock --upgrade-package requests"
    assert all(s.code is None for s in got if s is not lead)  # the next paragraph leads into nothing
    assert "uv lock" not in " ".join(s.text for s in got)  # the code is shown, not a sentence


def test_a_how_to_heading_with_only_code_under_it_is_a_sentence_with_that_code():
    """pip's Getting Started: "### Install a package from GitHub", then the command and nothing else.
    The command was in no sentence, so "How do I install a package from git?" could not show it; the
    heading is now a sentence of its own with the code. One word ("Formatters") is no how-to."""
    text = ("# Getting Started\n\n## Common tasks\n\n### Install a package from GitHub\n\n"
            "```console\n$ pip install git+https://github.com/pypa/sampleproject.git@main\n```\n\n"
            "### Formatters\n\n```py\nformat(x)\n```\n\n### Upgrade a package\n\nRun this:\n\n"
            "```console\n$ pip install --upgrade sampleproject\n```\n")
    got = [(s.text, s.context, s.headings, s.code) for s in split_document(text, "getting-started.md", "markdown")]
    assert got == [
        ("Install a package from GitHub", "Getting Started > Common tasks. Install a package from GitHub",
         "Getting Started > Common tasks", "$ pip install git+https://github.com/pypa/sampleproject.git@main"),
        ("Run this:", "Getting Started > Common tasks > Upgrade a package. Run this:",
         "Getting Started > Common tasks > Upgrade a package", "$ pip install --upgrade sampleproject")]


def test_every_sentence_of_a_paragraph_gets_the_code_it_leads_into_and_only_right_before_it():
    """The answer to a how-to is not always the paragraph's last sentence ("All it has to do is
    redirect to it. The view:"), so each of its sentences shows the code the paragraph leads into."""
    text = ("First sentence. Run this:\n\n    make all\n\n## Other\n\nNo code follows here.\n\n"
            "```\nunrelated\n```\n\nA paragraph after the code.\n")
    got = {s.text: s.code for s in split_document(text, "x.md", "markdown")}
    assert got == {"First sentence.": "make all", "Run this:": "make all", "No code follows here.": "unrelated",
                   "A paragraph after the code.": None}


def test_mkdocs_material_constructs_read_as_rendered():
    """Admonitions, collapsible blocks and content tabs give their body as prose under their title;
    attribute lists, icons, abbreviations, snippet markers, [TOC] and inline-highlight prefixes are
    markup (real uses of each, from MkDocs-Material documentation sets)."""
    text = ('# Lint\n\n## Settings {: #lint_enable }\n\n## 7.0 Notes {: #\\\\7.0}\n\n[TOC]\n\n'
            '!!! note "Custom title"\n    Body of the note.\n\n??? tip\n    Collapsed tip body.\n\n'
            '???+ warning "Open"\n    Open body.\n\n'
            '=== "Linux"\n\n    The cache lives in `~/.cache/uv` on Linux.\n\n'
            '=== "Windows"\n    It lives in `%LOCALAPPDATA%` on Windows.\n\n'
            '{ .annotate }\n\n*[HTML]: Hyper Text Markup Language\n--8<-- "LICENSE.md"\n\n'
            'Get it from [GitHub](https://x){: .md-button } :octicons-mark-github-16: and wrap in `#!html <div>`.\n')
    got = {s.text: s.context.split(". ")[0] for s in split_document(text, "x.md", "markdown")}
    assert got == {"Body of the note.": "Lint > 7.0 Notes > Custom title",
                   "Collapsed tip body.": "Lint > 7.0 Notes > Tip",
                   "Open body.": "Lint > 7.0 Notes > Open",
                   "The cache lives in ~/.cache/uv on Linux.": "Lint > 7.0 Notes > Linux",
                   "It lives in %LOCALAPPDATA% on Windows.": "Lint > 7.0 Notes > Windows",
                   "Get it from GitHub and wrap in <div>.": "Lint > 7.0 Notes"}


def test_markdown_reference_links_without_a_definition_show_their_text():
    """A reference link whose label the file does not define shows its text, as the site does
    (pymdown-extensions' pages open with ``[:octicons-file-code-24:][_caret]{: .source-link }``, its
    label defined in a snippet MkDocs appends); a defined one and brackets in code are as before."""
    text = ("[:octicons-file-code-24:][_caret]{: .source-link }\n\n# Caret\n\n"
            "Built with [MkDocs][mkdocs] and [Material][].\n\nEnable the [attr_list][attr-list] extension.\n\n"
            "Or the [`md_in_html`][md-in-html] one.\n\n"
            "Keep `a[0][1]` as written.\n\n"
            "From the [Python Package Index][pypi].\n\n[pypi]: https://pypi.org\n")
    got = [s.text for s in split_document(text, "caret.md", "markdown")]
    assert got == ["Built with MkDocs and Material.", "Enable the attr_list extension.", "Or the md_in_html one.",
                   "Keep a[0][1] as written.",
                   "From the Python Package Index."]


@pytest.mark.parametrize(("markdown", "shown"), [
    ("Index it as a[i][j] to get the cell.", "Index it as a[i][j] to get the cell."),  # indexing, not a link
    ("Run `x`[0][1] and f(x)[0][1] now.", "Run x[0][1] and f(x)[0][1] now."),
    ("As shown in [1][2], and [1, 2][0] is 1.", "As shown in [1][2], and [1, 2][0] is 1."),  # citations, numbers
    ("An escaped \\[text\\]\\[label\\] stays.", "An escaped [text][label] stays."),  # as the page shows it
    ("See ![the flow][flow-img] below.", "See the flow below."),  # an image: its alt, as a defined one gives
    ("Glyph \ue0003\ue001 then `code`.", "Glyph 3\ue001 then code."),  # private-use characters: no crash
])
def test_markdown_brackets_that_are_not_a_reference_link_stay_as_written(markdown, shown):
    assert [s.text for s in split_document(markdown, "x.md", "markdown")] == [shown]


def test_markdown_a_badge_given_by_reference_is_no_sentence():
    """``[![PyPI][badge]][pypi]`` (README badges, labels defined in a snippet): an image alone gives
    nothing, as one whose label is defined."""
    assert [s.text for s in split_document("[![PyPI][badge]][pypi] ![CI][ci]\n\nText.\n", "x.md", "markdown")] \
        == ["Text."]


def test_markdown_definition_lists_lead_into_their_definitions_as_in_restructuredtext():
    """MyST's and Python-Markdown's definition lists (pip's configuration page, abridged): the
    term is each definition's lead-in, as a definition list's term is in reStructuredText, not a
    sentence run into it ("Global : In a ...")."""
    text = ("# Location\n\nGlobal\n: In a \"pip\" subdirectory of `XDG_CONFIG_DIRS`.\n\n"
            "  This will be followed by loading `/etc/pip.conf`.\n\nUser\n: `$HOME/.config/pip/pip.conf`\n")
    md = {s.text: s.context for s in split_document(text, "configuration.md", "markdown")}
    rst = {s.text: s.context for s in split_document(
        "Location\n========\n\nGlobal\n    In a \"pip\" subdirectory of ``XDG_CONFIG_DIRS``.\n\n"
        "    This will be followed by loading ``/etc/pip.conf``.\n\nUser\n    ``$HOME/.config/pip/pip.conf``\n",
        "configuration.rst", "rst")}
    assert list(md) == ['In a "pip" subdirectory of XDG_CONFIG_DIRS.',
                        "This will be followed by loading /etc/pip.conf.", "$HOME/.config/pip/pip.conf"]
    assert md == rst
    assert all(not s.startswith(("Global", "User")) for s in md)
    assert "Global" in md["This will be followed by loading /etc/pip.conf."]


def test_myst_toctree_include_and_image_show_no_text_and_no_code():
    """A toctree is navigation, an include another file's text, an image a picture: the page shows
    none of them as text (pip's cli/index.md gave its toctree's options as the code under "The
    general options ... in this section.", and a colon-fenced include was a sentence)."""
    text = ("# Commands\n\nThe general options are under the pip page in this section.\n\n"
            "```{toctree}\n:maxdepth: 1\n:hidden:\n\npip\n```\n\n:::{include} ../README.md\n:::\n\n"
            "```{image} logo.png\n:alt: pip\n```\n\nAfter them.\n\n```{pip-cli}\n$ pip install x\n```\n")
    got = [(s.text, s.code) for s in split_document(text, "cli/index.md", "markdown")]
    assert got == [("The general options are under the pip page in this section.", None),
                   ("After them.", "$ pip install x")]  # a project's own directive stays code


def test_a_left_out_directive_left_open_is_reported_not_silent():
    """A toctree whose closing fence is missing runs to the end of the file, as an open code fence
    does: what it takes with it is reported."""
    said = []
    blocks = list(read_blocks("# A\n\nText.\n\n```{toctree}\n:maxdepth: 1\n\n# B\n\nMore text.\n", "markdown",
                              report=lambda line, what: said.append((line, what))))
    assert [b.text for b in blocks if b.kind != HEADING] == ["Text."]
    assert said == [(5, "a {toctree} directive left open: the rest of the file (6 lines) is left out with it")]


@pytest.mark.parametrize(("markdown", "shown"), [
    ('Press ++ctrl+alt+delete++ or ++ctrl+"My Key"++.', "Press ctrl+alt+delete or ctrl+My Key."),  # keys
    ("Use ==mark me== and ^^insert me^^ and ~~delete me~~.", "Use mark me and insert me and delete me."),
    ("Water is H^2^O and ethanol CH~3~CH~2~OH.", "Water is H2O and ethanol CH3CH2OH."),
    ("The n^th^ line, the [docs](https://x){.magiclink-ignore}.", "The nth line, the docs."),  # after a link
    ("C++ and C++ compilers; a == b == c; 2^10; ~/.cache and ~user~.",
     "C++ and C++ compilers; a == b == c; 2^10; ~/.cache and ~user~."),  # no text inside the markers
    ("Keep `==x==` and `++x++` in code.", "Keep ==x== and ++x++ in code."),
    # pymdown's markers are never inside a word, nor a lone ^ or ~ around more than one short word
    ("Pin Django==4.2 and x==1; a==b==c; libstdc++/libc++, g++,clang++.",
     "Pin Django==4.2 and x==1; a==b==c; libstdc++/libc++, g++,clang++."),
    ("HEAD~1..HEAD~3, requests~=2.28, PROGRA~1\\MICROS~2, x^2+y^2, (^^) and (^^).",
     "HEAD~1..HEAD~3, requests~=2.28, PROGRA~1\\MICROS~2, x^2+y^2, (^^) and (^^)."),
    ("Inserting sub~scripts~ and super^scripts^.", "Inserting subscripts and superscripts."),
    ("Escaped: H\\^2\\^O and \\=\\=x\\=\\=.", "Escaped: H^2^O and ==x==."),
    ("Run `cp .env{.example,}` then `${FOO=bar}`", "Run cp .env{.example,} then ${FOO=bar}"),  # braces of code
])
def test_pymdown_inline_markup_shows_its_text_as_the_page_does(markdown, shown):
    """pymdown-extensions' keys, mark, caret and tilde, which MkDocs-Material sites enable: the page
    shows key caps, highlights, super- and subscripts, not the markers (they were in sentences)."""
    assert [s.text for s in split_document(markdown, "x.md", "markdown")] == [shown]


def test_myst_directives_with_a_prose_body_read_as_sphinx_renders_them():
    """MyST's fenced directives (pip's and Black's docs, abridged): a note, a version note, an
    admonition, a tab, a colon fence and a note inside a list item give their body as prose under
    their label, as the same directives in reStructuredText do; a version note with no body is its
    own sentence; toctree and a project's own directive (pip-cli) stay code, read by no sentence."""
    text = ("# Certificates\n\n```{versionadded} 1.3\n\n```\n\n"
            "By default, pip will perform SSL certificate verification.\n\n"
            "```{versionadded} 22.2\nExperimental support, behind `--use-feature=truststore`.\n```\n\n"
            "````{admonition} Example\nCreating the bundle, on a modern Unix system:\n\n"
            "```\n$ python -m pip wheel -r requirements.txt\n```\n````\n\n"
            "```{note}\nThe `black-jupyter` hook became available in version 21.8b0.\n```\n\n"
            "```{tab} Unix\n:sync: unix\n\nThe file lives in `/etc/pip.conf`.\n```\n\n"
            ":::{warning} Do not expose blackd publicly.\n:::\n\n"
            "- Quote specifiers in the shell.\n\n  ```{note}\n  Do not use quotes in requirement files.\n  ```\n\n"
            "```{toctree}\nuser_guide\n```\n\n```{pip-cli}\n$ python -m pip install SomePackage\n```\n")
    got = {s.text: (s.context.split(". ")[0], s.code) for s in split_document(text, "x.md", "markdown")}
    assert got == {
        "New in version 1.3.": ("Certificates", None),
        "By default, pip will perform SSL certificate verification.": ("Certificates", None),
        "Experimental support, behind --use-feature=truststore.": ("Certificates > New in version 22.2", None),
        "Creating the bundle, on a modern Unix system:": ("Certificates > Example",
                                                           "$ python -m pip wheel -r requirements.txt"),
        "The black-jupyter hook became available in version 21.8b0.": ("Certificates > Note", None),
        "The file lives in /etc/pip.conf.": ("Certificates > Unix", None),
        "Do not expose blackd publicly.": ("Certificates > Warning", None),
        "Quote specifiers in the shell.": ("Certificates", None),
        "Do not use quotes in requirement files.": ("Certificates > Note", None),
    }
    # every sentence's span is where it is in the file (the version note's: its directive's line)
    for s in split_document(text, "x.md", "markdown"):
        assert s.text.split()[-1].strip(".`") in text[s.start:s.end]


def test_sphinx_autodoc_content_and_cross_references():
    text = ("API\n===\n\n.. _autoescape-overrides:\n\nOverriding\n----------\n\n"
            "See :ref:`autoescape-overrides`, :ref:`other-label`, :doc:`/templates` and :class:`.Sandboxed`.\n\n"
            ".. autoclass:: werkzeug.wrappers.Request\n   :members:\n\n   The request object.\n\n"
            "   .. attribute:: max_content_length\n\n      The maximum content length.\n")
    got = {s.text: s.context for s in split_document(text, "api.rst", "rst")}
    assert "See Overriding, other label, templates and Sandboxed." in got
    assert got["The request object."].startswith("API > Overriding. werkzeug.wrappers.Request: ")
    # a member names its class too, as the rendered page shows it inside the class's box
    assert got["The maximum content length."].startswith(
        "API > Overriding. werkzeug.wrappers.Request max_content_length: ")


def test_sphinx_class_directive_and_boxes_inside_an_object_name_the_object():
    """Werkzeug's datastructures.rst (tests/data/werkzeug, real, unmodified): ``.. class::`` is Sphinx's Python class
    (not docutils' class attribute), and a note, a deprecation or an attribute inside a class keeps
    the class's name in its lead-in; a short paragraph led in by its class does not borrow the
    previous class's last paragraph."""
    path = DATA.parent / "werkzeug" / "datastructures.rst"
    got = {}
    for s in split_document(path.read_text(), path.name, "rst"):
        got.setdefault(s.text, s.context)
    section = "Data Structures > General Purpose. "
    assert got["Works like a regular MultiDict but preserves the order of the fields."].startswith(
        section + "OrderedMultiDict: ")
    assert got["Use MultiDict instead."].startswith(section + "OrderedMultiDict Deprecated since version 3.1: ")
    assert got["Instead you have to use the to_dict method, otherwise the internal bucket objects are exposed."] \
        .startswith(section + "OrderedMultiDict note: ")
    assert got["An immutable OrderedMultiDict."] == section + "ImmutableMultiDict: An immutable OrderedMultiDict."
    assert got["Can be a str, or an instance of os.PathLike."].startswith(
        "Data Structures > Others. FileStorage filename: ")


def test_a_docutils_class_attribute_without_content_adds_no_text():
    text = "Title\n=====\n\n.. class:: special\n\nA plain paragraph.\n"
    assert [(s.text, s.context) for s in split_document(text, "x.rst", "rst")] == [
        ("A plain paragraph.", "Title. A plain paragraph.")]


@pytest.mark.parametrize("text, sentences", [
    ("The company started with Vanguard. 37signals matches it later.",
     ["The company started with Vanguard.", "37signals matches it later."]),
    ("Use the ~ operator. {{ 1 + 1 }} is 2.", ["Use the ~ operator.", "{{ 1 + 1 }} is 2."]),
    ('Use the "!" prefix to negate a pattern. Next one.', ['Use the "!" prefix to negate a pattern.', "Next one."]),
    ("See Fig. 3 for details. It was version 2.0. 3 items came later.",
     ["See Fig. 3 for details.", "It was version 2.0. 3 items came later."]),
])
def test_sentences_split_where_documentation_needs_it(text, sentences):
    from sparc_es.corpus.sources import sentence_spans

    assert [text[a:b] for a, b in sentence_spans(text)] == sentences


def test_a_short_paragraph_of_one_sentence_has_the_paragraph_before_as_lead_in():
    text = ("# Config\n\nThe cache size is set with the --cache option.\n\nThe default is 5.\n\n"
            "## Other\n\nShort one.\n")
    got = {s.text: s.context for s in split_document(text, "x.md", "markdown")}
    assert got["The default is 5."] == "Config. The cache size is set with the --cache option. The default is 5."
    assert got["Short one."] == "Config > Other. Short one."  # a new section: nothing before it
    # a code block between them: the paragraph before led into its own code, not into this one
    text = ("# Responses\n\nAuthentication headers can be set that way as well:\n\n    response.www_authenticate\n\n"
            "Cookies can be set as well:\n\n    response.set_cookie('name', 'value')\n")
    cookie = next(s for s in split_document(text, "q.md", "markdown") if s.text.startswith("Cookies"))
    assert cookie.context == "Responses. Cookies can be set as well:" and cookie.code.startswith("response.set_cookie")


def test_a_wide_table_row_is_read_as_groups_of_its_cells_with_the_row_as_context():
    header = [f"Col{i}" for i in range(12)]
    cells = [f"value {i} " + "word " * 10 for i in range(12)]
    text = ("# Handbook\n\n| " + " | ".join(header) + " |\n|" + "---|" * 12 + "\n| " + " | ".join(cells) + " |\n")
    got = list(split_document(text, "t.md", "markdown"))
    assert len(got) > 1 and all(len(s.text) <= 400 for s in got)
    assert "; ".join(s.text for s in got) == "; ".join(f"{h}: {c.strip()}" for h, c in zip(header, cells))
    assert all(s.context == got[0].context and "Col0: value 0" in s.context for s in got)  # the whole row
    assert all(text[s.start:s.end].startswith("| value 0") for s in got)  # the row's line


def test_a_word_split_by_markup_is_found_where_it_is_not_in_a_later_code_span():
    """`search`'s, then a code span holding search's: the first sentence ran to the later code span
    (the whole word was found there first) and the second started inside it (the README's explain
    paragraph, caught by the offsets test)."""
    text = "One is the place in `search`'s answer. Two is the line: `search's score`, each side.\n"
    assert [text[s.start:s.end] for s in split_document(text, "x.md", "markdown")] == [
        "One is the place in `search`'s answer.", "Two is the line: `search's score`, each side."]
    # but not a word's first letters in an attribute before it: all of its parts must come first
    html = '<p>It works well here. <a href="#Python">Python-3.12</a> is the version we use.</p>'
    assert [html[s.start:s.end] for s in split_document(html, "x.html", "html")] == [
        "It works well here.", "Python-3.12</a> is the version we use."]
