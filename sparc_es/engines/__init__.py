"""Search engines behind one interface: each returns plain :class:`Hit` lists, never raw engine objects."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hit:
    """One retrieved sentence. ``score`` is in model units: g(q, s) over the quantised weights."""

    id: str
    score: float
    impact: int | None = None  # an impact engine's integer score: score * factor
    text: str = ""
    doc: str | None = None
    start: int | None = None
    end: int | None = None

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}
