"""Search engines behind one interface: each returns plain :class:`Hit` lists, never raw engine objects."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


@dataclass(frozen=True, slots=True)  # slots: a run of 10k queries x 1,000 hits is 10M of these
class Hit:
    """One retrieved sentence. ``score`` is in model units: g(q, s) over the quantised weights."""

    id: str
    score: float
    impact: int | None = None  # an impact engine's integer score: score * factor
    text: str = ""
    doc: str | None = None
    start: int | None = None
    end: int | None = None

    def located(self, sentence) -> Hit:
        """This hit with the stored sentence's text, document and offsets (``None``: unchanged)."""
        if sentence is None:
            return self
        return replace(self, text=sentence.text, doc=sentence.doc, start=sentence.start, end=sentence.end)

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
