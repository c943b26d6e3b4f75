"""What a sentence stores: the one place its weights are composed, for encoding and training.

For a sentence s with passage P (its context, or itself without one), in this order:

1. **neural**: f(v, s) of :mod:`sparc_es.model.neural` (the paper's f: encoder, head, w) for every
   scorable vocabulary token v;
2. **passage expansion**: + lambda x f_P(v, P), the passage encoded alone by the passage encoder
   (``passage_weight``; :class:`~sparc_es.layout.passages.PassageCache` keeps them for updates);
3. **top-K cut** of that sum (K = ``top_k``): the model chooses which tokens a sentence keeps;
4. **IDF** (``encode --idf``): each kept weight x log(N / N_v) over the corpus being encoded;
5. **lexical term** (:mod:`sparc_es.model.lexical`): + alpha x BM25 of the sentence's own tokens
   + beta x BM25 of its words' Porter stems for their siblings, with the corpus statistics
   (not IDF-weighted: BM25 weighs by IDF already); tokens outside the top K join the map;
6. **whole words**: + gamma x BM25 of each whole technical word, stored as a ``w|word`` feature;
7. **quantisation** (:func:`sparc_es.layout.records.quantize`): integer impacts ``round(weight x factor)``.

:class:`Pipeline` runs steps 1-6 for ``encode`` (sparse maps) and gives ``train`` the same sum as
dense, differentiable scores over the question tokens (:meth:`Pipeline.training_scores`);
``requantize --idf`` re-applies steps 4-6 to kept parts with :func:`stored_weights`; ``explain``
and ``scripts/bench.py`` call it too, the benchmark with a :class:`Stages` timer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from sparc_es.errors import ModelError
from sparc_es.model.lexical import (
    WORD_PREFIX,
    CorpusStatistics,
    LexicalTerm,
    Stems,
    Words,
    add_lexical,
    add_words,
    bm25_weights,
    count_corpus,
    sentence_token_ids,
    stem_weights,
    stop_word_ids,
    word_weights,
)


def _torch():
    import torch

    return torch


@dataclass(frozen=True)
class EncodedSentence:
    """One sentence's top-K map and what happened while encoding it."""

    tokens: list[str]
    weights: np.ndarray  # float32, descending, all > 0
    truncated_sentence: bool = False
    truncated_context: bool = False
    nonzero: int = 0  # tokens with f(v, s) > 0 before top-K
    # With a lexical term: token -> (its neural weight before IDF, 0 outside the top K; its lexical weight)
    lexical: dict[str, tuple[float, float]] | None = None


@dataclass(frozen=True)
class TokenParts:
    """How one token's stored weight was made (:meth:`Pipeline.explain_parts`), in the order of the
    module docstring: ``weight = (neural + passage) x idf`` when the token is among the sentence's
    top K (``top_k``), else 0, ``+ lexical + stem + word``."""

    weight: float  # what the sentence stores, before quantisation (0: nothing)
    neural: float  # f(v, s): the encoder and head (and the learned token weight u_v, when the model has one)
    passage: float  # lambda x f_P(v, passage) (times u_v too)
    top_k: bool  # neural + passage is among the K highest of the sentence (else not stored)
    idf: float  # the IDF factor on the kept neural weight (1 without IDF weighting)
    lexical: float  # alpha x BM25 of the token in the sentence's own text
    stem: float  # beta x BM25 of a word's Porter stem, lent to this token (a stem sibling)
    word: float  # gamma x BM25 of the whole word (a ``w|word`` feature)
    cut: float  # the K-th highest neural + passage of the sentence: what a token needs to be kept

    @property
    def kept(self) -> float:
        """The neural part as stored: (neural + passage) x idf, or 0 outside the top K."""
        return (self.neural + self.passage) * self.idf if self.top_k else 0.0

    @property
    def total(self) -> float:
        """The parts summed (``weight`` up to float rounding)."""
        return self.kept + self.lexical + self.stem + self.word


def passage_text(sentence: str, context: str | None) -> str:
    """The passage a sentence is expanded with: its context, or the sentence itself without one."""
    return context or sentence


