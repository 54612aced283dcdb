"""The pre-training compute curve: ELECTRA and masked-LM continued pre-training of one encoder at equal training
FLOPs, at several compute points, on real learner errors and on what the pre-trained model knows before any GED.

    python -m benchmarks.studies.compute_curve --fce runs/data/fce --jfleg ../shared/data/jfleg/dev --threads 1 \\
        --point electra-500=runs/curve/electra-500 --point mlm-649=runs/curve/mlm-649 --point base=minilm
    python -m benchmarks.studies.compute_curve --report      # table.md, result.json, plot.png from points/*.json alone
    python -m benchmarks.studies.compute_curve --fce runs/data/fce --threads 1 --train electra-1000  # pre-train

``--train NAME``: a point of compute_curve.toml (the plan: every point's pre-training link as data). Its chain's
links that have not finished are pre-trained into ``--runs-dir/NAME`` (a cut one resumes from its last checkpoint,
so a run that outlives a session goes on in the next), then the point is measured as below.
``--zero-shot-pair A=SOURCE B=SOURCE``: two discriminators (run or model dirs, e.g. a point against the shipped
``models/electra-minilm``) scored on the same sentences: the difference of zero-shot AP with a 95% paired bootstrap
over sentences, kept in ``--out-dir/zero_shot_pairs.json`` and shown by the report.
``--point NAME=SOURCE``: SOURCE is a pre-training run dir or a published encoder (``minilm``, a folder). Runs are
chained: a later point continues from the previous point's run dir with its own warm-up and decay
(``electra-detect pretrain --init-from runs/curve/electra-500 --out runs/curve/electra-1000 ...``); the masked-LM
arm is the same with ``--objective bert_mlm`` and 1.30x the updates (equal FLOPs). Measurements of a point
(``--measure``, default all):

- compute (always): objective, updates, tokens and training PFLOPs summed over the point's chain (run_config.json's
  ``train.init_from`` followed down to the published encoder; FLOPs from the model shapes,
  benchmarks/studies/ablation.py),
  and the chain itself;
- ``zero-shot``: a run whose objective trains the replaced-token head, as it is (benchmarks/studies/warmstart.py): AP on
  all of FCE dev and of JFLEG dev, the token error rate, AP / error rate, each with a 95% bootstrap interval over
  sentences; F0.5 on the report half at the tuning half's threshold;
- ``corruption``: word-level AUC of the replaced-token head on JFLEG dev.ref0 with 15% of words swapped
  (benchmarks/studies/learning.py ``--score``);
- ``blimp``: the discriminator's sentence score (sum of log(1 - p)) on every pair (benchmarks/quality/blimp.py), and the
  pseudo-log-likelihood of the objective's own masked LM (ELECTRA: generator/; masked LM: mlm/, the encoder with
  its MLM head) on ``--blimp-pairs-per-set`` pairs per set (0: none; one pass per token, slow on a CPU);
- ``ged``: the point's discriminator (a masked-LM run's: its encoder with the untrained head, as warmstart.py's arm
  (c)) fine-tuned with the shipped recipe (benchmarks/studies/synthetic_curve.py: ``--ged-sentences`` sentences of
  ``prose`` text with realistic errors, word choices from ``--neighbours-from``, typed head, one epoch; one
  fine-tune per ``--ged-seeds`` seed, the same synthetic sentences for every point), F0.5 and AP on the report halves
  of FCE dev and JFLEG dev (threshold from the tuning half).

FCE dev and JFLEG dev are split by a fixed seed into a tuning and a report half (warmstart.load_sets). Every F0.5
measurement keeps its per-sentence TP/FP/FN counts in the fixed order of the report half (and a hash of that half):
paired bootstraps between any two points need nothing else. Each measurement is written to
``--out-dir/points/NAME.json`` as soon as it is done, and a re-run skips what is there (``--redo``: measure again;
fine-tunes in ``--work-dir`` are reused either way): run dirs do not outlive a session, the committed points do.
No FCE text is written, only metrics and counts.

The report (written after measuring, or alone with ``--report``): one row per point, sorted by objective then
PFLOPs. A point's role comes from its chain: the curve (the recipe of the baseline's first link: lr, batch, sequence
length, masking rate, generator depth, corpus, warm-up share), a pre-training seed repeat (the same chain of lengths,
other seeds) or a recipe lever (another setting: compared with the default-recipe point of the same lengths, and of
the same seeds where one is measured). For each ELECTRA curve or seed point the masked-LM point with the nearest
PFLOPs (the same seeds when one is within 1.5x), each curve point against ``--baseline``, each seed repeat against its
curve point and each lever against its default: the difference of seed-mean F0.5 with a 95% paired bootstrap over
report sentences (1,000 resamples).
plot.png: GED F0.5 on FCE dev and zero-shot AP against PFLOPs, one line per objective through the curve's points,
seed repeats hollow; a third panel: each seed repeat and lever's GED difference from its reference point.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import math
import re
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common.ged_halves import BOOTSTRAP, f05_of_counts, load_sets, sentence_counts
from benchmarks.studies.warmstart import pretraining, trains_rtd_head, zero_shot
from electra_detect.fileio import atomic_save_figure, atomic_write_json, atomic_write_text
from electra_detect.tasks.ged.metrics import flatten
from electra_detect.tasks.ged.readers import GedSentence, split_sentences

ROOT = Path(__file__).resolve().parents[2]
PLAN = Path(__file__).with_suffix(".toml")
CLI = [sys.executable, "-m", "electra_detect.cli"]
MEASURES = ("zero-shot", "corruption", "blimp", "ged")
SETS = ("FCE dev", "JFLEG dev")
ELECTRA, MASKED_LM = ("electra", "electra15"), ("bert_mlm",)
NO_HEAD = "no replaced-token head"  # a measurement that needs one is "n/a: " + this, for the masked-LM arm


# -- the points' files ----------------------------------------------------------------------------------
def point_file(out_dir: Path, name: str) -> Path:
    return out_dir / "points" / f"{name}.json"


def compact_json(obj: Any) -> str:
    """Indented JSON with each list of numbers on one line: per-sentence counts stay one line per list."""
    text = json.dumps(obj, indent=2, sort_keys=True)
    return re.sub(r"\[[\d\s,.eE+-]*\]", lambda m: "[" + ", ".join(m.group(0)[1:-1].split()).replace(",,", ",")
                  + "]", text)


def save_point(path: Path, point: dict[str, Any]) -> None:
    atomic_write_text(path, compact_json(point) + "\n")


def load_points(out_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted((out_dir / "points").glob("*.json"))]


def fingerprint(sentences: list[GedSentence]) -> str:
    """A hash of a report half's tokens and labels: counts pair up only over the same sentences (no text kept)."""
    payload = json.dumps([[s.tokens, s.labels] for s in sentences], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def portable(path: str | Path) -> str:
    """A path inside the project relative to its root: the same on every machine."""
    resolved = Path(path).resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(resolved)


# -- the plan: each point's pre-training link, as data (compute_curve.toml) -------------------------------------
def load_plan(path: Path = PLAN) -> dict[str, Any]:
    """The plan's shared pretrain flags (``args``) and its points, each an encoder or a link; fails on a bad one."""
    plan = tomllib.loads(path.read_text(encoding="utf-8"))
    for name, point in plan["points"].items():
        if ("encoder" in point) == ("init" in point and "updates" in point):
            raise SystemExit(f"error: {path.name}: point {name} needs either encoder or init and updates")
        if unknown := set(point.get("measure", [])) - set(MEASURES):
            raise SystemExit(f"error: {path.name}: point {name} measures unknown {', '.join(sorted(unknown))}")
        chain_of(plan, name)
    return plan


def chain_of(plan: dict[str, Any], name: str) -> list[str]:
    """The plan's links that make point ``name``, oldest first (empty for a published encoder)."""
    links: list[str] = []
    while name in plan["points"] and "init" in plan["points"][name]:
        if name in links:
            raise SystemExit(f"error: the plan's chain of {links[-1]} loops through {name}")
        links.insert(0, name)
        name = plan["points"][name]["init"]
    return links


def pretrain_command(plan: dict[str, Any], name: str, runs_dir: Path, threads: int = 0) -> list[str]:
    """The ``electra-detect pretrain`` command of one link: the shared flags, then the point's own (later win);
    ``--resume`` when the run dir holds a cut run."""
    point, out = plan["points"][name], runs_dir / name
    start = plan["points"].get(point["init"], {"encoder": point["init"]})  # a point, or an encoder's short name
    init = start.get("encoder") or str(runs_dir / point["init"])
    command = [*CLI, "pretrain", "--init-from", init, "--out", str(out), *plan["args"],
               "--max-steps", str(point["updates"]), "--warmup-steps", str(math.ceil(point["updates"] / 10)),
               "--seed", str(point.get("seed", 0)), *point.get("flags", [])]
    if threads:
        command += ["--threads", str(threads)]
    if not sys.stderr.isatty():
        command.append("--no-progress")
    if (out / "run_config.json").exists():
        command.append("--resume")
    return command


def finished(run: Path, updates: int) -> bool:
    """Whether a run dir holds all its planned updates (an interrupted run writes summary.json too)."""
    summary = run / "summary.json"
    return summary.exists() and json.loads(summary.read_text()).get("steps", 0) >= updates


def train_point(plan: dict[str, Any], name: str, runs_dir: Path, threads: int = 0) -> str:
    """Pre-train the links of ``name``'s chain that have not finished (a cut one resumes from its checkpoint);
    returns the source to measure."""
    if name not in plan["points"]:
        raise SystemExit(f"error: no point {name} in {PLAN.name} (of {', '.join(plan['points'])})")
    if "encoder" in plan["points"][name]:
        return plan["points"][name]["encoder"]
    for link in chain_of(plan, name):
        if finished(runs_dir / link, plan["points"][link]["updates"]):
            continue
        command = pretrain_command(plan, link, runs_dir, threads)
        print("$ electra-detect " + " ".join(command[len(CLI):]), file=sys.stderr)
        subprocess.run(command, check=True)
    return str(runs_dir / name)


# -- measurements -----------------------------------------------------------------------------------------
def no_head(compute: dict[str, Any]) -> str | None:
    """Why a point has no replaced-token head to score (None: it has one)."""
    if compute["kind"] == "encoder":
        return "published encoder: no trained replaced-token head"
    return None if trains_rtd_head(compute["objective"]) else NO_HEAD


def bootstrap_aps(sentences: list[GedSentence], scores: list[np.ndarray]) -> np.ndarray:
    """AP and AP / token error rate on each of BOOTSTRAP resamples of sentences: (BOOTSTRAP, 2), NaN where a
    resample holds one class only. The rows are ``resamples_for`` the sentence count, so two models pair up."""
    from sklearn.metrics import average_precision_score

    labels = [np.asarray(s.labels) for s in sentences]
    values = [np.asarray(v) for v in scores]
    out = np.full((BOOTSTRAP, 2), np.nan)
    for draw, rows in enumerate(resamples_for(len(sentences))):
        y, p = np.concatenate([labels[i] for i in rows]), np.concatenate([values[i] for i in rows])
        if 0 < y.sum() < len(y):
            ap = average_precision_score(y, p)
            out[draw] = ap, ap / y.mean()
    return out


def ap_intervals(sentences: list[GedSentence], scores: list[np.ndarray]) -> dict[str, list[float]]:
    """95% bootstrap intervals over sentences of AP and of AP / token error rate."""
    draws = bootstrap_aps(sentences, scores)
    return {"ap_all_ci95": np.nanpercentile(draws[:, 0], [2.5, 97.5]).tolist(),
            "ap_over_rate_ci95": np.nanpercentile(draws[:, 1], [2.5, 97.5]).tolist()}


def ap_difference(sentences: list[GedSentence], first: list[np.ndarray], second: list[np.ndarray]) -> dict[str, Any]:
    """AP(first) - AP(second) on all sentences, with its 95% paired bootstrap interval over sentences."""
    from sklearn.metrics import average_precision_score

    (labels, a), (_, b) = flatten(sentences, first), flatten(sentences, second)
    ap = [float(average_precision_score(labels, a)), float(average_precision_score(labels, b))]
    low, high = np.nanpercentile(bootstrap_aps(sentences, first)[:, 0] - bootstrap_aps(sentences, second)[:, 0],
                                 [2.5, 97.5])
    return {"ap": ap, "diff_ap": ap[0] - ap[1], "ci95": [float(low), float(high)],
            "resolved": bool(low > 0 or high < 0), "sentences": len(sentences)}


def zero_shot_pair(first: tuple[str, str], second: tuple[str, str], sets: dict[str, dict]) -> dict[str, Any]:
    """Two discriminators' zero-shot AP on all of each set, paired: the difference and its interval."""
    out: dict[str, Any] = {"first": first[0], "second": second[0], "sources": [first[1], second[1]], "sets": {}}
    for name, split in sets.items():
        scores = [zero_shot(source, split)[1]["all"] for _, source in (first, second)]
        out["sets"][name] = ap_difference(split["all"], *scores)
        print(f"zero-shot AP {name}: {first[0]} - {second[0]} {out['sets'][name]['diff_ap']:+.3f} "
              f"[{out['sets'][name]['ci95'][0]:+.3f}, {out['sets'][name]['ci95'][1]:+.3f}]", file=sys.stderr)
    return out


def measure_zero_shot(source: str, compute: dict[str, Any], sets: dict[str, dict]) -> dict[str, Any]:
    reason = no_head(compute)
    if reason:
        return {"n/a": reason}
    out: dict[str, Any] = {}
    for name, split in sets.items():
        row, parts = zero_shot(source, split)
        out[name] = {**row, **ap_intervals(split["all"], parts["all"]), "sentences_all": len(split["all"]),
                     "ap_over_rate": row["ap_all"] / row["error_rate_all"],
                     "counts": sentence_counts(split["report"], parts["report"], row["threshold"]),
                     "report_fingerprint": fingerprint(split["report"])}
        print(f"zero-shot {name}: AP {row['ap_all']:.3f} ({out[name]['ap_over_rate']:.2f}x the error rate)",
              file=sys.stderr)
    return out


def measure_corruption(source: str, compute: dict[str, Any], jfleg: Path) -> dict[str, Any]:
    reason = no_head(compute)
    if reason:  # learning.py scores the replaced-token head; a masked LM's is untrained
        return {"n/a": reason}
    from benchmarks.studies.learning import score_model

    return score_model(source, jfleg / "dev.ref0")


def pll_model(source: str, compute: dict[str, Any]) -> tuple[Path | None, str]:
    """The masked LM an objective leaves (ELECTRA: its generator; masked LM: the encoder with its MLM head)."""
    if compute["kind"] == "encoder":
        return None, "published encoder: no MLM head shipped"
    run = Path(source)
    if (run / "mlm").is_dir():
        return run / "mlm", "mlm/ (the encoder with its MLM head)"
    return run / "generator", "generator/ (ELECTRA's small generator)"


def measure_blimp(source: str, compute: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.quality import blimp

    sets = blimp.read_blimp(Path(args.blimp), args.blimp_max_pairs)
    sentences, index = blimp.pair_sentences(sets)
    out: dict[str, Any] = {"sets": len(sets), "pairs": len(sentences) // 2}
    scores: dict[str, np.ndarray] = {}
    reason = no_head(compute)
    if reason:
        out["discriminator"] = {"n/a": reason}
    else:  # every pair: one pass per sentence
        scores, seconds = blimp.electra_scores(source, sentences, args.batch_size)
        table = blimp.summarise(sets, index, scores)
        out["discriminator"] = {"overall": blimp.overall(table, "electra_sum"),
                                "overall_mean": blimp.overall(table, "electra_mean"),
                                "per_set": {uid: row["electra_sum"] for uid, row in table.items()},
                                "seconds": round(seconds, 1)}
    model, what = pll_model(source, compute)
    if model is None or not args.blimp_pairs_per_set:
        out["pll"] = {"n/a": what if model is None else "--blimp-pairs-per-set 0"}
        return out
    subset = blimp.pll_subset(sets, args.blimp_pairs_per_set, 0)
    rows = blimp.pll_rows(sets, index, subset)
    values, seconds = blimp.pll_scores(str(model), [sentences[r] for r in rows], args.batch_size)
    pll = np.full(len(sentences), np.nan)
    pll[rows] = values
    table = blimp.summarise(sets, index, {**scores, "pll": pll}, subset)
    out["pll"] = {"model": what, "pairs_per_set": args.blimp_pairs_per_set, "overall": blimp.overall(table, "pll"),
                  "per_set": {uid: row["pll"] for uid, row in table.items()}, "seconds": round(seconds, 1),
                  "discriminator_same_pairs": blimp.overall(table, "electra_sum") if scores else None}
    return out


def ged_recipe(args: argparse.Namespace) -> dict[str, Any]:
    """The shipped GED recipe (models/electra-minilm/README.md), at ``--ged-sentences``."""
    return {"sentences": args.ged_sentences, "text": args.ged_text, "mix": "realistic", "types": not args.binary,
            "epochs": 1, "neighbours_from": portable(args.neighbours_from)}


def recipe_key(recipe: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:8]


def measure_ged_seed(name: str, source: str, seed: int, sets: dict[str, dict], recipe: dict[str, Any],
                     args: argparse.Namespace) -> dict[str, Any]:
    """One fine-tune of the recipe from the point's model (kept in ``--work-dir``), scored on the report halves."""
    from benchmarks.studies.synthetic_curve import score_point, synthetic_data
    from electra_detect.training.finetune.ged_finetune import FinetuneConfig, finetune, start_model

    work, key = Path(args.work_dir), recipe_key(recipe)
    model_dir = work / "ged" / name / f"{key}-seed{seed}"
    if not (model_dir / "ged.json").exists():
        # the same synthetic sentences for every point: only the encoder differs between two fine-tunes of a seed
        examples = synthetic_data(work / "examples" / f"{key}-seed{seed}.json", recipe, seed, args.runs,
                                  ROOT / recipe["neighbours_from"])
        config = FinetuneConfig(epochs=recipe["epochs"], seed=seed, types=recipe["types"], checkpoint_every=500)
        with start_model(source) as start:
            finetune(start, model_dir, examples, None, config, show_progress=sys.stderr.isatty())
    evals = score_point(f"{name} seed {seed}", model_dir, sets)
    out: dict[str, Any] = {"finetune": {k: evals["finetune"].get(k) for k in ("minutes", "steps", "train_sentences")}}
    for set_name, split in sets.items():
        row = evals[set_name]
        scores = [np.asarray(s) for s in row["report_scores"]]
        out[set_name] = {**{k: row[k] for k in ("f05", "precision", "recall", "average_precision", "threshold",
                                                "tokens", "errors", "flagged")},
                         "counts": sentence_counts(split["report"], scores, row["threshold"]),
                         "report_fingerprint": fingerprint(split["report"])}
        if "types" in row:
            out[set_name]["operation_accuracy"] = row["types"]["operation_accuracy"]
        print(f"ged {name} seed {seed} {set_name}: F0.5 {row['f05']:.3f}, AP {row['average_precision']:.3f}",
              file=sys.stderr)
    return out


def eval_sets(args: argparse.Namespace) -> dict[str, dict]:
    if not args.fce:
        raise SystemExit("error: zero-shot and ged need --fce (a folder with fce-dev.json)")
    sets = load_sets(Path(args.fce), Path(args.jfleg), args.split_seed)
    if args.max_sentences:  # a smoke run: the first N sentences of each set, split again
        for name, split in sets.items():
            tune, report = split_sentences(split["all"][:args.max_sentences], 0.5, args.split_seed)
            sets[name] = {"all": split["all"][:args.max_sentences], "tune": tune, "report": report}
    return sets


def measure_point(name: str, source: str, args: argparse.Namespace,
                  sets: Callable[[], dict[str, dict]]) -> dict[str, Any]:
    """Every selected measurement the point's file lacks (all of them with --redo), each saved when done; ``sets``
    reads FCE dev and JFLEG dev when first called."""
    path = point_file(Path(args.out_dir), name)
    point = json.loads(path.read_text()) if path.exists() else {"name": name}
    if point.get("source", source) != source:
        print(f"warning: {name} was measured from {point['source']}, now {source}", file=sys.stderr)
    point["source"] = source
    command = "python -m benchmarks.studies.compute_curve " + " ".join(sys.argv[1:])

    def record(key: str, value: dict[str, Any], started: float) -> None:
        value.update(date=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                     seconds=round(time.monotonic() - started, 1))
        point[key] = value
        point["commands"] = sorted({*point.get("commands", []), command})
        save_point(path, point)
        print(f"{name}: {key} saved to {path}", file=sys.stderr)

    started = time.monotonic()
    if "compute" not in point or args.redo:
        compute = pretraining(source)
        record("compute", {**compute, "pflops": compute["flops"] / 1e15}, started)
    compute = point["compute"]
    todo = [m for m in args.measure if m != "ged" and (m not in point or args.redo)]
    for measure in todo:
        started = time.monotonic()
        print(f"{name}: measuring {measure}", file=sys.stderr)
        if measure == "zero-shot":
            record(measure, measure_zero_shot(source, compute, sets()), started)
        elif measure == "corruption":
            record(measure, measure_corruption(source, compute, Path(args.jfleg)), started)
        elif measure == "blimp":
            record(measure, measure_blimp(source, compute, args), started)
    if "ged" in args.measure:
        recipe = ged_recipe(args)
        ged = point.get("ged") if not args.redo else None
        if ged and ged["recipe"] != recipe:
            raise SystemExit(f"error: {path} holds GED with another recipe ({ged['recipe']}); give that recipe, "
                             "--redo, or another --out-dir")
        ged = ged or {"recipe": recipe, "seeds": {}}
        for seed in args.ged_seeds:
            if str(seed) in ged["seeds"]:
                continue
            started = time.monotonic()
            print(f"{name}: GED fine-tune seed {seed}", file=sys.stderr)
            ged["seeds"][str(seed)] = measure_ged_seed(name, source, seed, sets(), recipe, args)
            ged["seeds"][str(seed)]["seconds"] = round(time.monotonic() - started, 1)
            record("ged", ged, started)
    return point


# -- the report: from the points' files only ---------------------------------------------------------------
def objective(point: dict[str, Any]) -> str:
    return point["compute"]["objective"] or "encoder"


def ged_counts(point: dict[str, Any], set_name: str) -> tuple[list[dict[str, list[int]]], str] | None:
    """A point's per-seed report-half counts on one set and that half's hash (None: no GED there)."""
    seeds = [seed[set_name] for seed in point.get("ged", {}).get("seeds", {}).values() if set_name in seed]
    if not seeds or len({s["report_fingerprint"] for s in seeds}) != 1:
        return None
    return [s["counts"] for s in seeds], seeds[0]["report_fingerprint"]


def resamples_for(size: int) -> np.ndarray:
    """The bootstrap resamples of a report half of ``size`` sentences: the same for every pair."""
    return np.random.default_rng(0).integers(0, size, size=(BOOTSTRAP, size))


def seed_mean_f05(counts: list[dict[str, list[int]]], rows: np.ndarray) -> np.ndarray:
    """Seed-mean F0.5 of each resample (rows of sentence indices)."""
    return np.mean([f05_of_counts(c, rows) for c in counts], axis=0)


def f05_summary(counts: list[dict[str, list[int]]]) -> dict[str, Any]:
    """Seed-mean F0.5 with its seed spread and its 95% bootstrap interval over report sentences."""
    size = len(counts[0]["tp"])
    per_seed = [float(f05_of_counts(c, np.arange(size)[None])[0]) for c in counts]
    low, high = np.percentile(seed_mean_f05(counts, resamples_for(size)), [2.5, 97.5])
    return {"f05": float(np.mean(per_seed)), "f05_std": float(np.std(per_seed)), "seeds": len(per_seed),
            "ci95": [float(low), float(high)]}


def difference(first: dict[str, Any], second: dict[str, Any], set_name: str) -> dict[str, Any]:
    """Seed-mean F0.5 of ``first`` minus ``second`` with a 95% paired bootstrap over the report sentences."""
    a, b = ged_counts(first, set_name), ged_counts(second, set_name)
    out: dict[str, Any] = {"first": first["name"], "second": second["name"], "set": set_name}
    if a is None or b is None:
        return {**out, "note": "no GED measurement"}
    if a[1] != b[1]:
        return {**out, "note": "measured on different report sentences"}
    rows = resamples_for(len(a[0][0]["tp"]))
    whole = np.arange(rows.shape[1])[None]
    diff = seed_mean_f05(a[0], rows) - seed_mean_f05(b[0], rows)
    low, high = np.percentile(diff, [2.5, 97.5])
    return {**out, "diff_f05": float(seed_mean_f05(a[0], whole)[0] - seed_mean_f05(b[0], whole)[0]),
            "ci95": [float(low), float(high)], "resolved": bool(low > 0 or high < 0), "seeds": [len(a[0]), len(b[0])]}


def nearest(point: dict[str, Any], others: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The point of ``others`` whose PFLOPs are closest to ``point``'s (by ratio)."""
    flops = point["compute"]["flops"]
    candidates = [o for o in others if o["compute"]["flops"] > 0]
    if flops <= 0 or not candidates:
        return None
    return min(candidates, key=lambda o: abs(np.log(o["compute"]["flops"] / flops)))


# What points measured before a link recorded these settings ran with (the shipped recipe's).
LINK_DEFAULTS = {"mask_prob": 0.15, "gen_layers": 2, "corpus": ["runs/corpus"]}
RECIPE_KEYS = ("lr", "batch_size", "seq_len", "mask_prob", "gen_layers", "corpus", "warmup_share")


def recipe(link: dict[str, Any]) -> dict[str, Any]:
    """A chain link's pre-training settings other than its length, seed and objective."""
    link = {**LINK_DEFAULTS, **link, "warmup_share": round(link["warmup_steps"] / max(link["steps"], 1), 2)}
    return {key: link[key] for key in RECIPE_KEYS}


def lever_of(point: dict[str, Any], default: dict[str, Any]) -> dict[str, Any]:
    """The settings in which any link of the point's chain differs from ``default`` (empty: the default recipe)."""
    changed: dict[str, Any] = {}
    for link in point["compute"]["chain"]:
        changed.update({k: v for k, v in recipe(link).items() if v != default[k]})
    return changed


def lever_text(changed: dict[str, Any]) -> str:
    """``mask_prob 0.25``; a corpus list as its distinct paths with their repeats (``runs/corpus + 3× a.txt``)."""
    def value(v: Any) -> str:
        if not isinstance(v, list):
            return str(v)
        return " + ".join(f"{v.count(p)}× {p}" if v.count(p) > 1 else p for p in dict.fromkeys(v))
    return ", ".join(f"{k} {value(v)}" for k, v in sorted(changed.items()))


def seeds_of(point: dict[str, Any]) -> list[int]:
    return [link["seed"] for link in point["compute"]["chain"]]


def lengths_of(point: dict[str, Any]) -> tuple[int, ...]:
    return tuple(link["steps"] for link in point["compute"]["chain"])


def roles(points: list[dict[str, Any]], baseline: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Each point's role: ``curve`` (the default recipe, the lowest seeds of its objective and chain of lengths),
    ``seed`` (the same chain of lengths with other pre-training seeds: ``of`` names the curve point) or ``lever``
    (another recipe: ``changed`` and ``of``, the default-recipe point of the same objective and lengths, of the same
    seeds when there is one, so that a lever's seed repeat meets the default's own; the baseline when no default
    point has its lengths, as for a run on other hardware at its own length)."""
    if baseline is None or not baseline["compute"]["chain"]:
        return {p["name"]: {"role": "curve"} for p in points}
    default = recipe(baseline["compute"]["chain"][0])
    out: dict[str, dict[str, Any]] = {}
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for point in points:
        if changed := lever_of(point, default):
            out[point["name"]] = {"role": "lever", "changed": changed}
            continue
        groups.setdefault((objective(point), lengths_of(point)), []).append(point)
    for group in groups.values():
        group.sort(key=lambda p: (seeds_of(p), p["name"]))
        out[group[0]["name"]] = {"role": "curve"}
        out.update({p["name"]: {"role": "seed", "of": group[0]["name"]} for p in group[1:]})
    for point in points:
        if out[point["name"]]["role"] == "lever":
            same = groups.get((objective(point), lengths_of(point)), [])
            paired = next((p for p in same if seeds_of(p) == seeds_of(point)), same[0] if same else None)
            out[point["name"]]["of"] = paired["name"] if paired else baseline["name"]
    return out


def not_measured(measurement: dict[str, Any]) -> str | None:
    """"n/a: why" for a measurement that does not apply to the point, else None."""
    return f"n/a: {measurement['n/a']}" if "n/a" in measurement else None


def point_row(point: dict[str, Any]) -> dict[str, Any]:
    compute = point["compute"]
    row: dict[str, Any] = {"name": point["name"], "objective": objective(point), "pflops": compute["pflops"],
                           "updates": compute["steps"], "tokens": compute["pretrain_tokens"],
                           "minutes": compute["minutes"], "links": len(compute["chain"])}
    zero = point.get("zero-shot")
    if zero is not None:
        row["zero-shot"] = not_measured(zero) or {s: {k: zero[s][k] for k in ("ap_all", "ap_all_ci95", "ap_over_rate",
                                                                          "ap_over_rate_ci95", "error_rate_all",
                                                                          "f05")} for s in SETS if s in zero}
    if "corruption" in point:
        row["corruption_auc"] = not_measured(point["corruption"]) or point["corruption"]["corruption_auc"]
    if "blimp" in point:
        blimp = point["blimp"]
        row["blimp"] = {"pairs": blimp["pairs"],
                        "discriminator": not_measured(blimp["discriminator"]) or blimp["discriminator"]["overall"],
                        "pll": not_measured(blimp["pll"]) or blimp["pll"]["overall"],
                        "pll_model": blimp["pll"].get("model"), "pll_pairs_per_set": blimp["pll"].get("pairs_per_set"),
                        "discriminator_same_pairs": blimp["pll"].get("discriminator_same_pairs")}
    if "ged" in point:
        row["ged"] = {s: f05_summary(c[0]) for s in SETS if (c := ged_counts(point, s))}
        row["ged_recipe"] = point["ged"]["recipe"]
    return row


def masked_partner(point: dict[str, Any], masked: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The masked-LM point nearest in PFLOPs, among those pre-trained with the same seeds when one is within 1.5x;
    None when none is within 1.5x (no pair at this compute yet)."""
    def close(other: dict[str, Any] | None) -> bool:
        return other is not None and abs(np.log(other["compute"]["flops"] / point["compute"]["flops"])) < np.log(1.5)

    same = nearest(point, [m for m in masked if seeds_of(m) == seeds_of(point)])
    return same if close(same) else (other if close(other := nearest(point, masked)) else None)


def zero_shot_ap(point: dict[str, Any], set_name: str) -> float | None:
    zero = point.get("zero-shot", {})
    return zero[set_name]["ap_all"] if set_name in zero else None


def compared(point: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """``point`` against ``other``: paired GED differences, and both zero-shot AP on FCE dev and corruption AUC."""
    return {"point": point["name"], "of": other["name"], **{s: difference(point, other, s) for s in SETS},
            "zero_shot_ap_fce": [zero_shot_ap(point, "FCE dev"), zero_shot_ap(other, "FCE dev")],
            "corruption_auc": [point.get("corruption", {}).get("corruption_auc"),
                               other.get("corruption", {}).get("corruption_auc")],
            "pflops": [point["compute"]["pflops"], other["compute"]["pflops"]]}


def summarise(points: list[dict[str, Any]], baseline: str) -> dict[str, Any]:
    points = sorted(points, key=lambda p: (objective(p), p["compute"]["flops"], p["name"]))
    base = next((p for p in points if p["name"] == baseline), None)
    role = roles(points, base)
    by_name = {p["name"]: p for p in points}
    masked = [p for p in points if objective(p) in MASKED_LM and role[p["name"]]["role"] != "lever"]
    versus = []
    for point in points:
        if objective(point) not in ELECTRA or role[point["name"]]["role"] == "lever":
            continue
        if point["compute"]["flops"] <= 0:
            continue
        if (partner := masked_partner(point, masked)) is None:
            versus.append({"electra": point["name"], "masked_lm": None, "pflops": [point["compute"]["pflops"], None],
                           **{s: {"note": "no masked-LM point within 1.5x its compute"} for s in SETS}})
            continue
        versus.append({"electra": point["name"], "masked_lm": partner["name"],
                       "pflops": [point["compute"]["pflops"], partner["compute"]["pflops"]],
                       **{s: difference(point, partner, s) for s in SETS}})
    against = [{"point": p["name"], **{s: difference(p, base, s) for s in SETS}} for p in points
               if base is not None and p is not base and role[p["name"]]["role"] == "curve"]
    seeds = [compared(p, by_name[role[p["name"]]["of"]]) for p in points if role[p["name"]]["role"] == "seed"]
    levers = [{**compared(p, by_name[role[p["name"]]["of"]]), "changed": role[p["name"]]["changed"]}
              for p in points if role[p["name"]]["role"] == "lever" and role[p["name"]].get("of")]
    commands = sorted({c for p in points for c in p.get("commands", [])})
    rows = [{**point_row(p), **role[p["name"]]} for p in points]
    return {"benchmark": "compute_curve", "rows": rows, "electra_vs_masked_lm": versus,
            "baseline": baseline if base is not None else None, "against_baseline": against,
            "pretraining_seeds": seeds, "levers": levers,
            "chains": {p["name"]: p["compute"]["chain"] for p in points}, "bootstrap": BOOTSTRAP,
            "commands": commands, "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}


def pflops_text(value: float) -> str:
    return f"{value:,.1f}" if value >= 10 else f"{value:.3g}"


def interval(value: float, ci: list[float]) -> str:
    return f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"


def zero_cell(row: dict[str, Any], set_name: str) -> str:
    zero = row.get("zero-shot")
    if zero is None:
        return "–"
    if isinstance(zero, str):
        return zero
    if set_name not in zero:
        return "–"
    z = zero[set_name]
    return f"{interval(z['ap_all'], z['ap_all_ci95'])} ({z['ap_over_rate']:.2f}×)"


def ged_cell(row: dict[str, Any], set_name: str) -> str:
    g = row.get("ged", {}).get(set_name)
    if g is None:
        return "–"
    return f"{g['f05']:.3f} ± {g['f05_std']:.3f} ({g['seeds']}) [{g['ci95'][0]:.3f}, {g['ci95'][1]:.3f}]"


def number(value: Any) -> str:
    return "–" if value is None else value if isinstance(value, str) else f"{value:.3f}"


def diff_cell(d: dict[str, Any]) -> str:
    if "note" in d:
        return f"– ({d['note']})"
    return f"{d['diff_f05']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]{' resolved' if d['resolved'] else ''}"


def chain_text(chain: list[dict[str, Any]]) -> str:
    if not chain:
        return "published encoder, no continued pre-training"
    start = Path(chain[0]["init_from"]).name if chain[0]["init_from"] else "random initialisation"
    links = [f"{Path(link['run']).name} ({link['objective']}, {link['steps']} updates, lr {link['lr']:g}, batch "
             f"{link['batch_size']} × {link['seq_len']}, {link['warmup_steps']} warm-up, seed {link['seed']})"
             for link in chain]
    return " → ".join([start, *links])


def variant_text(row: dict[str, Any]) -> str:
    if row.get("role") == "seed":
        return f"seed of {row['of']}"
    if row.get("role") == "lever":
        return lever_text(row["changed"])
    return "–"


def comparison_table(items: list[dict[str, Any]], kind: str) -> list[str]:
    lines = [f"| {kind} | against | PFLOPs | ΔF0.5 FCE dev [95%] | ΔF0.5 JFLEG dev [95%] | zero-shot AP FCE dev | "
             "corruption AUC |", "|---|---|---|---|---|---|---|"]
    for c in items:
        name = f"{c['point']} ({lever_text(c['changed'])})" if "changed" in c else c["point"]
        lines.append(f"| {name} | {c['of']} | {pflops_text(c['pflops'][0])} vs {pflops_text(c['pflops'][1])} | "
                     f"{diff_cell(c['FCE dev'])} | {diff_cell(c['JFLEG dev'])} | "
                     f"{pair_cell(c['zero_shot_ap_fce'])} | {pair_cell(c['corruption_auc'])} |")
    return lines


def pair_cell(values: list[float | None]) -> str:
    """``0.242 vs 0.251``; one dash when neither point has the measurement (the masked LM has no head to score)."""
    return "–" if all(v is None for v in values) else " vs ".join(number(v) for v in values)


def table(summary: dict[str, Any]) -> str:
    rows = summary["rows"]
    recipes = {json.dumps(r["ged_recipe"], sort_keys=True) for r in rows if "ged_recipe" in r}
    pll = next((r["blimp"] for r in rows if isinstance(r.get("blimp", {}).get("pll"), float)), None)
    pairs = sorted({r["blimp"]["pairs"] for r in rows if "blimp" in r})
    lines = ["# Pre-training compute curve: ELECTRA and masked-LM continued pre-training at equal training FLOPs", "",
             f"{len(rows)} point{'s' * (len(rows) != 1)} from `points/*.json` (report of {summary['date']}). "
             "PFLOPs: training FLOPs summed over the point's chain of runs (model shapes, "
             "benchmarks/studies/ablation.py). "
             "Zero-shot AP on all of each set (× its token error rate) and GED F0.5 on the report half (threshold "
             "from the tuning half), each with a 95% bootstrap interval over sentences; GED: mean ± std over "
             "fine-tune seeds (their number), interval of the seed mean.", "",
             "What compares across objectives: compute and GED F0.5 (same recipe, synthetic sentences, seeds and "
             "report sentences). Zero-shot AP and corruption AUC read the replaced-token head, which only ELECTRA "
             "trains (n/a for the masked LM). BLiMP: the discriminator's score exists for ELECTRA only; PLL scores "
             "the masked LM each objective leaves (ELECTRA's small generator, the masked LM's whole encoder with "
             "its MLM head). Each objective's own sentence score on the same pairs (as benchmarks/studies/ablation.py "
             "scores BLiMP) is ELECTRA's \"disc. (PLL pairs)\" against the masked LM's \"PLL\".", ""]
    if recipes:
        lines += [f"GED recipe: {', '.join(recipes)}.", ""]
    pll_head = f"BLiMP PLL ({pll['pll_pairs_per_set']}/set)" if pll else "BLiMP PLL"
    disc_head = f"BLiMP disc. ({'/'.join(f'{n:,}' for n in pairs) or 'all'} pairs)"
    lines += ["Variant: the curve's own points run the default recipe (that of the baseline's first link); \"seed\" "
              "repeats a curve point's chain with other pre-training seeds; a lever changes the recipe.", "",
              "| point | objective | variant | PFLOPs | updates | tokens | zero-shot AP FCE dev | "
              "zero-shot AP JFLEG dev | "
              f"corruption AUC | {disc_head} | {pll_head} | BLiMP disc. (PLL pairs) | GED F0.5 FCE dev | "
              "GED F0.5 JFLEG dev |", "|---|---|---|---:|---:|---:|---|---|---:|---:|---:|---:|---|---|"]
    for r in rows:
        b = r.get("blimp", {})
        lines.append(f"| {r['name']} | {r['objective']} | {variant_text(r)} | {pflops_text(r['pflops'])} | "
                     f"{r['updates']:,} | "
                     f"{r['tokens'] / 1e6:.2f}M | {zero_cell(r, 'FCE dev')} | {zero_cell(r, 'JFLEG dev')} | "
                     f"{number(r.get('corruption_auc'))} | {number(b.get('discriminator'))} | {number(b.get('pll'))} | "
                     f"{number(b.get('discriminator_same_pairs'))} | {ged_cell(r, 'FCE dev')} | "
                     f"{ged_cell(r, 'JFLEG dev')} |")
    lines += ["", "## ELECTRA − masked LM at the nearest compute", "",
              "Difference of seed-mean GED F0.5, 95% paired bootstrap over report sentences "
              f"({summary['bootstrap']:,} resamples).", "",
              "| ELECTRA | PFLOPs | masked LM | PFLOPs | ΔF0.5 FCE dev [95%] | ΔF0.5 JFLEG dev [95%] |",
              "|---|---:|---|---:|---|---|"]
    for v in summary["electra_vs_masked_lm"]:
        lines.append(f"| {v['electra']} | {pflops_text(v['pflops'][0])} | {v['masked_lm'] or '–'} | "
                     f"{'–' if v['pflops'][1] is None else pflops_text(v['pflops'][1])} | "
                     f"{diff_cell(v['FCE dev'])} | {diff_cell(v['JFLEG dev'])} |")
    if summary["baseline"]:
        lines += ["", f"## Against `{summary['baseline']}`", "",
                  "| point | ΔF0.5 FCE dev [95%] | ΔF0.5 JFLEG dev [95%] |", "|---|---|---|"]
        lines += [f"| {a['point']} | {diff_cell(a['FCE dev'])} | {diff_cell(a['JFLEG dev'])} |"
                  for a in summary["against_baseline"]]
    if summary["pretraining_seeds"]:
        lines += ["", "## Pre-training seeds", "",
                  "The same chain of runs with other pre-training seeds, against the curve's point: the spread one "
                  "pre-training run per point leaves unmeasured. ΔF0.5: seed-mean GED F0.5, 95% paired bootstrap.", ""]
        lines += comparison_table(summary["pretraining_seeds"], "point")
    if summary["levers"]:
        lines += ["", "## Recipe levers", "",
                  "Each lever changes one setting of the default recipe at the same number of updates and seeds, "
                  "against the default-recipe point (its PFLOPs change with the setting); a run of a length no "
                  "default point has (another machine's) is against the baseline.", ""]
        lines += comparison_table(summary["levers"], "lever")
    if summary.get("zero_shot_pairs"):
        lines += ["", "## Zero-shot AP, paired", "",
                  "Two discriminators' replaced-token heads scored on the same sentences (all of each set): the "
                  "difference of AP with its 95% paired bootstrap over sentences (`--zero-shot-pair`).", "",
                  "| first − second | AP FCE dev | ΔAP FCE dev [95%] | AP JFLEG dev | ΔAP JFLEG dev [95%] |",
                  "|---|---|---|---|---|"]
        for key, pair in sorted(summary["zero_shot_pairs"].items()):
            cells = [(f"{d['ap'][0]:.3f} vs {d['ap'][1]:.3f}", diff_cell({"diff_f05": d["diff_ap"], **d}))
                     if (d := pair["sets"].get(s)) else ("–", "–") for s in SETS]
            lines.append(f"| {key} | {' | '.join(c for cell in cells for c in cell)} |")
    lines += ["", "## Chains", ""]
    lines += [f"- `{name}`: {chain_text(chain)}" for name, chain in summary["chains"].items()]
    pair_commands = [pair["command"] for pair in summary.get("zero_shot_pairs", {}).values()]
    lines += ["", "## Commands", "", "```bash", *summary["commands"], *sorted(set(pair_commands)),
              summary["report_command"], "```"]
    return "\n".join(lines) + "\n"


def plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    comparisons = [c for c in summary.get("pretraining_seeds", []) + summary.get("levers", [])
                   if "diff_f05" in c["FCE dev"]]
    fig, axes = plt.subplots(1, 3 if comparisons else 2, figsize=(16.5 if comparisons else 11, 4))
    left, right = axes[0], axes[1]
    by_objective: dict[str, list[dict]] = {}
    for row in summary["rows"]:
        by_objective.setdefault(row["objective"], []).append(row)
    colours = {"electra": "tab:blue", "bert_mlm": "tab:orange", "encoder": "tab:grey"}
    for row in summary["rows"]:  # seed repeats: hollow markers beside the curve (levers: the third panel)
        if row.get("role") == "seed" and "FCE dev" in row.get("ged", {}):
            left.plot(row["pflops"], row["ged"]["FCE dev"]["f05"], marker="o", linestyle="none",
                      markerfacecolor="none", color=colours.get(row["objective"], "tab:green"))
    origin = [r for r in by_objective.get("encoder", []) if r.get("role", "curve") == "curve"]
    for index, (name, rows) in enumerate(by_objective.items()):
        rows = sorted((r for r in rows if r.get("role", "curve") == "curve"), key=lambda r: r["pflops"])
        colour = colours.get(name, f"C{index + 3}")  # one colour per objective in both panels
        label = "encoder (no continued pre-training)" if name == "encoder" else name
        for set_name, style in (("FCE dev", "-"), ("JFLEG dev", "--")):  # every arm starts from the encoder
            ged = [r for r in (rows if name == "encoder" else origin + rows) if set_name in r.get("ged", {})]
            if ged:
                values = [r["ged"][set_name] for r in ged]
                err = np.array([[v["f05"] - v["ci95"][0] for v in values],
                                [v["ci95"][1] - v["f05"] for v in values]])
                left.errorbar([r["pflops"] for r in ged], [v["f05"] for v in values], yerr=err.clip(0), marker="o",
                              linestyle=style, capsize=3, color=colour, label=f"{label}, {set_name}")
        for set_name, style in (("FCE dev", "-"), ("JFLEG dev", "--")):
            zero = [r for r in rows if isinstance(r.get("zero-shot"), dict) and set_name in r["zero-shot"]]
            if zero:
                values = [r["zero-shot"][set_name] for r in zero]
                err = np.array([[v["ap_all"] - v["ap_all_ci95"][0] for v in values],
                                [v["ap_all_ci95"][1] - v["ap_all"] for v in values]])
                right.errorbar([r["pflops"] for r in zero], [v["ap_all"] for v in values], yerr=err.clip(0),
                               marker="o", linestyle=style, capsize=3, color=colour, label=f"{name}, {set_name}")
    # a lever of its own length (another machine's run, met by the baseline): a star beside the curves, log scale
    beyond = [r for r in summary["rows"] if r.get("role") == "lever" and r.get("of") == summary.get("baseline")]
    for row in beyond:
        label = f"{row['name']} ({lever_text(row['changed'])})"
        for set_name, face in (("FCE dev", None), ("JFLEG dev", "none")):
            zero_shot = row.get("zero-shot")  # a dict, or "n/a: why" where the point has no head
            zero = zero_shot.get(set_name) if isinstance(zero_shot, dict) else None
            ged = row.get("ged", {}).get(set_name)
            for axis, value, ci in ((left, ged and ged["f05"], ged and ged["ci95"]),
                                    (right, zero and zero["ap_all"], zero and zero["ap_all_ci95"])):
                if value is not None:
                    axis.errorbar([row["pflops"]], [value], yerr=[[value - ci[0]], [ci[1] - value]], marker="*",
                                  markersize=10, markerfacecolor=face, capsize=3, color="tab:purple",
                                  linestyle="none", label=f"{label}, {set_name}")
    left.set(title="GED after realistic synthetic errors", xlabel="pre-training compute (PFLOPs)",
             ylabel="token F0.5 (report half, seed mean)")
    right.set(title="Zero-shot replaced-token head", xlabel="pre-training compute (PFLOPs)",
              ylabel="AP (all sentences)")
    for axis in (left, right):
        axis.grid(alpha=0.3)
        if beyond:  # linear up to the CPU curve's scale, logarithmic beyond it (the origin sits at 0)
            axis.set_xscale("symlog", linthresh=0.5)
        else:
            axis.ticklabel_format(axis="x", useOffset=False)
        if axis.get_legend_handles_labels()[0]:  # below the axes: the curves and their intervals fill the panel
            axis.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    if comparisons:
        plot_comparisons(axes[2], comparisons)
    fig.tight_layout()
    atomic_save_figure(fig, path)


def plot_comparisons(axis: Any, comparisons: list[dict[str, Any]]) -> None:
    """Seed repeats and levers against their reference point: GED ΔF0.5 with its interval, FCE dev and JFLEG dev."""
    for offset, (set_name, marker) in enumerate((("FCE dev", "o"), ("JFLEG dev", "s"))):
        found = [(y, c[set_name]) for y, c in enumerate(comparisons) if "diff_f05" in c[set_name]]
        centres = [d["diff_f05"] for _, d in found]
        err = np.array([[d["diff_f05"] - d["ci95"][0] for _, d in found],
                        [d["ci95"][1] - d["diff_f05"] for _, d in found]])
        axis.errorbar(centres, [y + 0.2 * offset for y, _ in found], xerr=err.clip(0), fmt=marker, capsize=3,
                      color="tab:blue", markerfacecolor="tab:blue" if offset == 0 else "none", label=set_name)
    axis.axvline(0, color="black", linewidth=0.8)
    axis.set_yticks(range(len(comparisons)), [f"{c['point']} − {c['of']}" for c in comparisons], fontsize=7)
    axis.invert_yaxis()
    axis.set(title="Seed repeats and levers (same updates)", xlabel="GED ΔF0.5 [95% paired bootstrap]")
    axis.grid(alpha=0.3, axis="x")
    axis.legend(fontsize=7, loc="best")


DEFAULT_OUT, DEFAULT_BASELINE = ROOT / "benchmarks" / "results" / "compute_curve", "electra-500"
PAIRS_FILE = "zero_shot_pairs.json"  # {"first − second": zero_shot_pair(...)}, kept across runs


def write_report(out_dir: Path, baseline: str) -> dict[str, Any]:
    points = load_points(out_dir)
    if not points:
        raise SystemExit(f"error: no points in {out_dir / 'points'}")
    summary = summarise(points, baseline)
    flags = [f"--out-dir {portable(out_dir)}" if out_dir.resolve() != DEFAULT_OUT else "",
             f"--baseline {baseline}" if baseline != DEFAULT_BASELINE else ""]
    summary["report_command"] = " ".join(["python -m benchmarks.studies.compute_curve --report", *filter(None, flags)])
    if (pairs := out_dir / PAIRS_FILE).exists():
        summary["zero_shot_pairs"] = json.loads(pairs.read_text())
    atomic_write_json(out_dir / "result.json", summary)
    atomic_write_text(out_dir / "table.md", table(summary))
    plot(summary, out_dir / "plot.png")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--point", action="append", default=[], metavar="NAME=SOURCE",
                        help="a pre-training run dir or a published encoder; repeat per point")
    parser.add_argument("--train", action="append", default=[], metavar="NAME",
                        help=f"a point of {PLAN.name}: pre-train its chain's missing links, then measure it "
                             "(with the plan's --measure for it); repeat per point")
    parser.add_argument("--zero-shot-pair", nargs=2, metavar="NAME=SOURCE",
                        help="score two discriminators' zero-shot AP on the same sentences: their paired difference")
    parser.add_argument("--runs-dir", default="runs/curve", help="the plan's run dirs, one per point")
    parser.add_argument("--fce", help="folder with fce-dev.json (BEA-2019 JSON release)")
    parser.add_argument("--jfleg", default="../shared/data/jfleg/dev")
    parser.add_argument("--blimp", default=str(ROOT.parent / "shared" / "data" / "blimp"))
    parser.add_argument("--measure", default=",".join(MEASURES), help=f"comma-separated, of {', '.join(MEASURES)}")
    parser.add_argument("--ged-sentences", type=int, default=4000, help="synthetic sentences per GED fine-tune")
    parser.add_argument("--ged-seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--ged-text", default="prose", help="synthetic_curve.py's text preset under --runs")
    parser.add_argument("--runs", default="runs", help="where the corpus/ and text/ presets live")
    parser.add_argument("--neighbours-from", default=str(ROOT / "models" / "electra-minilm" / "discriminator"),
                        help="model whose input embeddings give the word-choice errors (the shipped recipe's)")
    parser.add_argument("--binary", action="store_true", help="binary GED head (the shipped recipe trains typed)")
    parser.add_argument("--blimp-pairs-per-set", type=int, default=100,
                        help="BLiMP pairs per set scored with the masked LM's PLL (0: none)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--split-seed", type=int, default=13)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--work-dir", default="runs/compute-curve", help="fine-tunes and synthetic data")
    parser.add_argument("--out-dir", default=str(DEFAULT_OUT))
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="the point every other is compared with")
    parser.add_argument("--redo", action="store_true", help="measure again what a point's file already holds")
    parser.add_argument("--report", action="store_true", help="only write the report from points/*.json")
    parser.add_argument("--max-sentences", type=int, default=0, help=argparse.SUPPRESS)  # smoke runs
    parser.add_argument("--blimp-max-pairs", type=int, default=0, help=argparse.SUPPRESS)  # smoke runs
    args = parser.parse_args(argv)
    args.measure = [m.strip() for m in args.measure.split(",") if m.strip()]
    if unknown := set(args.measure) - set(MEASURES):
        parser.error(f"unknown --measure {', '.join(sorted(unknown))} (of {', '.join(MEASURES)})")
    out = Path(args.out_dir)
    if not args.report:
        if not args.point and not args.train and not args.zero_shot_pair:
            parser.error("give --point NAME=SOURCE, --train NAME or --zero-shot-pair (or --report)")
        points = dict(spec.split("=", 1) for spec in args.point)
        plan = load_plan() if args.train else {}
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        loaded: dict[str, dict] = {}

        def sets() -> dict[str, dict]:  # FCE and JFLEG are read (spaCy, ERRANT) only when a measurement needs them
            if not loaded:
                loaded.update(eval_sets(args))
            return loaded

        for name, source in points.items():
            measure_point(name, source, args, sets)
        for name in args.train:
            source = train_point(plan, name, Path(args.runs_dir), args.threads)
            chosen = plan["points"][name].get("measure", args.measure)
            measure_point(name, source, argparse.Namespace(**{**vars(args), "measure": chosen}), sets)
        if args.zero_shot_pair:
            first, second = (tuple(spec.split("=", 1)) for spec in args.zero_shot_pair)
            pairs = json.loads((out / PAIRS_FILE).read_text()) if (out / PAIRS_FILE).exists() else {}
            pair = zero_shot_pair(first, second, sets())
            pair["command"] = "python -m benchmarks.studies.compute_curve " + " ".join(sys.argv[1:])
            pairs[f"{first[0]} − {second[0]}"] = pair
            atomic_write_json(out / PAIRS_FILE, pairs)
    summary = write_report(out, args.baseline)
    print(json.dumps({"benchmark": "compute_curve", "points": len(summary["rows"]),
                      "electra_vs_masked_lm": len(summary["electra_vs_masked_lm"]), "out": str(out)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
