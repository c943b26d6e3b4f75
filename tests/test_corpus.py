"""Corpus input: JSONL records, text and Markdown documents, and precise errors for bad input."""

from __future__ import annotations

import json
import re

import pytest

from sparc_es.corpus.sources import ReadStats, read_corpus, read_document, sentence_key, split_document
from sparc_es.errors import InputError


def write(path, text: str | bytes):
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def test_jsonl_records(tmp_path):
    f = write(tmp_path / "c.jsonl", '{"id": "a", "text": " One. ", "context": "Para."}\n\n'
                                    '{"id": 7, "text": "Two.", "doc": "d", "start": 3, "end": 7}\n')
    got = list(read_corpus([f]))
    assert [(s.id, s.text, s.context, s.doc, s.start) for s in got] == [
        ("a", "One.", "Para.", None, None), ("7", "Two.", "", "d", 3)]


@pytest.mark.parametrize("line, message", [
    ('{"id": "a", "text": "x"', "malformed JSON"),
    ('["a", "b"]', "expected a JSON object"),
    ('{"text": "x"}', 'missing or invalid "id"'),
    ('{"id": "a b", "text": "x"}', "contains whitespace"),
    ('{"id": "a"}', 'missing or invalid "text"'),
    ('{"id": "a", "text": "   "}', "empty sentence"),
    ('{"id": "a", "text": "x", "context": 3}', '"context" must be a string'),
    ('{"id": "a", "text": "x", "headings": ["A"]}', '"headings" must be a string'),
    ('{"id": "a", "text": "x", "start": "0"}', '"start" must be an integer'),
])
def test_bad_jsonl_line_names_file_and_line(tmp_path, line, message):
    f = write(tmp_path / "c.jsonl", '{"id": "ok", "text": "fine"}\n' + line + "\n")
    with pytest.raises(InputError, match=message) as e:
        list(read_corpus([f]))
    assert e.value.line == 2 and str(e.value).startswith(f"{f}:2: ")


def test_non_utf8_is_located(tmp_path):
    f = write(tmp_path / "c.jsonl", b'{"id": "a", "text": "ok"}\n{"id": "b", "text": "caf\xe9"}\n')
    with pytest.raises(InputError, match=r"c.jsonl:2: not valid UTF-8 \(byte 0xe9\)"):
        list(read_corpus([f]))
    doc = write(tmp_path / "d.md", b"# Title\n\nFine line.\nBad \xff line.\n")
    with pytest.raises(InputError, match=r"d.md:4: not valid UTF-8"):  # no stats to say so in
        list(read_document(doc))


def test_a_document_that_is_not_utf8_is_read_and_named(tmp_path):
    """One old file stopped a whole folder's encode; its bad bytes are now read as U+FFFD (as Sphinx
    does) and the encode's warning names the file and line. A page that declares its encoding is
    read in it, as a browser does (ISO-8859-1 as windows-1252)."""
    doc = write(tmp_path / "d.md", b"# Title\n\nFine line.\nBad \xff line.\n")
    write(tmp_path / "old.html", b'<html><head><meta http-equiv="Content-Type" content="text/html; charset='
                                 b'iso-8859-1"></head><body><p>A caf\xe9 \x93quoted\x94.</p></body></html>')
    stats = ReadStats()
    got = [(s.doc, s.text) for s in read_corpus([tmp_path], stats)]
    assert got == [("d.md", "Fine line."), ("d.md", "Bad \ufffd line."),
                   ("old.html", "A caf\u00e9 \u201cquoted\u201d.")]
    assert stats.cut_examples == [f"{doc}:4: not valid UTF-8: 1 byte sequence read as U+FFFD "
                                  "(re-encode the file as UTF-8)"]


def test_duplicate_ids_across_files(tmp_path):
    write(tmp_path / "a.jsonl", json.dumps({"id": "x", "text": "one"}) + "\n")
    write(tmp_path / "b.jsonl", json.dumps({"id": "y", "text": "two"}) + "\n" + json.dumps({"id": "x", "text": "3"}))
    with pytest.raises(InputError, match=r"b.jsonl:2: duplicate sentence id 'x'"):
        list(read_corpus([tmp_path]))


def test_empty_corpus(tmp_path):
    f = write(tmp_path / "c.jsonl", "\n\n")
    with pytest.raises(InputError, match="empty corpus"):
        list(read_corpus([f]))
    (tmp_path / "pdfs").mkdir()
    write(tmp_path / "pdfs" / "x.pdf", "")
    with pytest.raises(InputError, match=r"pdfs: no .jsonl, .txt, .md/.markdown, .rst/.rest or .html/.htm files in "
                                         r"this folder \(skipped 1 file: 1 .pdf\)"):
        list(read_corpus([tmp_path / "pdfs"]))


