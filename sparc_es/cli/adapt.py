"""``sparc-es adapt``: a model adapted to your corpus by embedding replacement, on the CPU (resumable)."""

from __future__ import annotations

import argparse

from sparc_es.cli.options import positive, set_threads


def add_parser(sub) -> None:
    from sparc_es.options import add_arguments
    from sparc_es.training.adapt import AdaptConfig, __doc__ as adapt_doc

    p = sub.add_parser("adapt", help="adapt a model to your corpus on the CPU (embedding replacement; resumable)",
                       description=adapt_doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", nargs="+", required=True, metavar="PATH",
                   help="the target corpus: what encode takes (JSONL, .txt, .md files or folders)")
    p.add_argument("--output", required=True, metavar="DIR", help="adapted model folder to write (and resume from)")
    p.add_argument("--model", default="default", help="SPARC model folder to adapt (default: %(default)s)")
    p.add_argument("--base", metavar="DIR", help="its base checkpoint (default: found from the model's provenance)")
    add_arguments(p, AdaptConfig)  # every adaptation setting, with its help, from the config's fields
    p.add_argument("--overwrite", action="store_true", help="replace a model in --output (kept until the new one is "
                   "complete; the same command resumes a stopped one) or start an unfinished adaptation there again")
    p.add_argument("--threads", type=positive, default=None, help="torch CPU threads")
    p.add_argument("--device", default="auto", help="where E is trained: auto (a GPU when torch sees one), cpu, "
                   "cuda or cuda:N (default: %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def command(args: argparse.Namespace) -> int:
    from sparc_es.model import resolve_device
    from sparc_es.options import from_arguments
    from sparc_es.training.adapt import AdaptConfig, adapt, advice

    set_threads(args.threads)
    config = from_arguments(args, AdaptConfig)
    record = adapt(args.model, args.corpus, args.output, config, base=args.base, overwrite=args.overwrite,
                   progress=not args.quiet, device=resolve_device(args.device))
    print(f"adapted E on {record['sentences']} sentences in {record['seconds']:.0f} s ({record['steps']} steps, "
          f"MLM loss {record['loss_first_10']:.2f} -> {record['loss_last_10']:.2f}); model in {args.output}")
    if "expanded_vocabulary" in record:
        added = record["expanded_vocabulary"]
        examples = ", ".join(added["examples"][:5])
        print(f"added {added['words']} words to the vocabulary (each seen at least {added['min_count']} times)"
              + (f", e.g. {examples}" if examples else ""))
    print(advice(record["vocabulary_fit"]))
    return 0
