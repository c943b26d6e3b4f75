"""The lexical term: stored weights = the neural ones + alpha x BM25 over the corpus's WordPiece
statistics (+ beta x BM25 of each word's Porter stem for its vocabulary siblings), computed here from
the definitions; an update keeps the statistics it started with."""

from __future__ import annotations

import json
import math
import re
from collections import Counter

import pytest
import snowballstemmer

from sparc_es.encode.run import encode_corpus
from sparc_es.layout.manifest import Manifest
from sparc_es.layout.records import iter_vectors
from sparc_es.model import SparcModel
from sparc_es.model.lexical import CorpusStatistics

from tolerance import assert_impacts_match_floats

TEXTS = ["The capital of France is Paris.", "Paris has many museums and many bridges.",
         "Water boils at 100 degrees Celsius.", "The Seine flows through Paris.", "Celsius defined a scale."]


def write(path, texts):
    path.write_text("".join(json.dumps({"id": f"s{i}", "text": t, "context": " ".join(texts)}) + "\n"
                            for i, t in enumerate(texts)))
    return path


def bm25_by_hand(texts: list[str], tokenizer, k1: float, b: float) -> list[dict[str, float]]:
    """Lucene's BM25 term weight of every token of every text, over these texts."""
    bags = [Counter(t for t in tokenizer.tokenize(x)) for x in texts]
    n, avgdl = len(bags), sum(sum(c.values()) for c in bags) / len(bags)
    df = Counter(t for c in bags for t in c)
    return [{t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) * tf * (k1 + 1)
             / (tf + k1 * (1 - b + b * sum(c.values()) / avgdl)) for t, tf in c.items()} for c in bags]


def stems_by_hand(texts: list[str], tokenizer, k1: float, b: float) -> list[dict[str, float]]:
    """BM25 of each text's word stems (ASCII words, Porter), given to every whole-word vocabulary
    token with that stem that is not one of the text's own tokens."""
    porter = snowballstemmer.stemmer("porter")
    words = [porter.stemWords(re.findall(r"[a-z]+", x.lower())) for x in texts]
    n, avg = len(words), sum(map(len, words)) / len(words)
    df = Counter(s for w in words for s in set(w))
    by_stem: dict[str, list[str]] = {}
    for token in tokenizer.get_vocab():
        if re.fullmatch(r"[a-z]+", token):
            by_stem.setdefault(porter.stemWord(token), []).append(token)
    out = []
    for text, w in zip(texts, words):
        own, weights = set(tokenizer.tokenize(text)), {}
        for stem, tf in Counter(w).items():
            bm25 = math.log(1 + (n - df[stem] + 0.5) / (df[stem] + 0.5)) * tf * (k1 + 1) / (
                tf + k1 * (1 - b + b * len(w) / avg))
            weights.update({t: bm25 for t in by_stem.get(stem, []) if t not in own})
        out.append(weights)
    return out


def floats(folder) -> dict[str, dict[str, float]]:
    return {r["id"]: r["weights"] for r in iter_vectors(folder)}


