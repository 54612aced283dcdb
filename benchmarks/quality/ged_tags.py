"""What the writer is told, measured: detection, types, operations and suggestions of GED models side by side on the
report halves, with ERRANT's types on FCE dev.

    python -m benchmarks.quality.ged_tags --data runs/tags --jfleg ../shared/data/jfleg/dev \\
        --model today=models/electra-minilm/ged --model tagged=runs/tagged/ged

FCE dev is split by essay (``edit_tag_data.essay_halves``, seed 13), one split for its MultiGED TSV, its BEA JSON
and its ERRANT edits (``fce_dev_{tune,report}.{tsv,json,jsonl}``, written by ``edit_tag_data``); JFLEG dev's halves
are ``ged eval --split``'s. Each model's threshold is the one with the highest mean F0.5 over the tuning halves of
MultiGED FCE dev and JFLEG dev; every figure is on the report halves.

Types and suggestions are counted over the gold ERRANT edits (errant 3.0, from FCE's corrections) that the model
detects: an edit is detected when a flagged word overlaps its tokens (a missing word's: the token after the gap, or
the last token where the gap ends the sentence); the word with the highest score there gives the operation, main
type and first suggestion. A suggestion is right when the sentence with it applied equals the sentence with the gold
edit alone applied (whitespace aside). Edits without a correction are not in the set (their count is reported).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common.run import command_line, write_result
from electra_detect.detector import Detector
from electra_detect.fileio import atomic_write_json, atomic_write_text
from electra_detect.tasks.ged.alignment import score_tokens
from electra_detect.tasks.ged.check import GedChecker
from electra_detect.tasks.ged.metrics import flatten, token_metrics, tune_threshold
from electra_detect.tasks.ged.options import build_ged_options
from electra_detect.tasks.ged.readers import GedSentence, read_bea_json, read_parallel, read_token_tsv, split_sentences
from electra_detect.training.finetune.edit_tag_data import TaggedSentence, read_tagged, unescape_tsv

OUT = Path("benchmarks/results/ged_tags")


SET_STEMS = {"MultiGED FCE dev": "multiged_fce_dev", "BEA FCE dev": "bea_fce_dev", "JFLEG dev": "jfleg_dev"}


def write_sets(sets: dict[str, dict[str, list[GedSentence]]], folder: Path) -> None:
    """The sets' labels as token TSVs (``{stem}_{half}.tsv``): read where spaCy and ERRANT are not (the GPU)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, halves in sets.items():
        for half, sentences in halves.items():
            atomic_write_text(folder / f"{SET_STEMS[name]}_{half}.tsv", "\n\n".join(
                "\n".join(f"{t}\t{'i' if y else 'c'}" for t, y in zip(s.tokens, s.labels, strict=True))
                for s in sentences) + "\n")


def read_sets(folder: Path) -> dict[str, dict[str, list[GedSentence]]]:
    """:func:`write_sets`' files back: the sets ``load_sets`` made, tokens and labels."""
    return {name: {half: read_token_tsv(folder / f"{stem}_{half}.tsv") for half in ("tune", "report")}
            for name, stem in SET_STEMS.items()}


def load_sets(data: Path, jfleg: Path) -> dict[str, dict[str, list[GedSentence]]]:
    """{set: {"tune": [...], "report": [...]}} for MultiGED FCE dev, BEA FCE dev and JFLEG dev."""
    sets = {"MultiGED FCE dev": {half: read_token_tsv(data / f"fce_dev_{half}.tsv") for half in ("tune", "report")},
            "BEA FCE dev": {half: read_bea_json(data / f"fce_dev_{half}.json") for half in ("tune", "report")}}
    jf = read_parallel(jfleg / "dev.src", sorted(jfleg.glob("dev.ref[0-9]")), "majority")
    sets["JFLEG dev"] = dict(zip(("tune", "report"), split_sentences(jf, 0.5, 13), strict=True))
    for name, halves in sets.items():
        for half in halves.values():  # MultiGED writes quotes as \"; the model reads the text as written
            for sentence in half:
                sentence.tokens[:] = [unescape_tsv(t) for t in sentence.tokens]
        print(f"{name}: tune {len(halves['tune'])}, report {len(halves['report'])}", file=sys.stderr)
    return sets