def test_missing_and_unknown_inputs(tmp_path):
    with pytest.raises(InputError, match="no such file or folder"):
        list(read_corpus([tmp_path / "nothing.jsonl"]))
    with pytest.raises(InputError, match="unknown corpus format"):
        list(read_corpus([write(tmp_path / "x.pdf", "")]))


MARKDOWN = """# Title here

First sentence of the **first** paragraph. Second sentence, with `code`.
It continues on a new line.

- A list item. With two sentences.
- Another item

```python
print("never a sentence.")
```
> Quoted text here.
"""


def test_markdown_sentences_keep_offsets_and_paragraph_context(tmp_path):
    f = write(tmp_path / "guide notes.md", MARKDOWN)
    got = list(read_corpus([f]))
    texts = [s.text for s in got]
    # The heading is no sentence of its own: it heads the context of every sentence under it.
    assert texts == ["First sentence of the first paragraph.", "Second sentence, with code.",
                     "It continues on a new line.", "A list item.", "With two sentences.", "Another item",
                     "Quoted text here."]
    assert [s.id for s in got][:2] == [f"guide_notes.md#{sentence_key(t)}" for t in texts[:2]]
    assert all(s.doc == "guide notes.md" for s in got)
    for s in got:  # offsets point at the sentence in the original file
        raw = MARKDOWN[s.start:s.end]
        assert " ".join(raw.replace("**", "").replace("`", "").split()) == s.text
    paragraph = "First sentence of the first paragraph. Second sentence, with code. It continues on a new line."
    assert got[0].context == got[1].context == f"Title here. {paragraph}"
    # A list item's context: the section title, the paragraph that introduces the list, the item.
    assert got[3].context == f"Title here. {paragraph} A list item. With two sentences."
    assert got[6].context == "Title here. Quoted text here."


def test_plain_text_paragraphs():
    text = "Alpha one. Alpha two.\nAlpha three.\n\n\nBeta one!"
    got = list(split_document(text, "t.txt"))
    assert [s.text for s in got] == ["Alpha one.", "Alpha two.", "Alpha three.", "Beta one!"]
    assert got[0].context == "Alpha one. Alpha two. Alpha three."
    # a paragraph of one short sentence has the paragraph before it as its lead-in
    assert got[3].context == "Alpha one. Alpha two. Alpha three. Beta one!"
    assert [text[s.start:s.end] for s in got][3] == "Beta one!"


def test_links_are_followed_only_to_regular_files_inside_the_folder(tmp_path):
    """A cloned docs folder may hold ``environ.txt -> /proc/self/environ``: never read, only counted."""
    from sparc_es.corpus.sources import ReadStats, corpus_files

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("The password is hunter2.\n")
    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "guide" / "real.md").write_text("# Guide\n\nThe real page is read once.\n")
    (docs / "environ.txt").symlink_to("/proc/self/environ")
    (docs / "secret.md").symlink_to(outside / "secret.md")
    (docs / "far").symlink_to(outside, target_is_directory=True)
    (docs / "alias.md").symlink_to(docs / "guide" / "real.md")  # inside the folder: read
    (docs / "dangling.md").symlink_to(tmp_path / "nowhere.md")
    stats = ReadStats()
    files = corpus_files([docs], stats)
    assert sorted(name for _, name in files) == ["alias.md", "guide/real.md"]
    assert stats.skipped_links == 4
    assert "skipped 4 links" in stats.skipped_notice()
    texts = " ".join(s.text for s in read_corpus([docs]))
    assert "hunter2" not in texts and "PATH=" not in texts and "real page" in texts


