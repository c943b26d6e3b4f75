#!/usr/bin/env python
"""What the readers keep of a MkDocs-Material documentation set's admonitions and content tabs.

Counts, over every ``.md`` file of a folder: the sentences that are an extension's marker line
(``!!! note``, ``??? tip``, ``=== "Linux"``) or carry attribute-list, snippet or abbreviation markup,
and the prose lines inside admonitions and tabs (indented under their marker, code fences left
out) of which fewer than 80% of the words (three letters or more) are in any sentence of the file.
A list of those lines is printed for a look by eye; code that sits in a tab without a fence shows
up there too. Issue "documents as their authors wrote them" asks for 0 and 0.

    .venv/bin/python scripts/mkdocs_check.py work/docsqa/pymdown
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
from pathlib import Path

MARKER = re.compile(r"^(\s*)(!!!|\?\?\?\+?|===[!+]?)\s")
# A sentence that is an extension's markup: a marker line, an attribute list, a snippet include, an
# abbreviation definition, [TOC] (prose about them, "the start and end --8<-- ...", is text).
MARKUP = re.compile(r'^(!!!|\?\?\?\+?|===[!+]?)(\s|$)|\{:\s*[#.]|^;?-+8<-+\s*["\[]|^\*\[[^\]]+\]:|^\[TOC\]$')
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


def words(text: str) -> list[str]:
    return [w for w in re.sub(r"[^a-z0-9]+", " ", text.lower()).split() if len(w) > 2]


def check(folder: Path) -> dict:
    from sparc_es.corpus.sources import read_document

    markers, lines, lost = 0, 0, []
    for path in sorted(folder.rglob("*.md")):
        sentences = list(read_document(path))
        markers += sum(bool(MARKUP.search(s.text)) for s in sentences)
        known = set(words(" ".join(s.text for s in sentences)))
        text = path.read_text(encoding="utf-8").split("\n")
        fence = False
        for i, line in enumerate(text):
            if line.startswith(("```", "~~~")):
                fence = not fence
            found = MARKER.match(line)
            if not found or fence:
                continue
            indent, inner = len(found.group(1)) + 4, False
            for j in range(i + 1, len(text)):
                body = text[j]
                if body.strip() and len(body) - len(body.lstrip()) < indent:
                    break
                stripped = body.strip()
                opened = FENCE.match(body)
                if opened and not inner:
                    inner = opened.group(1)
                    continue
                if opened and inner and opened.group(1).startswith(inner) and not stripped.strip(inner[0]):
                    inner = False  # a fence closes on the same character, at least as long, and nothing after
                    continue
                if inner or not stripped or MARKER.match(body) or stripped[0] in "|<{:[$-":
                    continue
                # as rendered: HTML entities decoded (``&Uuml;`` is the reader's "Ü")
                got = words(re.sub(r"`|\*|_|\[|\]\([^)]*\)", " ", html.unescape(stripped)))
                if len(got) >= 3:
                    lines += 1
                    if sum(w in known for w in got) < 0.8 * len(got):
                        lost.append(f"{path.relative_to(folder)}:{j + 1}: {stripped[:80]}")
    return {"folder": str(folder), "marker_sentences": markers, "box_and_tab_prose_lines": lines,
            "lines_not_in_any_sentence": len(set(lost)), "examples": sorted(set(lost))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", type=Path)
    p.add_argument("--json", type=Path, help="write the counts here too")
    args = p.parse_args(argv)
    result = check(args.folder)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    for line in result["examples"]:
        print(line)
    print(f"{result['marker_sentences']} marker sentences; {result['lines_not_in_any_sentence']} of "
          f"{result['box_and_tab_prose_lines']} prose lines of admonitions and tabs in no sentence")
    return 0


if __name__ == "__main__":
    sys.exit(main())