def detection(detector: Detector, sets: dict[str, dict[str, list[GedSentence]]]) -> dict[str, Any]:
    """The threshold tuned on the tuning halves (MultiGED FCE dev and JFLEG dev: best mean F0.5), each set's own
    tuned threshold, and the report halves' metrics at both."""
    scores = {name: {half: score_tokens(detector, s) for half, s in halves.items()} for name, halves in sets.items()}
    grid = np.linspace(0.05, 0.95, 91)
    tuning = ("MultiGED FCE dev", "JFLEG dev")
    mean = [np.mean([token_metrics(*flatten(sets[n]["tune"], scores[n]["tune"]), t)["f05"] for n in tuning])
            for t in grid]
    shared = float(grid[int(np.argmax(mean))])
    out: dict[str, Any] = {"threshold": shared, "tune_at_shared": float(np.max(mean))}  # the mean it was chosen by
    for name in sets:
        own = tune_threshold(*flatten(sets[name]["tune"], scores[name]["tune"]))
        report = flatten(sets[name]["report"], scores[name]["report"])
        out[name] = {"at_shared": token_metrics(*report, shared), "own_threshold": own,
                     "at_own": token_metrics(*report, own)}
    return out


def applied(tokens: list[str], start: int, end: int, value: str) -> str:
    return " ".join([*tokens[:start], *value.split(), *tokens[end:]])


def told(detector: Detector, sentences: list[TaggedSentence], threshold: float, ranked: bool = False
         ) -> dict[str, Any]:
    """Operation, type and suggestion accuracy over the detected gold edits of ``sentences`` (``ranked``: a tag
    model's one-word replacements re-ranked, ``ged --ranked``)."""
    checker = GedChecker(detector)
    options = build_ged_options(threshold=threshold, suggest=True, use_dictionary_file=False, calibrated=False,
                                ranked=ranked)
    texts = [" ".join(unescape_tsv(t) for t in s.tokens) for s in sentences]
    started = time.perf_counter()
    words = checker.check_texts(texts, options)
    seconds = time.perf_counter() - started
    counts: Counter = Counter()
    for sentence, text, flagged in zip(sentences, texts, words, strict=True):
        tokens = [unescape_tsv(t) for t in sentence.tokens]
        starts = np.cumsum([0] + [len(t) + 1 for t in tokens])[:-1]
        for edit in sentence.edits:
            op, main = edit.type.split(":", 1) if ":" in edit.type else ("R", "OTHER")  # ERRANT's UNK: R:OTHER
            counts["edits"] += 1
            span = range(edit.start, edit.end) if edit.end > edit.start else [min(edit.start, len(tokens) - 1)]
            lo, hi = int(starts[span[0]]), int(starts[span[-1]] + len(tokens[span[-1]]))
            hits = [w for w in flagged if w.start < hi and w.end > lo]
            if not hits:
                continue
            word = max(hits, key=lambda w: w.score)
            counts["detected"] += 1
            counts["op_right"] += word.operation == op
            counts["type_right"] += word.operation == op and word.type == main
            counts["main_right"] += word.type == main
            kind = {"M": "missing", "U": "unnecessary"}.get(op, "replace1" if edit.end - edit.start == 1 and
                                                           len((edit.correction or "").split()) == 1 else "replaceN")
            counts[f"{kind}_detected"] += 1
            if op == "M":
                counts["missing_both_right"] += word.operation == "M" and word.type == main
            gold = applied(tokens, edit.start, edit.end, edit.correction or "")
            best = word.best or (word.suggestions[0] if word.suggestions else None)
            if best is not None:
                mine = " ".join((text[:best.start] + best.value + text[best.end:]).split())
                counts[f"{kind}_suggested_right"] += mine == gold
            shown = [" ".join((text[:s.start] + s.value + text[s.end:]).split()) for s in (word.suggestions or [])[:3]]
            counts[f"{kind}_top3_right"] += gold in shown or (best is not None and mine == gold)
            counts[f"{kind}_shown"] += len(shown)
            if edit.end - edit.start > 1 or len((edit.correction or "").split()) > 1:
                counts["multiword_detected"] += 1
    detected = max(counts["detected"], 1)

    def share(key: str, of: str) -> float:
        return round(counts[key] / max(counts[of], 1), 4)

    return {"counts": dict(counts), "operation_right": round(counts["op_right"] / detected, 4),
            "main_type_right": round(counts["main_right"] / detected, 4),
            "missing_op_and_type_right": share("missing_both_right", "missing_detected"),
            "suggest_replace_one_word": share("replace1_suggested_right", "replace1_detected"),
            "suggest_missing_inserted": share("missing_suggested_right", "missing_detected"),
            "suggest_unnecessary_deleted": share("unnecessary_suggested_right", "unnecessary_detected"),
            "suggest_multiword": share("replaceN_suggested_right", "replaceN_detected"),
            "suggest_replace_one_word_top3": share("replace1_top3_right", "replace1_detected"),
            "suggestions_per_replace_one_word": share("replace1_shown", "replace1_detected"),
            "check_seconds_per_sentence": round(seconds / max(len(sentences), 1), 5)}


