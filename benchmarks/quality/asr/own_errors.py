"""The recogniser's own errors as GED training data: each hypothesis of a decoded train list, its words labelled by
their alignment with the reference (substituted, inserted, or after a deleted word: ``i``; matched: ``c``), plus
the reference itself (all ``c``), written as token TSV for ``electra-detect ged train --format tsv``.

    python -m benchmarks.quality.asr.make_lists ... --n-train 300 --out-dir runs/asr-lists   # the train split
    python -m benchmarks.quality.asr.own_errors --lists runs/asr-lists --out runs/asr-own-errors.tsv
    electra-detect ged train --model runs/warm-electra --data runs/asr-own-errors.tsv --format tsv --out runs/asr-ged
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from electra_detect.fileio import atomic_write_text
from electra_detect.tasks.rerank.nbest import Utterance, read_nbest
from electra_detect.tasks.rerank.wer import hypothesis_word_errors, normalise

ROOT = Path(__file__).resolve().parents[3]



def labelled_hypotheses(utterances: list[Utterance]) -> list[tuple[list[str], list[int]]]:
    """(words, 0/1 labels) for each distinct non-empty hypothesis and the reference of every utterance."""
    out = []
    for utt in utterances:
        ref = normalise(utt.ref)
        seen = set()
        for text in [ref, *(normalise(h.text) for h in utt.hyps)]:
            if not text or text in seen:
                continue
            seen.add(text)
            labels = hypothesis_word_errors(ref, text, mark_deletions=True)
            out.append((text.split(), [int(label or 0) for label in labels]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lists", required=True, help="folder with train.json (make_lists.py --n-train)")
    ap.add_argument("--split", default="train")
    ap.add_argument("--out", required=True, help="token TSV to write")
    args = ap.parse_args()
    path = Path(args.lists) / f"{args.split}.json"
    if not path.is_file():
        raise SystemExit(f"error: {path} not found: make it with make_lists.py --n-train N")
    rows = labelled_hypotheses(list(read_nbest(path)))
    lines = []
    for words, labels in rows:
        lines += [f"{w}\t{'i' if label else 'c'}" for w, label in zip(words, labels, strict=True)] + [""]
    atomic_write_text(Path(args.out), "\n".join(lines))
    tokens = sum(len(w) for w, _ in rows)
    wrong = sum(sum(labels) for _, labels in rows)
    print(json.dumps({"sentences": len(rows), "tokens": tokens, "error_rate": round(wrong / max(tokens, 1), 4),
                      "out": args.out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
