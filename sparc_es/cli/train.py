"""``sparc-es train``: train SPARC on the SQuAD train slice (resumable)."""

from __future__ import annotations

import argparse

from sparc_es.cli.options import positive, set_threads


def add_parser(sub) -> None:
    from sparc_es.options import add_arguments
    from sparc_es.training.train import TrainConfig, __doc__ as train_doc

    p = sub.add_parser("train", help="train SPARC on the SQuAD train slice (resumable)",
                       description=train_doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output", required=True, metavar="DIR", help="model folder to write (and resume from)")
    add_arguments(p, TrainConfig)  # every training setting, with its help, from the config's fields
    p.add_argument("--limit", type=positive, default=None, help="use only the first N questions (smoke tests)")
    p.add_argument("--examples-cache", metavar="JSON", help="where the questions with their negatives are "
                   "kept, to share between runs (default: OUTPUT/examples.json)")
    p.add_argument("--overwrite", action="store_true", help="replace a finished model in --output (kept until the "
                   "new one is complete); an unfinished run there is resumed either way")
    p.add_argument("--threads", type=positive, default=None, help="torch CPU threads")
    p.add_argument("--device", default="auto", help="where the model trains: auto (a GPU when torch sees one), cpu, "
                   "cuda or cuda:N (default: %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def command(args: argparse.Namespace) -> int:
    from sparc_es.model import resolve_device
    from sparc_es.options import from_arguments
    from sparc_es.training.examples import squad_examples
    from sparc_es.training.train import TrainConfig, train

    set_threads(args.threads)
    device = resolve_device(args.device)  # before any work: a device torch does not see fails at once
    config = from_arguments(args, TrainConfig)
    summary = train(config, args.output, squad_examples(config, args.output, args.limit, args.examples_cache),
                    progress=not args.quiet, overwrite=args.overwrite, device=device)
    print(f"trained {summary['steps']} steps in {summary['seconds']:.0f} s ({summary['questions_per_second']} "
          f"questions/s on {summary['device']}); exp(w) = {summary['exp_w']:.2f}; model in {args.output}")
    return 0
