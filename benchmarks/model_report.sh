#!/usr/bin/env bash
# Every product figure of one model, in one run: re-run it whenever the shipped model changes.
#
#   bash benchmarks/model_report.sh MODEL CORPUS_FILE...      # e.g. models/electra-tiny sotu.txt brown.txt
#
# MODEL is a run or shipped model dir (discriminator/, generator/). CORPUS_FILE... is the text it was
# pre-trained on, for the same-corpus 5-gram baselines. Steps (each logged with its wall time to
# $OUT/model_report.log): generator-free corruption AUC, GED (zero-shot, surprisal, fine-tuned, peers;
# its synthetic-only fine-tuned model is left in runs/bench-ged/synthetic for shipping as MODEL/ged),
# calibration (rtd, fitted and written; GED, report only), POS bias (clean, corrupted, learner errors),
# n-best reranking, BLiMP, CoLA, ONNX export with parity at the tuned threshold, inference speed.
# STEPS="ged blimp" runs a subset.
set -euo pipefail
MODEL=${1:?usage: model_report.sh MODEL CORPUS_FILE...}
shift
CORPUS=("$@")
PY=${PYTHON:-.venv/bin/python}
CLI=("$PY" -m electra_detect.cli)
OUT=${OUT:-benchmarks/results}
JFLEG=${JFLEG:-../shared/data/jfleg/dev}
REFS=("$JFLEG/dev.ref0" "$JFLEG/dev.ref1" "$JFLEG/dev.ref2" "$JFLEG/dev.ref3")
STEPS=${STEPS:-"corruption ged calibration pos_bias asr blimp cola export inference"}
mkdir -p "$OUT"

step() {  # step NAME COMMAND...: run it if selected, log its wall time
  local name=$1
  shift
  [[ " $STEPS " == *" $name "* ]] || return 0
  local started=$SECONDS
  echo "== $name: $*" | tee -a "$OUT/model_report.log" >&2
  "$@"
  echo "== $name: $((SECONDS - started)) s" | tee -a "$OUT/model_report.log" >&2
}

corruption() {
  "$PY" benchmarks/learning.py --score "$MODEL" --jfleg "$JFLEG/dev.ref0" | tee "$OUT/corruption.json"
}

ged() {
  "$PY" benchmarks/ged.py --model "$MODEL" --jfleg "$JFLEG" --work-dir runs/bench-ged --out-dir "$OUT"
}

calibration() {
  mkdir -p "$OUT/calibration"
  "${CLI[@]}" calibrate --model "$MODEL" --text "${REFS[@]}" --method platt --plot "$OUT/calibration/rtd.png" \
    | tee "$OUT/calibration/rtd.json"
  "${CLI[@]}" calibrate --model "$MODEL" --data "$JFLEG/dev.src" --refs "${REFS[@]}" --format parallel \
    --plot "$OUT/calibration/ged.png" --dry-run | tee "$OUT/calibration/ged.json"
}

zero_shot_threshold() {  # the pre-trained discriminator's F0.5 threshold, tuned by benchmarks/ged.py
  "$PY" -c "import json, sys; print(next(r['threshold'] for r in json.load(open(sys.argv[1]))['rows']
            if r['system'] == 'ELECTRA zero-shot'))" "$OUT/ged.json"
}

pos_bias() {
  local threshold
  threshold=$(zero_shot_threshold)
  "${CLI[@]}" pos-bias --model "$MODEL" --text "$JFLEG/dev.ref0" --threshold "$threshold" --out-dir "$OUT/pos_bias/clean"
  "${CLI[@]}" pos-bias --model "$MODEL" --text "$JFLEG/dev.ref0" --corrupt --rounds 2 --threshold "$threshold" \
    --out-dir "$OUT/pos_bias/corrupt"
  "${CLI[@]}" pos-bias --model "$MODEL" --ged "$JFLEG/dev.src" --refs "${REFS[@]}" --format parallel \
    --threshold "$threshold" --out-dir "$OUT/pos_bias/ged"
}

asr() {
  "$PY" benchmarks/asr/bench.py --model "$MODEL" --ngram-corpus "${CORPUS[@]}" --out-dir "$OUT"
}

blimp() {
  "$PY" benchmarks/blimp.py --model "$MODEL" --corpus "${CORPUS[@]}" --out-dir "$OUT"
}

cola() {
  "$PY" benchmarks/cola.py --model "$MODEL" --out-dir "$OUT"
}

export_onnx() {  # parity gate at the tuned zero-shot threshold (pre-trained) and at ged.json's (fine-tuned)
  mkdir -p "$OUT/export"
  rm -rf runs/export
  "${CLI[@]}" export --model "$MODEL" --out runs/export/discriminator --text "$JFLEG/dev.ref0" \
    --threshold "$(zero_shot_threshold)" --no-progress
  cp runs/export/discriminator/parity.md "$OUT/export/parity_discriminator.md"
  cp runs/export/discriminator/parity.json "$OUT/export/parity_discriminator.json"
  if [[ -d "$MODEL/ged" ]]; then
    "${CLI[@]}" export --model "$MODEL/ged" --out runs/export/ged --text "$JFLEG/dev.src" --no-progress
    cp runs/export/ged/parity.md "$OUT/export/parity_ged.md"
    cp runs/export/ged/parity.json "$OUT/export/parity_ged.json"
  fi
}

inference() {
  "$PY" benchmarks/inference.py --model "$MODEL" --export-dir runs/export/discriminator --out-dir "$OUT"
}

step corruption corruption
step ged ged
step calibration calibration
step pos_bias pos_bias
step asr asr
step blimp blimp
step cola cola
step export export_onnx
step inference inference
