"""The SPARC model: token-to-sentence scores with a learnable sparsity scalar.

SPARC (paper 000, eq. 4) extends SPARTA (paper 002): for every vocabulary token v and sentence s

    f(v, s) = log(1 + ReLU(max_i H(s)_i . e_v) * exp(w))

with H the contextual encoder run on ``[CLS] sentence [SEP] context [SEP]``, e_v the row of the
encoder's own input word-embedding matrix E, and w one learnable scalar (SPARTA: w = 0). A
sentence is stored as its top-K tokens; a question is the bag of its WordPiece tokens and
g(q, s) = sum over the question's tokens v of f(v, s). Special and ``[unused*]`` tokens are never
scored.

A SPARC model is a folder: ``sparc_config.json`` (w, K, max length, which positions the max runs
over, base checkpoint provenance), the encoder's ``config.json`` and ``model.safetensors``, and
the tokenizer. :meth:`SparcModel.load` also accepts a plain BERT-family checkpoint folder, which
it reads as untrained SPARTA (w = 0).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import numbers
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import numpy as np

from .checkpoint import (DEFAULT_MODEL, SPARC_CONFIG, base_provenance, model_fingerprint, quiet_transformers,
                         resolve_model_path, versions, weights_file)
from .errors import ModelError, choice
from .lexical import CorpusStatistics, LexicalTerm, Stems, Words, add_words, bm25_weights, count_corpus, \
    sentence_token_ids, stem_weights, stored_weights, word_weights
from .query import QueryEncoder

FORMAT = "sparc-es-model/1"
_UNUSED = re.compile(r"^\[unused\d+\]$")


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
    "lexical_k1": float, "lexical_b": float, "stem_weight": float, "word_weight": float, "base_model": dict,
    "adaptation": dict}
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
    # The lexical term (sparc_es.lexical): alpha x BM25(k1, b) over the sentence's own WordPiece
    # tokens, with the statistics of the corpus being encoded, added to its stored weights.
    lexical_weight: float = 0.0
    lexical_k1: float = 0.9
    lexical_b: float = 0.4
    # ... and beta x BM25 of each word's Porter stem for the vocabulary's other words with that stem.
    stem_weight: float = 0.0
    # ... and gamma x BM25 of each whole word WordPiece splits (identifiers, flags, numbers), stored
    # as a ``w|word`` feature that questions containing the word also ask for (sparc_es.lexical.Words).
    word_weight: float = 0.0
    base_model: dict = field(default_factory=dict)  # provenance: name, package (or local path), sha256
    adaptation: dict = field(default_factory=dict)  # embedding replacement provenance (sparc_es.adapt)

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
        for key in ("name", "package", "path", "sha256"):  # sparc_es.adapt.find_base reads them as text
            if key in self.base_model and not isinstance(self.base_model[key], str):
                raise ModelError(f"field 'base_model' has {key!r} = {self.base_model[key]!r}; it must be str")

    @property
    def lexical(self) -> bool:
        """Whether encoding needs the corpus statistics of sparc_es.lexical."""
        return bool(self.lexical_weight or self.stem_weight or self.word_weight)

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


HEAD_FILE = "sparc_head.safetensors"
_MLM_PREFIX = "cls.predictions."


def _legacy_name(key: str) -> str:
    """Old BERT checkpoints name LayerNorm parameters gamma and beta."""
    return key.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")


def _sparc_head(encoder, config: SparcConfig, weights: Path, folder: Path):
    """The scoring head's own parameters, or None for the paper's plain dot product.

    Holds the BERT MLM transform and output bias (``head=mlm``) and the per-token log-multiplier
    (``token_weights``). Read from ``sparc_head.safetensors`` in a SPARC model folder, else taken
    from the checkpoint's own MLM head (``cls.predictions.*``); token weights start at 1.
    """
    if config.head is Head.DOT and not config.token_weights:
        return None
    torch = _torch()
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    vocab = encoder.get_input_embeddings().weight.shape[0]
    head = torch.nn.Module()
    if config.head is Head.MLM:
        from transformers.models.bert.modeling_bert import BertPredictionHeadTransform

        head.transform = BertPredictionHeadTransform(encoder.config)
        head.bias = torch.nn.Parameter(torch.zeros(vocab))
    if config.token_weights:
        head.log_u = torch.nn.Parameter(torch.zeros(vocab))
    try:
        if (folder / HEAD_FILE).is_file():
            state = load_file(folder / HEAD_FILE)
        elif weights.suffix == ".safetensors":
            raw = load_file(weights)
            state = {_legacy_name(k[len(_MLM_PREFIX):]): v for k, v in raw.items()
                     if k.startswith(_MLM_PREFIX + "transform.") or k == _MLM_PREFIX + "bias"}
        else:
            state = {}
    except (SafetensorError, OSError) as e:
        raise ModelError(f"{folder}: cannot read the head weights ({e})") from None
    wanted = set(head.state_dict())
    missing = sorted(wanted - set(state) - {"log_u"})
    if missing:
        raise ModelError(f"{folder}: head={config.head.value} needs the checkpoint's BERT MLM head, but "
                         f"{', '.join(missing[:3])} {'is' if len(missing) == 1 else 'are'} missing")
    head.load_state_dict({k: v.float() for k, v in state.items() if k in wanted}, strict=False)
    return head


def _passage_folder(path: Path, name: str, where: Path, nested: bool) -> Path:
    """The sub-folder of model folder ``path`` that holds its passage encoder, checked before
    anything is loaded. SparcConfig keeps ``name`` relative and free of "." and ".."; a symlink can
    still lead back to the model folder or above it, and a passage encoder may not have its own."""
    def bad(rule: str) -> ModelError:
        return ModelError(f"{where}: field 'passage_encoder' is {name!r}; {rule}")

    if nested:
        raise bad("a passage encoder cannot have a passage encoder of its own")
    sub = path / name
    real, root = sub.resolve(), path.resolve()
    if real == root or real in root.parents:
        raise bad("it leads back to the model folder itself (or above it)")
    if not (sub / SPARC_CONFIG).is_file():
        raise bad(f"{sub} holds no SPARC model (no {SPARC_CONFIG})")
    return sub


def _check_positions(where: Path, name: str, value: int, encoder) -> None:
    """A max length within the encoder's position table: longer inputs would fail mid-encoding."""
    limit = getattr(encoder.config, "max_position_embeddings", None)
    if isinstance(limit, int) and value > limit:
        raise ModelError(f"{where}: field {name!r} is {value}; it must be at most {limit}, the encoder's positions")


