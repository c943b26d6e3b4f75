"""Public QA data as sparc-es sentence records (MRQA contexts, MultiReQA sentence boundaries).

The data lives outside the repository, in ``../shared/data`` by default; set ``SPARC_ES_DATA``
to point elsewhere.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import regex

from sparc_es.corpus.sources import Sentence
from sparc_es.errors import InputError, StoreError
from sparc_es.evaluation.trec import write_qrels, write_topics
from sparc_es.layout import ownership as folders

DATA_ENV = "SPARC_ES_DATA"


def data_dir() -> Path:
    """``$SPARC_ES_DATA``, else ``../shared/data`` beside the repository."""
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV])
    return Path(__file__).resolve().parents[3] / "shared" / "data"


def read_mrqa(path: str | Path) -> Iterator[dict]:
    """The context records of an MRQA JSON-lines file, gzipped (``.jsonl.gz``) or not (its header
    line skipped)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "not a regular file" if path.exists() else "MRQA file not found")
    for lineno, record in _json_lines(path, "an MRQA record"):
        qas = record.get("qas")
        if not isinstance(record.get("context"), str) or not isinstance(qas, list) or not all(
                isinstance(qa, dict) and {"qid", "question", "detected_answers"} <= qa.keys() for qa in qas):
            raise InputError(path, "expected an MRQA record: context, and qas with qid, question and "
                                   "detected_answers", lineno)
        yield record


GZIP_MAGIC = b"\x1f\x8b"


def _json_lines(path: Path, what: str) -> Iterator[tuple[int, dict]]:
    """The JSON objects of a JSON-lines file, gzipped or not (told by gzip's magic bytes, whatever
    the name ends with), the header line skipped; a broken gzip stream, or text that is not UTF-8
    or not JSON, is a one-line error naming the file (and the line)."""
    if not path.is_file():
        raise InputError(path, "not a regular file" if path.exists() else "file not found")
    lineno, zipped = 0, False
    try:
        with open(path, "rb") as head:
            zipped = head.read(2) == GZIP_MAGIC
        with (gzip.open if zipped else open)(path, "rb") as f:  # bytes, decoded line by line: errors know their line
            for lineno, raw in enumerate(f, start=1):
                line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
                if not line.strip():
                    continue
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    raise InputError(path, f"expected {what} (a JSON object)", lineno)
                if "header" in obj:
                    continue
                yield lineno, obj
    except (gzip.BadGzipFile, EOFError, OSError) as e:
        if not zipped:
            raise
        raise InputError(path, f"not a readable gzip file ({e})", lineno or None) from None
    except UnicodeDecodeError:
        raise InputError(path, "not valid UTF-8", lineno) from None
    except json.JSONDecodeError as e:
        raise InputError(path, f"not JSON: {e.msg} at column {e.colno}", lineno) from None


def multireqa_sentences(mrqa: str | Path, candidates: str | Path, prefix: str) -> Iterator[Sentence]:
    """Sentences of MRQA contexts cut at the MultiReQA boundaries; context = the passage.

    A MultiReQA ``candidate_id`` names the MRQA question ids of its context and ends with the
    sentence number (``SQuAD_<qid>/<qid>/.../_<n>``).
    """
    contexts = list(read_mrqa(mrqa))
    by_qid = {qa["qid"]: i for i, c in enumerate(contexts) for qa in c["qas"]}
    for lineno, cand in _json_lines(Path(candidates), "a MultiReQA candidate"):
        try:
            head, _, number = cand["candidate_id"].rpartition("/_")
            qid = head.split("_", 1)[1].split("/")[0]
            a, b = int(cand["response_start"]), int(cand["response_end"])
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            raise InputError(candidates, "expected candidate_id (SQuAD_<qid>/.../_<n>), response_start and "
                                         "response_end", lineno) from None
        if qid not in by_qid:
            raise InputError(candidates, f"candidate names unknown question id {qid}", lineno)
        ctx = by_qid[qid]
        passage = contexts[ctx]["context"]
        yield Sentence(id=f"{prefix}-{ctx}-{number}", text=passage[a:b].strip(), context=passage,
                       doc=f"{prefix}-{ctx}", start=a, end=b)


