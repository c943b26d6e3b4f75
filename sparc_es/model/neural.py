"""The paper's f(v, s): token-to-sentence scores with a learnable sparsity scalar.

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

This module is f alone (encoder, head, w, and f_P of the passage encoder, which is a model of the
same kind); what a sentence stores on top of it (passage expansion, top-K, IDF, the lexical term)
is composed in :mod:`sparc_es.model.stored`, the settings live in :mod:`sparc_es.model.config`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from pathlib import Path

from sparc_es.errors import ModelError, option
from sparc_es.model.checkpoint import (
    DEFAULT_MODEL,
    SPARC_CONFIG,
    base_provenance,
    from_transformers,
    give_umask_mode,
    quiet_transformers,
    resolve_model_path,
    versions,
    weights_file,
)
from sparc_es.model.config import Head, MaxOver, SparcConfig
from sparc_es.model.query import QueryEncoder

_UNUSED = re.compile(r"^\[unused\d+\]$")


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
        self.fingerprint = weights_fingerprint(encoder, config, head)
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
        self._pipeline = None
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
        AutoModel, AutoTokenizer = from_transformers("AutoModel", "AutoTokenizer")

        weights = weights_file(path)
        sparc_file = path / SPARC_CONFIG
        if sparc_file.is_file():
            try:
                config = SparcConfig.from_json(json.loads(sparc_file.read_text(encoding="utf-8")))
            except (ValueError, TypeError, ModelError) as e:
                raise ModelError(f"{sparc_file}: invalid SPARC config ({e})") from None
        else:
            config = SparcConfig(base_model=base_provenance(path, weights))
        unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(SparcConfig)})
        if unknown:
            raise ModelError(f"no SPARC config field {', '.join(map(repr, unknown))}; the fields are "
                             + ", ".join(f.name for f in dataclasses.fields(SparcConfig)))
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
        give_umask_mode(folder)  # safetensors leaves its files 0600
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
        learned u_v, a query-side weight that the index stores folded in. The vocabulary-wide product
        and its max (:func:`sparc_es.model.kernels.relu_max_product`) run over unpadded positions
        only: padding would otherwise cost as much as the sentences themselves.
        """
        torch = _torch()
        head = self.head
        E = self.embeddings if vocab_ids is None else self.embeddings[vocab_ids]
        if head is not None and hasattr(head, "transform"):
            hidden = head.transform(hidden)
        bias = None
        if head is not None and hasattr(head, "bias"):
            bias = head.bias if vocab_ids is None else head.bias[vocab_ids]
        keep = self.scorable if vocab_ids is None else self.scorable[vocab_ids]
        from sparc_es.model.kernels import relu_max_product

        f = torch.log1p(relu_max_product(hidden, mask, E, bias, keep) * torch.exp(self.w))
        if passage is not None:
            f = f + passage
        if weighted and head is not None and hasattr(head, "log_u"):
            f = f * torch.exp(head.log_u if vocab_ids is None else head.log_u[vocab_ids])
        return f * keep.to(f.dtype)

    def passage_scores(self, passages: list[str]):
        """f_P(v, passage) for every vocabulary token: each passage encoded alone, max over all its
        positions, by the passage encoder; shape (passages, tokens)."""
        model = self.passage_model or self
        ids, seg, _, _ = model.tokenize_pairs(passages, [""] * len(passages), self.config.passage_max_length)
        hidden, mask = model.hidden_states(ids, seg)  # no context: the "sentence" positions are all of them
        return model.token_scores(hidden, mask, weighted=False)

    # --- what a sentence stores: sparc_es.model.stored composes these scores with the other terms ---

    @property
    def pipeline(self):
        """The :class:`~sparc_es.model.stored.Pipeline` of this model: what its sentences store."""
        if self._pipeline is None:
            from sparc_es.model.stored import Pipeline

            self._pipeline = Pipeline(self)
        return self._pipeline

    def encode(self, pairs, **options):
        """:meth:`Pipeline.encode <sparc_es.model.stored.Pipeline.encode>` of this model."""
        return self.pipeline.encode(pairs, **options)

    def encode_batch(self, sentences: list[str], contexts: list[str], **options):
        """:meth:`Pipeline.encode_batch <sparc_es.model.stored.Pipeline.encode_batch>` of this model."""
        return self.pipeline.encode_batch(sentences, contexts, **options)

    def explain(self, sentence: str, context: str = "", top: int = 20) -> list[tuple[str, float]]:
        """:meth:`Pipeline.explain <sparc_es.model.stored.Pipeline.explain>` of this model."""
        return self.pipeline.explain(sentence, context, top)

    def count_corpus(self, texts):
        """:meth:`Pipeline.count_corpus <sparc_es.model.stored.Pipeline.count_corpus>` of this model."""
        return self.pipeline.count_corpus(texts)

    def lexical_terms(self, sentences: list[str], corpus):
        """:meth:`Pipeline.lexical_terms <sparc_es.model.stored.Pipeline.lexical_terms>` of this model."""
        return self.pipeline.lexical_terms(sentences, corpus)

    @property
    def queries(self) -> QueryEncoder:
        """The question side: bags of this model's WordPiece tokens, as every engine scores them."""
        return QueryEncoder(self.tokenizer)


def resolve_device(name: str = "auto") -> str:
    """A torch device for encoding: ``auto`` is the first CUDA device torch sees, else the CPU;
    ``cpu``; ``cuda`` or ``cuda:N`` (a one-line :class:`ModelError` when torch sees no such device)."""
    name = (name or "auto").strip().lower()
    if name == "cpu":
        return name
    torch = _torch()
    available = torch.cuda.is_available()
    if name == "auto":
        return "cuda:0" if available else "cpu"
    if name == "cuda" or (name.startswith("cuda:") and name[5:].isdigit()):
        index = int(name[5:]) if ":" in name else 0
        count = torch.cuda.device_count() if available else 0
        if index >= count:
            devices = f"{count} CUDA device{'s' if count != 1 else ''}"
            raise ModelError(f"{option('--device', 'device')} {name}: torch sees {devices} here "
                             f"(torch {torch.__version__}{', a CPU-only build' if torch.version.cuda is None else ''})")
        return f"cuda:{index}"
    raise ModelError(f"{option('--device', 'device')} {name!r}: choose auto, cpu, cuda or cuda:N")


def weights_fingerprint(encoder, config: SparcConfig, head=None) -> str:
    """Short hash of the weights' values and the settings that change f(v, s): the key encoded
    folders, indexes and evaluation caches are tied to.

    Hashes tensor contents, not file bytes, so re-saving a model keeps its fingerprint; which
    settings enter is the config's rule (:meth:`SparcConfig.fingerprint_settings`).
    """
    h = hashlib.sha256()
    tensors = sorted(encoder.state_dict().items())
    if head is not None:
        tensors += sorted((f"sparc_head.{k}", v) for k, v in head.state_dict().items())
    for name, tensor in tensors:
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    h.update(json.dumps(config.fingerprint_settings(head is not None), sort_keys=True).encode())
    return h.hexdigest()[:16]
