"""Issue 28: bad input is refused where it is read, with a one-line error that names the file
and line; input that is merely large is read in time linear in its size."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from sparc_es.cli import main
from sparc_es.corpus.sources import (
    ID_MAX_BYTES,
    MAX_CONTEXT_CHARS,
    MAX_SENTENCE_CHARS,
    ReadStats,
    read_corpus,
    read_document,
    sentence_key,
)
from sparc_es.errors import InputError, SparcError
from sparc_es.evaluation.trec import read_qrels, read_run, read_topics
from sparc_es.layout.records import MAX_FACTOR, MAX_IMPACT_SUM, check_factor, quantize


def _cli(capsys, *argv) -> tuple[int, str]:
    rc = main([str(a) for a in argv])
    return rc, capsys.readouterr().err


def _one_line_error(capsys, *argv) -> str:
    rc, err = _cli(capsys, *argv)
    assert rc == 1 and err.count("\n") == 1 and err.startswith("sparc-es: error: "), err
    return err


# --- sentence and document ids ------------------------------------------------------------------

@pytest.mark.parametrize("sid, expected", [
    ("a\x01b", "contains a control character ('\\x01')"),
    ("a\x7fb", "contains a control character"),
    ("x" * (ID_MAX_BYTES + 1), f"is {ID_MAX_BYTES + 1} bytes long"),
    ("é" * 300, "is 600 bytes long"),  # 300 characters, but Elasticsearch counts UTF-8 bytes
], ids=["C0", "DEL", "513 bytes", "600 bytes in 300 characters"])
def test_a_jsonl_id_that_an_engine_or_a_run_file_cannot_hold_is_refused_at_its_line(tmp_path, sid, expected):
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in ({"id": "ok", "text": "Fine."},
                                                                   {"id": sid, "text": "Bad id."})))
    with pytest.raises(InputError, match="c.jsonl:2: ") as e:
        list(read_corpus([path]))
    assert expected in str(e.value) and "\n" not in str(e.value) and len(str(e.value)) < 300


def test_ids_up_to_the_limit_and_of_any_other_character_are_read(tmp_path):
    ids = ["x" * ID_MAX_BYTES, "é" * (ID_MAX_BYTES // 2), "q/1:2#3", "日本語", "a_b-c.d"]
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": "Fine."}) + "\n" for i in ids))
    assert [s.id for s in read_corpus([path])] == ids


def test_a_lone_surrogate_escape_is_refused_at_its_line_not_when_stored(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "text": "Fine."}\n{"id": "b\\ud800", "text": "x"}\n')
    with pytest.raises(InputError, match=r"c.jsonl:2: .*lone surrogate"):
        list(read_corpus([path]))


def test_a_beir_id_too_long_for_its_sentence_ids_is_refused_at_its_line(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"_id": "d" * 504, "text": "One sentence."}) + "\n")  # + "#" and an 8-digit key
    with pytest.raises(InputError, match=r"corpus.jsonl:1: \"_id\" 'd.*too long: .* 513 bytes"):
        list(read_corpus([path]))


def test_a_path_with_control_characters_gives_valid_ids_and_keeps_the_path(tmp_path):
    # Whitespace and control characters in a path become "_" in sentence ids (as spaces always
    # did): the ids stay readable and stable, and "doc" keeps the real path.
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "tab\there.md").write_text("One sentence here.\n")
    (folder / "bell\x07.md").write_text("Another one.\n")
    (folder / "my notes.md").write_text("A third one.\n")
    got = {s.id: s.doc for s in read_corpus([folder])}
    key = {t: sentence_key(t) for t in ("One sentence here.", "Another one.", "A third one.")}
    assert got == {f"bell_.md#{key['Another one.']}": "bell\x07.md",
                   f"my_notes.md#{key['A third one.']}": "my notes.md",
                   f"tab_here.md#{key['One sentence here.']}": "tab\there.md"}


def test_two_paths_that_give_the_same_ids_are_named_with_the_reason(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "my notes.md").write_text("A sentence.\n")
    (folder / "my_notes.md").write_text("A sentence.\n")  # the same text: the same id
    with pytest.raises(InputError, match=rf"duplicate sentence id 'my_notes.md#{sentence_key('A sentence.')}' "
                                         r".*in a path become '_'.*rename"):
        list(read_corpus([folder]))


def test_a_path_too_long_for_its_sentence_ids_is_refused_naming_the_file(tmp_path):
    deep = tmp_path / "docs" / ("d" * 200) / ("e" * 200)
    deep.mkdir(parents=True)
    (deep / ("f" * 120 + ".md")).write_text("A sentence.\n")
    with pytest.raises(InputError, match=r"f\.md: sentence ids .* longer than the 512 bytes"):
        list(read_corpus([tmp_path / "docs"]))


def test_a_file_name_that_is_not_utf8_is_refused_naming_it(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    try:
        fd = os.open(os.fsencode(folder) + b"/caf\xe9.md", os.O_WRONLY | os.O_CREAT)
    except OSError:
        pytest.skip("this file system takes only UTF-8 names")
    os.write(fd, b"A sentence.\n")
    os.close(fd)
    with pytest.raises(InputError, match=r"caf\\udce9.md: the name is not valid UTF-8"):
        list(read_corpus([folder]))


def test_encode_shows_a_bad_id_as_one_line(tmp_path, tiny_model_dir, capsys):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"id": "x" * 600, "text": "Bad id."}) + "\n")
    err = _one_line_error(capsys, "encode", "--corpus", path, "--output", tmp_path / "enc", "--model",
                          tiny_model_dir, "--quiet")
    assert "c.jsonl:1:" in err and "600 bytes" in err
    assert not (tmp_path / "enc" / "meta.json").exists()


# --- topics, runs, qrels ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("q1\tWhat?\n q1 \tAgain?\n", "topics.tsv:2: duplicate query id 'q1' (first at line 1)"),
    ("q1\tWhat?\n\tNo id?\n", "topics.tsv:2: query id '' is empty"),
    ("q\u00a01\tWhat?\n", "topics.tsv:1: query id 'q\\xa01' contains whitespace"),
    ("q\x0b1\tWhat?\n", "topics.tsv:1: query id 'q\\x0b1' contains whitespace"),
    ("q\x1b1\tWhat?\n", "topics.tsv:1: query id 'q\\x1b1' contains a control character"),
], ids=["same id once trimmed", "empty", "no-break space", "vertical tab", "escape"])
def test_bad_topics_are_refused_at_their_line(tmp_path, text, expected):
    path = tmp_path / "topics.tsv"
    path.write_text(text)
    with pytest.raises(InputError) as e:
        list(read_topics(path))
    assert expected in str(e.value)


def test_topics_ids_are_trimmed(tmp_path):
    path = tmp_path / "topics.tsv"
    path.write_text(" q1 \tWhat?\nq2\tWhy?\n")
    assert list(read_topics(path)) == [("q1", "What?"), ("q2", "Why?")]


@pytest.mark.parametrize("score", ["nan", "NaN", "inf", "-inf", "Infinity"])
def test_a_run_score_that_is_not_finite_is_refused_at_its_line(tmp_path, score):
    path = tmp_path / "run"
    path.write_text(f"q1 Q0 d1 1 2.5 tag\nq1 Q0 d2 2 {score} tag\n")
    with pytest.raises(InputError, match=f"run:2: score '{score}' is not a finite number"):
        read_run(path)


def test_a_document_twice_in_one_query_of_a_run_is_refused_at_its_line(tmp_path, capsys):
    run = tmp_path / "run"
    run.write_text("q1 Q0 d1 1 3.0 tag\nq2 Q0 d1 1 3.0 tag\nq1 Q0 d2 2 2.0 tag\nq1 Q0 d1 3 1.0 tag\n")
    with pytest.raises(InputError, match="run:4: document 'd1' is listed twice for query 'q1'"):
        read_run(run)
    qrels = tmp_path / "qrels"
    qrels.write_text("q1 0 d1 1\n")
    err = _one_line_error(capsys, "eval", "--run", run, "--qrels", qrels)
    assert "run:4: document 'd1' is listed twice" in err


def test_a_run_with_one_document_per_query_reads_as_before(tmp_path):
    path = tmp_path / "run"
    path.write_text("q1 Q0 d1 1 3.0 tag\nq2 Q0 d1 1 -1.5 tag\nq1 Q0 d2 2 2.0 tag\n")
    assert read_run(path) == {"q1": {"d1": 3.0, "d2": 2.0}, "q2": {"d1": -1.5}}


def test_a_relevance_that_is_not_an_integer_is_refused(tmp_path):
    path = tmp_path / "qrels"
    path.write_text("q1 0 d1 nan\n")
    with pytest.raises(InputError, match="qrels:1: relevance 'nan' is not an integer"):
        read_qrels(path)


# --- --max-length past the model's positions ------------------------------------------------------

def test_a_max_length_past_the_models_positions_is_one_line_giving_the_limit(tmp_path, tiny_model_dir, capsys):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"id": "a", "text": "Fine."}) + "\n")
    err = _one_line_error(capsys, "encode", "--corpus", path, "--output", tmp_path / "enc", "--model",
                          tiny_model_dir, "--max-length", 4096, "--quiet")
    assert "4096" in err and "at most 512" in err


# --- quantisation factors ---------------------------------------------------------------------

@pytest.mark.parametrize("factor", [True, MAX_FACTOR * 2, 1e12])
def test_a_factor_no_engine_can_score_exactly_is_refused(factor):
    with pytest.raises(SparcError, match="factor"):
        check_factor(factor)


def test_factors_up_to_the_bound_are_taken():
    assert check_factor(5) == 5.0 and check_factor(MAX_FACTOR) == MAX_FACTOR and check_factor(1e-3) == 1e-3


def test_a_sentence_whose_impacts_sum_past_exact_float_scores_is_refused():
    # Each impact fits Lucene's int term frequency, but their sum (a score) does not fit a float32 exactly.
    quarter = MAX_IMPACT_SUM // 4
    with pytest.raises(SparcError, match="sum to 16,777,217, more than Lucene can store and score exactly"):
        quantize(["a", "b", "c", "d"], np.array([quarter, quarter, quarter, quarter + 1]), 1.0)
    assert quantize(["a", "b", "c", "d"], np.full(4, quarter / 2), 2.0) == dict.fromkeys("abcd", quarter)
    assert quantize(["a", "b", "c"], np.array([0.04, 1.0, 7.3]), 5.0) == {"b": 5, "c": 36}


# --- linear time on pathological lines --------------------------------------------------------

# A guard against quadratic blow-up, not a speed goal: each kind of 300 KB line below took from
# 16 s to many minutes before (Python's HTMLParser on unterminated markup, in .html files and in
# Markdown's HTML blocks; docutils' inline patterns on long .rst paragraphs), and reads in about
# a second now. The bounds are generous, so that only a blow-up fails them: 5 s of CPU for a tenth
# of the line, and for the whole line 5 s or 20 times what the tenth took (markdown-it alone needs
# a few seconds for 300 KB of "["; linear time is 10 times as long for 10 times the text, quadratic
# time 100 times).
SIZE = 300_000
KINDS = {
    "one character": "a", "a.": "a.", "backticks": "`", "stars": "*", "brackets": "[", "spaces": " ",
    "urls": "http://x.io/a ", "colons": ":", "a-": "a-", "open backquotes": "`a ", "references": "a_ ",
    "e-mails": "a@b.c ", "open <p": "<p ", "attribute": "<a b=", "<?": "<?", "<![": "<![",
}
# The kinds that were quadratic or failed, per suffix, run in the quick tier; the rest are slow.
QUICK = {".html": {"open <p", "attribute", "<?", "<!["}, ".md": {"open <p", "<?"},
         ".rst": {"a-", "open backquotes", "e-mails", "urls"}, ".txt": {"one character"}}
CASES = [pytest.param(suffix, unit, id=f"{suffix}-{name}",
                      marks=() if name in QUICK[suffix] else pytest.mark.slow)
         for suffix in (".md", ".rst", ".txt", ".html") for name, unit in KINDS.items()]


def _read_cpu_seconds(path: Path, wall_limit: float) -> float:
    """CPU seconds to read every sentence of ``path``; past ``wall_limit`` seconds, a failure (so
    that a quadratic reader fails in bounded time)."""
    def stop(*_):
        raise TimeoutError(f"reading {path.name} ({path.stat().st_size:,} bytes) took more than {wall_limit:.0f} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, wall_limit)
    start = time.process_time()
    try:
        list(read_document(path))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return time.process_time() - start


@pytest.mark.parametrize("suffix, unit", CASES)
def test_a_300_kb_pathological_line_reads_in_linear_time(tmp_path, suffix, unit):
    def line_file(size: int) -> Path:
        path = tmp_path / f"{size}{suffix}"
        path.write_text((unit * (size // len(unit) + 1))[:size] + "\n")
        return path

    tenth = _read_cpu_seconds(line_file(SIZE // 10), 30)
    assert tenth < 5.0, f"{tenth:.1f} s of CPU for 30 KB"
    bound = max(5.0, 20 * tenth)
    seconds = _read_cpu_seconds(line_file(SIZE), 10 + 2 * bound)
    assert seconds < bound, f"{seconds:.1f} s of CPU for 300 KB, {tenth:.2f} s for 30 KB"


def test_a_long_rst_line_is_read_not_dropped(tmp_path):
    # docutils drops a whole document with a line past its line-length limit, without a word.
    path = tmp_path / "long.rst"
    path.write_text("Title\n=====\n\nFirst paragraph.\n\n" + "word " * 40_000 + "\n")
    got = list(read_document(path))
    assert got[0].text == "First paragraph." and all(s.text.startswith("word word") for s in got[1:])
    assert sum(s.text.count("word") for s in got[1:]) == 40_000  # in pieces, every word kept


def test_many_urls_in_one_rst_paragraph_are_read(tmp_path):
    # docutils recursed once per standalone URI or address: 2,000 overflowed the stack.
    path = tmp_path / "links.rst"
    path.write_text("See " + " ".join(f"a{i}@b.c" for i in range(2000)) + ".\n")
    got = [s.text for s in read_document(path)]  # one sentence of 18 KB: read in pieces
    assert got[0].startswith("See a0@b.c a1@b.c") and got[-1].endswith("a1999@b.c.")
    assert " ".join(got).split()[1:] == [f"a{i}@b.c" for i in range(1999)] + ["a1999@b.c."]


def test_rst_inline_markup_is_still_resolved_in_ordinary_paragraphs(tmp_path):
    path = tmp_path / "doc.rst"
    path.write_text("Use ``pip install`` and *read* `the docs <https://example.org/docs>`_, see a@b.c.\n")
    (sentence,) = read_document(path)
    assert sentence.text == "Use pip install and read the docs, see a@b.c."


@pytest.mark.parametrize("markup", ["<![<![<![", "<![foo[ x", "<![if x]>kept<![endif]>"])
def test_html_marked_sections_never_crash_the_reader(tmp_path, markup):
    path = tmp_path / "page.html"
    path.write_text(f"<p>Before.</p><p>{markup}</p><p>After the markup.</p>")
    texts = [s.text for s in read_document(path)]
    assert texts[0] == "Before." and texts[-1] == "After the markup."


def test_html_after_the_last_tag_is_text_in_its_place(tmp_path):
    # An unterminated tag at the end of a page is text, as Python's parser always made it.
    path = tmp_path / "page.html"
    text = "<h1>Title</h1>\n<p>One sentence.</p>\n<p>Cut <b>short</b> <a href='x\n  y &amp; z"
    path.write_text(text)
    got = list(read_document(path))
    assert [s.text for s in got] == ["One sentence.", "Cut short <a href='x y & z"]
    assert [text[s.start:s.end] for s in got] == ["One sentence.", "Cut <b>short</b> <a href='x\n  y &amp; z"]


# --- texts that blow up: bounded, every cut reported with its file and line ------------------------

def test_nested_rst_substitutions_are_bounded_and_reported(tmp_path):
    """Five levels of ten references: a 370-byte file expanded to gigabytes (15 minutes, 3.7 GB)."""
    path = tmp_path / "bomb.rst"
    names = "abcdef"
    defs = "".join(f".. |{a}| replace:: {' '.join([f'|{b}|'] * 10)}\n\n" for a, b in zip(names, names[1:]))
    path.write_text(f"Title\n=====\n\nStart |a| end.\n\nA |small| one.\n\n{defs}.. |f| replace:: lol lol lol\n\n"
                    ".. |small| replace:: kept as written\n")
    stats = ReadStats()
    start = time.process_time()
    got = [s.text for s in read_document(path, stats=stats)]
    assert time.process_time() - start < 30
    assert "A kept as written one." in got and max(map(len, got)) < 20_000, [len(t) for t in got]
    assert stats.cut >= 1 and all(e.startswith(f"{path}:") and "substitution |" in e for e in stats.cut_examples)
    assert "left out: its expansion is over 10,000 characters" in stats.cut_examples[0]


def test_a_5_mb_line_is_read_in_pieces_with_bounded_contexts(tmp_path):
    """Split and tokenised whole it took 1.5 GB and 42 s to encode (50 MB: past 10 GB)."""
    path = tmp_path / "one-line.txt"
    path.write_text("Intro paragraph.\n\n" + " ".join(f"word{i % 977}" for i in range(700_000)) + "\n")
    stats = ReadStats()
    got = list(read_document(path, stats=stats))
    assert got[0].text == "Intro paragraph." and len(got) > 3000
    assert max(len(s.text) for s in got) <= MAX_SENTENCE_CHARS
    assert max(len(s.context) for s in got) <= MAX_CONTEXT_CHARS
    assert sum(len(s.text.split()) for s in got[1:]) == 700_000  # nothing lost
    text = path.read_text()
    assert all(text[s.start:s.end] == s.text for s in got[1:50])  # offsets still index the file
    assert got[2].context == got[3].context and got[1].context != got[-1].context  # shared windows
    assert stats.cut == 1 and stats.cut_examples[0].startswith(f"{path}:3: a sentence of ")


def test_encode_says_what_was_cut(tmp_path, tiny_model_dir, capsys):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "ids.txt").write_text(" ".join(f"id{i}" for i in range(1_000)) + "\n")
    code, err = _cli(capsys, "encode", "--corpus", str(tmp_path / "docs"), "--output", str(tmp_path / "enc"),
                     "--model", str(tiny_model_dir), "--quiet")
    assert code == 0, err  # a corpus with no alphabetic word at all (its mean length in words is 0)
    assert "1 text of the corpus was cut, read in pieces or left out: " in err and "ids.txt:1: a sentence of" in err


def test_markdown_nested_deep_is_read_and_deeper_is_reported(tmp_path):
    """markdown-it stops at 20 levels (ten list levels) and leaves the rest out, silently."""
    path = tmp_path / "deep.md"
    path.write_text("".join("  " * i + f"- item number {i}\n" for i in range(30)) + "\n" + ">" * 30 + " deep quote\n")
    stats = ReadStats()
    got = [s.text for s in read_document(path, stats=stats)]
    assert "item number 29" in got and "deep quote" in got and stats.cut == 0
    path.write_text(">" * 150 + " too deep\n\nAfter it.\n")
    got = [s.text for s in read_document(path, stats=stats)]
    assert "too deep" not in got and "After it." in got
    assert stats.cut == 1 and "nested deeper than 100 levels" in stats.cut_examples[0]
    assert stats.cut_examples[0].startswith(f"{path}:1:")


def test_an_unterminated_html_comment_hides_its_text(tmp_path):
    """HTML5: a comment left open runs to the end of the page; its text is not the page's."""
    path = tmp_path / "page.html"
    path.write_text("<p>Visible words.</p>\n<!-- a secret note <b>with tags</b> and the password hunter2\n")
    assert [s.text for s in read_document(path)] == ["Visible words."]
    path.write_text("<p>Visible words.</p>\n<!-- closed --><p>After.</p><!-- open, no tag after it")
    assert [s.text for s in read_document(path)] == ["Visible words.", "After."]