def test_a_folder_that_cannot_be_listed_is_an_error_naming_it(tmp_path, monkeypatch):
    """As an unreadable file is. The suite runs as root in CI, where no permission bit makes a folder
    unreadable, so listing it is made to fail as it does for other users (PermissionError)."""
    import os

    (tmp_path / "docs" / "private").mkdir(parents=True)
    (tmp_path / "docs" / "a.md").write_text("Readable words.\n")
    (tmp_path / "docs" / "private" / "b.md").write_text("Hidden words.\n")
    real = os.scandir

    def scandir(path="."):
        if os.fspath(path).endswith("private"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(InputError, match=r"private: cannot read this folder: Permission denied"):
        list(read_corpus([tmp_path / "docs"]))


# --- what a folder of real documentation holds besides documents ---------------------------------

def test_json_files_in_a_folder_are_skipped_and_counted_but_a_json_file_named_is_read(tmp_path):
    """package.json or a theme's _static/*.json used to stop the encode at line 1 ("missing or invalid
    id"): in a folder only .jsonl is JSONL; a .json file named on its own is still read as JSONL."""
    from sparc_es.corpus.sources import ReadStats

    docs = tmp_path / "docs"
    (docs / "_static").mkdir(parents=True)
    write(docs / "guide.md", "# Guide\n\nRead the guide first.\n")
    write(docs / "package.json", '{\n  "name": "site"\n}\n')
    write(docs / "_static" / "search.json", "[1, 2]\n")
    stats = ReadStats()
    assert [s.text for s in read_corpus([docs], stats)] == ["Read the guide first."]
    assert stats.skipped_files == {".json": 2}
    assert stats.skipped_notice().startswith("skipped 2 files: 2 .json (only .jsonl, ")
    named = write(tmp_path / "records.json", json.dumps({"id": "r1", "text": "A record."}) + "\n")
    assert [s.id for s in read_corpus([named])] == ["r1"]


def test_folders_sparc_es_wrote_inside_a_corpus_are_skipped_and_counted(tmp_path):
    """An earlier encode or index inside the corpus folder (proj/work/encoded) used to be read as
    corpus and stop the encode at its vectors file; the corpus folder itself is refused with a reason."""
    from sparc_es.corpus.sources import ReadStats
    from sparc_es.layout import ownership

    proj = tmp_path / "proj"
    proj.mkdir()
    write(proj / "notes.md", "A note to read.\n")
    for name in ("work/encoded", "work/index"):
        folder = ownership.claim(proj / name, "encode")
        (folder / "vectors").mkdir()
        write(folder / "vectors" / "vectors.jsonl", '{"id": "notes.md#1", "contents": "x", "vector": {}}\n')
        write(folder / "meta.json", "{}\n")
        write(folder / "notes.txt", "Never read.\n")
    stats = ReadStats()
    assert [s.text for s in read_corpus([proj], stats)] == ["A note to read."]
    assert stats.own_folders == ["work/encoded", "work/index"]
    assert "skipped 2 folders sparc-es wrote (an earlier encode or index is not corpus): work/encoded, work/index" \
        in stats.skipped_notice()
    assert ownership.MARKER == ".sparc-es"  # the name the reader knows them by (corpus comes before layout)
    with pytest.raises(InputError, match=r"encoded: a folder sparc-es wrote .* not a corpus"):
        list(read_corpus([proj / "work" / "encoded"]))


def _files(folder, text="One page of the docs.\n", **files):
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in files.items():
        path = folder / name.replace("__", "/").replace("_DOT_", ".")
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path, text if body is None else body)


def test_a_site_built_inside_a_docs_project_is_left_out_and_read_when_given(tmp_path):
    """Sphinx's _build/html beside the sources is the same pages again (the same answer two or three
    times, and its _sources copies read as plain text); given on its own it is read, without the
    pages Sphinx makes of its own."""
    from sparc_es.corpus.sources import ReadStats

    docs = tmp_path / "docs"
    _files(docs, conf_DOT_py="project = 'x'\n", index_DOT_rst=None, requirements_DOT_txt="sphinx==7.2.6\n",
           _templates__layout_DOT_html="{% extends '!layout.html' %}\n")
    html = docs / "_build" / "html"
    _files(html, _DOT_buildinfo="config: 1\n", index_DOT_html="<p>One page of the docs.</p>",
           genindex_DOT_html="<p>A | B | C</p>", search_DOT_html="<p>Please activate JavaScript.</p>",
           _sources__index_DOT_rst_DOT_txt="One page of the docs.\n",
           _modules__pkg__core_DOT_html="<pre>def f(): pass</pre>")
    write(html / "py-modindex.html", "<p>pkg</p>")
    stats = ReadStats()
    assert [(s.doc, s.text) for s in read_corpus([docs], stats)] == [("index.rst", "One page of the docs.")]
    assert stats.skipped_notice() == (
        "skipped 1 file: 1 .py (only .jsonl, .txt, .md/.markdown, .rst/.rest or .html/.htm files are read); "
        "left out what is no page of the docs: _templates/ (Sphinx's page templates), requirements.txt (pip's "
        "requirements for building the docs), _build/html/ (a Sphinx site built from the sources read beside it); "
        "a built site given as --corpus on its own is read as HTML")
    assert [(s.doc, s.text) for s in read_corpus([html], stats)] == [("index.html", "One page of the docs.")]
    assert stats.generated == ["_modules/", "_sources/", "genindex.html", "py-modindex.html", "search.html"]
    # built sites where no project's configuration is (downloaded docs) are read, each without its own pages
    sites = tmp_path / "sites"
    for name in ("a", "b"):
        _files(sites / name, _DOT_buildinfo="", index_DOT_html=f"<p>Page {name} of the docs.</p>",
               genindex_DOT_html="<p>A | B</p>")
    assert [s.doc for s in read_corpus([sites], stats)] == ["a/index.html", "b/index.html"]
    with pytest.raises(InputError, match=r"no .* files in this folder \(.*left out .*_build/html/ \(a Sphinx "
                                         r"site.*\): a built site given"):
        list(read_corpus([_emptied(docs)]))


