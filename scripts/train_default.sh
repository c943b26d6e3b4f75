#!/bin/sh
# Reproduce the shipped default model (sparc_es/models/default) from ../shared/data, and check it.
#
#     sh scripts/train_default.sh [FOLDER]        # default FOLDER: runs/models/default
#
# 1. `sparc-es train` with the defaults of TrainConfig, which are the shipped recipe (three epochs
#    of SQuAD train articles 1-38, seed 13; about an hour on the 2-core CPU with one torch thread,
#    which is what the shipped model was trained with: other thread counts may round differently).
#    Resumable: after a kill, run the same command again.
# 2. scripts/ship_model.py sets the lexical term's alpha 0.2 and the stem term's beta 0.3, chosen
#    on the validation articles (docs/training.md), and writes FOLDER-shipped in half precision.
# 3. Its fingerprint is compared with the shipped model's: the same means the same weights.
set -eu
cd "$(dirname "$0")/.."
folder=${1:-runs/models/default}
train="sparc-es train --output $folder --threads 1"
.venv/bin/$train
.venv/bin/python scripts/ship_model.py "$folder" --lexical-weight 0.2 --stem-weight 0.3 \
    --output "$folder-shipped" --command "$train"
.venv/bin/python - "$folder-shipped" <<'EOF'
import sys

from sparc_es.model import SparcModel

ours, shipped = SparcModel.load(sys.argv[1]).fingerprint, SparcModel.load("default").fingerprint
print(f"reproduced {ours}, shipped {shipped}: {'the same' if ours == shipped else 'DIFFERENT'}")
sys.exit(ours != shipped)
EOF
