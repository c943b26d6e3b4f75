"""Property-based tests (hypothesis) of the readers and the token-name escaping: whatever is
written the documented way reads back the same, and whatever is malformed is a located error."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sparc_es.corpus.sources import CONTROL, read_corpus
from sparc_es.engines.elastic import feature_name, token_name
from sparc_es.errors import InputError
from sparc_es.evaluation.trec import read_qrels, read_run, read_topics, write_qrels, write_topics

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
ids = st.text(st.characters(blacklist_categories=("Z", "C")), min_size=1, max_size=12)
texts = st.text(min_size=1, max_size=60).filter(lambda t: CONTROL.sub("", t).strip())


def _file(content: bytes, name: str) -> Path:
    folder = Path(tempfile.mkdtemp())
    path = folder / name
    path.write_bytes(content)
    return path


@SETTINGS
@given(st.lists(st.tuples(ids, texts, st.text(max_size=40)), min_size=1, max_size=8, unique_by=lambda r: r[0]),
       st.booleans(), st.booleans())
def test_jsonl_records_read_back(records, bom, crlf):
    end = "\r\n" if crlf else "\n"
    body = "".join(json.dumps({"id": i, "text": t, "context": c}) + end for i, t, c in records)
    path = _file((b"\xef\xbb\xbf" if bom else b"") + body.encode("utf-8"), "c.jsonl")
    got = list(read_corpus([path]))
    assert [s.id for s in got] == [i for i, _, _ in records]
    assert [s.text for s in got] == [CONTROL.sub("", t).strip() for _, t, _ in records]
    assert [s.context for s in got] == [CONTROL.sub("", c).strip() for _, _, c in records]


@SETTINGS
@given(st.binary(max_size=200))
def test_any_bytes_are_read_or_refused_with_a_location(content):
    path = _file(content, "c.jsonl")
    try:
        for s in read_corpus([path]):
            assert s.id and s.text.strip() and not CONTROL.search(s.text)
    except InputError as e:
        assert str(e).startswith(str(path))


@SETTINGS
@given(st.lists(st.tuples(ids, st.text(min_size=1, max_size=50).filter(str.strip)), min_size=1, max_size=8,
                unique_by=lambda t: t[0]))
def test_topics_round_trip(topics):
    topics = [(q, text) for q, text in topics if not any(c.isspace() for c in q)]
    path = Path(tempfile.mkdtemp()) / "t.tsv"
    write_topics(path, topics)
    if not topics:
        return
    assert list(read_topics(path)) == [(q, " ".join(text.split())) for q, text in topics]


@SETTINGS
@given(st.dictionaries(st.text("abcxyz019", min_size=1, max_size=6),
                       st.dictionaries(st.text("abcdef-#.", min_size=1, max_size=6), st.integers(0, 3), min_size=1,
                                       max_size=4), min_size=1, max_size=5))
def test_qrels_round_trip(qrels):
    path = Path(tempfile.mkdtemp()) / "q.txt"
    write_qrels(path, qrels.items())
    if any(r > 0 for judged in qrels.values() for r in judged.values()):
        assert read_qrels(path) == qrels
    else:  # nothing relevant: every measure would be 0, refused
        with pytest.raises(InputError, match="no relevant judgement"):
            read_qrels(path)


@SETTINGS
@given(st.lists(st.tuples(st.text("abc", min_size=1, max_size=3), st.text("xyz#.", min_size=1, max_size=4),
                          st.floats(-1e6, 1e6, allow_nan=False)), max_size=10), st.integers(0, 6))
def test_run_lines_read_back_or_name_the_line(rows, broken_at):
    lines = [f"{q} Q0 {d} {r} {s!r} tag" for r, (q, d, s) in enumerate(rows, start=1)]
    seen, twice = set(), None  # the first line listing a document again for its query: trec_eval refuses it
    for line, (q, d, _) in enumerate(rows, start=1):
        if (q, d) in seen and twice is None:
            twice = line
        seen.add((q, d))
    broken = broken_at + 1 if rows and broken_at < len(lines) else None
    if broken is not None:
        lines[broken_at] = lines[broken_at].replace(" tag", "")
    path = _file(("\n".join(lines) + "\n").encode(), "run")
    if broken is not None or twice is not None:
        first = min(x for x in (broken, twice) if x is not None)
        try:
            read_run(path)
            raise AssertionError("a broken line or a document twice in a query was read")
        except InputError as e:
            assert f"run:{first}:" in str(e)
        return
    expected: dict[str, dict[str, float]] = {}
    for q, d, s in rows:
        expected.setdefault(q, {})[d] = s
    assert read_run(path) == expected


@SETTINGS
@given(st.text(max_size=30))
def test_feature_names_are_reversible_and_dot_free(token):
    name = feature_name(token)
    assert "." not in name and token_name(name) == token
