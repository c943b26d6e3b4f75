"""Folders sparc-es makes, and the only ones it deletes.

Every output folder (encoded folder, index, demo work folder, adapted model) gets a marker file,
``.sparc-es``, when sparc-es creates it. ``--overwrite`` and ``demo`` delete a folder only when
it carries the marker (or, for folders written before markers existed, the layout only sparc-es
writes); anything else is refused with one line, so a mistyped path never costs a user's files.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sparc_es.errors import StoreError
from sparc_es.layout.names import LUCENE, META, PROGRESS, SENTENCES, VECTORS

MARKER = ".sparc-es"

# The kinds of folder sparc-es makes, by the command its marker names: --overwrite replaces a folder
# only with one of its kind (an index is never an encode's output, nor an encoded folder an index's).
ENCODED, INDEX, MODEL = ("encode", "requantize"), ("index",), ("train", "adapt")
_KINDS = {"encode": "an encoded folder", "requantize": "an encoded folder", "index": "an index",
          "adapt": "a model", "train": "a model", "demo": "the demo's work folder", "evalset": "an evaluation set"}

# What sparc-es folders written before the marker existed hold, one set per kind: a folder
# holding all of one set is taken as made by sparc-es.
_LEGACY = ({META, LUCENE, SENTENCES},  # Lucene index (first: it holds an encoded folder's META and SENTENCES)
           {META, VECTORS, SENTENCES},  # encoded folder
           {PROGRESS, VECTORS},  # unfinished encode
           {"config.json", "sparc_config.json"},  # model folder
           {"adapt-checkpoint.pt"})  # unfinished adaptation
_LEGACY_MAKERS = ("index", "encode", "encode", "train", "adapt")


def claim(folder: str | Path, what: str) -> Path:
    """Create ``folder`` (parents too) if needed and mark it as made by sparc-es (``what`` made it)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER).write_text(f"made by sparc-es {what}; sparc-es may delete this folder\n")
    return folder


def is_ours(folder: str | Path) -> bool:
    """Whether ``folder`` was made by sparc-es: it carries the marker, or an older sparc-es layout."""
    folder = Path(folder)
    if (folder / MARKER).is_file():
        return True
    names = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
    return any(kind <= names for kind in _LEGACY)


def folder_size(path: str | Path) -> int:
    """Bytes of every file under ``path``."""
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def maker(folder: str | Path) -> str | None:
    """The sparc-es command that made ``folder`` ("encode", "index", ...), as its marker says, or as
    an older layout shows; None when unknown."""
    folder = Path(folder)
    try:
        said = (folder / MARKER).read_text().split()
    except (OSError, UnicodeDecodeError):
        names = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
        return next((m for kind, m in zip(_LEGACY, _LEGACY_MAKERS) if kind <= names), None)
    return said[3].rstrip(";") if said[:3] == ["made", "by", "sparc-es"] and len(said) > 3 else None


def holds(folder: str | Path) -> str | None:
    """What ``folder`` holds, as its maker says ("an index (made by sparc-es index)"); None when unknown."""
    made = maker(folder)
    return f"{_KINDS[made]} (made by sparc-es {made})" if made in _KINDS else None


def remove(folder: str | Path, flag: str = "--overwrite") -> None:
    """Delete ``folder`` if sparc-es made it; refuse with one line if not (``flag``: what asked for it)."""
    if check_removable(folder, flag):
        shutil.rmtree(folder)


def swap_in(new: Path, folder: Path, retired: Path) -> None:
    """Put the complete folder ``new`` in ``folder``'s place and delete the one it replaces (moved to
    ``retired`` meanwhile): a kill between the renames is completed by :func:`finish_swap`."""
    shutil.rmtree(retired, ignore_errors=True)
    folder.rename(retired)
    new.rename(folder)
    shutil.rmtree(retired)


def finish_swap(folder: Path, new: Path, retired: Path, complete: bool) -> None:
    """Complete a :func:`swap_in` killed between its renames, ``new`` in place where it is
    ``complete``, else the old folder put back; the old folder, where the new one is in, deleted."""
    if not retired.exists():
        return
    if not folder.exists():
        (new if complete else retired).rename(folder)
    shutil.rmtree(retired, ignore_errors=True)


def check_removable(folder: str | Path, flag: str = "--overwrite", replaces: tuple[str, ...] | None = None) -> bool:
    """Whether ``folder`` exists and may be deleted; a one-line error if sparc-es did not make it, or
    (``replaces``: the commands whose folders this one replaces) made it of another kind."""
    folder = Path(folder)
    if not folder.exists() and not folder.is_symlink():
        return False
    if folder.is_symlink() or not folder.is_dir():
        raise StoreError(f"{folder}: is not a folder sparc-es made (a {'link' if folder.is_symlink() else 'file'}); "
                         f"{flag} deletes only sparc-es's own folders: remove it yourself or choose another path")
    if not (is_ours(folder) or not any(folder.iterdir())):
        raise StoreError(f"{folder}: was not made by sparc-es (no {MARKER} file in it); {flag} deletes only "
                         "sparc-es's own folders: remove it yourself or choose another path")
    made = maker(folder) if replaces else None
    if made is not None and made not in replaces and made in _KINDS:
        raise StoreError(f"{folder}: holds {_KINDS[made]} (made by sparc-es {made}), not {_KINDS[replaces[0]]}; "
                         f"{flag} replaces only {_KINDS[replaces[0]]}: remove it yourself or choose another path")
    return True


def check_apart(output: str | Path, inputs, flag: str) -> None:
    """Refuse, with one line, an output (``flag`` names its option) that is one of ``inputs`` or
    lies inside one, or that holds one: writing it would overwrite or delete the input, or read
    the output back as input."""
    out = Path(output).resolve()
    for given in inputs:
        if given is None:
            continue
        source = Path(given).resolve()
        if out == source or out.is_relative_to(source) or source.is_relative_to(out):
            relation = "is" if out == source else "is inside" if out.is_relative_to(source) else "holds"
            raise StoreError(f"{output}: {flag} {relation} the input {given}: writing it would overwrite or read "
                             "its own input; choose another path")


def check_file_output(output: str | Path, flag: str) -> None:
    """Refuse, with one line, an output file (``flag``) that is there and is not a regular file: a
    folder, a device, a pipe or a link to one would be replaced by the file written."""
    path = Path(output)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        kind = "a link" if path.is_symlink() else "a folder" if path.is_dir() else "not a regular file"
        raise StoreError(f"{output}: {flag} is {kind}; name a file to write (it is written whole, then "
                         "renamed into place)")


def check_folder_output(output: str | Path, flag: str) -> None:
    """Refuse, with one line, an output folder (``flag``) that is a file, or would lie inside one:
    the system's own words ("Not a directory", "File exists") say neither which path nor why."""
    path = Path(output)
    for at in (path, *path.parents):
        if at.is_dir() or not (at.exists() or at.is_symlink()):
            continue
        kind = ("a file" if at.is_file() else "a link to nothing" if not at.exists()
                else "not a regular file")  # a pipe, a device
        if at == path:
            raise StoreError(f"{at}: is {kind}, not a folder: {flag} names a folder to write (sparc-es replaces "
                             "nothing it did not make); choose another path")
        raise StoreError(f"{output}: cannot be a folder: {at} is {kind}, not a folder; choose another path")
