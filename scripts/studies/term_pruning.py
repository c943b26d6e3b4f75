"""Term-centric static pruning: each token's posting list cut to its largest impacts.

The one-request default walks long posting lists because the model spreads generic tokens over
most sentences (on the 10,642 SQuAD dev sentences ``cause`` is stored by 8,908 of them), each with
a small impact. Pruning by a sentence's own impacts (``encode --min-impact``, docs/benchmarks.md,
"Static pruning") cuts every list alike; pruning by term (Carmel et al., SIGIR 2001; the per-term
list cut of Seismic, Bruch et al., SIGIR 2024) keeps each token's ``share`` x N largest impacts
(ties at the cut kept, so the result does not depend on sentence order) and leaves short lists
whole, so the lists a question walks are at most ``share`` x N long. Each token keeps its largest
impact, so the default's per-question normalisation (the sum of the question tokens' largest stored
impacts) does not change.

    # quality: the default beside the default over pruned lists, on each domain's cached folders
    python scripts/studies/term_pruning.py quality --workdir runs/v5 --shares 0.02,0.05,0.1 \
        --domains docs-pip,...,val --json out.json
    # a pruned copy of an encoded folder, its indexes as scripts/bench.py builds them, and the
    # default over both timed beside Lucene BM25, question by question
    W=bench/work-stop
    python scripts/studies/term_pruning.py prune $W/encoded-1m $W/encoded-1m-lists0.05 --share 0.05
    python scripts/studies/reorder.py index --encoded $W/encoded-1m-lists0.05 --index $W/index-1m-lists0.05
    python scripts/studies/term_pruning.py bench --index $W/index-1m --pruned $W/index-1m-lists0.05 --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path

DEFAULT_ENCODED = "encoded-2304a1258a440b87-k500-idf"  # the table's cache of the shipped model, IDF-weighted


def thresholds(encoded: Path, share: float) -> tuple[dict[str, int], int]:
    """Each token's smallest kept impact (only tokens whose list is longer than the cut) and N."""
    from sparc_es.layout.records import iter_vectors

    values: dict[str, Counter] = defaultdict(Counter)
    n = 0
    for record in iter_vectors(encoded):
        n += 1
        for token, impact in record["vector"].items():
            values[token][impact] += 1
    cut = max(1, math.ceil(share * n))
    floor = {}
    for token, counts in values.items():
        if sum(counts.values()) <= cut:
            continue
        seen = 0
        for impact in sorted(counts, reverse=True):
            seen += counts[impact]
            if seen >= cut:
                floor[token] = impact  # the cut-th largest impact: ties with it kept
                break
    return floor, n


