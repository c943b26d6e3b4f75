"""Training data for ``sparc-es train``: SQuAD examples mined from the training slice, with BM25
candidates, kept in a cache.

Each question of the SQuAD train slice (its validation articles left out) brings its positive
sentence (the one holding the answer), the other sentences of its passage without the answer,
and the Lucene BM25 top ``bm25_depth`` of the whole pool without the answer; the trainer draws
its hard negatives from those (:func:`sparc_es.training.train.sample_batch`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from sparc_es.corpus.sources import Sentence
from sparc_es.errors import InputError, option
from sparc_es.evaluation.evalsets import TRAIN_FILE, VALIDATION_ARTICLES, data_dir, paragraph_sentences, train_articles
from sparc_es.layout import ownership as folders
from sparc_es.training.train import Example, TrainConfig


def load_examples(root: str | Path | None = None, bm25_depth: int = 100, workdir: str | Path | None = None,
                  limit: int | None = None, validation_articles: int = VALIDATION_ARTICLES) -> list[Example]:
    """Training examples from the SQuAD train slice without its validation articles: sentences
    split like the NewsQA evaluation set (the project's splitter; context = the paragraph)."""
    articles = train_articles(root, validation_articles, "train")
    paragraphs = [p for article in articles for p in article["paragraphs"]]
    sentences: list[Sentence] = []
    by_paragraph: list[list[Sentence]] = []
    for i, p in enumerate(paragraphs):
        ss = paragraph_sentences(p["context"], f"squad-train-{i}")
        by_paragraph.append(ss)
        sentences += ss
    questions = []
    for i, p in enumerate(paragraphs):
        for qa in p["qas"]:
            a = qa["answers"][0]
            start = a["answer_start"]
            positive = next((s for s in by_paragraph[i] if s.start <= start < s.end), None)
            if positive is not None:
                questions.append((i, qa["question"].strip(), a["text"], positive))
    if limit:
        questions = questions[:limit]

    bm25 = _bm25_candidates([q for _, q, _, _ in questions], sentences, bm25_depth, workdir)
    by_id = {s.id: s for s in sentences}
    examples = []
    for (i, question, answer, positive), hits in zip(questions, bm25):
        lowered = answer.lower()
        same = [s for s in by_paragraph[i] if s.id != positive.id and lowered not in s.text.lower()]
        hard = [by_id[h] for h in hits if h != positive.id and lowered not in by_id[h].text.lower()]
        examples.append(Example(question, answer, positive, same, hard))
    return examples


def _bm25_candidates(questions: list[str], sentences: list[Sentence], depth: int,
                     workdir: str | Path | None) -> list[list[str]]:
    import tempfile

    from sparc_es.engines.bm25 import LuceneBM25, build_bm25_index

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        build_bm25_index(sentences, Path(tmp) / "bm25")
        engine = LuceneBM25(Path(tmp) / "bm25")
        results = engine.batch_search([(str(i), q) for i, q in enumerate(questions)], k=depth, threads=2)
    return [[h.id for h in results[str(i)]] for i in range(len(questions))]




def cached_examples(cache: Path, root: str | Path | None, bm25_depth: int, limit: int | None,
                    validation_articles: int = VALIDATION_ARTICLES) -> list[Example]:
    """:func:`load_examples`, kept in ``cache`` (JSON) so runs with the same data share the BM25 pass.

    Each sentence is stored once and examples refer to it by id (a paragraph per BM25 candidate
    made the file a gigabyte).
    """
    flag = option("--examples-cache", "examples_cache")
    folders.check_file_output(cache, flag)  # before minutes of mining, not at the rename after them
    # the slice's content, not its path: a data folder moved or mounted elsewhere keeps its cache
    slice_file = (Path(root) if root else data_dir()) / TRAIN_FILE
    digest = hashlib.sha256(slice_file.read_bytes()).hexdigest()[:16] if slice_file.is_file() else None
    key = {"format": 3, "train_slice": digest, "bm25_depth": bm25_depth, "limit": limit,
           "validation_articles": validation_articles}
    if cache.is_file():
        try:
            stored = json.loads(cache.read_text())
            if stored.get("key") == key:
                by_id = {d["id"]: Sentence(**d) for d in stored["sentences"]}
                return [Example(e["question"], e["answer"], by_id[e["positive"]],
                                [by_id[i] for i in e["same_passage"]], [by_id[i] for i in e["bm25"]])
                        for e in stored["examples"]]
        except (ValueError, AttributeError, KeyError, TypeError) as e:  # not JSON, or not the cache's fields
            reason = str(e) if isinstance(e, json.JSONDecodeError) else f"{type(e).__name__}: {e}"
            raise InputError(cache, f"not an examples cache sparc-es wrote ({reason}); delete it (the examples "
                                    f"are mined again) or give {flag} another file") from None
    examples = load_examples(root, bm25_depth, workdir=cache.parent, limit=limit,
                             validation_articles=validation_articles)
    sentences = {s.id: dataclasses.asdict(s) for e in examples for s in [e.positive, *e.same_passage, *e.bm25]}
    refs = [{"question": e.question, "answer": e.answer, "positive": e.positive.id,
             "same_passage": [s.id for s in e.same_passage], "bm25": [s.id for s in e.bm25]} for e in examples]
    tmp = cache.with_name(cache.name + ".tmp")
    tmp.write_text(json.dumps({"key": key, "sentences": list(sentences.values()), "examples": refs}))
    tmp.replace(cache)
    return examples


def squad_examples(config: TrainConfig, output: str | Path, limit: int | None = None,
                   examples_cache: str | Path | None = None):
    """What ``sparc-es train`` trains on: a callable for :func:`sparc_es.training.train.train` that reads
    the examples from ``examples_cache`` (default ``OUTPUT/examples.json``) or mines them."""
    cache = Path(examples_cache) if examples_cache else Path(output) / "examples.json"
    folders.check_file_output(cache, option("--examples-cache", "examples_cache"))  # before the output is made
    return lambda: cached_examples(cache, config.data, config.bm25_depth, limit, config.validation_articles)
