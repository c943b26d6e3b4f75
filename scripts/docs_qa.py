#!/usr/bin/env python
"""The technical-documentation QA validation set: fetch the pinned docs, check the answer patterns.

Six projects' documentation, one folder each under ``work/docsqa/`` (git-ignored, never
committed); the questions and answer patterns are committed under ``docs/validation/docsqa/``
(see its README.md for how they were written and what the files mean).

    python scripts/docs_qa.py fetch [--dest work/docsqa]
    python scripts/docs_qa.py check [--dest work/docsqa] [--set docs/validation/docsqa] [-v]
    .venv/bin/python scripts/docs_qa.py evalsets [--output work/docsqa-sets]   # sparc-es evalset --docs, per project

``fetch`` downloads each pinned source with the ordinary clients (``pip download`` for PyPI
source distributions, ``apt-get download`` for Debian packages; run ``apt-get update`` once first),
verifies the sha256 recorded below, and extracts only the documentation files chosen by the
project's rule into ``DEST/<project>/``, keeping their paths relative to the doc folder. The
downloads are kept in ``DEST/_downloads/``; a second run checks and does nothing.

``check`` verifies every answer pattern: it must match the named file's raw text (or, with no
file named, some file of the project's docs). For each pattern it reports how many places match
across the whole project's docs (raw text), how many match in the file's prose rendering (markup
stripped, code blocks left out: what a reader of the document sees as sentences), and, when the
project's own sentence splitter can be imported (``.venv/bin/python``), how many sentences of that
rendering match: those are the sentences an evaluation set would judge relevant. A pattern that
matches more than 20 places across the docs and names no file is reported as too loose.
Only the standard library is needed (the sentence count is skipped without ``sparc_es``).
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import html
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DEST = ROOT / "work" / "docsqa"
DEFAULT_SET = ROOT / "docs" / "validation" / "docsqa"
LOOSE = 20  # a pattern matching more places than this across a project's docs must name its file


@dataclass(frozen=True)
class Project:
    """One project's pinned documentation source and the rule choosing its doc files."""

    name: str
    version: str
    format: str  # md, rst or html: the format of the chosen doc files
    licence: str
    source: str  # "pypi-sdist" or "debian"
    spec: str  # what the client is asked for: NAME==VERSION (pip) or NAME=VERSION (apt-get)
    filename: str  # the downloaded file
    sha256: str
    root: str  # the doc folder inside the archive (its files keep their paths relative to it)
    include: tuple[str, ...]  # glob patterns (relative to root) of the files kept
    exclude: tuple[str, ...] = ()  # glob patterns taken out again
    rule: str = ""  # the selection rule in words (also in the README)
    url: str = ""  # where the project lives, for people
    notes: tuple[str, ...] = field(default=())


