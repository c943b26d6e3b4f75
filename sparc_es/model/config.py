"""The settings of a SPARC model: one frozen, self-validating config, written as ``sparc_config.json``.

Every setting that changes what a sentence stores lives here, with its range and why; the config
also says which of them enter the model's fingerprint (:meth:`SparcConfig.fingerprint_settings`),
so the rule sits beside the fields it describes.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass, field
from enum import Enum

from sparc_es.errors import ModelError, choice

FORMAT = "sparc-es-model/1"


class Head(str, Enum):
    """How a position's hidden state is turned into vocabulary logits before the max."""

    DOT = "dot"  # H . E^T, the paper's
    MLM = "mlm"  # the base's BERT MLM head: LayerNorm(act(dense(H))) . E^T + b, E still tied


class MaxOver(str, Enum):
    """Which positions of H(s) the max in f(v, s) runs over."""

    SENTENCE = "sentence"  # [CLS] sentence [SEP]: token type 0 (about 8x cheaper to encode)
    ALL = "all"  # sentence and context, as in SPARTA


# The type of each SparcConfig field as sparc_config.json holds it (annotations are strings here);
# tests check it covers every field.
_KINDS: dict[str, type] = {
    "w": float, "top_k": int, "max_length": int, "max_over": str, "head": str, "token_weights": bool,
    "passage_weight": float, "passage_encoder": str, "passage_max_length": int, "lexical_weight": float,
    "lexical_k1": float, "lexical_b": float, "lexical_skips_stop_words": bool, "stem_weight": float,
    "word_weight": float, "base_model": dict, "adaptation": dict}
_WRITTEN_BESIDE = ("format", "versions")  # keys SparcModel.save writes next to the fields