def _torch():
    import torch

    return torch


class SparcModel:
    """A BERT-family encoder scored as SPARC. Not an ``nn.Module`` itself: training wraps it."""

    def __init__(self, encoder, tokenizer, config: SparcConfig, head=None, passage_model=None) -> None:
        """Wrap a loaded encoder and tokenizer (and the head's parameters, see :func:`_sparc_head`);
        most callers want :meth:`load`."""
        torch = _torch()
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.config = config
        self.head = head
        self.passage_model = passage_model  # None: passages are encoded by this model itself
        self.w = torch.nn.Parameter(torch.tensor(float(config.w)))
        self.fingerprint = model_fingerprint(encoder, config, head)
        if passage_model is not None:
            self.fingerprint = hashlib.sha256((self.fingerprint + passage_model.fingerprint).encode()).hexdigest()[:16]
        for name in ("cls_token_id", "sep_token_id", "pad_token_id"):
            if getattr(tokenizer, name) is None:
                raise ModelError(f"the tokenizer has no {name[:3].upper()} token: SPARC needs a BERT-family "
                                 "tokenizer ([CLS] sentence [SEP] context [SEP])")
        vocab = self.embeddings.shape[0]
        scorable = torch.zeros(vocab, dtype=torch.bool)
        scorable[: min(vocab, len(tokenizer))] = True
        for i in tokenizer.all_special_ids:
            if i is not None and i < vocab:
                scorable[i] = False
        for tok, i in tokenizer.get_vocab().items():
            if _UNUSED.match(tok) and i < vocab:
                scorable[i] = False
        self.scorable = scorable
        self._id_to_token = tokenizer.convert_ids_to_tokens(list(range(vocab)))
        self._stems = None
        self._words = None
        self._uses_token_types = "token_type_ids" in tokenizer.model_input_names and \
            getattr(encoder.config, "type_vocab_size", 0) > 1

    # --- loading and saving ----------------------------------------------------------------

    @classmethod
    def load(cls, name_or_path: str | os.PathLike = DEFAULT_MODEL, **overrides) -> SparcModel:
        """Load a SPARC model folder, or a plain BERT-family checkpoint as untrained SPARTA.

        ``overrides`` replace config fields (e.g. ``top_k=2000``) for this use only.
        """
        return cls._load(resolve_model_path(name_or_path), overrides, nested=False)

    @classmethod
    def _load(cls, path: Path, overrides: dict, nested: bool) -> SparcModel:
        """:meth:`load` of a resolved folder. ``nested``: this is a passage encoder, which may not
        have one of its own, so that loading never recurses whatever the folders and links say."""
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # weights come from local folders, never a hub
        from transformers import AutoModel, AutoTokenizer

        weights = weights_file(path)
        sparc_file = path / SPARC_CONFIG
        if sparc_file.is_file():
            try:
                config = SparcConfig.from_json(json.loads(sparc_file.read_text(encoding="utf-8")))
            except (ValueError, TypeError, ModelError) as e:
                raise ModelError(f"{sparc_file}: invalid SPARC config ({e})") from None
        else:
            config = SparcConfig(base_model=base_provenance(path, weights))
        config = dataclasses.replace(config, **overrides)

        def where(name: str) -> Path:
            """What a bad value is blamed on: the config file, unless the caller passed it."""
            return sparc_file if sparc_file.is_file() and name not in overrides else path

        # Checked before any weights are read: a bad folder name fails at once.
        passage_folder = None
        if config.passage_weight and config.passage_encoder != "self":
            passage_folder = _passage_folder(path, config.passage_encoder, where("passage_encoder"), nested)
        try:
            with quiet_transformers():
                tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
                # float32 on the CPU even where the shipped weights are half precision; weights-only
                # (transformers' default, said here): a pytorch_model.bin never runs code
                encoder, info = AutoModel.from_pretrained(path, local_files_only=True, output_loading_info=True,
                                                          dtype=_torch().float32, weights_only=True)
        except Exception as e:  # OSError, ValueError, SafetensorError (truncated weights), ...
            raise ModelError(f"{path}: cannot load the checkpoint ({type(e).__name__}: {e})") from None
        rows = encoder.get_input_embeddings().weight.shape[0]
        if len(tokenizer) < 0.9 * rows:
            raise ModelError(f"{path}: the tokenizer has {len(tokenizer)} tokens but the embedding matrix has {rows} "
                             "rows: its tokenizer files are missing or belong to another model")
        # A pooler is never used by SPARC; any other tensor missing from the checkpoint is an error.
        missing = sorted(info.get("missing_keys", ()))
        essential = [k for k in missing if not k.startswith("pooler.")]
        if essential:
            raise ModelError(f"{path}: weights are missing {len(essential)} tensors, e.g. {essential[:3]}")
        if missing and getattr(encoder, "pooler", None) is not None:
            encoder.pooler = None  # randomly initialised, unused: drop it rather than save noise
        encoder.eval()
        _check_positions(where("max_length"), "max_length", config.max_length, encoder)
        passage = None
        if passage_folder is not None:
            passage = cls._load(passage_folder, {}, nested=True)
        if config.passage_weight:  # passages are tokenised to passage_max_length by the passage encoder
            _check_positions(where("passage_max_length"), "passage_max_length", config.passage_max_length,
                             encoder if passage is None else passage.encoder)
        return cls(encoder, tokenizer, config, _sparc_head(encoder, config, weights, path), passage)

    def save(self, folder: str | os.PathLike) -> Path:
        """Write the model folder: SPARC config, encoder config and safetensors weights, tokenizer."""
        folder = Path(folder)
        try:  # validated before anything is written: a diverged w (NaN) never reaches the folder
            config = dataclasses.replace(self.config, w=float(self.w.detach()))
        except ModelError as e:
            raise ModelError(f"{folder}: not saved: {e}") from None
        folder.mkdir(parents=True, exist_ok=True)
        with quiet_transformers():
            self.encoder.save_pretrained(folder)  # safetensors
            self.tokenizer.save_pretrained(folder)
        if self.head is not None:
            from safetensors.torch import save_file

            save_file({k: v.detach().cpu().contiguous() for k, v in self.head.state_dict().items()},
                      folder / HEAD_FILE)
        if self.passage_model is not None:
            self.passage_model.save(folder / self.config.passage_encoder)
        manifest = {**config.to_json(), "versions": versions()}
        # allow_nan=False: JSON has no NaN, and a bare NaN here silently dropped the neural weights
        (folder / SPARC_CONFIG).write_text(json.dumps(manifest, indent=2, allow_nan=False) + "\n")
        return folder

    # --- scoring ---------------------------------------------------------------------------

    @property
    def device(self):
        return self.encoder.get_input_embeddings().weight.device

    def to(self, device) -> SparcModel:
        """Move the encoder, w and the scorable mask to ``device`` (e.g. ``"cuda"``)."""
        torch = _torch()
        self.encoder.to(device)
        if self.head is not None:
            self.head.to(device)
        if self.passage_model is not None:
            self.passage_model.to(device)
        with torch.no_grad():
            self.w.data = self.w.data.to(device)
        self.scorable = self.scorable.to(device)
        return self

    @property
    def embeddings(self):
        """E: the encoder's input word-embedding matrix, (vocabulary, hidden)."""
        return self.encoder.get_input_embeddings().weight

    def tokenize_pairs(self, sentences: list[str], contexts: list[str], max_length: int | None = None
                       ) -> tuple[list[list[int]], list[int], list[bool], list[bool]]:
        """Build ``[CLS] sentence [SEP] context [SEP]`` id lists truncated to ``max_length``.

        Returns (input ids, sentence segment lengths including [CLS] and [SEP], sentence
        truncated?, context truncated?). The context gives way first; a sentence alone longer
        than the limit is cut too and flagged.
        """
        tok = self.tokenizer
        budget = max_length or self.config.max_length
        with quiet_transformers():  # no "longer than the maximum" warning: truncation happens below
            s_ids = tok(sentences, add_special_tokens=False)["input_ids"]
            c_ids = tok([c or "" for c in contexts], add_special_tokens=False)["input_ids"]
        ids, seg, s_cut, c_cut = [], [], [], []
        for s, c in zip(s_ids, c_ids):
            keep_s = min(len(s), budget - 2)
            s_cut.append(keep_s < len(s))
            s = s[:keep_s]
            first = [tok.cls_token_id, *s, tok.sep_token_id]
            room = budget - len(first) - 1
            c_cut.append(bool(c) and room < len(c))
            c = c[: max(room, 0)] if room > 0 else []
            ids.append(first + (c + [tok.sep_token_id] if c else []))
            seg.append(len(first))
        return ids, seg, s_cut, c_cut

    def hidden_states(self, ids: list[list[int]], seg: list[int]):
        """Run H and return (H over the positions the max runs over, their mask)."""
        torch = _torch()
        length = max(len(x) for x in ids)
        input_ids = torch.full((len(ids), length), self.tokenizer.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(ids), length), dtype=torch.long)
        types = torch.zeros((len(ids), length), dtype=torch.long)
        for i, (x, n) in enumerate(zip(ids, seg)):
            input_ids[i, : len(x)] = torch.tensor(x)
            attention[i, : len(x)] = 1
            types[i, n: len(x)] = 1
        inputs = {"input_ids": input_ids, "attention_mask": attention}
        if self._uses_token_types:
            inputs["token_type_ids"] = types
        inputs = {k: v.to(self.device) for k, v in inputs.items()}
        hidden = self.encoder(**inputs).last_hidden_state
        if self.config.max_over is MaxOver.SENTENCE:
            width = max(seg)  # sentence positions are a prefix: skip the context's rows
            mask = torch.arange(width)[None, :] < torch.tensor(seg)[:, None]
            return hidden[:, :width], mask.to(self.device)
        return hidden, inputs["attention_mask"].bool()

    def token_scores(self, hidden, mask, vocab_ids=None, passage=None, weighted: bool = True):
        """f(v, s) for every scorable token (or only ``vocab_ids``): shape (batch, tokens).

        With ``head=mlm`` the logits are the base's MLM head's, ``LayerNorm(act(dense(H))) . E^T + b``
        (the bias is per token, so it is added after the max). ``passage`` (lambda f_P, same shape)
        is added next; with ``token_weights`` (and ``weighted``) the sum is then multiplied by the
        learned u_v, a query-side weight that the index stores folded in. The product runs over unpadded positions only: padding
        would otherwise cost as much as the sentences themselves.
        """
        torch = _torch()
        head = self.head
        E = self.embeddings if vocab_ids is None else self.embeddings[vocab_ids]
        if head is not None and hasattr(head, "transform"):
            hidden = head.transform(hidden)
        m = _masked_max_product(hidden, mask, E)
        if head is not None and hasattr(head, "bias"):
            m = m + (head.bias if vocab_ids is None else head.bias[vocab_ids])
        f = torch.log1p(torch.relu(m) * torch.exp(self.w))
        if passage is not None:
            f = f + passage
        if weighted and head is not None and hasattr(head, "log_u"):
            f = f * torch.exp(head.log_u if vocab_ids is None else head.log_u[vocab_ids])
        keep = self.scorable if vocab_ids is None else self.scorable[vocab_ids]
        return f * keep.to(f.dtype)

    def passage_scores(self, passages: list[str]):
        """f_P(v, passage) for every vocabulary token: each passage encoded alone, max over all its
        positions, by the passage encoder; shape (passages, tokens)."""
        model = self.passage_model or self
        ids, seg, _, _ = model.tokenize_pairs(passages, [""] * len(passages), self.config.passage_max_length)
        hidden, mask = model.hidden_states(ids, seg)  # no context: the "sentence" positions are all of them
        return model.token_scores(hidden, mask, weighted=False)

    def encode_batch(self, sentences: list[str], contexts: list[str], top_k: int | None = None,
                     term_weights=None, passages=None, corpus=None) -> list[EncodedSentence]:
        """Top-K token maps for one batch (no sorting, no progress bar).

        ``term_weights`` (one float per vocabulary token, e.g. IDF) multiplies the kept weights
        after the top-K cut, so the model still chooses which tokens a sentence keeps (weighting
        before the cut let corpus-rare expansion tokens crowd out the sentence's own: 33.9 against
        73.3 MRR on SQuAD dev, docs/adaptation.md). With passage expansion, ``passages`` holds each
        sentence's row of :meth:`passage_scores` (computed here when not given). With a lexical
        term, ``corpus`` holds the :class:`~sparc_es.lexical.CorpusStatistics` it is computed
        with; without them the term is left out (``explain`` shows the neural part alone).
        """
        torch = _torch()
        k = top_k or self.config.top_k
        ids, seg, s_cut, c_cut = self.tokenize_pairs(sentences, contexts)
        with torch.inference_mode():
            hidden, mask = self.hidden_states(ids, seg)
            if self.config.passage_weight and passages is None:
                passages = self.passage_scores([passage_text(s, c) for s, c in zip(sentences, contexts)])
            f = self.token_scores(hidden, mask,
                                  passage=self.config.passage_weight * passages if self.config.passage_weight else None)
            nonzero = (f > 0).sum(dim=1).tolist()
            values, indices = torch.topk(f, min(k, f.shape[1]), dim=1)
        out = []
        values, indices = values.cpu().numpy(), indices.cpu().numpy()
        lexical = self.lexical_terms(sentences, corpus)
        for i in range(len(sentences)):
            extra = None if lexical is None else lexical[i].scaled(self.config.lexical_weight, self.config.stem_weight)
            ix, v = stored_weights(indices[i], values[i], term_weights, extra)
            words = None if lexical is None else {t: self.config.word_weight * w for t, w in lexical[i].words.items()}
            tokens, v = add_words([self._id_to_token[j] for j in ix], v, words)
            parts = None
            if extra or words:  # each lexical token's (neural, lexical) parts: requantize --idf needs them apart
                neural = dict(zip(indices[i].tolist(), values[i].tolist()))
                parts = {self._id_to_token[t]: (neural.get(t, 0.0), w) for t, w in extra.items() if w > 0}
                parts.update({t: (0.0, w) for t, w in (words or {}).items() if w > 0})
            out.append(EncodedSentence(tokens=tokens, weights=v,
                                       truncated_sentence=s_cut[i], truncated_context=c_cut[i], nonzero=nonzero[i],
                                       lexical=parts))
        return out

    def lexical_terms(self, sentences: list[str], corpus) -> list[LexicalTerm] | None:
        """Each sentence's lexical term before scaling (BM25 of its own tokens; of its words' stems
        for their siblings when the model has a stem weight), or None without one or without ``corpus``."""
        if not self.config.lexical or corpus is None:
            return None
        c = self.config
        ids = sentence_token_ids(self.tokenizer, sentences, self.scorable.cpu().numpy())
        if c.stem_weight and corpus.stem_df is None:
            raise ModelError("the model has a stem weight but the corpus statistics were counted without stems")
        if c.word_weight and corpus.word_df is None:
            raise ModelError("the model has a word weight but the corpus statistics were counted without whole words")
        stems, words = self.stems, self.words
        return [LexicalTerm(bm25_weights(x, corpus, c.lexical_k1, c.lexical_b),
                            {} if stems is None else stem_weights(stems.of(t), x, corpus, stems, c.lexical_k1,
                                                                  c.lexical_b),
                            {} if words is None else word_weights(words.of(t), len(x), corpus, c.lexical_k1,
                                                                  c.lexical_b))
                for t, x in zip(sentences, ids)]

    @property
    def words(self) -> Words | None:
        """The whole-word splitter of the word term (None without a word weight)."""
        if not self.config.word_weight:
            return None
        if self._words is None:
            self._words = Words(self.tokenizer)
        return self._words

    @property
    def stems(self) -> Stems | None:
        """The vocabulary's Porter stems (built on first use: about a second), for the stem term."""
        if not self.config.stem_weight:
            return None
        if self._stems is None:
            self._stems = Stems(self.tokenizer, self.scorable.cpu().numpy())
        return self._stems

    def count_corpus(self, texts: Iterable[str]) -> CorpusStatistics:
        """The statistics of :mod:`sparc_es.lexical` over a stream of sentence texts, as this model needs them."""
        return count_corpus(texts, self.tokenizer, self.scorable.cpu().numpy(), stems=self.stems, words=self.words)

    def encode(self, pairs: Iterable[tuple[str, str]], batch_size: int = 32, window: int = 8,
               top_k: int | None = None, term_weights=None,
               on_batch: Callable[[int], object] | None = None, corpus=None,
               passage_cache=None) -> Iterator[EncodedSentence]:
        """Encode (sentence, context) pairs as a stream, in input order.

        Pairs are read ``batch_size * window`` at a time and sorted by length so each batch pads
        little; results come back in the order they went in. With passage expansion each distinct
        context of a window is encoded once (a sentence without context stands for its own passage).
        ``on_batch(n)`` is called as each batch of n sentences is done (progress bars); ``corpus``:
        see :meth:`encode_batch`. ``passage_cache`` (a :class:`~sparc_es.encoded.PassageCache`)
        gives the passages it holds and keeps those computed here.
        """
        buffer: list[tuple[str, str]] = []
        for pair in pairs:
            buffer.append(pair)
            if len(buffer) >= batch_size * window:
                yield from self._encode_window(buffer, batch_size, top_k, term_weights, on_batch, corpus,
                                               passage_cache)
                buffer = []
        if buffer:
            yield from self._encode_window(buffer, batch_size, top_k, term_weights, on_batch, corpus, passage_cache)

    def _encode_window(self, pairs: list[tuple[str, str]], batch_size: int, top_k: int | None,
                       term_weights=None, on_batch=None, corpus=None, cache=None) -> list[EncodedSentence]:
        torch = _torch()
        passages = None
        if self.config.passage_weight:
            texts = list(dict.fromkeys(passage_text(s, c) for s, c in pairs))
            row = {t: i for i, t in enumerate(texts)}
            size = self.embeddings.shape[0]
            with torch.inference_mode():
                scores = torch.empty((len(texts), size), device=self.device)
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
                    scores[idx] = self.passage_scores([texts[i] for i in idx])
                    if cache is not None:
                        for i, r in zip(idx, scores[idx].cpu().numpy()):
                            cache.put(texts[i], r)
            passages = [row[passage_text(s, c)] for s, c in pairs]
        # Character length is a good enough proxy for token length to sort by.
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        results: list[EncodedSentence | None] = [None] * len(pairs)
        for b in range(0, len(order), batch_size):
            idx = order[b: b + batch_size]
            rows = None if passages is None else scores[[passages[i] for i in idx]]
            encoded = self.encode_batch([pairs[i][0] for i in idx], [pairs[i][1] for i in idx], top_k, term_weights,
                                        rows, corpus)
            for i, e in zip(idx, encoded):
                results[i] = e
            if on_batch is not None:
                on_batch(len(idx))
        return results  # type: ignore[return-value]

    def explain(self, sentence: str, context: str = "", top: int = 20) -> list[tuple[str, float]]:
        """The sentence's highest-scoring (token, f(v, s)) pairs, for people (SPARTA table 6)."""
        e = self.encode_batch([sentence], [context], top_k=top)[0]
        return list(zip(e.tokens, e.weights.tolist()))

    @property
    def queries(self) -> QueryEncoder:
        """The question side: bags of this model's WordPiece tokens, as every engine scores them."""
        return QueryEncoder(self.tokenizer)


