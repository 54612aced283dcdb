"""ASR n-best reranking on the pocketsphinx lists: ELECTRA sentence score vs generator PLL vs baselines.

Every system fuses ``total = asr + lambda * lm + beta * words`` with (lambda, beta) tuned on the dev
list by WER (``electra_detect.tasks.rerank.tune_weights``) and is scored on the test list. Systems:

* ``1-best``: the recogniser's choice; ``oracle``: the best hypothesis in each list;
* ``length only``: lambda = 0, beta tuned (what the length term alone buys);
* ``ELECTRA sum`` / ``ELECTRA mean``: the Detector's sentence score (one pass per hypothesis);
* ``generator PLL``: our generator's pseudo-log-likelihood (one pass per token), the baseline;
* ``5-gram (ours)``: with ``--ngram-corpus``, a Kneser-Ney 5-gram on the pre-training text.

Seconds per utterance = LM scoring time of the test list's hypotheses / utterances, measured in
this process one scorer after the other. A paired bootstrap over test utterances gives a 95%
interval for each system's WER and for ELECTRA sum minus PLL. Prints one JSON line; writes
``result.json``, ``table.md`` and ``plot.png`` under ``--out-dir`` (default ``benchmarks/results/asr/``;
with ``--tag T``: ``asrT.json``, ``.md``, ``.png`` there instead).

    python benchmarks/asr/bench.py --model models/electra-tiny --ngram-corpus runs/text/sotu.txt runs/text/brown.txt
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from electra_detect.fileio import atomic_save_figure, atomic_write_json, atomic_write_text  # noqa: E402
from electra_detect.tasks import rerank  # noqa: E402


class Timed:
    """Wraps an LM scorer and adds up the seconds spent in it."""

    def __init__(self, scorer: rerank.LmScorer) -> None:
        self.scorer = scorer
        self.seconds = 0.0

    def __call__(self, texts):
        started = time.perf_counter()
        out = self.scorer(texts)
        self.seconds += time.perf_counter() - started
        return out


def load(path: Path) -> list[rerank.Utterance]:
    utts = list(rerank.read_nbest(path))
    if not all(u.ref for u in utts):
        raise SystemExit(f"{path}: every utterance needs a reference")
    return utts


def errors_of(items: list[rerank.Scored], lm_weight: float, length_weight: float) -> np.ndarray:
    return np.array([item.errors[rerank.choose(item, lm_weight, length_weight)] for item in items])


def bootstrap(errors: dict[str, np.ndarray], ref_words: np.ndarray, seed: int, rounds: int = 1000) -> dict:
    """95% intervals of each system's WER and of ELECTRA sum minus generator PLL, resampling utterances."""
    rng = np.random.default_rng(seed)
    samples = rng.integers(0, len(ref_words), size=(rounds, len(ref_words)))
    denominators = ref_words[samples].sum(axis=1)
    wers = {name: e[samples].sum(axis=1) / denominators for name, e in errors.items()}
    out = {name: [float(np.percentile(w, 2.5)), float(np.percentile(w, 97.5))] for name, w in wers.items()}
    if "ELECTRA sum" in wers and "generator PLL" in wers:
        diff = wers["ELECTRA sum"] - wers["generator PLL"]
        out["ELECTRA sum - generator PLL"] = [float(np.percentile(diff, 2.5)), float(np.percentile(diff, 97.5))]
    return out