def prune(encoded: Path, out: Path, share: float) -> Path:
    """A copy of ``encoded`` whose tokens keep their ``share`` x N largest impacts (ties kept)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench import filtered_copy

    if (out / "meta.json").is_file():
        return out
    floor, _ = thresholds(encoded, share)
    partial = out.with_name(out.name + ".partial")
    filtered_copy(encoded, partial, lambda v: {t: i for t, i in v.items() if i >= floor.get(t, 0)})
    partial.rename(out)
    return out


def quality(workdir: Path, domains: list[str], shares: list[float], weight: float) -> list[dict]:
    """MRR@1000 (and the table's other measures) of the default and of the default over pruned
    lists, on each domain's cached evaluation set and encoded folder (``sparc-es table``'s)."""
    from sparc_es.engines import open_engine
    from sparc_es.engines.lucene import build_index
    from sparc_es.evaluation.evalsets import EvalSet
    from sparc_es.evaluation.measures import compare, evaluate_file
    from sparc_es.evaluation.runs import RunFile, write_runs
    from sparc_es.layout.manifest import Manifest

    rows = []
    for domain in domains:
        folder = workdir / domain
        evalset = EvalSet.read(folder / "evalset")
        qrels = {q: dict(d) for q, d in _qrels(folder / "evalset" / "qrels.txt").items()}
        doc_of = {s.id: s.doc for s in evalset.sentences} if evalset.level == "document" else None
        encoded = folder / DEFAULT_ENCODED
        for share in [None, *shares]:
            source = encoded if share is None else prune(encoded, folder / f"{DEFAULT_ENCODED}-lists{share:g}", share)
            index = folder / f"index-{source.name.removeprefix('encoded-')}-study"
            if not (index / "meta.json").is_file():
                build_index(source, index, overwrite=True, bm25=False)
            engine = open_engine("lucene", index, hybrid="sum", hybrid_weight=weight)
            run = folder / "runs" / f"term-pruning-{'none' if share is None else f'{share:g}'}.trec"
            try:
                write_runs([RunFile(engine, run)], evalset.topics, 1000, batch=256, threads=2,
                           documents=(lambda results, d=doc_of: d) if doc_of is not None else None)
            finally:
                engine.close()
            scores = evaluate_file(run, qrels)
            change = {}
            if share is None:
                unpruned = run
            else:  # MRR@1000 against the unpruned lists, a paired bootstrap 95% interval over the questions
                d = compare(run, unpruned, qrels, {"MRR@1000": "RR@1000"})[0]
                change = {"mrr_change": round(100 * (d.run - d.baseline), 2),
                          "mrr_change_interval": [round(100 * d.low, 2), round(100 * d.high, 2)],
                          "questions_changed": d.changed}
            m = Manifest.read(source)
            rows.append({"domain": domain, "share": share, "sentences": m.sentences,
                         "postings_per_sentence": round(m.postings / m.sentences, 1),
                         "index_megabytes": round(Manifest.read(index).index.bytes / 1e6, 2), "run": str(run),
                         **{k: round(100 * v, 2) for k, v in scores.items()}, **change})
            print(f"{domain:14} share {share if share is not None else '-':>6}  postings/sentence "
                  f"{rows[-1]['postings_per_sentence']:6.1f}  MRR@1000 {rows[-1]['MRR@1000']:.2f}  {change}",
                  flush=True)
    return rows


def bench(index: Path, pruned: Path, queries: int) -> dict:
    """Lucene BM25, the default and the default over pruned lists, taking turns question by
    question (``scripts/bench.py``'s ``side_by_side``), with the postings the SPARC side walks (the
    sum of its question tokens' list lengths) and how often the two defaults' top 10 agree."""
    import statistics

    from sparc_es.engines import blend, open_engine
    from sparc_es.engines.bm25 import LuceneBM25
    from sparc_es.evaluation.evalsets import data_dir

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench import cpu_model, side_by_side, squad_questions

    questions = squad_questions(data_dir(), queries)
    default, lists = open_engine("lucene", index, hybrid="default"), open_engine("lucene", pruned, hybrid="default")
    engines = [("bm25", LuceneBM25(index / "bm25")), ("default", default), ("default_pruned", lists)]
    walked, same = {"default": [], "default_pruned": []}, []
    for q in questions:
        tops = [[h.id for h in e.batch_search([("q", q)], 10)["q"]] for e in (default, lists)]
        same.append(len(set(tops[0]) & set(tops[1])))
        for name, e in (("default", default), ("default_pruned", lists)):
            terms = [t for t in e.weights(q) if not t.startswith(blend.PREFIX)]
            walked[name].append(sum(e.searcher.doc_freqs(terms).values()))
    sizes = {name: round(sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 1e6, 1)
             for name, folder in (("impact_mb", index / "lucene"), ("pruned_mb", pruned / "lucene"),
                                  ("bm25_mb", index / "bm25"))}
    out = {"cpu": cpu_model(), "index": str(index), "pruned": str(pruned), "queries": len(questions), "sizes": sizes,
           "sparc_side_postings_walked_median": {k: statistics.median(v) for k, v in walked.items()},
           "top10_overlap_mean": round(statistics.mean(same), 2),
           "latency_ms": side_by_side(engines, questions)}
    print(json.dumps({k: v for k, v in out.items() if k != "latency_ms"}))
    return out


def _qrels(path: Path):
    from sparc_es.evaluation.trec import read_qrels

    return read_qrels(path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    q = sub.add_parser("quality", help="the default over pruned lists on each domain's cached folders")
    q.add_argument("--workdir", type=Path, default=Path("runs/v5"))
    q.add_argument("--domains", required=True, help="comma-separated folders under --workdir")
    q.add_argument("--shares", required=True, help="comma-separated list cuts, as shares of the sentences")
    q.add_argument("--weight", type=float, default=None, help="BM25's share (default: the default's)")
    q.add_argument("--json", type=Path)
    r = sub.add_parser("prune", help="a pruned copy of an encoded folder")
    r.add_argument("encoded", type=Path)
    r.add_argument("output", type=Path)
    r.add_argument("--share", type=float, required=True)
    b = sub.add_parser("bench", help="the default over both indexes beside Lucene BM25")
    b.add_argument("--index", type=Path, required=True, help="the unpruned index, its bm25/ beside it")
    b.add_argument("--pruned", type=Path, required=True)
    b.add_argument("--queries", type=int, default=500)
    b.add_argument("--json", type=Path)
    a = p.parse_args()
    if a.command == "bench":
        out = bench(a.index, a.pruned, a.queries)
        if a.json:
            a.json.write_text(json.dumps(out, indent=1) + "\n")
        return
    if a.command == "prune":
        m = json.loads((prune(a.encoded, a.output, a.share) / "meta.json").read_text())
        print(f"{a.output}: {m['postings'] / m['sentences']:.1f} postings a sentence")
        return
    from sparc_es.engines.hybrid import BM25_WEIGHT

    rows = quality(a.workdir, a.domains.split(","), [float(s) for s in a.shares.split(",")],
                   BM25_WEIGHT if a.weight is None else a.weight)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