def passage_text(sentence: str, context: str | None) -> str:
    """The passage a sentence is expanded with: its context, or the sentence itself without one."""
    return context or sentence


def _masked_max_product(hidden, mask, E, positions: int = 2048):
    """``max_i hidden[b, i] . E^T`` over the positions where ``mask`` is set, for each row b.

    The valid positions of several sentences go into one product (a few large matrix products
    run about 1.4 times faster than one small product per sentence), at most ``positions`` rows at
    a time so memory stays bounded; ``index_reduce`` takes each sentence's max and back-propagates.
    """
    import warnings

    torch = _torch()
    lengths = mask.sum(dim=1).tolist()
    packed = hidden[mask]
    out, start, first = [], 0, 0
    for b in range(len(lengths) + 1):
        if b < len(lengths) and (b == first or sum(lengths[first: b + 1]) <= positions):
            continue
        n = sum(lengths[first:b])
        logits = packed[start: start + n] @ E.T
        rows = torch.repeat_interleave(torch.arange(b - first, device=logits.device),
                                       torch.tensor(lengths[first:b], device=logits.device))
        init = torch.full((b - first, E.shape[0]), float("-inf"), dtype=logits.dtype, device=logits.device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "index_reduce() is in beta"
            out.append(init.index_reduce(0, rows, logits, "amax"))
        start, first = start + n, b
    return torch.cat(out)