def markdown(result: dict) -> str:
    lines = [f"# ASR n-best reranking ({result['test_utterances']} test utterances, pocketsphinx 10-best)", "",
             f"Model: `{result['model']}`. Weights tuned on {result['dev_utterances']} dev utterances by WER; "
             "WER on the test list. Seconds per utterance: LM scoring of the test hypotheses "
             f"({result['test_hypotheses']} in all), this process, one scorer after the other.", "",
             "| system | test WER | 95% CI | rel. change vs 1-best | dev WER | lambda | beta | s/utt | note |",
             "|---|---:|---|---:|---:|---:|---:|---:|---|"]
    for name, row in result["systems"].items():
        ci = result["bootstrap_ci"].get(name)
        lines.append(f"| {name} | {row['test_wer']:.4f} | {f'{ci[0]:.3f}–{ci[1]:.3f}' if ci else '–'} | "
                     f"{row['relative_change']:+.1%} | {row.get('dev_wer', float('nan')):.4f} | "
                     f"{row.get('lm_weight', 0):.4g} | {row.get('length_weight', 0):.4g} | "
                     f"{row['seconds_per_utterance']:.4f} | {row.get('note', '')} |")
    diff = result["bootstrap_ci"].get("ELECTRA sum - generator PLL")
    if diff:
        lines += ["", f"Paired bootstrap, ELECTRA sum minus generator PLL test WER: 95% CI "
                      f"[{diff[0]:+.4f}, {diff[1]:+.4f}]."]
    if result.get("speedup_vs_pll"):
        speed = result["speedup_vs_pll"]
        lines += ["", f"PLL seconds per utterance / ELECTRA seconds per utterance: **{speed:.1f}×**."]
    if result.get("by_noise"):
        lines += ["", "## Test WER by noise level (ELECTRA sum weights)", "",
                  "| SNR | utterances | 1-best | ELECTRA sum | oracle |", "|---|---:|---:|---:|---:|"]
        for snr, row in result["by_noise"].items():
            lines.append(f"| {snr} | {row['utterances']} | {row['1-best']:.4f} | {row['ELECTRA sum']:.4f} | "
                         f"{row['oracle']:.4f} |")
    return "\n".join(lines) + "\n"


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["systems"])
    wers = [result["systems"][n]["test_wer"] for n in names]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar(range(len(names)), wers, color=["#888" if n in ("1-best", "oracle") else "#3a7" for n in names])
    for i, (name, wer) in enumerate(zip(names, wers, strict=True)):
        ci = result["bootstrap_ci"].get(name)
        if ci:
            ax.plot([i, i], ci, color="black", lw=1)
        ax.text(i, wer, f"{wer:.3f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(names)), names, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("test WER")
    ax.set_title(f"pocketsphinx 10-best reranking: {result['model']}")
    fig.tight_layout()
    atomic_save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="run dir (discriminator/ and generator/)")
    ap.add_argument("--dev", default=str(HERE / "data" / "dev.json"))
    ap.add_argument("--test", default=str(HERE / "data" / "test.json"))
    ap.add_argument("--manifest", default=str(HERE / "data" / "manifest.json"), help="for WER by noise level")
    ap.add_argument("--ngram-corpus", nargs="*", default=None, help="also rerank with a 5-gram trained on these files")
    ap.add_argument("--no-pll", action="store_true")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0,
                    help="torch CPU threads (0 = torch's default; 1 is much faster on an oversubscribed CPU)")
    ap.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results" / "asr"))
    ap.add_argument("--tag", default="", help="write asr{tag}.json/.md/.png instead of result.json/table.md/plot.png")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    from electra_detect.detector import Detector

    dev, test = load(Path(args.dev)), load(Path(args.test))
    detector = Detector.load(args.model)
    scorers: dict[str, tuple[rerank.LmScorer, str]] = {
        "ELECTRA sum": (rerank.detector_scorer(detector, "sum", args.batch_size), "one discriminator pass per hyp"),
        "ELECTRA mean": (rerank.detector_scorer(detector, "mean", args.batch_size), "same pass, mean over tokens"),
    }
    if not args.no_pll:
        from electra_detect.tasks.pll import GeneratorScorer

        scorers["generator PLL"] = (rerank.pll_scorer(GeneratorScorer.load(args.model), args.batch_size),
                                    "one generator pass per token")
    if args.ngram_corpus is not None:
        from ngram import KneserNeyLM, corpus_sentences

        lm = KneserNeyLM(5).fit(corpus_sentences(args.ngram_corpus))
        scorers["5-gram (ours)"] = (lambda texts: [lm.sentence_logprob(t) for t in texts],
                                    f"Kneser-Ney, {lm.tokens:,} training tokens")

    # Features: the recogniser's and the length terms are the same for every scorer.
    zero = rerank.score_utterances(test, lambda texts: [0.0] * len(texts))
    zero_dev = rerank.score_utterances(dev, lambda texts: [0.0] * len(texts))
    ref_words = np.array([item.ref_words for item in zero], dtype=float)
    total_words = ref_words.sum()
    before = float(np.sum([item.errors[0] for item in zero]) / total_words)
    oracle = float(np.sum([item.errors.min() for item in zero]) / total_words)
    errors: dict[str, np.ndarray] = {"1-best": np.array([item.errors[0] for item in zero]),
                                     "oracle": np.array([item.errors.min() for item in zero])}
    tuned = rerank.tune_weights(zero_dev, lm_grid=[0.0])
    systems: dict[str, dict] = {"1-best": {"test_wer": before, "dev_wer": tuned["dev_wer_before"],
                                           "seconds_per_utterance": 0.0, "note": "recogniser's choice"}}
    errors["length only"] = errors_of(zero, 0.0, tuned["length_weight"])
    systems["length only"] = {"test_wer": float(errors["length only"].sum() / total_words), "dev_wer":
                              tuned["dev_wer_after"], "lm_weight": 0.0, "length_weight": tuned["length_weight"],
                              "seconds_per_utterance": 0.0, "note": "beta tuned, no LM"}
    weights: dict[str, tuple[float, float]] = {}
    for name, (scorer, note) in scorers.items():
        timed = Timed(scorer)
        dev_items = rerank.score_utterances(dev, scorer)
        test_items = rerank.score_utterances(test, timed)
        tuned = rerank.tune_weights(dev_items)
        weights[name] = (tuned["lm_weight"], tuned["length_weight"])
        errors[name] = errors_of(test_items, *weights[name])
        systems[name] = {"test_wer": float(errors[name].sum() / total_words), "dev_wer": tuned["dev_wer_after"],
                         "lm_weight": tuned["lm_weight"], "length_weight": tuned["length_weight"],
                         "seconds_per_utterance": timed.seconds / len(test), "note": note}
        if name == "ELECTRA sum":
            electra_items = test_items
        print(json.dumps({"system": name, **{k: v for k, v in systems[name].items() if k != "note"}}),
              file=sys.stderr)
    systems["oracle"] = {"test_wer": oracle, "dev_wer": rerank.tune_weights(zero_dev, [0.0], [0.0])["dev_wer_oracle"],
                         "seconds_per_utterance": 0.0, "note": "best hypothesis in each list"}
    for row in systems.values():
        row["relative_change"] = (row["test_wer"] - before) / before if before else 0.0

    by_noise: dict[str, dict] = {}
    manifest_path = Path(args.manifest)
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))["utterances"]
        chosen = errors_of(electra_items, *weights["ELECTRA sum"])
        for snr in sorted({str(manifest[u.id]["snr_db"]) for u in test if u.id in manifest}):
            mask = np.array([str(manifest.get(u.id, {}).get("snr_db")) == snr for u in test])
            words = ref_words[mask].sum()
            by_noise["clean" if snr == "clean" else f"{snr} dB"] = {
                "utterances": int(mask.sum()), "1-best": float(errors["1-best"][mask].sum() / words),
                "ELECTRA sum": float(chosen[mask].sum() / words), "oracle": float(errors["oracle"][mask].sum() / words)}

    speedup = None
    if "generator PLL" in systems:
        speedup = systems["generator PLL"]["seconds_per_utterance"] / systems["ELECTRA sum"]["seconds_per_utterance"]
    result = {"model": args.model, "dev": args.dev, "test": args.test, "dev_utterances": len(dev),
              "test_utterances": len(test), "test_hypotheses": sum(len(u.hyps) for u in test),
              "test_ref_words": int(total_words), "systems": systems,
              "bootstrap_ci": bootstrap(errors, ref_words, args.seed), "speedup_vs_pll": speedup,
              "by_noise": by_noise}
    out = Path(args.out_dir)
    stem = f"asr{args.tag}"  # a tagged run sits beside the untagged one in the same folder
    json_path, md_path, png_path = ((out / "result.json", out / "table.md", out / "plot.png") if not args.tag else
                                    (out / f"{stem}.json", out / f"{stem}.md", out / f"{stem}.png"))
    atomic_write_json(json_path, result)
    atomic_write_text(md_path, markdown(result))
    if not args.no_plot:
        plot(result, png_path)
    electra = systems["ELECTRA sum"]
    line = {"model": args.model, "wer_before": round(before, 4), "wer_after": round(electra["test_wer"], 4),
            "wer_oracle": round(oracle, 4), "relative_reduction": round(-electra["relative_change"], 4),
            **({"wer_pll": round(systems["generator PLL"]["test_wer"], 4),
                "speedup_vs_pll": round(speedup, 2)} if speedup else {}),
            "electra_seconds_per_utterance": round(electra["seconds_per_utterance"], 5),
            "json": str(json_path)}
    print(json.dumps(line))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
