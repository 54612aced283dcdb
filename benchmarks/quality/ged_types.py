"""Error types that name the edit: operation and main-type accuracy of the GED check's types on FCE dev's detected
errors, the type head's beside them, and what typing costs a sentence.

    python -m benchmarks.quality.ged_types --fce runs/data/fce

FCE dev is cut into its tuning and report halves (seed 13, as ``ged eval --split``); the typing rule
(``tasks.ged.check.TypingRule``) was chosen on the tuning half, the report half is the one to quote. A detected
error is a token labelled wrong whose score reaches the threshold (the model's, and the one ``ged eval --split``
tunes for F0.5 on the tuning half); its gold type is its first edit's (FCE codes mapped onto ERRANT main types,
``tasks.ged.error_types``), as ``ged eval`` counts them (``metrics.type_metrics``). The cost: seconds of
``GedChecker.check`` over the scored report half (candidates ranked for the words the rule types by their edit,
ERRANT on the best) beside the flags alone, per sentence; the machine's load is recorded with it.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from benchmarks.common.run import command_line
from electra_detect.detector import Detector
from electra_detect.fileio import atomic_write_json, atomic_write_text
from electra_detect.tasks.ged.alignment import TypedTokens, to_token_scores, token_spans
from electra_detect.tasks.ged.check import GedChecker, TypingRule
from electra_detect.tasks.ged.error_types import split_type
from electra_detect.tasks.ged.metrics import flatten, tune_threshold, type_metrics
from electra_detect.tasks.ged.options import GedOptions
from electra_detect.tasks.ged.readers import read_bea_json, split_sentences

SHIPPED = Path(__file__).resolve().parents[2] / "models" / "electra-minilm"


def typed_tokens(sentence, result, words) -> TypedTokens:
    """The check's view of one GED sentence: per whitespace token the Detector's score, and the operation and main
    type of the flagged word inside it with the highest score (R/OTHER where none is flagged)."""
    scores = to_token_scores(sentence.tokens, ((t.start, t.p_replaced) for t in result.tokens))
    best = [(-1.0, "R", "OTHER")] * len(sentence.tokens)
    starts = [start for start, _ in token_spans(sentence.tokens)]
    for word in words:
        index = bisect.bisect_right(starts, word.start) - 1
        if 0 <= index < len(starts) and word.score > best[index][0]:
            best[index] = (word.score, word.operation or "R", word.type or "OTHER")
    return TypedTokens(scores, [b[1] for b in best], [b[2] for b in best])


def head_tokens(sentence, result) -> TypedTokens:
    """The type head's view (``alignment.score_typed_tokens`` on a scored sentence)."""
    from electra_detect.tasks.ged.flags import FlaggedWord

    return typed_tokens(sentence, result, [FlaggedWord.of_word(w) for w in result.words])


def confusion(sentences, typed, threshold: float, top: int = 15) -> list[list]:
    """The commonest (gold main type, predicted) pairs among detected errors typed wrong."""
    pairs: Counter = Counter()
    for sentence, predicted in zip(sentences, typed, strict=True):
        for position, types in enumerate(sentence.types):
            if sentence.labels[position] and types and predicted.scores[position] >= threshold:
                gold = split_type(types[0])[1]
                if predicted.types[position] != gold:
                    pairs[(gold, predicted.types[position])] += 1
    return [[gold, got, n] for (gold, got), n in pairs.most_common(top)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fce", type=Path, required=True, help="folder holding fce-dev.json (BEA-2019 JSON)")
    parser.add_argument("--model", default=str(SHIPPED))
    parser.add_argument("--engine", default="auto", help="the engine `ged` runs (default auto)")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--out-dir", type=Path, default=Path("benchmarks/results/ged_types"))
    parser.add_argument("--ranked", action="store_true",
                        help="type by the edit to the model's best candidate (every candidate scored; the default "
                             "types by the first proposed one)")
    args = parser.parse_args(argv)

    sentences = read_bea_json(args.fce / "fce-dev.json")
    tune, report = split_sentences(sentences, 0.5, args.seed)
    detector = Detector.load(args.model, task="ged", engine=args.engine)
    print(detector.describe(), file=sys.stderr)
    checker = GedChecker(detector, typing=TypingRule(ranked=args.ranked))
    halves = {"tune": tune, "report": report}
    scored, score_ms = {}, {}
    for name, group in halves.items():  # the scoring itself, to set the check's cost beside
        started = time.perf_counter()
        scored[name] = detector.score([s.text for s in group])
        score_ms[name] = round(1000 * (time.perf_counter() - started) / len(group), 2)
    tuned = tune_threshold(*flatten(tune, [to_token_scores(s.tokens, ((t.start, t.p_replaced) for t in r.tokens))
                                           for s, r in zip(tune, scored["tune"], strict=True)]))
    thresholds = {"model": detector.threshold(), "tuned on the tuning half (F0.5)": tuned}
    out: dict = {"command": command_line(), "model": args.model, "engine": detector.describe(),
                 "typing_rule": repr(checker.typing), "halves": {k: len(v) for k, v in halves.items()},
                 "results": {}}
    for label, threshold in thresholds.items():
        options = GedOptions(threshold=threshold, use_dictionary_file=False)
        row: dict = {"threshold": threshold}
        for name, group in halves.items():
            load = os.getloadavg()[0]
            started = time.perf_counter()
            words = checker.check(scored[name], options)
            check_s = time.perf_counter() - started
            started = time.perf_counter()
            _plain = [r.flagged(threshold) for r in scored[name]]
            flags_s = time.perf_counter() - started
            typed = [typed_tokens(s, r, w) for s, r, w in zip(group, scored[name], words, strict=True)]
            head = [head_tokens(s, r) for s, r in zip(group, scored[name], strict=True)]
            check_m, head_m = type_metrics(group, typed, threshold), type_metrics(group, head, threshold)
            sources = Counter(w.type_source for found in words for w in found)
            row[name] = {"detected": check_m["detected"],
                         "check": {k: round(check_m[k], 4) for k in ("operation_accuracy", "type_accuracy")},
                         "type_head": {k: round(head_m[k], 4) for k in ("operation_accuracy", "type_accuracy")},
                         "type_sources": dict(sources),
                         "ms_per_sentence": {"check": round(1000 * check_s / len(group), 2),
                                             "scoring": score_ms[name],
                                             "flags_alone": round(1000 * flags_s / len(group), 3),
                                             "load_average": round(load, 2)},
                         "wrong_types": confusion(group, typed, threshold)}
            print(label, name, json.dumps({k: row[name][k] for k in ("detected", "check", "type_head")}),
                  file=sys.stderr)
        out["results"][label] = row
    args.out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out_dir / "ged_types.json", out)
    lines = ["| threshold | half | detected | operation (check) | main type (check) | operation (head) | "
             "main type (head) | check ms/sentence |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for label, row in out["results"].items():
        for name in halves:
            r = row[name]
            lines.append(f"| {label} {row['threshold']:.3f} | {name} | {r['detected']} | "
                         f"{r['check']['operation_accuracy']:.3f} | {r['check']['type_accuracy']:.3f} | "
                         f"{r['type_head']['operation_accuracy']:.3f} | {r['type_head']['type_accuracy']:.3f} | "
                         f"{r['ms_per_sentence']['check']:.1f} |")
    atomic_write_text(args.out_dir / "ged_types.md", f"`{out['command']}`\n\n" + "\n".join(lines) + "\n")
    print(json.dumps({k: out[k] for k in ("model", "typing_rule", "halves")} | {
        "report": {label: row["report"]["check"] for label, row in out["results"].items()}}))
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