def squad_dev_sentences(root: str | Path | None = None) -> Iterator[Sentence]:
    """The 10,642 SQuAD dev sentences of the revised MultiReQA pool, with their paragraphs."""
    root = Path(root) if root else data_dir()
    return multireqa_sentences(root / "mrqa" / "SQuAD.jsonl.gz",
                               root / "multireqa" / "dev" / "SQuAD" / "candidates.json.gz", "squad-dev")


# --- evaluation sets (revised MultiReQA protocol, paper 000 section 6.1) --------------------

@dataclass
class EvalSet:
    """A candidate pool, queries and their judgements, for one domain.

    ``level`` says what the qrels judge: ``sentence`` ids (the MultiReQA protocol), or ``document``
    ids (a BEIR-style collection), in which case a run of sentences is scored per document, each
    document by its best sentence.
    """

    name: str
    sentences: list[Sentence]
    topics: list[tuple[str, str]]  # (qid, question)
    qrels: dict[str, dict[str, int]]  # qid -> judged id -> relevance
    level: str = "sentence"
    notes: list[str] = field(default_factory=list)  # what building it left out, for the user to hear

    def check(self, where: str | Path) -> EvalSet:
        """This set, or a one-line error naming ``where`` when it can measure nothing: no questions,
        or judgements of nothing in the corpus (a run on it would score 0.00 without a word)."""
        if not self.topics:
            raise InputError(where, "no questions: an evaluation set needs at least one judged question")
        ids = {s.id for s in self.sentences} if self.level == "sentence" else {s.doc for s in self.sentences}
        judged = {d for q in self.qrels.values() for d, r in q.items() if r > 0}
        if not judged & ids:
            example = f" (e.g. {min(judged)!r})" if judged else ""
            raise InputError(where, f"the qrels judge no {self.level} of the corpus relevant{example}: qrels and "
                                    "corpus of different sets?")
        return self

    FILES = {"corpus": "corpus.jsonl", "topics": "topics.tsv", "qrels": "qrels.txt", "info": "evalset.json"}

    def write(self, folder: str | Path, overwrite: bool = False) -> dict[str, Path]:
        """Write ``corpus.jsonl`` (the project's input format), ``topics.tsv``, TREC ``qrels.txt`` and
        ``evalset.json`` (name, level, counts) into ``folder``, marked as made by sparc-es. A folder
        already there and not empty is refused unless ``overwrite``, and replaced only if sparc-es
        made it (:func:`check_output`). The set is written beside it and renamed into place, so a
        failed write leaves what was there as it was."""
        folder = Path(folder)
        check_output(folder, overwrite)
        partial = folder.with_name(f".{folder.name}.writing")  # left by a write that was killed
        if partial.exists() or partial.is_symlink():
            folders.remove(partial, "writing an evaluation set")
        try:
            folders.claim(partial, "evalset")
            paths = {key: partial / name for key, name in self.FILES.items()}
            with open(paths["corpus"], "w", encoding="utf-8") as f:
                for s in self.sentences:
                    f.write(json.dumps(s.to_json(), ensure_ascii=False) + "\n")
            write_topics(paths["topics"], self.topics)
            write_qrels(paths["qrels"], ((qid, self.qrels[qid]) for qid, _ in self.topics if qid in self.qrels))
            paths["info"].write_text(json.dumps({"name": self.name, "level": self.level,
                                                 "sentences": len(self.sentences), "queries": len(self.topics)},
                                                indent=2) + "\n")
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        if folder.exists():  # checked above: empty, or made by sparc-es
            shutil.rmtree(folder)
        os.replace(partial, folder)
        return {key: folder / name for key, name in self.FILES.items()}

    @classmethod
    def read(cls, folder: str | Path) -> EvalSet:
        """An evaluation set folder: ``corpus.jsonl`` (any corpus ``encode`` reads, JSONL), ``topics.tsv``
        and ``qrels.txt``, with ``evalset.json`` optional (name: the folder's; level: sentence)."""
        from sparc_es.corpus.sources import read_corpus
        from sparc_es.evaluation.trec import read_qrels, read_topics

        folder = Path(folder)
        missing = [name for key, name in cls.FILES.items() if key != "info" and not (folder / name).is_file()]
        if missing:
            raise InputError(folder, f"not an evaluation set: {', '.join(missing)} missing "
                                     "(sparc-es evalset writes one)")
        info = json.loads((folder / cls.FILES["info"]).read_text()) if (folder / cls.FILES["info"]).is_file() else {}
        level = info.get("level", "sentence")
        if level not in ("sentence", "document"):
            raise InputError(folder / cls.FILES["info"], f"level must be sentence or document, not {level!r}")
        return cls(info.get("name", folder.name), list(read_corpus([folder / cls.FILES["corpus"]])),
                   list(read_topics(folder / cls.FILES["topics"])), read_qrels(folder / cls.FILES["qrels"]),
                   level).check(folder)


