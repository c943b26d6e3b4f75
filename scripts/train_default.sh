#!/bin/sh
# Reproduce the shipped default model (sparc_es/model/default) from ../shared/data, and check it.
#
#     sh scripts/train_default.sh [FOLDER]        # default FOLDER: runs/models/default
#
# 1. `sparc-es train` with the defaults of TrainConfig, which are the shipped recipe (three epochs
#    of SQuAD train articles 1-38, seed 13; about an hour on the 2-core CPU with one torch thread,
#    which is what the shipped model was trained with). Resumable: after a kill, run it again (a
#    finished FOLDER is not trained again).
# 2. scripts/ship_model.py sets the lexical term's alpha 0.2 and the stem term's beta 0.3, chosen
#    on the validation articles (docs/training.md), and its stop-word rule (docs/evaluation.md), and
#    writes FOLDER-shipped in half precision.
# 3. Its weights are compared with the shipped model's: the same fingerprint means the same bits;
#    otherwise the largest difference (scripts/compare_models.py; float rounding: up to 0.004).
set -eu
cd "$(dirname "$0")/.."
folder=${1:-runs/models/default}
train="sparc-es train --output $folder --threads 1"
if [ -f "$folder/training.json" ] && [ ! -e "$folder/checkpoint" ]; then  # trained: train refuses a finished model
    echo "$folder: trained already; shipping it" >&2
else
    .venv/bin/$train
fi
.venv/bin/python scripts/ship_model.py "$folder" --lexical-weight 0.2 --stem-weight 0.3 --lexical-skips-stop-words \
    --output "$folder-shipped" --command "$train"
.venv/bin/python scripts/compare_models.py "$folder-shipped" default
