#!/usr/bin/env bash
# Concluded (previous default): adapted + IDF + BM25 sum best, 76.58 SQuAD / 39.40 NewsQA MRR (docs/adaptation.md).
# Issue 5's table: the default model against embedding replacement on each domain's own sentences,
# IDF weighting, BM25 hybrids and their combinations, on SQuAD dev and NewsQA dev.
# Writes docs/results/adaptation.{json,md}; every encoding, index and adapted model is cached
# under runs/, so a second run only re-scores. Run from anywhere, after the README's first command.
set -euo pipefail
cd "$(dirname "$0")/.."
S=.venv/bin/sparc-es
for d in squad newsqa; do
  [ -f "runs/$d/evalset/corpus.jsonl" ] || $S evalset --domain "$d" --output "runs/$d/evalset"
  # embedding replacement on the domain's own sentences (no questions), paper defaults
  [ -f "runs/models/adapted-$d/sparc_config.json" ] || \
    $S adapt --model default --corpus "runs/$d/evalset/corpus.jsonl" --output "runs/models/adapted-$d" --threads 2
done
A='model=runs/models/adapted-{domain}'
$S table --domains squad,newsqa --workdir runs \
  --json docs/results/adaptation.json --markdown docs/results/adaptation.md \
  --systems "bm25,sparc-int,sparc-int:idf=1,sparc-int:$A,sparc-int:$A,idf=1,sparc-int:hybrid=rrf,sparc-int:hybrid=sum,sparc-int:idf=1,hybrid=rrf,sparc-int:$A,idf=1,hybrid=rrf,sparc-int:$A,idf=1,hybrid=sum"