def check_output(folder: str | Path, overwrite: bool = False, flag: str = "the output folder") -> None:
    """Refuse, with one line, an evaluation set's output ``folder`` (``flag`` names it) that
    :meth:`EvalSet.write` would not write: a file, a folder that is not empty without ``overwrite``,
    or, with it, a folder sparc-es did not make (an evaluation set written before folders were
    marked, holding only its four files, counts as sparc-es's)."""
    folder = Path(folder)
    folders.check_folder_output(folder, flag)
    if not folder.exists() or (folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir())):
        return
    if not overwrite:
        raise StoreError(f"{folder}: already exists; pass --overwrite to replace it")
    if not _older_set(folder):
        folders.check_removable(folder, replaces=("evalset",))


def _older_set(folder: Path) -> bool:
    """Whether ``folder`` is an evaluation set an older sparc-es wrote: its four files, nothing else."""
    return (folder.is_dir() and not folder.is_symlink()
            and {p.name for p in folder.iterdir()} == set(EvalSet.FILES.values()))


def _newsqa_sentences(contexts: list[dict], prefix: str) -> Iterator[Sentence]:
    """NewsQA has no MultiReQA boundaries: the project's own splitter, context = the article."""
    from sparc_es.corpus.sources import split_document

    for ctx, c in enumerate(contexts):
        for s in split_document(c["context"], f"{prefix}-{ctx}"):
            yield Sentence(id=f"{prefix}-{ctx}-{s.id.rsplit('#', 1)[1]}", text=s.text, context=c["context"],
                           doc=f"{prefix}-{ctx}", start=s.start, end=s.end)


# --- the training slice and its validation split --------------------------------------------

VALIDATION_ARTICLES = 6  # the SQuAD slice's last articles (1,036 questions), never trained on by default
TRAIN_FILE = Path("squad_train_slice") / "train-v1.1-articles-1-44.json"


def train_articles(root: str | Path | None = None, validation_articles: int = VALIDATION_ARTICLES,
                   part: str = "train") -> list[dict]:
    """The SQuAD train slice's articles: ``part="train"`` all but the last ``validation_articles``,
    ``"validation"`` those last ones (model selection happens there, never on SQuAD or NewsQA dev)."""
    root = Path(root) if root else data_dir()
    path = root / TRAIN_FILE
    if not path.is_file():
        raise InputError(path, f"SQuAD train slice not found (--data DIR or {DATA_ENV} names the data folder)")
    articles = json.loads(path.read_text(encoding="utf-8"))["data"]
    cut = len(articles) - validation_articles
    if part not in ("train", "validation") or not 0 <= validation_articles < len(articles):
        raise InputError(path, f"cannot hold out {validation_articles} of {len(articles)} articles as {part}")
    return articles[:cut] if part == "train" else articles[cut:]