def _emptied(docs):
    (docs / "index.rst").unlink()
    return docs


def test_sphinxs_separate_source_and_build_folders_are_read_once(tmp_path):
    """sphinx-quickstart's other layout: docs/source/conf.py and docs/build/html (beside, not under,
    the configuration's folder) was read twice."""
    from sparc_es.corpus.sources import ReadStats

    docs = tmp_path / "docs"
    _files(docs / "source", conf_DOT_py="project = 'x'\n", index_DOT_rst=None)
    _files(docs / "build" / "html", _DOT_buildinfo="", index_DOT_html="<p>One page of the docs.</p>")
    stats = ReadStats()
    assert [s.doc for s in read_corpus([docs], stats)] == ["source/index.rst"]
    assert stats.generated == ["build/html/ (a Sphinx site built from the sources read beside it)"]


def test_an_mkdocs_site_beside_its_sources_is_left_out(tmp_path):
    from sparc_es.corpus.sources import ReadStats

    _files(tmp_path, mkdocs_DOT_yml="site_name: x\n", docs__index_DOT_md=None)
    site = tmp_path / "site"
    _files(site, sitemap_DOT_xml_DOT_gz="", index_DOT_html="<p>One page of the docs.</p>",
           **{"404_DOT_html": "<p>404 - Not found</p>"})
    stats = ReadStats()
    assert [s.doc for s in read_corpus([tmp_path], stats)] == ["docs/index.md"]
    assert stats.generated == ["site/ (a MkDocs site built from the sources read beside it)"]
    assert [s.doc for s in read_corpus([site], stats)] == ["index.html"] and stats.generated == ["404.html"]
    _files(site / "search", index_DOT_html="<p>How to search these notes well.</p>")  # the user's search.md, built
    assert [s.doc for s in read_corpus([site], stats)] == ["index.html", "search/index.html"]
    # plugins' copies of the sources (mkdocs-llmstxt) are the pages again, as Markdown and text
    _files(site, llms_DOT_txt=None, api__index_DOT_md=None,
           **{"llms-full_DOT_txt": "# Docs\n\nOne page of the docs.\n"})
    assert [s.doc for s in read_corpus([site], stats)] == ["index.html", "search/index.html"]
    assert stats.generated == ["404.html", "llms-full.txt (a MkDocs site's pages are its HTML)",
                               "llms.txt (a MkDocs site's pages are its HTML)",
                               "api/index.md (a MkDocs site's pages are its HTML)"]


def test_hidden_files_and_folders_are_counted_in_the_skip_line(tmp_path):
    from sparc_es.corpus.sources import ReadStats

    docs = tmp_path / "docs"
    (docs / ".hidden").mkdir(parents=True)
    write(docs / ".hidden" / "h.md", "Not read.\n")
    write(docs / ".dot.md", "Not read either.\n")
    write(docs / "good.md", "Read this.\n")
    stats = ReadStats()
    assert [s.text for s in read_corpus([docs], stats)] == ["Read this."]
    assert stats.skipped_notice() == "left out 2 hidden files and folders (names that start with '.')"
    write(docs / "x.png", "")
    (docs / ".dot.md").unlink()
    assert list(read_corpus([docs], stats)) and stats.skipped_notice() == (
        "skipped 1 file: 1 .png (only .jsonl, .txt, .md/.markdown, .rst/.rest or .html/.htm files are read); "
        "left out 1 hidden file or folder (names that start with '.')")