def _shown(value) -> str:
    """``value`` for a one-line message: non-finite floats as JSON spells them (NaN, Infinity)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return repr(value)


def _bad(name: str, value, rule: str) -> ModelError:
    return ModelError(f"field {name!r} is {_shown(value)}; {rule}")


def _non_finite(value, where: str = "") -> str | None:
    """The key path of the first NaN or infinity inside a JSON-like value, else None."""
    if isinstance(value, float) and not math.isfinite(value):
        return where
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for key, item in items:
        found = _non_finite(item, f"{where}.{key}" if where else str(key))
        if found is not None:
            return found
    return None


def _check_subfolder_name(name: str, value: str) -> None:
    """``value`` is "self" or a relative folder name that stays below the model folder."""
    parts = value.replace("\\", "/").split("/")
    absolute = value.startswith(("/", "\\")) or ":" in parts[0]  # POSIX, or a Windows drive
    if value != "self" and (absolute or any(p in ("", ".", "..") for p in parts)):
        raise _bad(name, value, 'it must be "self" or the name of a sub-folder of the model folder '
                                '(relative, without "." or "..")')


@dataclass(frozen=True)
class SparcConfig:
    """Settings stored with a model folder and re-read at every use."""

    w: float = 0.0
    top_k: int = 500
    max_length: int = 256
    max_over: MaxOver = MaxOver.SENTENCE
    head: Head = Head.DOT
    token_weights: bool = False  # a learned per-token multiplier u_v on f(v, s), stored in the index
    # Passage expansion: a sentence stores f(v, s) + passage_weight * f_P(v, passage), with the
    # passage encoded alone ([CLS] passage [SEP], max over all its positions, at most
    # passage_max_length tokens) by the encoder in the subfolder ``passage_encoder`` ("self": this one).
    passage_weight: float = 0.0
    passage_encoder: str = "self"
    passage_max_length: int = 256
    # The lexical term (sparc_es.model.lexical): alpha x BM25(k1, b) over the sentence's own WordPiece
    # tokens, with the statistics of the corpus being encoded, added to its stored weights.
    lexical_weight: float = 0.0
    lexical_k1: float = 0.9
    lexical_b: float = 0.4
    # ... leaving out the tokens that are Lucene's English stop words (sparc_es.model.lexical.STOP_WORDS).
    lexical_skips_stop_words: bool = False
    # ... and beta x BM25 of each word's Porter stem for the vocabulary's other words with that stem.
    stem_weight: float = 0.0
    # ... and gamma x BM25 of each whole word WordPiece splits (identifiers, flags, numbers), stored
    # as a ``w|word`` feature that questions containing the word also ask for (sparc_es.model.lexical.Words).
    word_weight: float = 0.0
    base_model: dict = field(default_factory=dict)  # provenance: name, package (or local path), sha256
    adaptation: dict = field(default_factory=dict)  # embedding replacement provenance (sparc_es.training.adapt)

    def __post_init__(self) -> None:
        """Check every field: its type, that numbers are finite, and the range its use allows.

        Runs on every construction (``sparc_config.json``, overrides, ``dataclasses.replace``), so a
        diverged or mistyped value never reaches encoding or a written config. Ranges, from use:

        * ``w``: any finite number, but exp(w) multiplies every neural score in float32: beyond
          +-80 it overflows to infinity or underflows to 0 (every vector empty);
        * ``top_k`` >= 1 (the number of tokens stored); ``max_length``, ``passage_max_length`` >= 8
          ([CLS] and [SEP]s take three positions); their upper limit is the encoder's position table,
          checked by :meth:`SparcModel.load`, which has the encoder;
        * ``passage_weight``, ``lexical_weight``, ``stem_weight``, ``word_weight`` >= 0: each adds
          evidence for a token, 0 turns it off, and a negative one would count a token's presence
          against the sentence (training learns them as exp(log weight), always positive);
        * ``lexical_k1`` >= 0 (0 is binary BM25: term frequency ignored, still no division by zero)
          and ``lexical_b`` in [0, 1] (the share of length normalisation; outside it the BM25
          denominator can reach zero or turn negative);
        * ``passage_encoder``: "self" or a relative sub-folder name without "." or ".." parts,
          so saving and loading stay inside the model folder (:meth:`SparcModel.load` checks it exists);
        * ``base_model``, ``adaptation``: objects of provenance, with no NaN or infinity anywhere.
        """
        for name, kind in _KINDS.items():
            value = getattr(self, name)
            if kind is float and isinstance(value, numbers.Real) and not isinstance(value, bool):
                value = float(value)  # JSON writes 1.0 as 1; numpy scalars become plain floats
            elif kind is int and isinstance(value, numbers.Integral) and not isinstance(value, bool):
                value = int(value)
            elif not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
                raise _bad(name, value, f"it must be {'a number' if kind is float else kind.__name__}")
            if kind is float and not math.isfinite(value):
                raise _bad(name, value, "it must be a finite number")
            object.__setattr__(self, name, value)
        # accept the enums' string values too (config files, overrides)
        object.__setattr__(self, "max_over", choice(MaxOver, self.max_over, "max_over", ModelError))
        object.__setattr__(self, "head", choice(Head, self.head, "head", ModelError))
        if abs(self.w) > 80:
            raise _bad("w", self.w, "exp(w) must stay a finite, non-zero float32: |w| at most 80")
        if self.top_k < 1:
            raise _bad("top_k", self.top_k, "top-K must be at least 1")
        for name in ("max_length", "passage_max_length"):
            if getattr(self, name) < 8:
                raise _bad(name, getattr(self, name), "it must be at least 8 tokens")
        for name in ("passage_weight", "lexical_weight", "stem_weight", "word_weight", "lexical_k1"):
            if getattr(self, name) < 0:
                raise _bad(name, getattr(self, name), "it must be >= 0")
        if not 0 <= self.lexical_b <= 1:
            raise _bad("lexical_b", self.lexical_b, "it must be within [0, 1]")
        _check_subfolder_name("passage_encoder", self.passage_encoder)
        for name in ("base_model", "adaptation"):
            where = _non_finite(getattr(self, name))
            if where is not None:
                raise ModelError(f"field {name!r} holds NaN or infinity at {where!r}; numbers must be finite")
        for key in ("name", "package", "path", "sha256"):  # sparc_es.training.adapt.find_base reads them as text
            if key in self.base_model and not isinstance(self.base_model[key], str):
                raise ModelError(f"field 'base_model' has {key!r} = {self.base_model[key]!r}; it must be str")

    @property
    def lexical(self) -> bool:
        """Whether encoding needs the corpus statistics of sparc_es.model.lexical."""
        return bool(self.lexical_weight or self.stem_weight or self.word_weight)

    def fingerprint_settings(self, has_head: bool) -> dict:
        """The settings that change f(v, s) and what a sentence stores, as the fingerprint hashes
        them (:func:`sparc_es.model.neural.weights_fingerprint`). Fields enter only when their
        feature is on, so older fingerprints (no head, no lexical term) stay what they were."""
        settings = {"w": self.w, "max_over": self.max_over.value, "max_length": self.max_length}
        if has_head:
            settings["head"] = self.head.value
        if self.passage_weight:
            settings["passage"] = [self.passage_weight, self.passage_encoder, self.passage_max_length]
        if self.lexical_weight:
            settings["lexical"] = [self.lexical_weight, self.lexical_k1, self.lexical_b]
            if self.lexical_skips_stop_words:
                settings["lexical_stop_words"] = "lucene-english"
        if self.stem_weight:
            settings["stems"] = [self.stem_weight, "porter", self.lexical_k1, self.lexical_b]
            if self.lexical_skips_stop_words:  # since 2026-11-28 the stem term leaves them out too
                settings["stems"].append("no-lucene-english-stop-words")
        if self.word_weight:
            settings["words"] = [self.word_weight, "technical", self.lexical_k1, self.lexical_b]
        return settings

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["max_over"] = self.max_over.value
        d["head"] = self.head.value
        return {"format": FORMAT, **d}

    @classmethod
    def from_json(cls, d: dict) -> SparcConfig:
        """The config of a ``sparc_config.json``; a field of the wrong type or range, or a field this
        sparc-es does not know (a misspelt name would otherwise be ignored), is a :class:`ModelError`."""
        if not isinstance(d, dict):
            raise ModelError(f"the config must be a JSON object, got {type(d).__name__}")
        for name in d:
            if name not in _KINDS and name not in _WRITTEN_BESIDE:
                raise ModelError(f"unknown field {name!r}; the fields are {', '.join(_KINDS)}")
        if d.get("format", FORMAT) != FORMAT:
            raise _bad("format", d["format"], f"this sparc-es reads {FORMAT} (a newer sparc-es wrote it?)")
        return cls(**{name: d[name] for name in _KINDS if name in d})