def paragraph_sentences(context: str, prefix: str) -> list[Sentence]:
    """A paragraph cut by the project's splitter; each sentence's context is the paragraph."""
    from sparc_es.corpus.sources import split_document

    return [Sentence(id=f"{prefix}-{s.id.rsplit('#', 1)[1]}", text=s.text, context=context, doc=prefix,
                     start=s.start, end=s.end) for s in split_document(context, prefix)]


def _judged(qrels: dict[str, set[str]]) -> dict[str, dict[str, int]]:
    return {qid: dict.fromkeys(sorted(ids), 1) for qid, ids in qrels.items()}


def _merge_question(topics: list[tuple[str, str]], qrels: dict[str, set[str]], qid_of: dict[str, str],
                    qid: str, question: str, relevant: set[str]) -> None:
    """Identical questions (after strip) become one query with the union of their relevant sentences."""
    question = question.strip()
    if question not in qid_of:
        qid_of[question] = qid
        topics.append((qid, question))
        qrels[qid] = set()
    qrels[qid_of[question]] |= relevant


def _validation_set(root: str | Path | None) -> EvalSet:
    """The held-out articles of the training slice as a MultiReQA-style pool (the project's splitter,
    as for NewsQA: the slice has no usable MultiReQA boundaries)."""
    sentences: list[Sentence] = []
    topics: list[tuple[str, str]] = []
    qrels: dict[str, set[str]] = {}
    qid_of: dict[str, str] = {}
    paragraphs = [p for a in train_articles(root, part="validation") for p in a["paragraphs"]]
    for n, p in enumerate(paragraphs):
        ss = paragraph_sentences(p["context"], f"squad-val-{n}")
        sentences += ss
        for qa in p["qas"]:
            relevant = {s.id for s in ss for a in qa["answers"]
                        if s.start < a["answer_start"] + len(a["text"]) and a["answer_start"] < s.end}
            _merge_question(topics, qrels, qid_of, qa["id"], qa["question"], relevant)
    return EvalSet("val", sentences, topics, _judged(qrels))


def check_data_folder(root: str | Path, flag: str | None = None) -> None:
    """A one-line error naming ``root`` (and the option ``flag`` that gave it) unless it is a folder."""
    if not Path(root).is_dir():
        raise InputError(root, f"{f'{flag}: ' if flag else ''}the data folder "
                               f"{'is not a folder' if Path(root).exists() else 'does not exist'}")


def build_eval_set(domain: str, root: str | Path | None = None) -> EvalSet:
    """One of the project's :data:`DOMAINS`: ``squad`` and ``newsqa`` dev (see :func:`mrqa_eval_set`),
    ``val`` the training slice's held-out articles."""
    if domain not in DOMAINS:
        raise InputError(domain, f"unknown domain; choose from {', '.join(DOMAINS)}")
    if root:  # a folder named, not $SPARC_ES_DATA's: no hint about the variable
        check_data_folder(root)
    if domain == "val":
        return _validation_set(root)
    folder = Path(root) if root else data_dir()

    def data_file(relative: str) -> Path:
        path = folder / relative
        if not path.is_file():
            raise InputError(path, f"not found in the data folder {root}" if root else
                             f"not found (--data DIR or {DATA_ENV} names the data folder)")
        return path

    mrqa_name, prefix = DOMAINS[domain]
    mrqa = data_file(f"mrqa/{mrqa_name}")
    candidates = data_file("multireqa/dev/SQuAD/candidates.json.gz") if domain == "squad" else None
    return mrqa_eval_set(mrqa, candidates, domain, prefix)