@pytest.mark.parametrize("stem_weight", [0.0, 0.7])
def test_stored_weights_add_alpha_times_bm25_of_the_sentences_own_tokens(tiny_model_dir, tmp_path, stem_weight):
    corpus = write(tmp_path / "c.jsonl", TEXTS)
    plain = encode_corpus([corpus], tmp_path / "plain", SparcModel.load(tiny_model_dir, top_k=20), keep_floats=True,
                          progress=False, idf=False)
    model = SparcModel.load(tiny_model_dir, top_k=20, lexical_weight=0.5, stem_weight=stem_weight)
    manifest = encode_corpus([corpus], tmp_path / "lex", model, keep_floats=True, progress=False, idf=False)
    assert manifest.model.fingerprint != plain.model.fingerprint and manifest.model.lexical_weight == 0.5
    assert manifest.model.stem_weight == stem_weight
    assert manifest.lexical["sentences"] == len(TEXTS) and CorpusStatistics.read(tmp_path / "lex").sentences == 5
    own = bm25_by_hand(TEXTS, model.tokenizer, 0.9, 0.4)
    siblings = stems_by_hand(TEXTS, model.tokenizer, 0.9, 0.4) if stem_weight else [{}] * len(TEXTS)
    before, after = floats(tmp_path / "plain"), floats(tmp_path / "lex")
    outside = 0
    for i, (mine, sib) in enumerate(zip(own, siblings)):
        sid = f"s{i}"
        assert set(after[sid]) == set(before[sid]) | set(mine) | set(sib)
        outside += len(set(mine) - set(before[sid]))
        for token, w in after[sid].items():
            assert w == pytest.approx(before[sid].get(token, 0.0) + 0.5 * mine.get(token, 0.0)
                                      + stem_weight * sib.get(token, 0.0), rel=1e-5)
    assert outside > 0  # K = 20 left some of the sentences' own tokens out: the term brings them in
    if stem_weight:  # "museums" lends to "museum", "bridges" to "bridge", "degrees" to "degree", ...
        assert {"museum", "bridge", "degree", "flow"} <= set().union(*siblings)
        assert model.fingerprint != SparcModel.load(tiny_model_dir, top_k=20, lexical_weight=0.5).fingerprint


def test_the_lexical_term_can_leave_out_lucenes_stop_words(tiny_model_dir, tmp_path):
    """lexical_skips_stop_words: a stop word of the sentence gets no lexical weight; every other token
    gets alpha x its BM25 over the corpus's statistics, with the sentence's length counted without
    the stop words."""
    from sparc_es.model.lexical import STOP_WORDS

    corpus = write(tmp_path / "c.jsonl", TEXTS)
    encode_corpus([corpus], tmp_path / "plain", SparcModel.load(tiny_model_dir, top_k=20), keep_floats=True,
                  progress=False, idf=False)
    model = SparcModel.load(tiny_model_dir, top_k=20, lexical_weight=0.5, lexical_skips_stop_words=True)
    manifest = encode_corpus([corpus], tmp_path / "lex", model, keep_floats=True, progress=False, idf=False)
    assert manifest.model.lexical_skips_stop_words and Manifest.read(tmp_path / "lex").model.lexical_skips_stop_words
    assert model.fingerprint != SparcModel.load(tiny_model_dir, top_k=20, lexical_weight=0.5).fingerprint
    tok = model.tokenizer
    bags = [Counter(tok.tokenize(x)) for x in TEXTS]
    n, avgdl = len(bags), sum(sum(c.values()) for c in bags) / len(bags)  # the corpus's length: every token
    df = Counter(t for c in bags for t in c)
    before, after = floats(tmp_path / "plain"), floats(tmp_path / "lex")
    skipped = 0
    for i, bag in enumerate(bags):
        sid, length = f"s{i}", sum(tf for t, tf in bag.items() if t not in STOP_WORDS)
        for t, tf in bag.items():
            if t in STOP_WORDS:
                skipped += 1
                assert after[sid].get(t, 0.0) == before[sid].get(t, 0.0), (sid, t)
            else:
                bm25 = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) * tf * 1.9 / (tf + 0.9 * (0.6 + 0.4 * length
                                                                                                  / avgdl))
                assert after[sid][t] == pytest.approx(before[sid].get(t, 0.0) + 0.5 * bm25, rel=1e-5), (sid, t)
    assert skipped >= 5  # "the", "of", "is", "and", "at", "a" are in the texts


