"""How often a synthetic word choice is an error rather than a fluent paraphrase, with and without the judge.

    python -m benchmarks.studies.word_choice_sample --runs runs  # draws the sample, scores it, writes the table

Draws 30 ``word_choice`` and 30 ``other`` edits (training/synthetic/realistic_errors.py, no judge) on 150 short
sentences of the ``prose`` text (seeded), and reads a person's verdict for each from ``judgements.tsv`` in
``--out-dir`` (family,
original -> replacement, 1 = an error a teacher would mark, 0 = fluent; written by hand, one line per edit: the
sample is fixed by its seeds, so the verdicts stay attached to the same edits). The start discriminator's
p(replaced) of the replacement in place (the judge of ``--error-mix realistic`` with ``judge_threshold``) is
scored beside it: the share of errors among the edits the judge keeps, at each threshold, and its ROC AUC.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

from benchmarks.common.run import command_line
from electra_detect.fileio import atomic_write_json, atomic_write_text
from electra_detect.training.synthetic.realistic_corpus import clean_sentences, discriminator_judge, tag_tokens
from electra_detect.training.synthetic.realistic_errors import Draft, RealisticErrorMaker
from electra_detect.training.synthetic.word_errors import EmbeddingNeighbours

PROSE = ["text/brown.txt", "corpus/spam-assassin", "corpus/cfi-en", "corpus/gutenberg", "corpus/janeaustenr",
         "corpus/fortunes"]


def sample(runs: Path, model: str) -> list[dict]:
    clean = [c for c in clean_sentences([str(runs / p) for p in PROSE], 400, 7) if len(c) <= 25][:150]
    tags = tag_tokens(clean)
    maker = RealisticErrorMaker(EmbeddingNeighbours.from_model(model), seed=5)
    out = []
    for family in ("word_choice", "other"):
        made = 0
        for tokens, tagged in zip(clean, tags, strict=True):
            draft = Draft(list(tokens), list(tagged))
            if getattr(maker, f"_{family}")(draft):
                i = draft.labels.index(1)
                out.append({"family": family, "original": tokens[i], "replacement": draft.tokens[i], "position": i,
                            "sentence": " ".join(draft.tokens)})
                made += 1
            if made >= 30:
                break
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default="runs")
    parser.add_argument("--model", default="models/electra-minilm/discriminator")
    parser.add_argument("--out-dir", default=str(Path(__file__).resolve().parents[1] / "results" / "word_choice"))
    args = parser.parse_args()
    out = Path(args.out_dir)
    edits = sample(Path(args.runs), args.model)
    verdicts = {(r["family"], r["original"], r["replacement"]): int(r["error"])
                for r in csv.DictReader((out / "judgements.tsv").open(encoding="utf-8"), delimiter="\t")}
    judge = discriminator_judge(args.model)
    for edit in edits:
        edit["error"] = verdicts.get((edit["family"], edit["original"], edit["replacement"]))
        edit["judge_p"] = judge(edit["sentence"].split(" "), edit["position"])
    judged = [e for e in edits if e["error"] is not None]
    errors, p = np.array([e["error"] for e in judged]), np.array([e["judge_p"] for e in judged])
    from sklearn.metrics import roc_auc_score

    rows = [{"threshold": t, "kept": int((p >= t).sum()), "error_share": float(errors[p >= t].mean())}
            for t in (0.0, 0.1, 0.2, 0.3, 0.4) if (p >= t).any()]
    summary = {"benchmark": "word_choice_sample", "edits": edits, "judged": len(judged), "rows": rows,
               "judge_auc": float(roc_auc_score(errors, p)), "command": command_line()}
    atomic_write_json(out / "result.json", summary)
    lines = ["# Synthetic word choices: errors or paraphrases?", "", f"Command: `{summary['command']}`. "
             f"{len(judged)} edits judged by hand; the judge is the start discriminator's p(replaced) of the new "
             f"word in place (ROC AUC against the verdicts {summary['judge_auc']:.2f}).", "",
             "| judge threshold | edits kept | share that are errors |", "|---:|---:|---:|"]
    lines += [f"| {r['threshold']} | {r['kept']} | {r['error_share']:.2f} |" for r in rows]
    atomic_write_text(out / "table.md", "\n".join(lines) + "\n")
    print(json.dumps({k: summary[k] for k in ("judged", "judge_auc", "rows")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
