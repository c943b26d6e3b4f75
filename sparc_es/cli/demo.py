"""``sparc-es demo``: the main job end to end on the bundled demo corpus (the project's own
documentation): encode, index, answer a few questions."""

from __future__ import annotations

import argparse
from pathlib import Path

from sparc_es.cli.options import hit_count, load_model, model_args
from sparc_es.cli.output import invoked_as, print_hits, report_encode
from sparc_es.layout import ownership as folders


def add_parser(sub) -> None:
    p = sub.add_parser("demo", help="encode, index and query the bundled demo corpus",
                       description="The main job end to end on the embedded Lucene engine: encode the "
                       "project's own documentation, index it, and answer a few questions.")
    p.add_argument("--workdir", default=".sparc-demo", help="where the encoded folder and index go "
                   "(replaced on each run if an earlier demo made it; any other existing folder is refused; "
                   "default: %(default)s)")
    p.add_argument("-k", type=hit_count, default=3, help="hits per question (default: %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    model_args(p)


def command(args: argparse.Namespace) -> int:
    from importlib import resources

    from sparc_es.answers.show import Presenter, answer
    from sparc_es.encode.run import encode_corpus
    from sparc_es.engines import open_engine
    from sparc_es.engines.hybrid import DEFAULT_METHOD
    from sparc_es.engines.lucene import build_index
    from sparc_es.evaluation.trec import read_topics
    from sparc_es.model.idf import IDF_DEFAULT

    demo = resources.files("sparc_es") / "demo"
    with resources.as_file(demo) as demo_dir:
        work = Path(args.workdir)
        folders.remove(work, "demo")  # only a folder an earlier demo made
        folders.claim(work, "demo")
        model = load_model(args)
        print(f"model: {args.model} (base {model.config.base_model.get('name', '?')}, fingerprint "
              f"{model.fingerprint}, exp(w)={float(model.w.detach().exp()):.2f}, K={model.config.top_k})")
        manifest = encode_corpus([demo_dir], work / "encoded", model, progress=not args.quiet, idf=IDF_DEFAULT)
        report_encode(manifest)
        index = build_index(work / "encoded", work / "index").index
        print(f"encoded {manifest.sentences} sentences of {demo_dir.name}/ in {manifest.seconds:.1f} s "
              f"({manifest.sentences_per_second} sentences/s), indexed them in {index.build_seconds:.1f} s\n")
        engine = open_engine("lucene", work / "index", hybrid=DEFAULT_METHOD)  # what search does
        presenter = Presenter(engine, work / "index")
        for _, question in read_topics(demo_dir / "questions.tsv"):
            print_hits(question, *answer(engine, presenter, question, args.k))
            print()
        presenter.close()
        engine.close()
    print(f"index kept in {work / 'index'}: try  {invoked_as()} search --index {work / 'index'} \"your question\"")
    return 0
