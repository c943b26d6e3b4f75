"""``sparc-es``: one console script, a sub-command per stage, each a thin call into the library.

    sparc-es encode  --corpus DOCS --output ENCODED     sentences -> top-K integer impacts
    sparc-es requantize --input ENCODED --output NEW --idf   IDF / another factor, no re-encoding
    sparc-es index   --input ENCODED --index INDEX      impacts -> Lucene impact index (or --engine es)
    sparc-es search  --index INDEX "question"           top sentences with text, document, score
    sparc-es serve   --index INDEX [--port 8000]        HTTP JSON API and search page, one engine start
    sparc-es run     --index INDEX --topics T --output RUN   topics TSV -> TREC run file
    sparc-es explain --index INDEX "question" 1 2       why those hits scored what they did, token by token
    sparc-es explain "sentence"                         the (token, weight) pairs a sentence gets
    sparc-es eval    --run RUN --qrels QRELS            MRR@1000, R@1, nDCG@10, R@100
    sparc-es evalset --domain squad --output DIR        corpus, topics, qrels (or --mrqa FILE, --beir DIR,
                                                        --docs DIR --questions Q --answers A)
    sparc-es table   --systems bm25,sparc --domains squad,newsqa   systems x domains table
    sparc-es train   --output MODEL                     train SPARC on the SQuAD train slice
    sparc-es adapt   --corpus DOCS --output MODEL       embedding replacement on your own corpus (CPU)
    sparc-es query-dsl "question"                       the Elasticsearch request, for Kibana
    sparc-es demo                                       all of the above on the bundled demo corpus

Each verb is a module of this package (``sparc_es.cli.VERB``) with ``add_parser(sub)``, which adds its
sub-command to the parser, and ``command(args) -> int``, which runs it: a thin call into the library
that parses and prints. :data:`VERBS` names them in ``--help``'s order. The options several verbs
share live in :mod:`sparc_es.cli.options`, what they print in :mod:`sparc_es.cli.output`.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from types import ModuleType

from sparc_es import __version__
from sparc_es.cli import (
    adapt,
    demo,
    encode,
    eval as eval_,
    evalset,
    explain,
    index,
    query_dsl,
    requantize,
    run,
    search,
    serve,
    table,
    train,
)
from sparc_es.cli.output import FAILED, INTERRUPTED, PROG, TERMINATED, error_line
from sparc_es.errors import command_line
from sparc_es.notices import printed

# The verbs, by name, in --help's order; each module has add_parser(sub) and command(args).
VERBS: dict[str, ModuleType] = {
    "encode": encode, "requantize": requantize, "index": index, "search": search, "serve": serve, "run": run,
    "query-dsl": query_dsl, "train": train, "adapt": adapt, "eval": eval_, "evalset": evalset, "table": table,
    "explain": explain, "demo": demo,
}


class _Parser(argparse.ArgumentParser):
    """argparse's parser with a one-line error: the message and where the options are listed, not
    the verb's usage block (15 lines for search) above a wrong value. Sub-commands' parsers are of
    this class too (``add_subparsers`` takes the parent's)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help lists the options)\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``sparc-es`` parser, a sub-command per verb of :data:`VERBS`."""
    parser = _Parser(
        prog=PROG, description="SPARC learned sparse retrieval on a CPU: encode sentences once into "
        "top-K token weights, index them in Lucene, answer questions as sums of stored weights.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n", 2)[2].split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    debug = "show the Python traceback of an error (also SPARC_ES_DEBUG=1)"
    parser.add_argument("--debug", action="store_true", help=debug)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, verb in VERBS.items():
        verb.add_parser(sub)
        # after the verb too, where an error's hint leads a user to add it; SUPPRESS keeps one given before it
        sub.choices[name].add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=debug)
    return parser


# The commands whose work, stopped, a rerun takes up where it stopped (an encode's shards, a load into
# Elasticsearch, a table's cached runs); the others (a search, a server) have nothing to resume.
RESUMED = frozenset({"encode", "index", "table"})


class _Terminated:
    """SIGTERM (``kill``, ``docker stop``, systemd) taken as Ctrl-C, so a command cleans up as on
    Ctrl-C (an index's ``.NAME.building`` folder and lock, a local Ray, serve's engine) instead of
    dying at once: what SIGINT's own handler does where a command set one (``train`` and ``adapt``
    finish the step in progress, a Ray shutdown is waited for), else a KeyboardInterrupt where
    Python is. ``received`` tells main which of the two signals it was."""

    def __init__(self) -> None:
        self.received = False

    def __call__(self, signum, frame) -> None:
        self.received = True
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler) and handler is not signal.default_int_handler:
            handler(signal.SIGINT, frame)
            return
        raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``sparc-es`` console script; returns the exit status."""
    parser = build_parser()
    if not (sys.argv[1:] if argv is None else argv):  # `sparc-es` alone: what it can do, not an error line
        parser.print_help(sys.stderr)
        return 2
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said with the verb's own usage, not the top level's list of verbs
        verbs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        verbs.choices[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    debug = args.debug or os.environ.get("SPARC_ES_DEBUG", "") not in ("", "0")
    terminated, before = _Terminated(), None
    try:
        # Only where SIGTERM would kill the process as it stands: a program that calls main keeps
        # its own handler, and an ignored SIGTERM stays ignored.
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            before = signal.signal(signal.SIGTERM, terminated)
        # errors name the command's flags, not the library's keywords; notices print as sparc-es STAGE: ...
        with command_line(), printed(sys.stderr):
            status = VERBS[args.command].command(args)
        sys.stdout.flush()  # a reader gone is found here, not in the interpreter's exit
        return status
    except KeyboardInterrupt as e:  # a command may say how it goes on (adapt: from which checkpoint)
        what = "terminated (SIGTERM)" if terminated.received else "interrupted"
        if args.command in RESUMED:
            what += "; run the same command again to resume"
        print(f"{PROG}: {str(e) or what}", file=sys.stderr)
        return TERMINATED if terminated.received else INTERRUPTED
    except BrokenPipeError:  # the reader has gone (`| head`): stop quietly, as other commands in a pipe do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush is quiet too
        return FAILED
    except Exception as e:
        if debug:
            raise
        print(error_line(e), file=sys.stderr)
        return FAILED
    finally:
        if before is not None:
            signal.signal(signal.SIGTERM, before)

