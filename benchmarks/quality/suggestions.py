"""Suggestions for flagged words: how often the first (and any of the top 3) is the reference correction.

    python -m benchmarks.quality.suggestions --fce runs/data/fce

On FCE dev (BEA-2019 JSON; the fixed-seed split of ``ged eval --split`` into a tuning and a report half) the
reference edits that replace one token by one token (ERRANT ``R:*``; FCE's codes mapped onto ERRANT's types) are
the gold suggestions. For each such token and each token the shipped model flags at its threshold, the suggester
(electra_detect/tasks/ged/suggestions.py) proposes candidates and the GED model ranks them; every candidate's
edited sentence is scored once and the error score around the edit kept for each ranking function, so every
setting of the grid (ranking function and window, sources, k) is judged offline. The setting with the highest
top-1 rate on the tuning half's flagged one-word replacements is reported on the report half:

- (a) flagged words: top-1 and top-3 rates on the flagged one-word replacements, and the rate of flagged words with
  no suggestion (for words with no reference edit no suggestion is the right answer);
- (b) oracle flags (every reference one-word replacement), per ERRANT main type, with the share whose reference is
  among the candidates at all (the ceiling of ranking) and the first candidate in source order (no model) beside;
- (c) the time suggestions add per sentence: ``ged`` scoring alone and with suggestions, on report sentences.

Comparisons on the tuning half: how candidates are batched for the engine (int8 scores move with the batch).
FCE is never redistributed: ``--out-dir`` gets counts and rates only; the scored candidates are cached under
``--cache`` (runs/, not committed).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.common.run import command_line
from electra_detect import sentences as sentence_module
from electra_detect.calibrators import weights_sha256
from electra_detect.detector import Detector
from electra_detect.fileio import atomic_write_json, atomic_write_text
from electra_detect.scores import TextScores
from electra_detect.tasks.ged import suggestion_ranking as ranking_module
from electra_detect.tasks.ged import suggestions as suggester_module
from electra_detect.tasks.ged import word_candidates as word_candidates_module
from electra_detect.tasks.ged.alignment import to_token_scores, token_spans
from electra_detect.tasks.ged.error_types import split_type
from electra_detect.tasks.ged.readers import GedSentence, read_bea_json, split_sentences
from electra_detect.tasks.ged.suggestion_ranking import SOURCES, RankSetting, choose, local_score, unnecessary
from electra_detect.tasks.ged.suggestions import Suggester

FEATURES = [(reduce, window) for reduce in ("max", "sum") for window in (0, 1, 2, 3, 64)]  # 64: the whole sentence
ABLATIONS = [("all sources", SOURCES)] + [(f"without {s}", tuple(x for x in SOURCES if x != s)) for s in SOURCES]
TYPES = ["SPELL", "VERB:SVA", "VERB:TENSE", "VERB:FORM", "NOUN:NUM", "DET", "PREP", "PRON", "VERB", "NOUN", "ADJ",
         "ADV", "MORPH", "CONJ", "PUNCT", "OTHER"]
CLOSENESS = (0.0, 0.05, 0.1, 0.2, 0.4)
WIDE = RankSetting(max_candidates=80)  # every candidate scored once; each setting of the grid picks among them


# -- gold and spans ---------------------------------------------------------------------------------------------
def one_word_edits(sentence: GedSentence) -> dict[int, tuple[str, str]]:
    """Token index -> (correction, ERRANT main type) of the reference edits that replace that one token by one
    other token; ``U:*`` edits of one token map to ("", main type)."""
    found: dict[int, tuple[str, str]] = {}
    for edit in sentence.edits:
        operation, main = split_type(edit.type)
        if edit.end - edit.start != 1 or edit.correction is None or edit.start in found:
            continue
        correction = edit.correction.strip()
        if operation == "R" and correction and " " not in correction and correction != sentence.tokens[edit.start]:
            found[edit.start] = (correction, main)
        elif operation == "U" and not correction:
            found[edit.start] = ("", main)
    return found


def collect(detector: Detector, sentences: Sequence[GedSentence], threshold: float, scoring: str,
            suggester: Suggester) -> list[dict[str, Any]]:
    """One record per token that is flagged or has a one-word reference edit: its gold, whether flagged, and the
    (value, source, features) of each candidate beside the unedited features."""
    scores = detector.score([s.text for s in sentences])
    records = []
    for number, (sentence, result) in enumerate(zip(sentences, scores, strict=True)):
        token_scores = to_token_scores(sentence.tokens, ((t.start, t.p_replaced) for t in result.tokens))
        gold = one_word_edits(sentence)
        chosen = [i for i in range(len(sentence.tokens)) if token_scores[i] >= threshold or i in gold]
        if not chosen:
            continue
        spans = token_spans(sentence.tokens)
        plan = suggester.plan(sentence.text, [spans[i] for i in chosen])
        scored = score_plan(detector, plan, scoring)
        groups = plan.split(scored)
        for i, target_index in zip(chosen, plan.order, strict=True):
            target, group = plan.targets[target_index], groups[target_index]
            correction, main = gold.get(i, (None, None))
            records.append({
                "sentence": number, "token": i, "flagged": bool(token_scores[i] >= threshold),
                "error": bool(sentence.labels[i]), "gold": correction, "type": main,
                "word": target.sentence[target.span[0]:target.span[1]],
                "unnecessary": unnecessary(group[0], target.sentence, target.span) if group else False,
                "original": features(group[0], target.span) if group else [],
                "candidates": [[value, source, features(result, span)]
                               for (value, source, _text, span), result in zip(target.edits, group[1:], strict=True)]})
        if number % 100 == 0:
            print(f"  {number}/{len(sentences)} sentences, {len(records)} words", file=sys.stderr, flush=True)
    return records


def score_plan(detector: Detector, plan: Any, scoring: str) -> list[TextScores]:
    """The plan's sentences scored as ``scoring`` says: ``grouped`` one engine call per target (its sentences share
    the int8 activation scales), ``batched`` all at once in batches of 32, ``single`` one sentence a call."""
    if scoring == "grouped":
        return [r for target in plan.targets for r in detector.score(target.texts, batch_size=len(target.texts))]
    return detector.score(plan.texts, batch_size=1 if scoring == "single" else 32) if plan.texts else []


def features(result: TextScores, span: tuple[int, int]) -> list[float]:
    return [round(local_score(result, span, reduce, window), 6) for reduce, window in FEATURES]


# -- judging a setting ------------------------------------------------------------------------------------------
def suggestions(record: dict[str, Any], setting: RankSetting, ranked: bool = True) -> list[str]:
    """The values the setting suggests for a record, by the suggester's own rule (``choose``); ``ranked=False``:
    its candidates in source order, no model."""
    pool = [c for c in record["candidates"] if c[1] in setting.sources][:setting.max_candidates]
    if not ranked:
        return [c[0] for c in pool[:setting.k]]
    if not pool:
        return []
    at = FEATURES.index((setting.reduce, setting.window))
    may_delete = setting.delete == "always" or record["unnecessary"]
    chosen = choose(record["word"], record["original"][at], [(c[0], c[1], c[2][at]) for c in pool], may_delete,
                    setting)
    return [value for value, _source, _score in chosen]


def rates(records: Sequence[dict[str, Any]], setting: RankSetting, ranked: bool = True) -> dict[str, Any]:
    """top-1, top-k and no-suggestion rates over records with a gold correction, and the candidate ceiling."""
    top1 = topk = none = ceiling = 0
    for record in records:
        found = [v.lower() for v in suggestions(record, setting, ranked)]
        gold = record["gold"].lower()
        top1 += bool(found) and found[0] == gold
        topk += gold in found
        none += not found
        ceiling += any(c[0].lower() == gold for c in record["candidates"] if c[1] in setting.sources)
    n = max(len(records), 1)
    return {"n": len(records), "top1": top1 / n, f"top{setting.k}": topk / n, "none": none / n,
            "in_candidates": ceiling / n}


def ranking_gain(records: Sequence[dict[str, Any]], setting: RankSetting, resamples: int = 1000) -> dict[str, Any]:
    """Top-1 ranked by the model minus the first candidate in source order, with a 95% bootstrap interval over
    sentences (a sentence's words are resampled together)."""
    import numpy as np

    def hit(record: dict[str, Any], ranked: bool) -> int:
        found = suggestions(record, setting, ranked)
        return int(bool(found) and found[0].lower() == record["gold"].lower())

    by_sentence: dict[int, list[int]] = defaultdict(list)
    for record in records:
        by_sentence[record["sentence"]].append(hit(record, True) - hit(record, False))
    sums = np.array([sum(v) for v in by_sentence.values()])
    counts = np.array([len(v) for v in by_sentence.values()])
    rng = np.random.default_rng(0)
    picks = rng.integers(0, len(sums), size=(resamples, len(sums)))
    gains = sums[picks].sum(1) / counts[picks].sum(1)
    low, high = np.percentile(gains, [2.5, 97.5])
    return {"gain": float(sums.sum() / counts.sum()), "ci95": [float(low), float(high)]}


def silence(records: Sequence[dict[str, Any]], setting: RankSetting) -> float:
    """Share of records given no suggestion."""
    return sum(not suggestions(r, setting) for r in records) / max(len(records), 1)


def tune(records: Sequence[dict[str, Any]]) -> tuple[RankSetting, list[dict[str, Any]]]:
    """The grid on the tuning half's flagged one-word replacements: the best top-1; ties (many settings differ by
    a word or none) go to the simpler setting: every source, less closeness, a narrower window, then top-3."""
    target = [r for r in records if r["flagged"] and r["gold"]]
    grid = []
    for name, sources in ABLATIONS:
        for reduce, window in FEATURES:
            for closeness in CLOSENESS:
                for delete in ("unnecessary", "always"):
                    setting = RankSetting(reduce=reduce, window=window, sources=sources, closeness=closeness,
                                          delete=delete)
                    grid.append({"sources": name, "reduce": reduce, "window": window, "closeness": closeness,
                                 "delete": delete, **rates(target, setting)})
    best = max(grid, key=lambda row: (round(row["top1"], 9), row["sources"] == "all sources", -row["closeness"],
                                      -row["window"], row["delete"] == "unnecessary", round(row["top3"], 9)))
    return RankSetting(reduce=best["reduce"], window=best["window"], sources=dict(ABLATIONS)[best["sources"]],
                       closeness=best["closeness"], delete=best["delete"]), grid


def shortlist(grid: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The grid rows worth keeping: the 20 best by top-1, and the best of each source ablation, ranking function
    and window, closeness and deletion rule (the rest stays in the cache)."""
    ranked = sorted(grid, key=lambda row: -row["top1"])
    keep = ranked[:20]
    for key in ("sources", "reduce", "window", "closeness", "delete"):
        for value in dict.fromkeys(row[key] for row in grid):
            keep.append(next(row for row in ranked if row[key] == value))
    kept = list({json.dumps(row, sort_keys=True): row for row in keep}.values())
    return sorted(kept, key=lambda row: -row["top1"])


# -- time -------------------------------------------------------------------------------------------------------
def timing(detector: Detector, texts: Sequence[str], threshold: float, suggester: Suggester,
           score: Callable[[list[str]], list[TextScores]]) -> dict[str, float]:
    """Seconds per sentence of ``ged``'s scoring alone and with suggestions (one call per 32 sentences)."""
    detector.score(list(texts[:32]))  # warm the engine
    started = time.perf_counter()
    batches = [list(texts[i:i + 32]) for i in range(0, len(texts), 32)]
    scored = [detector.score(batch) for batch in batches]
    alone = time.perf_counter() - started
    started = time.perf_counter()
    flagged = [suggester.flagged(score, detector.score(batch), threshold) for batch in batches]
    both = time.perf_counter() - started
    words = sum(len(s.flagged(threshold)) for batch in scored for s in batch)
    with_suggestion = sum(bool(w["suggestions"]) for batch in flagged for text in batch for w in text)
    return {"sentences": len(texts), "flagged_words": words, "words_with_a_suggestion": with_suggestion,
            "ms_per_sentence_ged": 1000 * alone / len(texts),
            "ms_per_sentence_with_suggestions": 1000 * both / len(texts),
            "ms_added_per_sentence": 1000 * (both - alone) / len(texts),
            "ms_added_per_flagged_word": 1000 * (both - alone) / max(words, 1)}


# -- output -----------------------------------------------------------------------------------------------------
def pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def describe(setting: RankSetting) -> dict[str, Any]:
    return {"reduce": setting.reduce, "window": setting.window, "closeness": setting.closeness,
            "delete": setting.delete, "sources": list(setting.sources), "k": setting.k}


def setting_line(chosen: dict[str, Any]) -> str:
    return (f"ranking by the `{chosen['reduce']}` of the error score over the edit and {chosen['window']} word(s) each "
            f"side, plus {chosen['closeness']} × the edit distance; the deletion offered {chosen['delete']}; sources "
            f"{', '.join(chosen['sources'])}; k = {chosen['k']}")


def write_table(summary: dict[str, Any], out: Path) -> None:
    chosen = summary["setting"]
    lines = ["# Suggestions for flagged words", "",
             f"Command: `{summary['command']}` ({summary['date']}), engine `{summary['engine']}`, candidates scored "
             f"`{summary['scoring']}`. FCE dev, split seed {summary['seed']}: the grid is judged on the tuning half "
             f"({summary['tune_sentences']} sentences), every figure below is the report half's "
             f"({summary['report_sentences']} sentences). Gold: reference edits replacing one token by one token "
             "(ERRANT R:*); a suggestion is right when it equals the correction, case aside.", "",
             (f"Chosen on the tuning half: {setting_line(chosen)}." if summary["setting_source"] == "tuned" else
              f"The suggester's defaults (`--setting default`): {setting_line(chosen)}; top-1 on the tuning half "
              f"{pct(summary['tune_top1']['setting'])}, where the grid's best, "
              f"{setting_line(summary['tuned_setting'])}, has {pct(summary['tune_top1']['tuned'])}."), "",
             "## (a) Words the model flags at its threshold "
             f"({summary['threshold']:.3f})", "",
             "| flagged words | n | top-1 | top-3 | no suggestion | reference among candidates | first candidate, "
             "unranked |", "|---|---:|---:|---:|---:|---:|---:|"]
    a = summary["flagged"]
    for name, key in (("one-word replacements (R)", "replacements"), ("one-word deletions (U)", "deletions")):
        lines.append(f"| {name} | {a[key]['n']} | {pct(a[key]['top1'])} | {pct(a[key]['top3'])} | "
                     f"{pct(a[key]['none'])} | {pct(a[key]['in_candidates'])} | {pct(a[key]['unranked_top1'])} |")
    for name, key in (("other errors", "other_errors"), ("correct words (no edit)", "correct"), ("all", "all")):
        lines.append(f"| {name} | {a[key]['n']} | | | {pct(a[key]['none'])} | | |")
    gain = a["replacements"]["ranking_gain"]
    lines += ["", f"The model's ranking against the first candidate in source order, top-1 on the flagged one-word "
              f"replacements: {100 * gain['gain']:+.1f} points (95% bootstrap interval over sentences "
              f"{100 * gain['ci95'][0]:+.1f} to {100 * gain['ci95'][1]:+.1f})."]
    lines += ["", "## (b) Oracle flags: every reference one-word replacement, per ERRANT type", "",
              "| type | n | top-1 | top-3 | no suggestion | reference among candidates | first candidate, unranked |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for main, row in summary["oracle"].items():
        lines.append(f"| {main} | {row['n']} | {pct(row['top1'])} | {pct(row['top3'])} | {pct(row['none'])} | "
                     f"{pct(row['in_candidates'])} | {pct(row['unranked_top1'])} |")
    t = summary["time"]
    lines += ["", "## (c) Time", "",
              f"{t['sentences']} report sentences, one engine thread on {summary['cpu_count']} shared cores (load "
              f"average {summary['load_average_1min']} as it began), 32 sentences a call as `ged` batches: "
              f"`ged` scoring {t['ms_per_sentence_ged']:.1f} ms a sentence, with suggestions "
              f"{t['ms_per_sentence_with_suggestions']:.1f} ms (+{t['ms_added_per_sentence']:.1f} ms a sentence, "
              f"{t['ms_added_per_flagged_word']:.1f} ms a flagged word; {t['flagged_words']} flagged words, "
              f"{t['words_with_a_suggestion']} with a suggestion).", "",
              f"## Tuning half: the grid (flagged one-word replacements; the best of {summary['grid_size']} settings)",
              "",
              "| sources | ranking | window | closeness | deletion | top-1 | top-3 | no suggestion |",
              "|---|---|---:|---:|---|---:|---:|---:|"]
    best = sorted(summary["grid"], key=lambda r: -r["top1"])
    shown = best[:12] + [next(r for r in best if r["sources"] == name)
                         for name, _ in ABLATIONS if all(r["sources"] != name for r in best[:12])]
    for row in shown:
        lines.append(f"| {row['sources']} | {row['reduce']} | {row['window']} | {row['closeness']} | "
                     f"{row['delete']} | {pct(row['top1'])} | {pct(row['top3'])} | {pct(row['none'])} |")
    lines += ["", "Top-k on the tuning half with the chosen setting (k = 1..5): "
              + ", ".join(f"{pct(v)}" for v in summary["tune_topk"]) + f"; the first candidate in source order (no "
              f"model): {pct(summary['tune_unranked_top1'])}."]
    if summary.get("scoring_comparison"):
        lines += ["", "## Tuning half: how the candidates are batched", "",
                  "| engine | scoring | top-1 | top-3 | no suggestion |", "|---|---|---:|---:|---:|"]
        for row in summary["scoring_comparison"]:
            lines.append(f"| {row['engine']} | {row['scoring']} | {pct(row['top1'])} | {pct(row['top3'])} | "
                         f"{pct(row['none'])} |")
    atomic_write_text(out / "table.md", "\n".join(lines) + "\n")


def plot(summary: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(k, v) for k, v in summary["oracle"].items() if k != "all" and v["n"] >= 10]
    names = [f"{k}\n(n={v['n']})" for k, v in rows]
    fig, ax = plt.subplots(figsize=(max(6, len(rows) * 0.9), 3.8))
    xs = range(len(rows))
    for offset, key, label in ((-0.27, "in_candidates", "among candidates"), (0, "top3", "top-3"),
                               (0.27, "top1", "top-1")):
        ax.bar([x + offset for x in xs], [v[key] for _, v in rows], width=0.27, label=label)
    ax.set_xticks(list(xs), names, fontsize=7)
    ax.set_ylabel("share of reference corrections")
    ax.set_title("Suggestions vs FCE dev corrections (report half, oracle flags)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "plot.png", dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="models/electra-minilm")
    parser.add_argument("--fce", required=True, help="folder with fce-dev.json (BEA-2019 JSON release)")
    parser.add_argument("--engine", default="auto", choices=("auto", "onnx", "torch"))
    parser.add_argument("--scoring", default="batched", choices=("grouped", "batched", "single"),
                        help="how candidate sentences reach the engine (see score_plan)")
    parser.add_argument("--compare", nargs="*", default=[], metavar="ENGINE:SCORING",
                        help="also judge the chosen setting on the tuning half with these, e.g. torch:batched")
    parser.add_argument("--setting", choices=("tuned", "default"), default="tuned",
                        help="judge the grid's best on the tuning half (tuned) or the suggester's defaults (default)")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--limit", type=int, default=0, help="first N sentences of each half (a quick look)")
    parser.add_argument("--time-sentences", type=int, default=320)
    parser.add_argument("--cache", default="runs/suggestions")
    parser.add_argument("--out-dir", default=str(Path(__file__).resolve().parents[1] / "results" / "suggestions"))
    args = parser.parse_args()
    tune_half, report_half = split_sentences(read_bea_json(Path(args.fce) / "fce-dev.json"), 0.5, args.seed)
    if args.limit:
        tune_half, report_half = tune_half[:args.limit], report_half[:args.limit]
    detector = Detector.load(args.model, task="ged", engine=args.engine, threads=1)
    threshold = detector.threshold()
    print(detector.describe(), file=sys.stderr)
    wide = Suggester(WIDE)
    # the cache's key: a new model, or a change to how candidates and their sentences are made, is scored anew
    weights = weights_sha256(detector.model_dir)[:12]
    modules = (suggester_module, word_candidates_module, ranking_module, sentence_module)  # records hold local scores
    sources = b"".join(Path(module.__file__).read_bytes() for module in modules)
    planner = hashlib.sha256(sources).hexdigest()[:8]

    def records(half: str, sentences: list[GedSentence], engine: str, scoring: str, scorer: Detector) -> list:
        path = Path(args.cache) / f"{engine}-{scoring}-{half}-{args.seed}-{args.limit}-{weights}-{planner}.json"
        if path.exists():
            return json.loads(path.read_text())
        print(f"{half}: {len(sentences)} sentences, {engine} {scoring}", file=sys.stderr)
        found = collect(scorer, sentences, threshold, scoring, wide)
        atomic_write_json(path, found)
        return found

    tuning = records("tune", tune_half, args.engine, args.scoring, detector)
    tuned, grid = tune(tuning)
    setting = tuned if args.setting == "tuned" else RankSetting()  # default: what `ged --suggest` ships with
    flagged_gold = [r for r in tuning if r["flagged"] and r["gold"]]
    tune_topk = [rates(flagged_gold, replace(setting, k=k))[f"top{k}"] for k in range(1, 6)]
    tune_unranked = rates(flagged_gold, setting, ranked=False)["top1"]
    comparison = []
    for item in args.compare:
        engine, scoring = item.split(":")
        other = detector if engine == args.engine else Detector.load(args.model, task="ged", engine=engine, threads=1)
        rows = records("tune", tune_half, engine, scoring, other)
        comparison.append({"engine": engine, "scoring": scoring,
                           **rates([r for r in rows if r["flagged"] and r["gold"]], setting)})
    if comparison:
        comparison.insert(0, {"engine": args.engine, "scoring": args.scoring,
                              **rates(flagged_gold, setting)})

    report = records("report", report_half, args.engine, args.scoring, detector)
    flagged = [r for r in report if r["flagged"]]
    replacements = [r for r in flagged if r["gold"]]
    deletions = [r for r in flagged if r["gold"] == ""]
    summary_flagged = {"replacements": {**rates(replacements, setting),
                                        "unranked_top1": rates(replacements, setting, ranked=False)["top1"],
                                        "ranking_gain": ranking_gain(replacements, setting)},
                       "deletions": {**rates(deletions, setting),
                                     "unranked_top1": rates(deletions, setting, ranked=False)["top1"]},
                       "other_errors": {"n": sum(r["error"] and r["gold"] is None for r in flagged),
                                        "none": silence([r for r in flagged if r["error"] and r["gold"] is None],
                                                        setting)},
                       "correct": {"n": sum(not r["error"] for r in flagged),
                                   "none": silence([r for r in flagged if not r["error"]], setting)},
                       "all": {"n": len(flagged), "none": silence(flagged, setting)}}
    oracle: dict[str, Any] = {}
    by_type = defaultdict(list)
    for record in report:
        if record["gold"]:
            by_type[record["type"]].append(record)
    for main in ["all", *TYPES, *sorted(set(by_type) - set(TYPES))]:
        rows = [r for r in report if r["gold"]] if main == "all" else by_type.get(main, [])
        if rows:
            oracle[main] = {**rates(rows, setting), "unranked_top1": rates(rows, setting, ranked=False)["top1"]}

    suggester = Suggester(setting)
    load = os.getloadavg()[0]  # the cores are shared: the timing says how busy they were
    times = timing(detector, [s.text for s in report_half[:args.time_sentences]], threshold, suggester,
                   detector.score)
    summary = {"benchmark": "suggestions", "model": args.model, "engine": detector.describe().split(" from ")[0],
               "scoring": args.scoring, "seed": args.seed, "threshold": threshold,
               "tune_sentences": len(tune_half), "report_sentences": len(report_half),
               "setting": describe(setting), "setting_source": args.setting, "tuned_setting": describe(tuned),
               "tune_top1": {"setting": tune_topk[0], "tuned": max(row["top1"] for row in grid)},
               "flagged": summary_flagged, "oracle": oracle, "time": times, "grid": shortlist(grid),
               "grid_size": len(grid), "tune_topk": tune_topk,
               "tune_unranked_top1": tune_unranked,
               "scoring_comparison": comparison, "cpu_count": os.cpu_count(), "load_average_1min": round(load, 2),
               "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "command": command_line()}
    out = Path(args.out_dir)
    atomic_write_json(out / "result.json", summary)
    write_table(summary, out)
    plot(summary, out)
    print(json.dumps({k: summary[k] for k in ("setting", "flagged", "time")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