PROJECTS: tuple[Project, ...] = (
    Project(
        name="click", version="8.1.7", format="rst", licence="BSD-3-Clause",
        source="pypi-sdist", spec="click==8.1.7", filename="click-8.1.7.tar.gz",
        sha256="ca9853ad459e787e2192211578cc907e7594e294c7ccc834310722b41b9ca6de",
        root="click-8.1.7/docs/", include=("*.rst",),
        rule="every .rst file of the sdist's docs/ folder",
        url="https://click.palletsprojects.com/"),
    Project(
        name="black", version="24.4.2", format="md", licence="MIT",
        source="pypi-sdist", spec="black==24.4.2", filename="black-24.4.2.tar.gz",
        sha256="c872b53057f000085da66a19c55d68f6f8ddcac2642392ad3a355878406fbd4d",
        root="black-24.4.2/docs/", include=("*.md",),
        rule="every .md file under the sdist's docs/ folder, subfolders included "
             "(change_log.md, license.md and authors.md only {include} files outside docs/, which are not taken)",
        url="https://black.readthedocs.io/"),
    Project(
        name="pip", version="24.0", format="md", licence="MIT",
        source="pypi-sdist", spec="pip==24.0", filename="pip-24.0.tar.gz",
        sha256="ea9bd1a847e8c5774a5777bb398c19e80bcd4e2aa16a4b301b718fe6f593aba2",
        root="pip-24.0/docs/html/", include=("*.md",),
        rule="every .md (MyST Markdown) file under the sdist's docs/html/ folder, subfolders included; "
             "the .rst pages (mostly command-reference stubs filled in by Sphinx directives) are not taken",
        url="https://pip.pypa.io/"),
    Project(
        name="flask", version="2.2.2", format="html", licence="BSD-3-Clause",
        source="debian", spec="python-flask-doc=2.2.2-3", filename="python-flask-doc_2.2.2-3_all.deb",
        sha256="0659f6a04b15fe3f907150cadc0399fe987c790e722e001b73f7e49fa5ecca15",
        root="usr/share/doc/python-flask-doc/html/", include=("*.html",),
        exclude=("genindex.html", "search.html", "py-modindex.html", "404.html", "_*"),
        rule="every Sphinx-built .html page of Debian bookworm's python-flask-doc 2.2.2-3 "
             "(/usr/share/doc/python-flask-doc/html/, subfolders included), except Sphinx's generated "
             "pages (genindex, search, py-modindex, 404) and the _sources/_static/_images folders",
        url="https://flask.palletsprojects.com/",
        notes=("Debian keeps only the current version of a package in bookworm: should a point release "
               "replace 2.2.2-3, apt-get download fails and the pin (and sha256) must be moved.",)),
    Project(
        name="pymdown", version="9.9.2", format="md", licence="MIT",
        source="pypi-sdist", spec="pymdown-extensions==9.9.2", filename="pymdown_extensions-9.9.2.tar.gz",
        sha256="ebb33069bafcb64d5f5988043331d4ea4929325dc678a6bcf247ddfcf96499f8",
        root="pymdown_extensions-9.9.2/docs/src/markdown/", include=("*.md",), exclude=(".snippets",),
        rule="every .md file under the sdist's docs/src/markdown/ folder (MkDocs-Material Markdown: admonitions, "
             "collapsible blocks, content tabs, attribute lists), subfolders included, except the .snippets/ folder "
             "(link references, abbreviations and a script that the snippets extension appends to every page)",
        url="https://facelessuser.github.io/pymdown-extensions/",
        notes=("9.9.2 is the last release whose docs use MkDocs-Material's !!! / ??? / === syntax; from 9.10 "
               "they move to the project's own /// blocks.",)),
    Project(
        name="werkzeug", version="3.1.3", format="rst", licence="BSD-3-Clause",
        source="pypi-sdist", spec="werkzeug==3.1.3", filename="werkzeug-3.1.3.tar.gz",
        sha256="60723ce945c19328679790e3282cc758aa4a6040e4bb330f53d30fa546d44746",
        root="werkzeug-3.1.3/docs/", include=("*.rst",),
        rule="every .rst file under the sdist's docs/ folder, subfolders included (Sphinx API pages: "
             "autodoc and py directives with hand-written paragraphs; changes.rst only includes ../CHANGES.rst, "
             "which is not taken)",
        url="https://werkzeug.palletsprojects.com/"),
)
BY_NAME = {p.name: p for p in PROJECTS}


# --- fetch -------------------------------------------------------------------------------------

def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def download(project: Project, downloads: Path) -> Path:
    """The verified archive, downloaded unless a copy with the recorded sha256 is already there."""
    downloads.mkdir(parents=True, exist_ok=True)
    path = downloads / project.filename
    if path.is_file() and sha256_of(path) == project.sha256:
        return path
    path.unlink(missing_ok=True)
    if project.source == "pypi-sdist":
        cmd = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
               "--disable-pip-version-check", "-q", project.spec, "-d", str(downloads)]
    elif project.source == "debian":
        cmd = ["apt-get", "download", "-q", project.spec]
    else:
        raise SystemExit(f"{project.name}: unknown source kind {project.source!r}")
    client = "pip download" if project.source == "pypi-sdist" else "apt-get download"
    print(f"{project.name}: {client} {project.spec}")
    done = subprocess.run(cmd, cwd=downloads, capture_output=True, text=True)
    if done.returncode != 0 or not path.is_file():
        hint = " (run apt-get update first; a newer Debian revision may have replaced the pin)" \
            if project.source == "debian" else ""
        raise SystemExit(f"{project.name}: {' '.join(cmd)} failed{hint}:\n{done.stderr.strip()[-2000:]}")
    got = sha256_of(path)
    if got != project.sha256:
        raise SystemExit(f"{project.name}: {path} has sha256 {got}, expected {project.sha256}; "
                         "the source changed: check it and update the pin")
    return path