def test_an_update_keeps_the_statistics_it_started_with(tiny_model_dir, tmp_path):
    model = SparcModel.load(tiny_model_dir, top_k=20, lexical_weight=0.5, stem_weight=0.7)
    out = tmp_path / "enc"
    encode_corpus([write(tmp_path / "a.jsonl", TEXTS)], out, model, progress=False, idf=False)
    statistics = (out / "lexical.json").read_bytes()
    before = (out / "vectors/vectors.jsonl").read_bytes().splitlines()
    edited = [*TEXTS[:4], "Celsius defined a temperature scale."]
    manifest = encode_corpus([write(tmp_path / "b.jsonl", edited)], out, model, progress=False, idf=False, update=True)
    after = (out / "vectors/vectors.jsonl").read_bytes().splitlines()
    assert (out / "lexical.json").read_bytes() == statistics and manifest.reused == 0  # every context changed
    # every weight is the one the first corpus's statistics give, not the new corpus's
    kept = CorpusStatistics.read(out)
    assert kept.stem_df and kept.words > 0
    contexts = [" ".join(edited)] * 5
    direct = model.encode_batch(edited, contexts, corpus=kept)
    neural = model.encode_batch(edited, contexts)  # without statistics: the neural top K, where the cut is made
    vectors = [json.loads(line)["vector"] for line in after]
    assert len(vectors) == len(direct)
    # The update encoded the five sentences sorted by length, encode_batch in input order: float
    # noise, so an impact may be one step off where its float sits at a .5 rounding boundary (and a
    # near-tie at the neural cut may fall either way); the new corpus's statistics move weights by
    # far more than that.
    for i, (vector, e, n) in enumerate(zip(vectors, direct, neural)):
        cut = float(n.weights[-1]) if len(n.tokens) >= model.config.top_k else 0.0
        assert_impacts_match_floats(vector, e.tokens, e.weights, manifest.factor, cut=cut, what=i)
    assert before != after
    same = encode_corpus([write(tmp_path / "c.jsonl", edited)], out, model, progress=False, idf=False, update=True)
    assert same.reused == 5 and (out / "vectors/vectors.jsonl").read_bytes().splitlines() == after
    assert Manifest.read(out).lexical["sentences"] == 5



def test_the_compiled_porter_stemmer_gives_the_pure_python_stems():
    """snowballstemmer hands out PyStemmer's compiled stemmer when it is installed (7x faster); the
    stem term's statistics must not depend on which one a machine has: the shipped model's
    whole-word vocabulary and a corpus's words stem the same."""
    from snowballstemmer.porter_stemmer import PorterStemmer

    compiled = snowballstemmer.stemmer("porter")
    assert not isinstance(compiled, PorterStemmer)  # PyStemmer is a dependency
    words = sorted({t for t in SparcModel.load("default").tokenizer.get_vocab() if t.isascii() and t.isalpha()}
                   | {w for t in TEXTS for w in re.findall(r"[a-z]+", t.lower())})
    assert len(words) > 20_000
    assert compiled.stemWords(words) == [PorterStemmer().stemWord(w) for w in words]


def test_statistics_count_stems_and_whole_words_apart():
    """A loop over the stems once reused the name of the whole-word argument: without whole words
    the statistics held the characters of the last sentence's stems as 'whole words'."""
    from sparc_es.model.lexical import CorpusStatistics

    stats = CorpusStatistics()
    stats.add([[1, 2], [2, 3]], stems=[["run", "fast"], ["run"]])
    assert stats.word_df is None and stats.stem_df == {"run": 2, "fast": 1} and stats.words == 3
    both = CorpusStatistics()
    both.add([[1, 2], [2, 3]], stems=[["run", "fast"], ["run"]], words=[["--fast"], ["--fast", "ls"]])
    assert both.word_df == {"--fast": 2, "ls": 1} and both.stem_df == {"run": 2, "fast": 1}


def test_the_stem_term_lends_stop_words_nothing_when_the_lexical_term_skips_them():
    """Porter stems "as" to "a" and "its" to "it": the stem term lent those stop words the weight
    the lexical term's stop-word rule denies them (their posting lists are what a question walks)."""
    sentence = "Its lamp is lit as the sun sets."
    ids = SparcModel.load("default").tokenizer.convert_tokens_to_ids
    siblings = {}
    for skips in (True, False):
        model = SparcModel.load("default", lexical_skips_stop_words=skips)  # the shipped stem weight
        corpus = model.count_corpus([sentence, "The keeper trims the wick."])
        siblings[skips] = model.lexical_terms([sentence], corpus)[0].siblings
    assert ids("a") in siblings[False] and ids("it") in siblings[False]  # without the rule: lent
    assert ids("a") not in siblings[True] and ids("it") not in siblings[True]
    assert {t: w for t, w in siblings[False].items() if t not in (ids("a"), ids("it"))} == siblings[True]
