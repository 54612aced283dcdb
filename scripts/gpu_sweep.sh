#!/usr/bin/env bash
# Pre-train several ELECTRA-Small variants side by side on one GPU (small models leave it mostly idle),
# keep every metrics.jsonl, and pack the run with the best validation discriminator AUC into $OUT.
# Usage (on the GPU machine, PYTHONPATH set): scripts/gpu_sweep.sh MINUTES NAME "FLAGS" [NAME "FLAGS" ...]
set -euo pipefail
minutes=$1; shift
pids=()
names=()
while [ $# -ge 2 ]; do
  name=$1; flags=$2; shift 2
  names+=("$name")
  # shellcheck disable=SC2086
  python3 scripts/gpu_pretrain.py --corpus .gpu/sotu.txt .gpu/brown.txt --out "/tmp/runs/$name" \
    --minutes "$minutes" -- $flags > "$OUT/$name.log" 2>&1 &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || echo "a run failed (pid $pid)"; done
best=""; best_auc=0
for name in "${names[@]}"; do
  cp "/tmp/runs/$name/metrics.jsonl" "$OUT/$name.metrics.jsonl" 2>/dev/null || continue
  auc=$(python3 -c "import json;print(json.load(open('/tmp/runs/$name/summary.json'))['val']['val_disc_auc'])" 2>/dev/null \
        || python3 -c "import json;rows=[json.loads(l) for l in open('/tmp/runs/$name/metrics.jsonl')];print([r for r in rows if 'val_disc_auc' in r][-1]['val_disc_auc'])")
  echo "$name val_disc_auc=$auc"
  if python3 -c "import sys; sys.exit(0 if float('$auc') > float('$best_auc') else 1)"; then best=$name; best_auc=$auc; fi
done
echo "best: $best ($best_auc)"
python3 scripts/pack_run.py "/tmp/runs/$best" "/tmp/pack/electra-small"
echo "$best" > /tmp/pack/electra-small/VARIANT
(cd /tmp/pack && tar czf /tmp/best.tgz electra-small && split -b 15M /tmp/best.tgz "$OUT/best.tgz.part-")