def _deb_data_tar(path: Path) -> tarfile.TarFile:
    """The data archive of a .deb (an ar archive), without dpkg."""
    raw = path.read_bytes()
    if not raw.startswith(b"!<arch>\n"):
        raise SystemExit(f"{path}: not a Debian package (no ar header)")
    pos = 8
    while pos + 60 <= len(raw):
        header = raw[pos:pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        body = raw[pos + 60:pos + 60 + size]
        if name.startswith("data.tar"):
            if name.endswith(".zst"):
                data = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(path)], check=True,
                                      capture_output=True).stdout
                return tarfile.open(fileobj=io.BytesIO(data), mode="r:")
            return tarfile.open(fileobj=io.BytesIO(body), mode="r:*")
        pos += 60 + size + (size % 2)
    raise SystemExit(f"{path}: no data.tar member")


def _selected(project: Project, rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    if not any(fnmatch.fnmatch(name, pat) for pat in project.include):
        return False
    parts = rel.split("/")
    for pat in project.exclude:
        if fnmatch.fnmatch(rel, pat) or any(fnmatch.fnmatch(part, pat) for part in parts[:-1]):
            return False
    return True


def _doc_members(project: Project, archive: Path) -> dict[str, bytes]:
    """relative path -> bytes of the doc files the project's rule selects (regular files only)."""
    tar = _deb_data_tar(archive) if project.source == "debian" else tarfile.open(archive, "r:*")
    out: dict[str, bytes] = {}
    with tar:
        for member in tar.getmembers():
            name = member.name[2:] if member.name.startswith("./") else member.name
            if not member.isfile() or not name.startswith(project.root):
                continue
            rel = name[len(project.root):]
            if not rel or rel.startswith("/") or ".." in rel.split("/") or not _selected(project, rel):
                continue
            out[rel] = tar.extractfile(member).read()
    if not out:
        raise SystemExit(f"{project.name}: no doc file under {project.root} in {archive}")
    return dict(sorted(out.items()))


def _stamp(project: Project, files: dict[str, bytes]) -> dict:
    return {"project": project.name, "version": project.version, "sha256": project.sha256,
            "root": project.root, "include": list(project.include), "exclude": list(project.exclude),
            "files": {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items()}}


def _up_to_date(project: Project, folder: Path, stamp_path: Path) -> bool:
    """The folder holds exactly what the stamp says, and the stamp is for this pin and rule."""
    if not (folder.is_dir() and stamp_path.is_file()):
        return False
    try:
        stamp = json.loads(stamp_path.read_text())
    except ValueError:
        return False
    want = {k: stamp.get(k) for k in ("version", "sha256", "root", "include", "exclude")}
    if want != {"version": project.version, "sha256": project.sha256, "root": project.root,
                "include": list(project.include), "exclude": list(project.exclude)}:
        return False
    present = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    if present != sorted(stamp["files"]):
        return False
    return all(sha256_of(folder / rel) == digest for rel, digest in stamp["files"].items())


def fetch(dest: Path, names: list[str]) -> int:
    downloads = dest / "_downloads"
    for name in names:
        project = BY_NAME[name]
        folder = dest / project.name
        stamp_path = downloads / f"{project.name}.stamp"
        if _up_to_date(project, folder, stamp_path):
            n = len(json.loads(stamp_path.read_text())["files"])
            print(f"{project.name} {project.version}: up to date ({n} files in {folder})")
            continue
        archive = download(project, downloads)
        files = _doc_members(project, archive)
        tmp = dest / f".{project.name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        for rel, data in files.items():
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
        stamp_path.write_text(json.dumps(_stamp(project, files), indent=1) + "\n")
        size = sum(len(d) for d in files.values())
        print(f"{project.name} {project.version}: {len(files)} {project.format} files, "
              f"{size / 1024:.0f} KiB -> {folder}")
    return 0


# --- prose rendering (what a reader sees as sentences) -----------------------------------------

_MD_INLINE = re.compile(r"\*\*|__|`|!?\[|\]\([^)]*\)")  # as sparc_es.corpus.sources cleans Markdown
# a code fence, also one opening a list item's body (CommonMark); MyST directives are fences with {name}
_MD_FENCE = re.compile(r"^\s*(?:(?:[-*+]|\d{1,9}[.)])\s+)?(`{3,}|~{3,})(.*)$")
_MYST_CODE = {"code", "code-block", "code-cell", "sourcecode", "literalinclude", "include", "pip-cli", "raw",
              "eval-rst", "mermaid", "graphviz", "math"}
_RST_ROLE = re.compile(r":[\w:.-]+:`([^`<]*?)(?:\s*<[^>]*>)?`")  # :func:`name <target>` -> name
_RST_INLINE = re.compile(r"\*\*|``|`_{0,2}|\*")
_HTML_DROP = re.compile(r"<(script|style|pre|head)\b.*?</\1>", re.S | re.I)
_HTML_BLOCK = re.compile(r"</?(p|div|li|dt|dd|h[1-6]|tr|td|th|table|ul|ol|dl|section|blockquote|br)\b[^>]*>", re.I)
_HTML_TAG = re.compile(r"<[^>]+>")


def prose(text: str, fmt: str) -> str:
    """The document's prose as plain text, paragraphs separated by blank lines, code blocks left out."""
    if fmt == "html":
        m = re.search(r'<div class="body" role="main">(.*?)<div class="sphinxsidebar"', text, re.S)
        text = _HTML_DROP.sub("\n\n", m.group(1) if m else text)
        text = _HTML_BLOCK.sub("\n\n", text)
        text = html.unescape(_HTML_TAG.sub("", text)).replace("\u00b6", "")
        return re.sub(r"\n\s*\n\s*", "\n\n", text).strip()
    lines, out = text.splitlines(), []
    code = None  # md: the (character, length) of the open code fence
    directives: list[tuple[str, int]] = []  # md: open MyST directive fences whose body is prose
    literal_indent = None  # rst: inside an indented literal block / directive body
    for line in lines:
        if fmt == "md":
            m = _MD_FENCE.match(line)
            if code is not None:
                if m and m.group(1)[0] == code[0] and len(m.group(1)) >= code[1] and not m.group(2).strip():
                    code = None
                out.append("")
                continue
            if m:
                fence, info = m.group(1), m.group(2).strip()
                if directives and fence == directives[-1][0] * directives[-1][1] and not info:
                    directives.pop()
                elif re.match(r"\{[A-Za-z][\w-]*\}", info) and info[1:].split("}")[0] not in _MYST_CODE:
                    # a MyST directive ({note}); a brace header of attributes ({.css linenums="1"}) is code
                    directives.append((fence[0], len(fence)))
                else:
                    code = (fence[0], len(fence))
                out.append("")
                continue
            out.append(_MD_INLINE.sub("", line))
            continue
        # rst
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if literal_indent is not None:
            if stripped and indent <= literal_indent:
                literal_indent = None
            else:
                out.append("")
                continue
        if re.match(r"^\s*\.\.\s+(code-block|code|sourcecode|literalinclude|click:example|click:run)\b", line) \
                or (stripped.endswith("::") and not stripped.startswith("..")):
            literal_indent = indent
            if stripped.endswith("::") and not stripped.startswith(".."):
                out.append(_RST_INLINE.sub("", _RST_ROLE.sub(r"\1", line[:-1] if line.endswith("::") else line)))
            else:
                out.append("")
            continue
        if re.match(r"^\s*[=\-~^\"'`#*+]{3,}\s*$", line):  # section underline
            out.append("")
            continue
        out.append(_RST_INLINE.sub("", _RST_ROLE.sub(r"\1", line)))
    return "\n".join(out)


def sentence_splitter():
    """``split(raw, prose, rel, fmt) -> sentence texts`` with the project's own splitter (Bling Fire, and
    its readers for Markdown, RST and HTML where it has them), or None where sparc_es cannot be imported."""
    try:
        import inspect

        import blingfire  # noqa: F401

        from sparc_es.corpus.sources import split_document
    except ImportError:
        return None
    params = inspect.signature(split_document).parameters
    if "format" in params:  # the reader knows the formats: give it the raw file
        names = {"md": "markdown", "rst": "rst", "html": "html"}

        def split(raw: str, plain: str, rel: str, fmt: str) -> list[str]:
            try:
                return [s.text for s in split_document(raw, rel, format=names[fmt])]
            except Exception as e:  # a reader that cannot read it: say so, use the prose rendering
                print(f"  ({rel}: the {names[fmt]} reader failed ({type(e).__name__}: {e}); prose split instead)")
                return [s.text for s in split_document(plain, rel, format="text")]
        return split

    def split_old(raw: str, plain: str, rel: str, fmt: str) -> list[str]:  # text and Markdown only
        md = fmt == "md"
        return [s.text for s in split_document(raw if md else plain, rel, markdown=md)]
    return split_old


# --- check -------------------------------------------------------------------------------------

QID = re.compile(r"^([a-z]+)-(\d{3})$")


def read_tsv(path: Path, min_fields: int, max_fields: int) -> list[tuple[int, list[str]]]:
    rows = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if not min_fields <= len(fields) <= max_fields or not all(f.strip() for f in fields):
            raise SystemExit(f"{path}:{lineno}: expected {min_fields} to {max_fields} non-empty tab-separated fields")
        rows.append((lineno, fields))
    return rows


def check(dest: Path, qa_set: Path, names: list[str], verbose: bool) -> int:
    split = sentence_splitter()
    problems: list[str] = []
    warnings: list[str] = []
    totals: list[tuple[str, int, int, int, int]] = []
    for name in names:
        project = BY_NAME[name]
        folder = dest / name
        if not folder.is_dir():
            raise SystemExit(f"{folder}: not fetched (python scripts/docs_qa.py fetch)")
        raw = {p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8")
               for p in sorted(folder.rglob("*")) if p.is_file()}
        plain = {rel: prose(text, project.format) for rel, text in raw.items()}
        sentences: dict[str, list[str]] | None = None
        if split is not None:
            sentences = {}
            for rel, text in raw.items():
                sentences[rel] = split(text, plain[rel], rel, project.format)
        qpath, apath = qa_set / f"{name}.questions.tsv", qa_set / f"{name}.answers.tsv"
        questions: dict[str, str] = {}
        for lineno, (qid, question) in read_tsv(qpath, 2, 2):
            m = QID.match(qid)
            if not m or m.group(1) != name:
                problems.append(f"{qpath}:{lineno}: qid {qid!r} is not {name}-NNN")
            if qid in questions:
                problems.append(f"{qpath}:{lineno}: duplicate qid {qid}")
            questions[qid] = question
        answered: set[str] = set()
        n_lines = 0
        print(f"\n== {name} {project.version} ({project.format}, {len(raw)} files, "
              f"{sum(len(t.encode()) for t in raw.values()) / 1024:.0f} KiB raw, "
              f"{sum(len(t) for t in plain.values()) / 1024:.0f} KiB prose"
              + (f", {sum(len(s) for s in sentences.values())} sentences" if sentences else "") + ")")
        print(f"{'qid':10} {'file':42} {'in file':>7} {'prose':>5} {'sents':>5} {'all docs':>8} {'files':>5}  pattern")
        for lineno, fields in read_tsv(apath, 2, 3):
            n_lines += 1
            qid, pattern = fields[0], fields[1]
            rel = fields[2] if len(fields) == 3 else None
            where = f"{apath}:{lineno} ({qid})"
            if qid not in questions:
                problems.append(f"{where}: no such question")
            answered.add(qid)
            try:
                rx = re.compile(pattern, re.I)
            except re.error as e:
                problems.append(f"{where}: bad pattern: {e}")
                continue
            if rel is not None and rel not in raw:
                problems.append(f"{where}: no file {rel} in {folder}")
                continue
            scope = [rel] if rel else list(raw)
            in_scope = sum(len(rx.findall(raw[f])) for f in scope)
            in_prose = sum(len(rx.findall(plain[f])) for f in scope)
            n_sents = sum(1 for f in scope for s in sentences[f] if rx.search(s)) if sentences else None
            per_file = {f: len(rx.findall(t)) for f, t in raw.items()}
            everywhere = sum(per_file.values())
            n_files = sum(1 for v in per_file.values() if v)
            flags = []
            if in_scope == 0:
                flags.append("NO MATCH")
                problems.append(f"{where}: pattern matches nothing in {rel or 'the docs'}")
            if in_prose == 0:
                flags.append("NOT IN PROSE")
                problems.append(f"{where}: pattern matches no prose of {rel or 'the docs'} (only markup or code?)")
            if sentences is not None and n_sents == 0:  # the splitter's view: a warning, not an error
                flags.append("NO SENTENCE")
                warnings.append(f"{where}: pattern matches no sentence of {rel or 'the docs'} as sparc_es splits it")
            if rel is None and everywhere > LOOSE:
                flags.append("LOOSE")
                problems.append(f"{where}: pattern matches {everywhere} places across the docs: "
                                "tighten it or name the file")
            if verbose or flags:
                print(f"{qid:10} {(rel or '*')[:42]:42} {in_scope:7d} {in_prose:5d} "
                      f"{'-' if n_sents is None else n_sents:>5} {everywhere:8d} {n_files:5d}  {pattern}"
                      + (f"   <- {', '.join(flags)}" if flags else ""))
        for qid in questions:
            if qid not in answered:
                problems.append(f"{qpath}: {qid} has no answer line")
        totals.append((name, len(questions), n_lines, len(raw), sum(len(t.encode()) for t in raw.values())))
        print(f"{name}: {len(questions)} questions, {n_lines} answer lines")
    print("\nproject    questions  answer lines  doc files  raw KiB")
    for name, nq, na, nf, size in totals:
        print(f"{name:10} {nq:9d} {na:13d} {nf:10d} {size / 1024:8.0f}")
    print(f"{'total':10} {sum(t[1] for t in totals):9d} {sum(t[2] for t in totals):13d}")
    if split is None:
        print("(sentence counts skipped: run with .venv/bin/python to use the project's splitter)")
    if warnings:
        print(f"\n{len(warnings)} warning(s):")
        for w in warnings:
            print("  " + w)
    if problems:
        print(f"\n{len(problems)} problem(s):")
        for p in problems:
            print("  " + p)
        return 1
    print("all patterns match")
    return 0


def evalsets(dest: Path, qa_set: Path, names: list[str], out: Path) -> int:
    """One ``sparc-es evalset --docs`` folder per project: ``OUT/docs-<project>/`` (a domain for
    ``sparc-es table --domains``)."""
    for name in names:
        cmd = [str(Path(sys.executable).parent / "sparc-es"), "evalset", "--docs", str(dest / name),
               "--questions", str(qa_set / f"{name}.questions.tsv"), "--answers", str(qa_set / f"{name}.answers.tsv"),
               "--name", f"docs-{name}", "--output", str(out / f"docs-{name}"), "--overwrite"]  # regenerated
        rc = subprocess.run(cmd).returncode
        if rc:
            return rc
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    for cmd in ("fetch", "check", "evalsets"):
        s = sub.add_parser(cmd)
        s.add_argument("--dest", type=Path, default=DEFAULT_DEST, help="where the doc folders go (default work/docsqa)")
        s.add_argument("--project", action="append", choices=sorted(BY_NAME), help="only this project (repeatable)")
        if cmd in ("check", "evalsets"):
            s.add_argument("--set", type=Path, default=DEFAULT_SET, help="the questions and answers folder")
        if cmd == "check":
            s.add_argument("-v", "--verbose", action="store_true", help="a line for every pattern, not only problems")
        if cmd == "evalsets":
            s.add_argument("--output", type=Path, default=Path("work/docsqa-sets"),
                           help="where the evaluation sets go (default work/docsqa-sets)")
    args = p.parse_args(argv)
    names = args.project or [pr.name for pr in PROJECTS]
    if args.command == "fetch":
        return fetch(args.dest, names)
    if args.command == "evalsets":
        return evalsets(args.dest, args.set, names, args.output)
    return check(args.dest, args.set, names, args.verbose)


if __name__ == "__main__":
    sys.exit(main())