class Stages:
    """Seconds spent per stage of :class:`Pipeline` (what ``scripts/bench.py`` reports)."""

    NAMES = ("tokenize", "transformer", "passages", "vocabulary product", "top-K", "lexical term",
             "IDF and composition")

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(self.NAMES, 0.0)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self._sync()
        started = time.perf_counter()
        try:
            yield
        finally:
            self._sync()  # a GPU's work is queued: timed where it ran, not where it was waited for
            self.seconds[name] += time.perf_counter() - started

    @staticmethod
    def _sync() -> None:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()

    def shares(self) -> dict[str, float]:
        total = sum(self.seconds.values()) or 1.0
        return {k: round(v / total, 3) for k, v in self.seconds.items()}


class _NoTimer:
    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        yield


_UNTIMED = _NoTimer()


def stored_weights(tokens: np.ndarray, neural: np.ndarray, idf: np.ndarray | None = None,
                   lexical: dict[int, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Steps 4-5 for one sentence, from its top-K neural map (token ids, float32 weights): the
    neural weights times ``idf`` (one factor per vocabulary id), then the lexical term (already
    scaled) added. ``encode`` and ``requantize --idf`` both call it.

    Returns (token ids, float32 weights > 0), by weight descending."""
    weights = np.asarray(neural, dtype=np.float32)
    if idf is not None:
        weights = weights * np.asarray(idf, dtype=np.float32)[tokens]
        order = np.argsort(-weights, kind="stable")
        tokens, weights = tokens[order], weights[order]
    if lexical:
        tokens, weights = add_lexical(tokens, weights, lexical)
    weights = weights.astype(np.float32)
    keep = weights > 0
    return tokens[keep], weights[keep]


class Pipeline:
    """Steps 1-6 of the module docstring for one :class:`~sparc_es.model.neural.SparcModel`
    (``model.pipeline``); it also keeps the model's Porter stems and whole-word splitter."""

    def __init__(self, model) -> None:
        self.model = model
        self.config = model.config
        self._stems: Stems | None = None
        self._words: Words | None = None
        self._skipped: frozenset[int] | None = None

    # --- the lexical term's pieces ---------------------------------------------------------

    @property
    def words(self) -> Words | None:
        """The whole-word splitter of the word term (None without a word weight)."""
        if not self.model.config.word_weight:
            return None
        if self._words is None:
            self._words = Words(self.model.tokenizer)
        return self._words

    @property
    def stems(self) -> Stems | None:
        """The vocabulary's Porter stems (built on first use: about a second), for the stem term."""
        if not self.model.config.stem_weight:
            return None
        if self._stems is None:
            self._stems = Stems(self.model.tokenizer, self.model.scorable.cpu().numpy())
        return self._stems

    @property
    def skipped(self) -> frozenset[int]:
        """The token ids the lexical term leaves out: the stop words, with ``lexical_skips_stop_words``."""
        if not self.model.config.lexical_skips_stop_words:
            return frozenset()
        if self._skipped is None:
            self._skipped = stop_word_ids(self.model.tokenizer)
        return self._skipped

    def count_corpus(self, texts: Iterable[str]) -> CorpusStatistics:
        """The statistics of :mod:`sparc_es.model.lexical` over a stream of sentence texts, as this model
        needs them (IDF weighting and the lexical term)."""
        model = self.model
        return count_corpus(texts, model.tokenizer, model.scorable.cpu().numpy(), stems=self.stems, words=self.words)

    def lexical_terms(self, sentences: list[str], corpus: CorpusStatistics | None) -> list[LexicalTerm] | None:
        """Each sentence's lexical term before scaling (BM25 of its own tokens; of its words' stems
        for their siblings; of its whole words), or None without one or without ``corpus``."""
        c = self.model.config
        if not c.lexical or corpus is None:
            return None
        ids = sentence_token_ids(self.model.tokenizer, sentences, self.model.scorable.cpu().numpy())
        if c.stem_weight and corpus.stem_df is None:
            raise ModelError("the model has a stem weight but the corpus statistics were counted without stems")
        if c.word_weight and corpus.word_df is None:
            raise ModelError("the model has a word weight but the corpus statistics were counted without whole words")
        stems, words = self.stems, self.words
        skipped = self.skipped
        return [LexicalTerm(bm25_weights([i for i in x if i not in skipped] if skipped else x, corpus, c.lexical_k1,
                                         c.lexical_b),
                            {} if stems is None else stem_weights(stems.of(t), x, corpus, stems, c.lexical_k1,
                                                                  c.lexical_b, skipped),
                            {} if words is None else word_weights(words.of(t), len(x), corpus, c.lexical_k1,
                                                                  c.lexical_b))
                for t, x in zip(sentences, ids)]

    # --- encoding: sparse maps -------------------------------------------------------------

    def encode_batch(self, sentences: list[str], contexts: list[str], top_k: int | None = None,
                     idf=None, passages=None, corpus: CorpusStatistics | None = None,
                     timer: Stages | None = None, steps: dict | None = None) -> list[EncodedSentence]:
        """Steps 1-6 for one batch (no sorting, no progress bar).

        ``idf`` (one float per vocabulary token) multiplies the kept weights after the top-K cut,
        so the model still chooses which tokens a sentence keeps (weighting before the cut let
        corpus-rare expansion tokens crowd out the sentence's own: 33.9 against 73.3 MRR on SQuAD
        dev, docs/adaptation.md). With passage expansion, ``passages`` holds each sentence's row
        of ``model.passage_scores`` (computed here when not given). With a lexical term,
        ``corpus`` holds the statistics it is computed with; without them the term is left out
        (``explain`` shows the neural part alone). ``timer`` adds each stage's seconds. ``steps``,
        when given, receives the batch's intermediate scores (:meth:`explain_parts` reads them).
        """
        torch = _torch()
        model, c, timer = self.model, self.model.config, timer or _UNTIMED
        k = top_k or c.top_k
        with timer.stage("tokenize"):
            ids, seg, s_cut, c_cut = model.tokenize_pairs(sentences, contexts)
        with torch.inference_mode():
            with timer.stage("transformer"):
                hidden, mask = model.hidden_states(ids, seg)
            if c.passage_weight and passages is None:
                with timer.stage("passages"):
                    passages = model.passage_scores([passage_text(s, x) for s, x in zip(sentences, contexts)])
            with timer.stage("vocabulary product"):
                f = model.token_scores(hidden, mask, passage=c.passage_weight * passages if c.passage_weight else None)
            with timer.stage("top-K"):
                nonzero = (f > 0).sum(dim=1).tolist()
                values, indices = torch.topk(f, min(k, f.shape[1]), dim=1)
                values, indices = values.cpu().numpy(), indices.cpu().numpy()
        with timer.stage("lexical term"):
            lexical = self.lexical_terms(sentences, corpus)
        out = []
        with timer.stage("IDF and composition"):
            names = model._id_to_token
            for i in range(len(sentences)):
                extra = None if lexical is None else lexical[i].scaled(c.lexical_weight, c.stem_weight)
                ix, v = stored_weights(indices[i], values[i], idf, extra)
                words = None if lexical is None else {t: c.word_weight * w for t, w in lexical[i].words.items()}
                tokens, v = add_words([names[j] for j in ix], v, words)
                parts = None
                if extra or words:  # each lexical token's (neural, lexical) parts: requantize --idf needs them apart
                    neural = dict(zip(indices[i].tolist(), values[i].tolist()))
                    parts = {names[t]: (neural.get(t, 0.0), w) for t, w in extra.items() if w > 0}
                    parts.update({t: (0.0, w) for t, w in (words or {}).items() if w > 0})
                out.append(EncodedSentence(tokens=tokens, weights=v, truncated_sentence=s_cut[i],
                                           truncated_context=c_cut[i], nonzero=nonzero[i], lexical=parts))
        if steps is not None:
            steps.update(hidden=hidden, mask=mask, f=f, values=values, indices=indices, lexical=lexical)
        return out

    def encode(self, pairs: Iterable[tuple[str, str]], batch_size: int = 32, window: int = 8,
               top_k: int | None = None, idf=None, on_batch: Callable[[int], object] | None = None,
               corpus: CorpusStatistics | None = None, passage_cache=None,
               timer: Stages | None = None) -> Iterator[EncodedSentence]:
        """Encode (sentence, context) pairs as a stream, in input order.

        Pairs are read ``batch_size * window`` at a time and sorted by length so each batch pads
        little; results come back in the order they went in. With passage expansion each distinct
        context of a window is encoded once (a sentence without context stands for its own passage).
        ``on_batch(n)`` is called as each batch of n sentences is done (progress bars); ``corpus``:
        see :meth:`encode_batch`. ``passage_cache`` (a :class:`~sparc_es.layout.passages.PassageCache`)
        gives the passages it holds and keeps those computed here.
        """
        buffer: list[tuple[str, str]] = []
        for pair in pairs:
            buffer.append(pair)
            if len(buffer) >= batch_size * window:
                yield from self._encode_window(buffer, batch_size, top_k, idf, on_batch, corpus, passage_cache, timer)
                buffer = []
        if buffer:
            yield from self._encode_window(buffer, batch_size, top_k, idf, on_batch, corpus, passage_cache, timer)

    def passages(self, texts: list[str], batch_size: int, cache, timer) -> object:
        """f_P of each distinct passage of a window: from ``cache`` where it holds them, else encoded
        (shortest first, ``batch_size`` at a time) and kept there."""
        torch = _torch()
        model = self.model
        size = model.embeddings.shape[0]
        with torch.inference_mode(), timer.stage("passages"):
            scores = torch.empty((len(texts), size), device=model.device)
            todo = []
            for i, t in enumerate(texts):
                stored = None if cache is None else cache.get(t, size)
                if stored is None:
                    todo.append(i)
                else:
                    scores[i] = torch.from_numpy(stored)
            todo.sort(key=lambda i: len(texts[i]))
            for b in range(0, len(todo), batch_size):
                idx = todo[b: b + batch_size]
                scores[idx] = model.passage_scores([texts[i] for i in idx])
                if cache is not None:
                    for i, r in zip(idx, scores[idx].cpu().numpy()):
                        cache.put(texts[i], r)
        return scores

    def _encode_window(self, pairs: list[tuple[str, str]], batch_size: int, top_k: int | None, idf=None,
                       on_batch=None, corpus=None, cache=None, timer: Stages | None = None) -> list[EncodedSentence]:
        timer = timer or _UNTIMED
        rows_of = None
        if self.model.config.passage_weight:
            texts = list(dict.fromkeys(passage_text(s, c) for s, c in pairs))
            row = {t: i for i, t in enumerate(texts)}
            scores = self.passages(texts, batch_size, cache, timer)
            rows_of = [row[passage_text(s, c)] for s, c in pairs]
        # Character length is a good enough proxy for token length to sort by.
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        results: list[EncodedSentence | None] = [None] * len(pairs)
        for b in range(0, len(order), batch_size):
            idx = order[b: b + batch_size]
            rows = None if rows_of is None else scores[[rows_of[i] for i in idx]]
            encoded = self.encode_batch([pairs[i][0] for i in idx], [pairs[i][1] for i in idx], top_k, idf, rows,
                                        corpus, timer)
            for i, e in zip(idx, encoded):
                results[i] = e
            if on_batch is not None:
                on_batch(len(idx))
        return results  # type: ignore[return-value]

    def explain(self, sentence: str, context: str = "", top: int = 20) -> list[tuple[str, float]]:
        """The sentence's highest-scoring (token, f(v, s)) pairs, ``top`` of them at most, for people
        (SPARTA table 6). A blank sentence, a text that is no string or a ``top`` under 1 is a
        one-line :class:`~sparc_es.errors.ModelError` (a blank sentence gave unrelated tokens)."""
        for name, text in (("sentence", sentence), ("context", context)):
            if not isinstance(text, str):
                raise ModelError(f"the {name} to explain is text, not {type(text).__name__}")
        if not sentence.strip():
            raise ModelError("empty sentence: there is nothing to explain")
        if isinstance(top, bool) or not isinstance(top, int) or top < 1:
            raise ModelError(f"top is how many tokens to show, 1 or more, not {top!r}")
        e = self.encode_batch([sentence], [context], top_k=top)[0]
        return list(zip(e.tokens, e.weights.tolist()))

    def explain_parts(self, sentence: str, context: str = "", corpus: CorpusStatistics | None = None, idf=None,
                      tokens: Iterable[str] = ()) -> dict[str, TokenParts]:
        """How each weight the sentence stores was made: :meth:`encode_batch` itself runs (the
        same composition, so ``weight`` is what ``encode`` stores with this ``corpus`` and ``idf``),
        and its intermediate scores are read back term by term (:class:`TokenParts`). Every stored
        token is explained, and each of ``tokens`` too (weight 0 where the sentence stores none)."""
        torch = _torch()
        model, c = self.model, self.config
        steps: dict = {}
        encoded = self.encode_batch([sentence], [context], idf=idf, corpus=corpus, steps=steps)[0]
        f = steps["f"][0]
        kept = {int(j): float(v) for j, v in zip(steps["indices"][0], steps["values"][0])}
        cut = float(steps["values"][0][-1]) if len(kept) else 0.0
        term = steps["lexical"][0] if steps["lexical"] is not None else None
        stored = dict(zip(encoded.tokens, encoded.weights.tolist()))
        vocab = model.tokenizer.get_vocab()
        names = list(stored) + [t for t in tokens if t not in stored]
        ids = sorted({vocab[t] for t in names if vocab.get(t, f.shape[0]) < f.shape[0]})
        neural = dict(zip(ids, f[ids].tolist()))
        if c.passage_weight and ids:  # f without the passage term, the neural part alone, for these tokens only
            with torch.no_grad():  # not inference mode: the kernel reads the (sliced) E's version counter
                alone = model.token_scores(steps["hidden"], steps["mask"], torch.tensor(ids, device=f.device))[0]
            neural = dict(zip(ids, alone.tolist()))
        out: dict[str, TokenParts] = {}
        for t in names:
            if t.startswith(WORD_PREFIX):
                word = c.word_weight * term.words.get(t, 0.0) if term is not None else 0.0
                out[t] = TokenParts(stored.get(t, 0.0), 0.0, 0.0, False, 1.0, 0.0, 0.0, word, cut)
                continue
            j = vocab.get(t)
            if j is None or j >= f.shape[0]:
                out[t] = TokenParts(0.0, 0.0, 0.0, False, 1.0, 0.0, 0.0, 0.0, cut)
                continue
            total, alone = float(f[j]), neural[j]
            out[t] = TokenParts(stored.get(t, 0.0), alone, total - alone, j in kept,
                                float(idf[j]) if idf is not None else 1.0,
                                c.lexical_weight * term.own.get(j, 0.0) if term is not None else 0.0,
                                c.stem_weight * term.siblings.get(j, 0.0) if term is not None else 0.0, 0.0, cut)
        return out

    # --- training: dense scores over the question tokens -----------------------------------

    def training_scores(self, hidden, mask, vocab_ids, passage=None, full_passage=None, top_k_aware: bool = False,
                        lexical=None, full=None):
        """Steps 1-5 as dense, differentiable scores of a batch over the question tokens ``vocab_ids``.

        ``passage``: lambda x f_P over ``vocab_ids`` (lambda learnable); ``full_passage``: the same
        over the whole vocabulary, for ``top_k_aware`` (a question token scores only if it is among
        the sentence's top K over the whole vocabulary, as the index will hold it; the cut is not
        differentiated; ``full``, where the caller has it already, is that whole-vocabulary score,
        detached). ``lexical``: (alpha, own, beta, siblings) dense over ``vocab_ids``. No IDF:
        training scores the source corpus, where encode's IDF is computed later, per corpus.
        """
        torch = _torch()
        model = self.model
        f = model.token_scores(hidden, mask, vocab_ids, passage)
        if top_k_aware:
            with torch.no_grad():
                if full is None:
                    full = model.token_scores(hidden.detach(), mask, passage=full_passage)
                kth = full.topk(min(model.config.top_k, full.shape[1]), dim=1).values[:, -1:]
                # Membership from the same full product the K-th came from: f, a product over fewer
                # columns, sums in another order and may put the K-th token itself a bit below it.
                kept = full.index_select(1, vocab_ids) >= kth
            f = f * kept.to(f.dtype)
        if lexical is not None:
            alpha, own, beta, siblings = lexical
            f = f + alpha * own + beta * siblings
        return f
