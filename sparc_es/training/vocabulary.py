"""Vocabulary expansion (AdaLM-style, paper 004 section 3.2.1) for ``sparc-es adapt``.

The target corpus's frequent words that WordPiece splits into pieces (``storedocvectors`` ->
``stored ##oc ##ve ##ctors``) become whole-word vocabulary entries, appended after the last id.
Each new entry's embedding row starts as the mean of its pieces' rows (and every other
vocabulary-sized tensor, the SPARC head's ``bias`` and ``log_u``, an MLM head's output bias, as
the mean of its pieces' entries); masked-language modelling then trains the new rows with the
rest of E. The model scores, stores and is asked the whole word as one token from then on.

The words are new entries of the WordPiece vocabulary itself (``tokenizer.json``'s ``model.vocab``),
not "added tokens": an added token matches inside other words, while a vocabulary entry is a
word-initial piece that WordPiece's longest-match-first picks only where the word starts a
pre-tokenized word, so ``storedocvectors`` becomes one token and every other text is tokenized as before
(a longer word starting with it, e.g. ``storedocvectorsx``, becomes ``storedocvectors ##x``).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from sparc_es.errors import ModelError
from sparc_es.model import SparcModel
from sparc_es.model.checkpoint import quiet_transformers

_WORD = re.compile(r"\w+")


def _eligible(word: str) -> bool:
    """Letters, digits and underscores only, with at least one letter, and not a ``##`` piece."""
    return bool(_WORD.fullmatch(word)) and any(c.isalpha() for c in word) and not word.startswith("##")


def expansion_words(texts: Iterable[str], tokenizer, most: int, min_count: int) -> list[str]:
    """The words of ``texts`` to add to ``tokenizer``'s vocabulary, most frequent first.

    The rule: a word is what the tokenizer's own normalizer and pre-tokenizer make of the text
    (BERT uncased: lower-cased, split on white space and punctuation); it is chosen when it

    * occurs at least ``min_count`` times in ``texts``,
    * is made of letters, digits and underscores only, with at least one letter (no number or
      mark alone, the paper's noise), and is not a ``##`` piece,
    * and WordPiece splits it into 2 or more pieces (a word the vocabulary has whole, or one it
      reads as ``[UNK]``, is left alone).

    The chosen words are ordered by count, most frequent first, ties by the word itself, and the
    first ``most`` are returned (none when ``most`` is 0).
    """
    if most <= 0:
        return []
    counts = _word_counts(texts, tokenizer)
    chosen = []
    with quiet_transformers():
        for word, n in sorted(counts.items(), key=lambda wn: (-wn[1], wn[0])):
            if n < min_count:
                break
            if _eligible(word) and len(tokenizer.tokenize(word)) >= 2:
                chosen.append(word)
                if len(chosen) >= most:
                    break
    return chosen


def _word_counts(texts: Iterable[str], tokenizer) -> Counter[str]:
    """The words of ``texts`` as the tokenizer's normalizer and pre-tokenizer make them, counted."""
    backend = tokenizer.backend_tokenizer
    normalizer, pre_tokenizer = backend.normalizer, backend.pre_tokenizer
    counts: Counter[str] = Counter()
    for text in texts:
        if normalizer is not None:
            text = normalizer.normalize_str(text)
        if pre_tokenizer is not None:
            counts.update(w for w, _ in pre_tokenizer.pre_tokenize_str(text))
        else:
            counts.update(text.split())
    return counts


def split_word_share(texts: Iterable[str], tokenizer) -> dict:
    """How well the vocabulary fits a corpus: of the occurrences of its words (as
    :func:`expansion_words` defines a word), the share WordPiece splits into 2 or more pieces, with
    the counts it comes from. A vocabulary learnt on other text splits more of a domain's words."""
    counts = _word_counts(texts, tokenizer)
    total = split = 0
    with quiet_transformers():
        for word, n in counts.items():
            if _eligible(word):
                total += n
                split += n * (len(tokenizer.tokenize(word)) >= 2)
    return {"words": total, "split": split, "share": split / total if total else 0.0}


def piece_ids(tokenizer, words: list[str]) -> list[list[int]]:
    """The ids of each word's WordPiece pieces under ``tokenizer`` (the one before expansion)."""
    with quiet_transformers():
        return [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(w)) for w in words]


def expand_tokenizer(tokenizer, words: list[str]):
    """A copy of the fast ``tokenizer`` whose WordPiece vocabulary has ``words`` appended, as
    whole-word entries at ids ``len(tokenizer)``, ``len(tokenizer) + 1``, ... (see the module's doc)."""
    from transformers import AutoTokenizer

    if not words:
        return tokenizer
    start = len(tokenizer)
    with tempfile.TemporaryDirectory(prefix="sparc-vocab-") as tmp:
        folder = Path(tmp)
        with quiet_transformers():
            tokenizer.save_pretrained(folder)
        spec_file = folder / "tokenizer.json"
        if not spec_file.is_file():
            raise ModelError("vocabulary expansion needs a fast (tokenizers) WordPiece tokenizer; this one has no "
                             "tokenizer.json")
        spec = json.loads(spec_file.read_text(encoding="utf-8"))
        model = spec.get("model") or {}
        vocab = model.get("vocab")
        if model.get("type") != "WordPiece" or not isinstance(vocab, dict):
            raise ModelError(f"vocabulary expansion needs a WordPiece tokenizer, not {model.get('type')!r}")
        taken = set(vocab) | {t.get("content") for t in spec.get("added_tokens") or ()}
        ids = set(vocab.values()) | {t.get("id") for t in spec.get("added_tokens") or ()}
        if max(ids) + 1 != start:
            raise ModelError(f"the tokenizer's ids do not end at its length {start}: cannot append words")
        for i, word in enumerate(words):
            if word in taken:
                raise ModelError(f"vocabulary expansion: {word!r} is already a token")
            vocab[word] = start + i
        spec_file.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
        vocab_txt = folder / "vocab.txt"
        if vocab_txt.is_file():
            lines = vocab_txt.read_text(encoding="utf-8").splitlines()
            if len(lines) == start:
                vocab_txt.write_text("\n".join(lines + list(words)) + "\n", encoding="utf-8")
            else:  # its ids are not the tokenizer's: tokenizer.json alone is the vocabulary
                vocab_txt.unlink()
        with quiet_transformers():
            expanded = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    if len(expanded) != start + len(words):
        raise ModelError(f"vocabulary expansion: the tokenizer has {len(expanded)} tokens, not {start + len(words)}")
    with quiet_transformers():
        for i, word in enumerate(words):
            if expanded.tokenize(word) != [word] or expanded.convert_tokens_to_ids(word) != start + i:
                raise ModelError(f"vocabulary expansion: {word!r} is not one token after expansion")
    return expanded