# The told figures: (table label, plot label or None, key of told()'s result), in table order.
TOLD = [("operation right, of detected errors", "operation", "operation_right"),
        ("main type right, of detected errors", "main type", "main_type_right"),
        ("missing words: operation M and type right", "missing: M + type", "missing_op_and_type_right"),
        ("first suggestion right: one-word replacements", "sugg. 1-word", "suggest_replace_one_word"),
        ("first suggestion right: missing words inserted", "sugg. missing", "suggest_missing_inserted"),
        ("first suggestion right: unnecessary words deleted", "sugg. unnecessary", "suggest_unnecessary_deleted"),
        ("first suggestion right: multi-word replacements", None, "suggest_multiword"),
        ("one of the first three right: one-word replacements", "top-3 1-word", "suggest_replace_one_word_top3"),
        ("check seconds a sentence (types, suggestions)", None, "check_seconds_per_sentence")]
DETECTED = [("MultiGED FCE dev", "MultiGED FCE F0.5"), ("JFLEG dev", "JFLEG F0.5"), ("BEA FCE dev", None)]


def f05(name: str):
    return lambda r: r["detection"][name]["at_shared"]["f05"]


def told_figure(key: str):
    return lambda r: r["told"][key]


def table(results: dict[str, Any]) -> str:
    names = list(results["models"])
    rows = [(f"{name} F0.5 (shared threshold)", f05(name)) for name, _ in DETECTED]
    rows += [("shared threshold", lambda r: r["detection"]["threshold"])]
    rows += [(label, told_figure(key)) for label, _, key in TOLD]
    lines = ["| report halves | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for label, get in rows:
        cells = []
        for n in names:
            try:
                cells.append(f"{get(results['models'][n]):.3f}")
            except KeyError:  # a --told-only run has no detection; an earlier run no top-3
                cells.append("–")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _or_nan(get: Any, row: dict[str, Any]) -> float:
    try:
        return get(row)
    except KeyError:  # a figure this row's run did not make
        return float("nan")


def plot(results: dict[str, Any], path: Path) -> None:
    """Grouped bars: each model's detection and told figures on the report halves."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [(short, f05(name)) for name, short in DETECTED if short]
    keys += [(short, told_figure(key)) for _, short, key in TOLD if short]
    names = list(results["models"])
    fig, ax = plt.subplots(figsize=(10, 4))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        ax.bar([k + i * width for k in range(len(keys))], [_or_nan(get, results["models"][name]) for _, get in keys],
               width, label=name)
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(keys))], [label for label, _ in keys], rotation=20)
    ax.set_ylim(0, 1)
    ax.set_title("What the writer is told: report halves (FCE dev by essay, JFLEG dev)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("runs/tags"), help="edit_tag_data's FCE dev halves")
    parser.add_argument("--jfleg", type=Path, default=Path("../shared/data/jfleg/dev"))
    parser.add_argument("--model", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--merge", nargs="+", type=Path, default=[],
                        help="earlier runs' result.json files to put beside this run's models in one table")
    parser.add_argument("--sets", type=Path, help="read the sets from --write-sets' TSVs (no spaCy: the GPU)")
    parser.add_argument("--write-sets", type=Path, help="write the sets as token TSVs into this folder and stop")
    parser.add_argument("--engine", default="torch")
    parser.add_argument("--ranked", action="store_true", help="tag models told as `ged --ranked` tells them")
    parser.add_argument("--told-only", action="store_true",
                        help="only the told figures (FCE dev's report half), at the model's own threshold")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    results: dict[str, Any] = {"command": command_line(), "models": {}}
    for earlier in args.merge:
        found = json.loads(earlier.read_text())
        results["models"].update({name: {**row, "command": found["command"]} for name, row in found["models"].items()})
    if args.write_sets:
        write_sets(load_sets(args.data, args.jfleg), args.write_sets)
        return 0
    sets = (read_sets(args.sets) if args.sets else load_sets(args.data, args.jfleg)) if args.model and not \
        args.told_only else {}
    report = read_tagged(args.data / "fce_dev_report.jsonl") if args.model else []
    args.out.mkdir(parents=True, exist_ok=True)
    for spec in args.model:
        name, _, path = spec.partition("=")
        detector = Detector.load(path, engine=args.engine, calibrated=False, task="ged")
        kept = args.out / f"detection_{name}.json"  # the slow half, kept: a failure in the rest re-uses it
        if args.told_only:
            found = {"threshold": detector.threshold()}
        else:
            found = json.loads(kept.read_text()) if kept.exists() else detection(detector, sets)
            atomic_write_json(kept, found)
        results["models"][name] = {"path": path, "detection": found,
                                   "told": told(detector, report, found["threshold"], args.ranked)}
        print(json.dumps({name: results["models"][name]["told"]}), file=sys.stderr)
    write_result(args.out, results, table(results), lambda path: plot(results, path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
