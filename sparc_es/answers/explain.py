"""Why a hit scored what it did: ``sparc-es explain --index INDEX "question" ID_OR_RANK ...`` and
the server's ``GET /explain``.

A hit's score is the sum, over the question's tokens (the bag :class:`~sparc_es.model.query.QueryEncoder`
gives the engine), of the token's count times the integer impact the sentence stores for it, divided
by the index's quantisation factor. For each question token and each hit this reads the impact the
index holds (the token's postings) and Lucene's own score of the hit, and shows how the model made
the impact: the sentence is encoded again, with its text and context from the index's sentence
store, by the model the index was encoded with (its fingerprint must match the manifest's), with
the index's settings (K, max length, max-over), its corpus statistics (``lexical.json``) and its
IDF, through :meth:`~sparc_es.model.stored.Pipeline.explain_parts`, the composition ``encode``
runs. The recomputed impacts are checked against the index's: a difference says the index was made
otherwise (another model or settings, statistics an update kept), or, by 1 here and there, float
rounding at the quantisation boundary (a batch of other sentences, another device).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sparc_es.answers.show import Places, paragraph
from sparc_es.engines.base import MAX_HITS, Closing, Impacts, sparc_side
from sparc_es.engines.blend import PREFIX, SCALE
from sparc_es.errors import SparcError, option
from sparc_es.layout.manifest import Manifest
from sparc_es.layout.names import LUCENE
from sparc_es.layout.records import quantize
from sparc_es.model.query import check_question

# How many hits a rank may reach, and how deep the search looks for an id's rank.
RANK_DEPTH = 1000


class Explainer(Closing):
    """Explains the hits of one Lucene index, with the model its sentences were encoded with."""

    def __init__(self, index: str | Path, engine, model="default", device: str = "cpu",
                 collapse: bool = True) -> None:
        """``engine``: the engine ``search`` opens over ``index`` (ranks are its ranks; a hybrid's
        SPARC engine holds the impacts); closing the explainer closes it. ``model``: a model name or
        folder (``--model``), loaded on first use with the index's settings, or a loaded
        :class:`~sparc_es.model.SparcModel`. ``collapse``: ranks count the sentences of one paragraph
        as one hit, as ``search``, :func:`~sparc_es.answers.show.answer` and ``/search`` show them
        (False: every sentence its own rank, ``--no-collapse``)."""
        self.index = Path(index)
        self.collapse = collapse
        self.manifest = Manifest.read(self.index)
        if self.manifest.index is None or self.manifest.index.engine != LUCENE:
            raise SparcError(f"{self.index}: explain needs a sparc-es Lucene index "
                             f"({option('sparc-es index --index DIR', 'sparc_es.engines.lucene.build_index')})")
        self.engine = engine
        self.sparc = sparc_side(engine)
        if not isinstance(self.sparc, Impacts):
            raise SparcError("explain reads the impacts of the Lucene impact index: search it with "
                             + option("--engine lucene", "open_engine('lucene', ...)"))
        self._model, self._device = model, device
        self._inputs = None

    # --- the model and the corpus statistics the index was encoded with ----------------------

    def model(self):
        """The index's model (loaded, and checked against the manifest's fingerprint, on first use)."""
        from sparc_es.model import SparcModel

        if not isinstance(self._model, SparcModel):
            m = self.manifest
            name = self._model
            model = SparcModel.load(name, top_k=m.top_k, max_length=m.model.max_length, max_over=m.model.max_over)
            if model.fingerprint != m.model.fingerprint:
                base = m.model.base_model.get("name", "?")
                raise SparcError(f"{self.index} was encoded with model {m.model.fingerprint} (base {base}), "
                                 f"{option('--model', 'model')} {name} is {model.fingerprint}: explain re-encodes "
                                 f"hits with the index's own model; pass its folder as {option('--model', 'model')}")
            self._model = model if self._device == "cpu" else model.to(self._device)
        return self._model

    def inputs(self) -> tuple:
        """(corpus statistics for the lexical term or None, IDF factors or None), as encode used them."""
        if self._inputs is None:
            from sparc_es.model.idf import idf_from_statistics
            from sparc_es.model.lexical import CorpusStatistics

            model, m = self.model(), self.manifest
            statistics = CorpusStatistics.read(self.index)
            if statistics is None and (m.idf or model.config.lexical):
                raise SparcError(f"{self.index}: has no lexical.json (the corpus statistics of its IDF and lexical "
                                 "term), so its weights cannot be made again; index the encoded folder again")
            idf = idf_from_statistics(statistics, model.embeddings.shape[0])[0] if m.idf else None
            self._inputs = (statistics if model.config.lexical else None, idf)
        return self._inputs

    # --- which hits ------------------------------------------------------------------------

    def resolve(self, question: str, wanted: list[str]) -> list[tuple[str, int | None, float | None, int | None]]:
        """(sentence id, its rank in the search or None, its search score or None, the rank of the hit
        whose paragraph it is collapsed into or None) of each of ``wanted``: a sentence id of the
        index, else a rank (1 = the first hit of ``search``)."""
        store = self.sparc.store
        known = store.get(list(dict.fromkeys(wanted)))
        ranks = [int(w) for w in wanted if w not in known and _rank(w)]
        too_deep = [r for r in ranks if r > MAX_HITS]
        if too_deep:
            raise SparcError(f"rank {too_deep[0]}: explain looks at the first {MAX_HITS:,} hits at most")
        depth = max([RANK_DEPTH, *ranks])
        ranking = self.engine.batch_search([("q", question)], k=depth)["q"] if wanted else []
        under: dict[str, tuple[int, float]] = {}  # a sentence folded into an earlier hit: that hit's rank, its score
        if self.collapse and ranking:  # rank n: the n-th paragraph's best sentence, as search shows it
            stored = store.get([h.id for h in ranking], context=True)
            seen: dict[tuple, int] = {}
            firsts = []
            for h in ranking:
                s = stored.get(h.id)
                key = paragraph(s.doc, s.context, h.id) if s is not None else paragraph(None, "", h.id)
                if key not in seen:
                    firsts.append(h)
                    seen[key] = len(firsts)
                else:
                    under[h.id] = (seen[key], h.score)
            ranking = firsts
        place = {h.id: (rank, h.score) for rank, h in enumerate(ranking, start=1)}
        out = []
        for w in wanted:
            if w in known:
                sid = w
            elif _rank(w) and int(w) >= 1:
                if int(w) > len(ranking):
                    raise SparcError(f"rank {w}: the search finds {len(ranking)} sentences for this question")
                sid = ranking[int(w) - 1].id
            else:
                raise SparcError(f"{w!r}: no sentence with this id in {self.index}, and not a rank (1, 2, ...)")
            rank, score = place.get(sid, (None, None))
            folded, folded_score = under.get(sid, (None, score))
            out.append((sid, rank, folded_score, folded))
        return out

    # --- the explanation -------------------------------------------------------------------

    def explain(self, question: str, wanted: list[str | int]) -> dict:
        """The explanation of ``wanted`` hits (sentence ids, or ranks: ``2`` or ``"2"``) for
        ``question`` as a JSON object (see :func:`table`)."""
        check_question(question, asked=True)
        if isinstance(wanted, str | int):  # a string is no list: "12" was read as ranks 1 and 2
            raise SparcError(f"name the hits to explain as a list of ids or ranks, not {wanted!r} alone")
        wanted = [str(w) if isinstance(w, int) and not isinstance(w, bool) else w for w in wanted]
        if not all(isinstance(w, str) for w in wanted):
            bad = next(w for w in wanted if not isinstance(w, str))
            raise SparcError(f"a hit to explain is a sentence id or a rank, not {type(bad).__name__} {bad!r}")
        if not wanted:
            raise SparcError("name at least one hit to explain: its id or its rank")
        bag = self.sparc.queries.encode(question)  # what the engine asks: integer counts
        factor = self.manifest.factor
        chosen = self.resolve(question, wanted)
        ids = list(dict.fromkeys(sid for sid, *_ in chosen))
        sentences = self.sparc.store.get(ids, context=True)
        engine_scores = self.sparc.scores_of(question, ids)
        corpus, idf = self.inputs()
        pipeline = self.model().pipeline
        places = Places(self.manifest.corpus_roots(self.index))
        blend = getattr(self.sparc, "blend", None)  # the one-request sum: its clause weights say each side's part
        clauses = self.sparc.weights(question) if blend is not None else {}
        terms = [f for f in clauses if f.startswith(PREFIX)]
        hits = []
        for sid, rank, search_score, collapsed_into in chosen:
            s = sentences[sid]
            parts = pipeline.explain_parts(s.text, s.context, corpus, idf, tokens=bag)
            made = quantize(list(parts), np.array([p.weight for p in parts.values()], dtype=np.float32), factor)
            held = self.sparc.stored([sid], list(dict.fromkeys([*bag, *made])))[sid]
            mismatched = sorted(t for t in made.keys() | bag.keys() if made.get(t, 0) != held.get(t, 0))
            tokens = []
            for t, count in bag.items():
                p = parts[t]
                tokens.append({"token": t, "count": count, "impact": held.get(t, 0), "recomputed": made.get(t, 0),
                               "weight": p.weight, "neural": p.neural, "passage": p.passage, "top_k": p.top_k,
                               "idf": p.idf, "lexical": p.lexical, "stem": p.stem, "word": p.word, "cut": p.cut})
            total = sum(c["count"] * c["impact"] for c in tokens)
            place = places.of(s)
            hits.append({
                "id": sid, "rank": rank, "search_score": search_score, "collapsed_into": collapsed_into,
                "text": s.text, "context": s.context,
                "doc": s.doc, "start": s.start, "end": s.end, "line": place.line,
                "path": str(place.path) if place.path else None,
                "headings": list(place.headings) if place.headings is not None else None,
                "impact": engine_scores.get(sid, 0), "score": engine_scores.get(sid, 0) / factor,
                "sum": total, "recomputed_sum": sum(c["count"] * c["recomputed"] for c in tokens),
                "checked": len(made.keys() | bag.keys()), "mismatched": mismatched,
                "matches_index": not mismatched, "tokens": tokens,
                "sum_parts": _sum_parts(blend, self.sparc.bm25_weight, clauses, held,
                                        self.sparc.stored([sid], terms)[sid] if terms else {},
                                        question, bag) if blend is not None else None})
        m = self.manifest
        return {"question": question, "index": str(self.index), "model": m.model.fingerprint, "factor": factor,
                "top_k": m.top_k, "idf": m.idf, "hybrid": _hybrid_name(self.engine), "tokens": bag, "hits": hits}

    def close(self) -> None:
        """Close the engine it explains the hits of (it was given that engine to own)."""
        self.engine.close()


def _sum_parts(blend, share: float, clauses: dict[str, float], impacts: dict[str, int], terms: dict[str, int],
               question: str, bag: dict[str, int]) -> dict:
    """How the one-request sum makes a hit's score (:mod:`~sparc_es.engines.blend`): C(q) x ((1 - a)
    x SPARC / S(q) + a x BM25 / B(q)), each side's sum of count x stored value and the most the
    question can score there, and the BM25 terms the sentence stores."""
    sparc_bag, stored, coverage = blend.sides(question, bag)
    bm25 = {f[len(PREFIX):]: terms.get(f, 0) * c for f, c in stored.items()}
    return {"coverage": coverage, "bm25_share": share,
            "sparc": sum(c * impacts.get(t, 0) for t, c in sparc_bag.items()),
            "sparc_reach": sum(c * blend.maxima[t] for t, c in sparc_bag.items()),
            "bm25": sum(bm25.values()) / SCALE,
            "bm25_reach": sum(c * blend.maxima[f] for f, c in stored.items()) / SCALE,
            "bm25_terms": {t: v / SCALE for t, v in bm25.items() if v},
            "score": sum(w * (terms.get(f, 0) if f.startswith(PREFIX) else impacts.get(f, 0))
                         for f, w in clauses.items())}


def _rank(word: str) -> bool:
    """Whether ``word`` is written as a rank: ASCII digits only ("²" and "٣" are digits to Python)."""
    return word.isascii() and word.isdigit()


def _hybrid_name(engine) -> str | None:
    method = engine.describe().hybrid
    return method.value if method is not None else None


# --- for people ------------------------------------------------------------------------------

def _number(x: float) -> str:
    return f"{x:.3f}"


def table(result: dict) -> str:
    """The explanation as text: the hits side by side per question token, then each hit's impacts
    token by token with how the model made them, the sum and the checks."""
    factor, hits, bag = result["factor"], result["hits"], result["tokens"]
    lines = [f"Q: {result['question']}",
             f"index {result['index']}: model {result['model']}, K {result['top_k']}, "
             f"{'IDF-weighted, ' if result['idf'] else ''}factor {factor:g} (impact = round(weight x {factor:g}); "
             f"score = sum of count x impact / {factor:g})"]
    if result["hybrid"] == "sum":
        lines.append("ranks and scores are search's: the one-request sum of SPARC and BM25 (its parts under each "
                     "hit); the impacts below are the SPARC side's")
    elif result["hybrid"]:
        lines.append(f"ranks are search's (SPARC fused with BM25, {result['hybrid']}); the scores below are SPARC's, "
                     "the sums the hybrid fuses")
    # side by side: which token each hit's score comes from
    width = max([len(t) for t in bag] + [8])
    names = [f"#{h['rank']}" if h["rank"] is not None else h["id"] for h in hits]
    columns = [max(len(n), 12) for n in names]
    lines += ["", f"{'token':<{width}} {'count':>5}  " + "  ".join(f"{n:>{c}}" for n, c in zip(names, columns))]
    for i, t in enumerate(bag):
        lines.append(f"{t:<{width}} {bag[t]:>5}  "
                     + "  ".join(f"{h['tokens'][i]['impact']:>{c}}" for h, c in zip(hits, columns)))
    scores = ["{} ({:.2f})".format(h["impact"], h["score"]) for h in hits]
    lines.append(f"{'score':<{width}} {'':>5}  " + "  ".join(f"{s:>{c}}" for s, c in zip(scores, columns)))
    words = any(c["word"] for h in hits for c in h["tokens"])
    for name, h in zip(names, hits):
        where = h["doc"] or h["id"]
        if h["doc"] and h["line"] is not None:
            where += f":{h['line']}"
        elif h["doc"] and h["start"] is not None:
            where += f" (characters {h['start']}-{h['end']})"
        if h["headings"]:
            where += " · " + " > ".join(h["headings"])
        if h["rank"] is not None:
            place = f"rank {h['rank']} in search, score {h['search_score']:.2f}"
        elif h.get("collapsed_into") is not None:
            place = (f"in the paragraph of search's hit #{h['collapsed_into']} (shown under it), score "
                     f"{h['search_score']:.2f}")
        else:
            place = f"not in search's top {RANK_DEPTH}"
        lines += ["", f"{name}  {h['id']}  [{where}; {place}]", f"  {h['text']}",
                  f"  {'token':<{width}} {'count':>5} {'impact':>6}  {'weight':>7} = ({'neural':>7} + {'passage':>7}) "
                  f"x {'idf':>5} + {'lexical':>7} + {'stem':>6}" + (f" + {'word':>6}" if words else "")]
        for c in h["tokens"]:
            if c["top_k"] or c["lexical"] or c["stem"] or c["word"]:
                neural = (f"({_number(c['neural']):>7} + {_number(c['passage']):>7}) x {c['idf']:5.2f}" if c["top_k"]
                          else f"{'not in the top K':<33}")
                made = (f"{_number(c['weight']):>7} = {neural} + {_number(c['lexical']):>7} + {_number(c['stem']):>6}"
                        + (f" + {_number(c['word']):>6}" if words else ""))
            elif c["neural"] + c["passage"] <= 0:  # the model gives it nothing: no cut to speak of
                made = f"{_number(0.0):>7}   not stored: the model scores it 0, and it is not a word of the sentence"
            else:
                made = (f"{_number(0.0):>7}   not stored: neural + passage {c['neural'] + c['passage']:.3f} "
                        f"below the K-th's {c['cut']:.3f}, and not a word of the sentence")
            check = "" if c["recomputed"] == c["impact"] else f"   (recomputed: {c['recomputed']})"
            lines.append(f"  {c['token']:<{width}} {c['count']:>5} {c['impact']:>6}  {made}{check}")
        agree = "=" if h["sum"] == h["impact"] else "!="
        lines.append(f"  sum of count x impact {h['sum']} {agree} Lucene's score {h['impact']} "
                     f"({h['score']:.2f} = {h['impact']} / {factor:g})")
        parts = h.get("sum_parts")
        if parts:
            a = parts["bm25_share"]
            sides = (f"{1 - a:g} x SPARC {parts['sparc']} / {parts['sparc_reach']} + "
                     f"{a:g} x BM25 {parts['bm25']:.2f} / {parts['bm25_reach']:.2f}")
            held = ", ".join(f"{t} {v:.2f}" for t, v in parts["bm25_terms"].items()) or "none of the question's"
            lines.append(f"  search's score {parts['score']:.3f} = {parts['coverage']:.2f} (the share of the "
                         f"question's words the corpus holds) x ({sides}), each side over the most this question "
                         f"can score there; its BM25 terms: {held}")
        if h["matches_index"]:
            lines.append(f"  made again from its text and context: all {h['checked']} impacts checked match the index")
        else:
            off = h["mismatched"]
            lines.append(f"  made again from its text and context: {len(off)} of {h['checked']} impacts differ from "
                         f"the index ({', '.join(off[:8])}{' ...' if len(off) > 8 else ''}): the index was made "
                         "otherwise (another model, settings or corpus statistics), or float rounding at the "
                         "quantisation boundary where they differ by 1")
    return "\n".join(lines)
