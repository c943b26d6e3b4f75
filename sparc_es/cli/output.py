"""What the verbs print: warnings and errors on one line each, exit codes, a question's hits for
people, and the warnings an encoded folder's manifest calls for."""

from __future__ import annotations

import sys

from sparc_es.errors import one_line

PROG = "sparc-es"

# Exit codes: 130 is a shell's for Ctrl-C (128 + SIGINT), 143 for kill's SIGTERM (128 + 15).
OK, FAILED, INTERRUPTED, TERMINATED = 0, 1, 130, 143

# After the message of an error sparc-es did not foresee: where to see more.
DEBUG_HINT = " (rerun with --debug for the traceback)"


def warn(message: str) -> None:
    """``sparc-es: warning: MESSAGE`` on standard error."""
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def error_line(e: BaseException) -> str:
    """``sparc-es: error: WHAT``: :func:`sparc_es.errors.one_line`, safe for a terminal."""
    from sparc_es.answers.show import printable

    return f"{PROG}: error: {printable(one_line(e, hint=DEBUG_HINT), one_line=True)}"


def print_hits(question: str, match, shown, color: bool | None = None) -> None:
    """One question's answer for people (``sparc_es.answers.show``): how it met the index, then each hit."""
    from sparc_es.answers.show import printable, render, use_color

    color = use_color() if color is None else color
    print(f"Q: {printable(question, one_line=True)}")
    for line in (match.summary(), match.notice() and f"! {match.notice()}"):
        if line:
            print(f"  {printable(line)}")
    if not shown and match.best_below is None:
        print("  (no sentence shares a token with the question)")
    held = match.in_index
    for s in shown:
        print(render(s, question, color, of=len(held) if held is not None else None))


def report_encode(manifest) -> None:
    """The warnings an encode's manifest calls for (encode, demo)."""
    from sparc_es.answers.show import printable
    from sparc_es.corpus.sources import counted

    if manifest.truncated_sentences:
        n = manifest.truncated_sentences
        warn(f"{counted(n, 'sentence')} {'was' if n == 1 else 'were'} longer than {manifest.model.max_length} tokens "
             f"and {'was' if n == 1 else 'were'} truncated (e.g. {', '.join(manifest.truncated_ids)}); raise "
             f"--max-length to keep {'it' if n == 1 else 'them'} whole")
    if manifest.empty_files:
        from sparc_es.corpus.sources import empty_files_notice

        warn(empty_files_notice(manifest.empty_files, [printable(e) for e in manifest.empty_file_examples]))
    report_empty(manifest)
    if manifest.control_characters_removed:
        from sparc_es.corpus.sources import controls_found

        kinds = controls_found(manifest.control_character_kinds) if manifest.control_character_kinds else \
            "C0 controls but tab and line ends, DEL, C1 controls"  # a folder written before kinds were kept
        warn(f"removed {counted(manifest.control_characters_removed, 'control character')} from the corpus text: "
             f"{kinds}; e.g. in {', '.join(manifest.cleaned_ids)}")
    if manifest.cut_texts:
        n = manifest.cut_texts
        more = " ..." if n > len(manifest.cut_examples) else ""
        warn(f"{n} text{'s' if n != 1 else ''} of the corpus {'were' if n != 1 else 'was'} cut, read in pieces or "
             f"left out: {'; '.join(printable(e) for e in manifest.cut_examples)}{more}")
    if manifest.truncated_contexts:
        warn(f"{manifest.truncated_contexts} of {counted(manifest.sentences, 'context')} "
             f"{'was' if manifest.truncated_contexts == 1 else 'were'} cut to fit "
             f"{manifest.model.max_length} tokens with their sentence (the sentence itself is kept whole)")


def report_empty(manifest) -> None:
    """The one warning of encode's that requantize repeats: its factor decides which vectors are empty."""
    from sparc_es.corpus.sources import counted

    n = manifest.empty_vectors
    has, cannot = (f"{counted(n, 'sentence')} {'has' if n == 1 else 'have'}", "cannot be retrieved")
    if n and manifest.min_impact > 1:
        warn(f"{has} no impact of at least {manifest.min_impact} and {cannot} by SPARC; lower --min-impact")
    elif n:
        warn(f"{has} no token weight above 0.5/factor and {cannot}; raise --factor")


def invoked_as() -> str:
    """How the user started sparc-es, for a command line to suggest: ``.venv/bin/sparc-es`` when
    run by that path (the README never activates the environment), ``python -m sparc_es``, else
    ``sparc-es``."""
    import shlex

    program = sys.argv[0] if sys.argv else ""
    if program.endswith("__main__.py"):
        return f"{shlex.quote(sys.executable)} -m sparc_es"
    if "/" in program and program.rpartition("/")[2] == "sparc-es":
        return shlex.quote(program)  # as the user typed it
    return "sparc-es"


def duration(seconds: float) -> str:
    """``45.2 s``, ``3 min 12 s``, ``2 h 05 min``: a time as a person reads it."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


def megabytes(folder) -> str:
    """The bytes of every file under ``folder``, in MB (``21.4 MB``)."""
    from sparc_es.layout.ownership import folder_size

    return f"{folder_size(folder) / 1e6:,.1f} MB"
