"""The documentation validation set's committed files (docs/validation/docsqa) are well formed.

Whether each pattern matches its document needs the documents (`scripts/docs_qa.py fetch`, then
`check`); what is checked here needs only the files: every question has an answer line and every
answer line a question, qids are the project's and unique, every pattern compiles as the evaluation
compiles it, and a named file is a relative path inside the project's documents.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import pytest

from sparc_es.evaluation.evalsets import read_answer_patterns
from sparc_es.evaluation.trec import read_topics

SET = Path(__file__).resolve().parent.parent / "docs" / "validation" / "docsqa"
PROJECTS = sorted(p.name.removesuffix(".questions.tsv") for p in SET.glob("*.questions.tsv"))


def test_the_six_projects_are_there():
    assert PROJECTS == ["black", "click", "flask", "pip", "pymdown", "werkzeug"]


@pytest.mark.parametrize("project", PROJECTS)
def test_questions_and_answers_pair_up(project):
    questions = list(read_topics(SET / f"{project}.questions.tsv"))
    qids = [qid for qid, _ in questions]
    assert len(qids) == len(set(qids)), "a qid is used twice"
    assert all(re.fullmatch(rf"{project}-\d{{3}}", qid) for qid in qids)
    assert all(text.strip() for _, text in questions)
    answers = read_answer_patterns(SET / f"{project}.answers.tsv")  # every pattern compiled
    assert set(answers) == set(qids), (sorted(set(qids) - set(answers))[:5], sorted(set(answers) - set(qids))[:5])
    for patterns in answers.values():
        for p in patterns:
            if p.where is not None:
                path = PurePosixPath(p.where)
                assert not path.is_absolute() and ".." not in path.parts, p.where