def test_files_that_give_no_sentences_are_counted_and_named(tmp_path):
    from sparc_es.corpus.sources import ReadStats

    docs = tmp_path / "docs"
    docs.mkdir()
    write(docs / "empty.md", "")
    write(docs / "codeonly.md", "# Install\n\n```\npip install x\n```\n")
    write(docs / "navonly.html", "<nav><a href='/'>Home</a></nav><script>var x = 1;</script>")
    write(docs / "good.txt", "A real sentence.\n")
    stats = ReadStats()
    assert [s.text for s in read_corpus([docs], stats)] == ["A real sentence."]
    assert stats.empty_files == 3
    assert stats.empty_notice() == (f"3 files gave no sentences (empty, or only headings, code or navigation): "
                                    f"{docs / 'codeonly.md'}, {docs / 'empty.md'}, {docs / 'navonly.html'}")
    list(read_corpus([docs], stats))
    assert stats.empty_files == 3  # read again, not counted twice


def test_the_same_document_path_in_two_folders_is_refused_naming_both(tmp_path):
    """a/setup.md and b/setup.md given as folders a and b both have the id setup.md: their sentences
    used to collide silently (hits with no line, no heading path)."""
    for folder, text in (("a", "Install it with pip."), ("b", "Configure it in a file.")):
        (tmp_path / "dup" / folder).mkdir(parents=True)
        write(tmp_path / "dup" / folder / "setup.md", text + "\n")
    a, b = tmp_path / "dup" / "a", tmp_path / "dup" / "b"
    with pytest.raises(InputError) as e:
        list(read_corpus([a, b]))
    assert str(e.value) == (f"{b / 'setup.md'}: has the same document id 'setup.md' as {a / 'setup.md'} (ids are "
                            "paths inside each folder given), so their sentence ids would collide: pass the folder "
                            f"that holds both ({tmp_path / 'dup'}) instead, or rename one")
    assert len(list(read_corpus([tmp_path / "dup"]))) == 2
    with pytest.raises(InputError, match=r"a/setup.md: is read twice \(also as .*a/setup.md, from .*dup\)"):
        list(read_corpus([tmp_path / "dup", a]))


class _Records:
    """An application's own corpus source, as a developer writes one."""

    def __init__(self, sentences, once: bool = False):
        self.sentences, self.generator = sentences, (iter(sentences) if once else None)

    def read(self, stats=None):
        return self.generator if self.generator is not None else iter(self.sentences)

    def describe(self):
        return ["my-app"]


@pytest.mark.parametrize("source, message", [
    (_Records([], once=False), "empty corpus: read() gave no sentences"),
    (_Records(["not a sentence"]), "read() gave a str, not a sparc_es.corpus.sources.Sentence"),
    (_Records([("s", "x")]), "read() gave a tuple"),
    ("EMPTY_TEXT", "empty sentence: the text of id 'x' has no characters to encode"),
    ("BAD_ID", "sentence id 'a b' contains whitespace"),
    ("TWICE", "duplicate sentence id 'a'"),
    ("ONCE", "read() gave 2 sentences, then 0: each call within one encode must give every sentence again"),
])
def test_an_applications_own_source_gets_the_checks_files_get(tmp_path, tiny_model, source, message):
    """A Source whose read() hands out one generator gave a finished encode of 0 sentences; an empty
    source, an empty text, an id with a space and a duplicate id were encoded (or failed after
    encoding, leaving no manifest)."""
    from sparc_es.corpus.sources import Sentence
    from sparc_es.encode.run import encode_corpus

    made = {"EMPTY_TEXT": _Records([Sentence("x", " ")]), "BAD_ID": _Records([Sentence("a b", "Text.")]),
            "TWICE": _Records([Sentence("a", "One."), Sentence("a", "Two.")]),
            "ONCE": _Records([Sentence("a", "One."), Sentence("b", "Two.")], once=True)}
    with pytest.raises(InputError, match=re.escape(message)):
        encode_corpus(made.get(source, source), tmp_path / "enc", tiny_model, progress=False)


def test_records_given_as_a_corpus_are_refused_naming_a_source(tmp_path, tiny_model):
    from sparc_es.corpus.sources import Sentence
    from sparc_es.encode.run import encode_corpus

    with pytest.raises(TypeError, match="give records through a Source"):
        encode_corpus([Sentence("a", "One.")], tmp_path / "enc", tiny_model, progress=False)
    manifest = encode_corpus(_Records([Sentence("a", "One."), Sentence("b", "Two.")]), tmp_path / "enc",
                             tiny_model, progress=False)
    assert manifest.sentences == 2 and list(manifest.corpus) == ["my-app"]
