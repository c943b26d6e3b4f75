"""Corpus input: JSONL records, text and Markdown documents, and precise errors for bad input."""

from __future__ import annotations

import json

import pytest

from sparc_es.corpus.sources import read_corpus, sentence_key, split_document
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
    with pytest.raises(InputError, match=r"d.md:4: not valid UTF-8"):
        list(read_corpus([doc]))


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
    with pytest.raises(InputError, match=r"pdfs: no .jsonl, .txt, .md, .rst or .html files in this folder "
                                         r"\(skipped 1 file: 1 .pdf\)"):
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
