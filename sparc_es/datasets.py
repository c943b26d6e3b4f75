"""Public QA data as sparc-es sentence records (MRQA contexts, MultiReQA sentence boundaries).

The data lives outside the repository, in ``../shared/data`` by default; set ``SPARC_ES_DATA``
to point elsewhere.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path

from .corpus import Sentence
from .errors import InputError

DATA_ENV = "SPARC_ES_DATA"


def data_dir() -> Path:
    """``$SPARC_ES_DATA``, else ``../shared/data`` beside the repository."""
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV])
    return Path(__file__).resolve().parents[2] / "shared" / "data"


def read_mrqa(path: str | Path) -> Iterator[dict]:
    """The context records of an MRQA ``.jsonl.gz`` file (its header line skipped)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, f"MRQA file not found (set {DATA_ENV} to the data folder)")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            obj = json.loads(line)
            if "header" in obj:
                continue
            yield obj


def multireqa_sentences(mrqa: str | Path, candidates: str | Path, prefix: str) -> Iterator[Sentence]:
    """Sentences of MRQA contexts cut at the MultiReQA boundaries; context = the passage.

    A MultiReQA ``candidate_id`` names the MRQA question ids of its context and ends with the
    sentence number (``SQuAD_<qid>/<qid>/.../_<n>``).
    """
    contexts = list(read_mrqa(mrqa))
    by_qid = {qa["qid"]: i for i, c in enumerate(contexts) for qa in c["qas"]}
    with gzip.open(candidates, "rt", encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            cand = json.loads(line)
            head, _, number = cand["candidate_id"].rpartition("/_")
            qid = head.split("_", 1)[1].split("/")[0]
            if qid not in by_qid:
                raise InputError(candidates, f"candidate names unknown question id {qid}", lineno)
            ctx = by_qid[qid]
            passage = contexts[ctx]["context"]
            a, b = cand["response_start"], cand["response_end"]
            yield Sentence(id=f"{prefix}-{ctx}-{number}", text=passage[a:b].strip(), context=passage,
                           doc=f"{prefix}-{ctx}", start=a, end=b)


def squad_dev_sentences(root: str | Path | None = None) -> Iterator[Sentence]:
    """The 10,642 SQuAD dev sentences of the revised MultiReQA pool, with their paragraphs."""
    root = Path(root) if root else data_dir()
    return multireqa_sentences(root / "mrqa" / "SQuAD.jsonl.gz",
                               root / "multireqa" / "dev" / "SQuAD" / "candidates.json.gz", "squad-dev")