def mrqa_eval_set(mrqa: str | Path, candidates: str | Path | None = None, name: str | None = None,
                  prefix: str | None = None) -> EvalSet:
    """The revised MultiReQA protocol on any MRQA file: candidate pool = every sentence of every
    passage, cut at the MultiReQA ``candidates`` file's boundaries when given (else by the project's
    splitter); relevant = sentences overlapping an answer span; identical questions (after strip)
    merged into one query with the union of their relevant sentences."""
    mrqa = Path(mrqa)
    name = name or mrqa.name.split(".")[0].lower()
    prefix = prefix or name
    contexts = list(read_mrqa(mrqa))
    if candidates is not None:
        sentences = list(multireqa_sentences(mrqa, candidates, prefix))
    else:
        sentences = list(_newsqa_sentences(contexts, prefix))
    by_doc: dict[str, list[Sentence]] = {}
    for s in sentences:
        by_doc.setdefault(s.doc, []).append(s)

    qid_of: dict[str, str] = {}
    qrels: dict[str, set[str]] = {}
    topics: list[tuple[str, str]] = []
    for ctx, c in enumerate(contexts):
        for qa in c["qas"]:
            spans = [span for a in qa["detected_answers"] for span in a["char_spans"]]
            # MRQA character spans are inclusive at both ends.
            relevant = {s.id for s in by_doc.get(f"{prefix}-{ctx}", ())
                        for a, b in spans if s.start <= b and a < s.end}
            _merge_question(topics, qrels, qid_of, qa["qid"], qa["question"], relevant)
    return EvalSet(name, sentences, topics, _judged(qrels))


def beir_eval_set(folder: str | Path, split: str = "test", name: str | None = None) -> EvalSet:
    """A BEIR-style collection (``corpus.jsonl`` of ``{_id, title, text}``, ``queries.jsonl`` of
    ``{_id, text}``, ``qrels/SPLIT.tsv``): documents split into sentences (see :mod:`sparc_es.corpus.sources`),
    the queries that have judgements, judged at the document level."""
    from sparc_es.corpus.sources import read_corpus

    folder = Path(folder)
    qrels_path = folder / "qrels" / f"{split}.tsv"
    for path in (folder / "corpus.jsonl", folder / "queries.jsonl", qrels_path):
        if not path.is_file():
            raise InputError(path, "not found (a BEIR folder has corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv)")
    qrels: dict[str, dict[str, int]] = {}
    with open(qrels_path, encoding="utf-8-sig") as f:
        for lineno, line in enumerate(f, start=1):
            fields = line.split()
            if not fields or (lineno == 1 and not fields[-1].lstrip("-").isdigit()):
                continue  # blank, or the "query-id corpus-id score" header
            if len(fields) != 3 or not fields[2].lstrip("-").isdigit():
                raise InputError(qrels_path, "expected 'query-id corpus-id score'", lineno)
            qrels.setdefault(fields[0], {})[fields[1]] = int(fields[2])
    topics, empty = [], 0
    with open(folder / "queries.jsonl", encoding="utf-8-sig") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                q = json.loads(line)
                qid, text = str(q["_id"]), " ".join(str(q["text"]).split())
            except (ValueError, KeyError, TypeError):
                raise InputError(folder / "queries.jsonl", "expected {\"_id\", \"text\"}", lineno) from None
            if qid in qrels:
                if text:
                    topics.append((qid, text))
                else:
                    empty += 1
    sentences = list(read_corpus([folder / "corpus.jsonl"]))
    docs = {s.doc for s in sentences}
    missing = sum(d not in docs for qid, _ in topics for d in qrels[qid])
    unknown = len(qrels.keys() - {qid for qid, _ in topics}) - empty
    notes = [f"{n} {what} left out" for n, what in (
        (unknown, f"judged queries of {qrels_path.name} not in queries.jsonl"),
        (empty, "judged queries with no text"),
        (missing, "judgements of documents not in corpus.jsonl")) if n]
    kept = {qid: {d: r for d, r in qrels[qid].items() if d in docs} for qid, _ in topics}
    return EvalSet(name or folder.name, sentences, topics, kept, level="document", notes=notes).check(qrels_path)


PATTERN_SECONDS = 1.0  # one answer pattern on one sentence: longer is catastrophic backtracking


@dataclass(frozen=True)
class AnswerPattern:
    """One line of an answers file: a pattern, the file it must match in (or None), its line."""

    pattern: regex.Pattern
    where: str | None
    line: int


