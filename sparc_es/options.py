"""Config dataclasses whose fields are also command-line flags: each setting is written once.

A field made with :func:`setting` carries its help text; :func:`add_arguments` turns every field
of a config class into a flag (``max_length`` -> ``--max-length``; a bool -> ``--x/--no-x``) with
the field's default, and :func:`from_arguments` builds the config back from the parsed flags.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import field


def setting(default, help: str, **cli):
    """A config field with its command-line help; ``cli`` may give ``choices``, ``type`` (for a
    field whose default is None) and ``metavar``."""
    return field(default=default, metadata={"help": help, **cli})


def add_arguments(parser: argparse.ArgumentParser, config: type, skip: tuple[str, ...] = ()) -> None:
    """One flag per field of the dataclass ``config`` (fields made with :func:`setting`)."""
    for f in dataclasses.fields(config):
        if f.name in skip or "help" not in f.metadata:
            continue
        meta = dict(f.metadata)
        help_text = meta.pop("help")
        flag = "--" + f.name.replace("_", "-")
        if isinstance(f.default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default,
                                help=f"{help_text} (default: {'on' if f.default else 'off'})")
            continue
        kind = meta.pop("type", type(f.default))
        if "(default" not in help_text:
            help_text += " (default: none)" if f.default is None else " (default: %(default)s)"
        parser.add_argument(flag, type=kind, default=f.default, help=help_text, **meta)


def from_arguments(args: argparse.Namespace, config: type, **given):
    """The dataclass ``config`` from the flags :func:`add_arguments` made (``given`` overrides)."""
    names = {f.name for f in dataclasses.fields(config)}
    return config(**{**{n: getattr(args, n) for n in names if hasattr(args, n)}, **given})