def _mean_rows(tensor, pieces: list[list[int]], start: int) -> None:
    """Set entries (rows) ``start``, ``start + 1``, ... of ``tensor`` to the mean of each word's pieces'."""
    for i, ids in enumerate(pieces):
        tensor[start + i] = tensor[ids].mean(dim=0)


def _extended(parameter, pieces: list[list[int]]):
    """A vocabulary-sized 1-d parameter with one entry per word appended: the mean of its pieces'."""
    import torch

    with torch.no_grad():
        data = parameter.detach()
        extra = torch.stack([data[ids].mean(dim=0) for ids in pieces])
        return torch.nn.Parameter(torch.cat([data, extra.to(data.dtype)]), requires_grad=parameter.requires_grad)


def expand_embeddings(encoder, tokenizer, pieces: list[list[int]]) -> None:
    """Append one row per word to a Hugging Face model's input embeddings (and its tied output
    embeddings and their bias, for a masked LM): the mean of its pieces' rows."""
    import torch

    rows = encoder.get_input_embeddings().weight.shape[0]
    if rows != len(tokenizer):
        raise ModelError(f"vocabulary expansion: the embedding matrix has {rows} rows but the tokenizer "
                         f"{len(tokenizer)} tokens; cannot append words")
    output = encoder.get_output_embeddings() if hasattr(encoder, "get_output_embeddings") else None
    old_bias = None
    if output is not None and getattr(output, "bias", None) is not None:
        old_bias = output.bias.detach().clone()
    with quiet_transformers():
        encoder.resize_token_embeddings(rows + len(pieces), mean_resizing=False)
    with torch.no_grad():
        _mean_rows(encoder.get_input_embeddings().weight, pieces, rows)
        output = encoder.get_output_embeddings() if hasattr(encoder, "get_output_embeddings") else None
        if output is not None:
            if output.weight.data_ptr() != encoder.get_input_embeddings().weight.data_ptr():
                encoder.tie_weights()
            if output.weight.data_ptr() != encoder.get_input_embeddings().weight.data_ptr():
                raise ModelError("vocabulary expansion: the MLM decoder is not tied to E after resizing")
            biases = [output.bias] if getattr(output, "bias", None) is not None else []
            predictions = getattr(getattr(encoder, "cls", None), "predictions", None)
            if predictions is not None and getattr(predictions, "bias", None) is not None:
                biases.append(predictions.bias)
            for bias in {id(b): b for b in biases}.values():
                if bias.shape[0] != rows + len(pieces):
                    raise ModelError("vocabulary expansion: the MLM output bias was not resized")
                if old_bias is not None:
                    bias[:rows] = old_bias
                _mean_rows(bias, pieces, rows)


def expand_model(model: SparcModel, words: list[str]) -> SparcModel:
    """``model`` with ``words`` appended to its vocabulary (tokenizer, E, the SPARC head's ``bias``
    and ``log_u``, the passage encoder's too), each new entry the mean of the word's pieces'; saved
    and loaded again, so every vocabulary-derived structure is the normal loader's. ``model`` itself
    is resized on the way (use only the returned model)."""
    if not words:
        return model
    _expand_in_place(model, words)
    if model.passage_model is not None:
        _expand_in_place(model.passage_model, words)
    with tempfile.TemporaryDirectory(prefix="sparc-expanded-") as tmp:
        model.save(tmp)
        return SparcModel.load(tmp)


def _expand_in_place(model: SparcModel, words: list[str]) -> None:
    pieces = piece_ids(model.tokenizer, words)
    tokenizer = expand_tokenizer(model.tokenizer, words)
    expand_embeddings(model.encoder, model.tokenizer, pieces)
    if model.head is not None:
        for name in ("bias", "log_u"):
            if hasattr(model.head, name):
                setattr(model.head, name, _extended(getattr(model.head, name), pieces))
    model.tokenizer = tokenizer


def expand_masked_lm(model, tokenizer, words: list[str]):
    """Expand a Hugging Face masked LM (or plain encoder) and its tokenizer as :func:`expand_model`
    expands a SPARC model; returns the new tokenizer."""
    if not words:
        return tokenizer
    pieces = piece_ids(tokenizer, words)
    expanded = expand_tokenizer(tokenizer, words)
    expand_embeddings(model, tokenizer, pieces)
    return expanded