def test_hits_per_question_are_bounded(capsys):
    """2^31 - 1 hits reached Lucene as a Java exception."""
    with pytest.raises(SystemExit):
        main(["run", "--index", "x", "--topics", "t", "--output", "o", "-k", "2147483647"])
    assert "argument -k: must be at most 10,000" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["search", "--index", "x", "--documents", "--depth", "1e3", "q"])
    assert "argument --depth: '1e3' is not a whole number" in capsys.readouterr().err


def test_a_question_that_is_not_text_is_one_line(capsys, monkeypatch, tmp_path):
    """A non-UTF-8 byte in an argument (Python keeps it as a surrogate escape) reached the tokenizer
    as a TypeError; from standard input, it stopped the batch."""

    for argv in (["search", "--index", str(tmp_path), "caf\udce9"], ["explain", "caf\udce9 au lait"],
                 ["query-dsl", "--tokenizer", str(tmp_path), "caf\udce9"]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert "is not valid text: byte 0xe9 is not UTF-8" in err and err.count("\n") == 1, err


# --- second probe: outputs that would overwrite inputs, unread blocks said, and bad options -----------

def test_an_output_is_never_one_of_its_inputs(tmp_path, tiny_model_dir, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nThe port is 8081.\n")
    (tmp_path / "q.tsv").write_text("q1\twhich port?\n")
    (tmp_path / "a.tsv").write_text("q1\t8081\n")
    cases = [
        (["encode", "--corpus", str(docs), "--output", str(docs / "enc"), "--model", str(tiny_model_dir)],
         "the output folder is inside the input"),
        (["evalset", "--docs", str(docs), "--questions", str(tmp_path / "q.tsv"), "--answers", str(tmp_path / "a.tsv"),
          "--output", str(docs)], "--output is the input"),
        (["run", "--index", str(tmp_path / "idx"), "--topics", str(tmp_path / "q.tsv"), "--output",
          str(tmp_path / "q.tsv")], "--output is the input"),
        (["run", "--index", str(tmp_path / "idx"), "--topics", str(tmp_path / "q.tsv"), "--output", str(docs)],
         "--output is a folder"),
        (["table", "--systems", "bm25", "--domains", str(docs), "--json", str(docs / "qrels.txt")],
         "--json is inside the input"),
    ]
    for argv, says in cases:
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1, err
    assert sorted(p.name for p in docs.iterdir()) == ["a.md"]
    assert (tmp_path / "q.tsv").read_text() == "q1\twhich port?\n"
    from sparc_es.engines.lucene import build_index
    from sparc_es.errors import StoreError

    with pytest.raises(StoreError, match="the index folder is the input"):
        build_index(tmp_path / "enc", tmp_path / "enc", overwrite=True)


def test_qrels_that_judge_nothing_relevant_or_twice_are_refused(tmp_path, capsys):
    (tmp_path / "zero.txt").write_text("q1 0 d1 0\nq2 0 d2 -1\n")
    with pytest.raises(InputError, match="no relevant judgement"):
        read_qrels(tmp_path / "zero.txt")
    (tmp_path / "twice.txt").write_text("q1 0 d1 1\nq1 0 d1 0\n")
    with pytest.raises(InputError, match=r"twice.txt:2: document 'd1' is judged twice for query 'q1'"):
        read_qrels(tmp_path / "twice.txt")
    (tmp_path / "mixed.txt").write_text("q1 0 d1 1\nq2 0 d2 0\n")
    (tmp_path / "run.trec").write_text("q1 Q0 d1 1 1.0 t\n")
    assert main(["eval", "--run", str(tmp_path / "run.trec"), "--qrels", str(tmp_path / "mixed.txt")]) == 0
    assert "1 of 2 queries of" in capsys.readouterr().err


@pytest.mark.parametrize("system, says", [
    ("sparc:hybrid=sum,hybrid_weight=7", "must be a number from 0 to 1"),
    ("sparc:hybrid_weight=nan", "must be a number from 0 to 1"),
    ("sparc:idf=2", "must be 0 or 1"),
    ("sparc:max_over=foo", "max_over in system"),
    ("sparc:word_weight=1e308", "must be a number from 0 to 100"),
    ("", "--systems and --domains each name at least one"),
])
def test_table_system_options_are_checked_as_the_flags_are(system, says, capsys, tmp_path):
    assert main(["table", "--systems", system, "--domains", "val", "--workdir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err


def test_an_answer_pattern_for_a_file_the_docs_do_not_have_is_named(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("Paris is the capital.\n")
    (tmp_path / "q.tsv").write_text("q1\twhat is the capital?\n")
    (tmp_path / "a.tsv").write_text("q1\tParis\tnosuch.html\n")
    assert main(["evalset", "--docs", str(docs), "--questions", str(tmp_path / "q.tsv"), "--answers",
                 str(tmp_path / "a.tsv"), "--output", str(tmp_path / "out")]) == 1
    assert "a.tsv:1: 'nosuch.html' is not a file of" in capsys.readouterr().err


def test_corpus_options_of_es_are_refused_with_files(capsys, tmp_path):
    assert main(["encode", "--corpus", str(tmp_path), "--output", str(tmp_path / "o"), "--format", "rst"]) == 1
    assert "--format applies to --from-es only" in capsys.readouterr().err


def test_blocks_docutils_cannot_read_and_constructs_left_open_are_reported(tmp_path):
    (tmp_path / "t.rst").write_text('Title\n=====\n\nBefore.\n\n.. csv-table:: T\n\n   "Armadillo", "armoured\n\n'
                                    "After.\n\n.. |s| unicode:: U+D800\n\nA |s| b.\n")
    (tmp_path / "f.md").write_text("# T\n\nVisible.\n\n```python\nprint(1)\n\nMore prose hidden.\n")
    (tmp_path / "d.html").write_text("<p>Start.</p>" + "<div><p>" * 20000 + "Deep text.")
    stats = ReadStats()
    got = {f.name: [s.text for s in read_document(f, stats=stats)] for f in sorted(tmp_path.iterdir())}
    assert got == {"d.html": ["Start.", "Deep text."], "f.md": ["Visible."],
                   "t.rst": ["Before.", "After.", "A \ufffd b."]}
    text = "\n".join(stats.cut_examples)
    assert "d.html:1: elements nested deeper than 512 levels" in text
    assert "f.md:5: a code fence (```) left open" in text
    assert 't.rst:6: reStructuredText docutils could not read, left out: Error with CSV data in "csv-table"' in text
    assert "a surrogate code point" in text and stats.cut == 4


def test_pipes_and_devices_are_never_read_and_said_as_such(tmp_path):
    import os

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("A sentence.\n")
    os.mkfifo(folder / "fifo.md")  # reading it would block for ever
    stats = ReadStats()
    assert [s.text for s in read_corpus([folder], stats)] == ["A sentence."]
    assert stats.skipped_files == {".md that is not a regular file": 1}
    with pytest.raises(InputError, match="not a regular file or a folder"):
        list(read_corpus([folder / "fifo.md"]))
    with pytest.raises(InputError, match="/dev/null: not a regular file"):
        read_qrels("/dev/null")


def test_a_huge_rst_file_is_read_as_plain_text_and_said(tmp_path):
    """docutils holds about 250 times a nested document's size (a 13 MB file reached 4 GB)."""
    from sparc_es.corpus.readers import MAX_RST_CHARS

    path = tmp_path / "big.rst"
    para = "* item with some words in it\n\n  * nested item with words\n\n"
    path.write_text("Title\n=====\n\n" + para * (MAX_RST_CHARS // len(para) + 1))
    stats = ReadStats()
    got = list(read_document(path, stats=stats))
    assert got and stats.cut == 1 and "read as plain text" in stats.cut_examples[0]


# --- a walkthrough on real documentation folders: outputs that are files, and what encode says ----------

def test_an_output_folder_that_is_a_file_or_lies_under_one_is_said_so(tmp_path, tiny_model_dir, capsys):
    """``encode --output afile`` said "afile: Not a directory; the work done so far is kept ..." (no work
    was done), ``--output afile/sub`` "afile: File exists", and ``index --index afile`` "already exists;
    pass --overwrite", which --overwrite then refused."""
    (tmp_path / "c.md").write_text("A sentence to encode.\n")
    afile = tmp_path / "afile"
    afile.write_text("a user's file")
    model = ["--model", tiny_model_dir, "--quiet"]
    err = _one_line_error(capsys, "encode", "--corpus", tmp_path / "c.md", "--output", afile, *model)
    assert f"error: {afile}: is a file, not a folder: --output names a folder to write" in err
    err = _one_line_error(capsys, "encode", "--corpus", tmp_path / "c.md", "--output", afile / "sub", *model)
    assert f"error: {afile / 'sub'}: cannot be a folder: {afile} is a file, not a folder; choose another path" in err
    for overwrite in ([], ["--overwrite"]):
        err = _one_line_error(capsys, "index", "--input", tmp_path / "enc", "--index", afile, *overwrite)
        assert f"error: {afile}: is a file, not a folder: --index names a folder to write" in err
    assert afile.read_text() == "a user's file"


def test_encode_names_the_files_that_gave_no_sentences_and_counts_in_the_singular(tmp_path, tiny_model_dir,
                                                                                   capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "empty.md").write_text("")
    (docs / "codeonly.md").write_text("# Install\n\n```\npip install x\n```\n")
    (docs / "good.md").write_text("The one sentence.\n")
    rc = main([str(a) for a in ["encode", "--corpus", docs, "--output", tmp_path / "enc", "--model",
                                tiny_model_dir, "--quiet"]])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert err == (f"sparc-es: warning: 2 files gave no sentences (empty, or only headings, code or navigation): "
                   f"{docs / 'codeonly.md'}, {docs / 'empty.md'}\n")
    assert out.startswith(f"encoded 1 sentence into {tmp_path / 'enc'} ")
    meta = json.loads((tmp_path / "enc" / "meta.json").read_text())
    assert meta["empty_files"] == 2

    # a Sphinx page of autodoc directives alone: its text comes from the Python code, at build time
    (docs / "api.rst").write_text("API\n===\n\n.. automodule:: werkzeug.middleware.lint\n   :members:\n")
    rc = main([str(a) for a in ["encode", "--corpus", docs, "--output", tmp_path / "enc2", "--model",
                                tiny_model_dir, "--quiet"]])
    err = capsys.readouterr().err
    assert rc == 0 and "3 files gave no sentences" in err and "an .rst page of autodoc directives alone holds no " \
        "text before Sphinx builds it: encode the built HTML for its API" in err and str(docs / "api.rst") in err, err


def test_encode_skips_json_files_and_earlier_outputs_inside_the_corpus(tmp_path, tiny_model_dir, cli):
    """A project folder with package.json and an earlier encode and index in proj/work used to stop at
    "package.json:1: missing or invalid id" or at the earlier encode's own files."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "notes.md").write_text("# Notes\n\nThe port is 8081.\n")
    (proj / "package.json").write_text('{\n  "name": "proj"\n}\n')
    model = ["--model", tiny_model_dir, "--quiet"]
    assert cli("encode", "--corpus", proj, "--output", tmp_path / "first", *model)[0] == 0
    (proj / "work").mkdir()
    (tmp_path / "first").rename(proj / "work" / "encoded")
    rc, out, err = cli("encode", "--corpus", proj, "--output", tmp_path / "enc", *model)
    assert rc == 0, err
    assert err == ("sparc-es: warning: skipped 1 file: 1 .json (only .jsonl, .txt, .md/.markdown, .rst/.rest or "
                   ".html/.htm files are read); skipped 1 folder sparc-es wrote (an earlier encode or index is not "
                   "corpus): work/encoded\n")
    assert out.startswith("encoded 1 sentence into")


def test_library_errors_name_keywords_and_the_cli_names_flags(monkeypatch):
    """Python callers were told to "pass --es-url", use "--device", "--keep-floats"...: the README
    promises errors in the caller's terms (overwrite=True from Python, --overwrite from the CLI)."""
    from sparc_es.engines.elastic import Connection
    from sparc_es.errors import SparcError, command_line
    from sparc_es.model.neural import resolve_device

    monkeypatch.delenv("SPARC_ES_URL", raising=False)
    for call, python, cli in ((lambda: Connection.from_env(), "pass url=...", "pass --es-url"),
                              (lambda: resolve_device("tpu"), "device 'tpu'", "--device 'tpu'")):
        with pytest.raises(SparcError) as raised:
            call()
        assert python in str(raised.value) and "--" not in str(raised.value), raised.value
        with command_line(), pytest.raises(SparcError) as raised:
            call()
        assert cli in str(raised.value), raised.value


def _without_root_override() -> list[str]:
    """A command prefix under which permissions hold: as root (CI), setpriv drops the capabilities
    that let root read any file; as anyone else, nothing is needed."""
    import shutil

    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv (util-linux): chmod 000 would not stop root")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]


@pytest.mark.parametrize("unreadable", ["folder", "file"])
def test_an_unreadable_folder_or_file_of_the_corpus_is_named_as_such(tmp_path, tiny_model_dir, unreadable):
    """A locked folder was reported as "locked/.buildinfo: Permission denied" (a file that is not
    there); a locked file as the output's trouble, "the work done so far is kept ... to resume"."""
    import subprocess
    import sys

    docs = tmp_path / "docs"
    (docs / "locked").mkdir(parents=True)
    (docs / "a.md").write_text("Hello there.\n")
    (docs / "locked" / "b.md").write_text("Secret.\n")
    locked = docs / "locked" if unreadable == "folder" else docs / "a.md"
    locked.chmod(0)
    try:
        done = subprocess.run([*_without_root_override(), sys.executable, "-m", "sparc_es", "encode", "--corpus",
                               str(docs), "--output", str(tmp_path / "enc"), "--model", str(tiny_model_dir),
                               "--quiet"], capture_output=True, text=True, timeout=300)
    finally:
        locked.chmod(0o755)
    err = done.stderr
    assert done.returncode == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    if unreadable == "folder":
        assert err == f"sparc-es: error: {locked}: cannot read this folder: Permission denied\n"
    else:
        assert err.startswith(f"sparc-es: error: {locked}: Permission denied: sparc-es cannot read this file of the "
                              "corpus; nothing was encoded yet"), err