def read_answer_patterns(path: str | Path) -> dict[str, list[AnswerPattern]]:
    """An answers file: ``qid<TAB>pattern[<TAB>file]`` per line, a case-insensitive Python regular
    expression that matches the answer in the answering sentence's text, optionally only in that
    file (a path relative to the documents folder). Several lines per question: any one matches.
    Blank lines and lines starting with ``#`` are skipped."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "answers file not found")
    out: dict[str, list[AnswerPattern]] = {}
    with open(path, encoding="utf-8-sig") as f:
        for lineno, line in enumerate(f, start=1):
            line = line.rstrip("\r\n")
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) not in (2, 3) or not fields[0].strip() or not fields[1]:
                raise InputError(path, "expected 'qid<TAB>pattern' or 'qid<TAB>pattern<TAB>file'", lineno)
            try:  # the regex module: Python's syntax (V0), and a time limit per search
                pattern = regex.compile(fields[1], regex.IGNORECASE | regex.V0)
            except regex.error as e:
                raise InputError(path, f"bad regular expression {fields[1]!r}: {e}", lineno) from None
            where = fields[2].strip() if len(fields) == 3 and fields[2].strip() else None
            out.setdefault(fields[0].strip(), []).append(AnswerPattern(pattern, where, lineno))
    return out


def _answers(rule: AnswerPattern, sentence, answers: Path) -> bool:
    """Whether ``rule`` judges ``sentence`` an answer; a pattern that takes more than
    ``PATTERN_SECONDS`` on one sentence is a one-line error naming its line."""
    if rule.where is not None and sentence.doc != rule.where:
        return False
    try:
        return rule.pattern.search(sentence.text, timeout=PATTERN_SECONDS) is not None
    except TimeoutError:
        raise InputError(answers, f"the pattern {rule.pattern.pattern!r} took over {PATTERN_SECONDS:g} s on one "
                                  f"sentence ({sentence.id}): it backtracks without end; rewrite it (nested "
                                  "repeats such as (a|aa)+ are the usual cause)", rule.line) from None


def docs_eval_set(docs: str | Path, questions: str | Path, answers: str | Path, name: str | None = None
                  ) -> tuple[EvalSet, list[str]]:
    """Your own documents as an evaluation set, judged by answer patterns (so judgements survive a
    change of reader or sentence splitter): the candidate pool is every sentence ``encode --corpus
    DOCS`` reads, a question's relevant sentences are those whose text matches one of its patterns
    (in the named file, when one is given). Returns the set and the ids of questions no sentence
    answers (left out: their pattern or the reader needs a look)."""
    from sparc_es.corpus.sources import read_corpus
    from sparc_es.evaluation.trec import read_topics

    patterns = read_answer_patterns(answers)
    topics = list(read_topics(questions))
    unknown = sorted(set(patterns) - {qid for qid, _ in topics})
    if unknown:
        raise InputError(answers, f"answers for questions not in {questions}: {', '.join(unknown[:5])}")
    sentences = list(read_corpus([docs]))
    files = {s.doc for s in sentences}
    for rules in patterns.values():
        for rule in rules:
            if rule.where is not None and rule.where not in files:
                raise InputError(answers, f"{rule.where!r} is not a file of {docs} with sentences (a path relative "
                                          "to the documents folder)", rule.line)
    qrels: dict[str, set[str]] = {}
    for qid, _ in topics:
        rules = patterns.get(qid, [])
        qrels[qid] = {s.id for s in sentences for rule in rules if _answers(rule, s, Path(answers))}
    unanswered = [qid for qid, _ in topics if not qrels[qid]]
    kept = [(qid, q) for qid, q in topics if qrels[qid]]
    return EvalSet(name or Path(docs).name, sentences, kept, _judged({q: qrels[q] for q, _ in kept})), unanswered


DOMAINS = {"squad": ("SQuAD.jsonl.gz", "squad-dev"), "newsqa": ("NewsQA.jsonl.gz", "newsqa-dev"),
           "val": ("train-v1.1-articles-1-44.json", "squad-val")}
