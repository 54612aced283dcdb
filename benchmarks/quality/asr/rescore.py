"""ASR n-best rescoring and word confidence, per noise condition, on lists made by ``make_lists.py --every-snr``.

Every sentence is decoded clean and at each SNR (ids ``dev-0007-clean``, ``test-0123-20.0``), so the conditions are
reported separately on the same sentences. A system is ``total = asr + sum_f w_f * feature_f`` over the hypotheses
of a list (the top total is chosen); its weights are tuned on the whole dev list (all conditions: a deployed
recogniser does not know its SNR) by coordinate search over log-spaced grids, and judged on dev by 5-fold
cross-validation (tuned on four folds of sentences, WER on the fifth) before the test list is touched.

Features of a hypothesis: ``words``; the Detector's ``ELECTRA sum`` (sum of log(1 - p) over tokens), ``mean``
(over tokens) and ``per-word`` (sum over words of log(1 - p_word), p_word the word's highest p); ``generator
PLL`` (one masked pass per token, Salazar et al. 2020) with ``--pll``; a Kneser-Ney 5-gram with
``--ngram-corpus``; ``ASR/words`` replaces the recogniser's score by its per-word mean. ``--also NAME=DIR`` adds
another detector (an ASR-aware fine-tune) with the same three forms, in the same run; ``--reranker NAME=DIR``
adds a ``rerank train`` directory, used with its learned weights as they are (not tuned on dev: its dev CV WER is
its dev WER; refitted on dev with ``rerank train --refit-on``, its dev figure is in-sample and the weights it had
before the refit are a system of their own), and combined with PLL when ``--pll`` is given. ``pooled`` is every
feature the list-wise reranker pools (sum, mean, min of log(1 - p), expected and counted wrong tokens, words) with
weights tuned on dev.

Per condition: test WER with a paired bootstrap (resampling sentences) of each system minus 1-best and minus PLL.
Word confidence on each condition's test 1-best: p(wrong) of each word (``word_confidence``) against the
word's alignment with the reference (``hypothesis_word_errors``): ROC AUC, and normalised cross-entropy
after a Platt map fitted on the dev 1-best (raw p(replaced) is not a probability of an ASR error); the
recogniser's own word posteriors (pocketsphinx lattice) the same way.

    python -m benchmarks.quality.asr.rescore --lists runs/asr-lists --model runs/warm-electra [--also NAME=DIR ...] \
        [--reranker NAME=DIR ...] [--pll [--pll-model RUN]] [--ngram-corpus F ...]

Writes result.json, table.md and plot.png to ``--out-dir`` (default benchmarks/results/asr_rescore/).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common.run import command_line
from electra_detect.fileio import atomic_save_figure, atomic_write_json, atomic_write_text
from electra_detect.tasks.rerank.fusion import pll_scorer, word_confidence, word_count
from electra_detect.tasks.rerank.listwise import FEATURES, Reranker, pooled_features
from electra_detect.tasks.rerank.nbest import Utterance, read_nbest
from electra_detect.tasks.rerank.wer import hypothesis_word_errors, word_errors

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


WEIGHT_GRID = np.concatenate([[0.0], np.logspace(-3, 3, 37), -np.logspace(-2, 3, 16)])
FOLDS = 5


# ------------------------------------------------------------------------------------------------ data

def load_lists(folder: Path) -> dict[str, Any]:
    """The dev and test lists (raw JSON, for the 1-best's word posteriors) and each utterance's condition."""
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))["utterances"]
    out: dict[str, Any] = {}
    for split in ("dev", "test"):
        raw = json.loads((folder / f"{split}.json").read_text(encoding="utf-8"))
        utts = list(read_nbest(folder / f"{split}.json"))
        out[split] = {"utts": utts, "raw": raw, "condition": [str(manifest[u.id]["snr_db"]) for u in utts],
                      "sentence": [u.id.rsplit("-", 1)[0] for u in utts]}
    return out


def padded(utts: list[Utterance], values: list[list[float]], fill: float) -> np.ndarray:
    """Per-hypothesis values as [utterances, widest list], padded with ``fill``."""
    width = max(len(u.hyps) for u in utts)
    out = np.full((len(utts), width), fill)
    for row, vals in enumerate(values):
        out[row, :len(vals)] = vals
    return out


def split_by_utterance(utts: list[Utterance], flat: list[float]) -> list[list[float]]:
    rows, start = [], 0
    for u in utts:
        rows.append(list(flat[start:start + len(u.hyps)]))
        start += len(u.hyps)
    return rows


# ------------------------------------------------------------------------------------------------ systems

def cached_scores_path(cache_dir: str, name: str, model: str, texts: list[str]) -> Path | None:
    """Where a slow scorer's scores of ``texts`` are kept: keyed by its name, the model's weights and the texts."""
    if not cache_dir or name != "generator PLL":  # the 5-gram is fitted in seconds; only PLL is worth keeping
        return None
    weights = sorted((Path(model) / "generator").glob("*.safetensors"))
    stamp = [f"{w.resolve()}:{w.stat().st_size}:{w.stat().st_mtime_ns}" for w in weights]
    key = hashlib.sha1(json.dumps([name, stamp, texts]).encode()).hexdigest()
    return Path(cache_dir) / f"{key}.json"


def pairs(specs: list[str], flag: str) -> list[tuple[str, str]]:
    out = []
    for spec in specs:
        name, _, path = spec.partition("=")
        if not name or not path:
            raise SystemExit(f"error: {flag} wants NAME=DIR, got {spec!r}")
        out.append((name, path))
    return out


def choose(asr: np.ndarray, features: list[np.ndarray], weights: list[float]) -> np.ndarray:
    """Index of the top total in each list: [utterances]."""
    total = asr.copy()
    for feature, weight in zip(features, weights, strict=True):
        total = total + weight * feature
    return np.argmax(total, axis=1)


def corpus_wer(errors: np.ndarray, ref_words: np.ndarray, chosen: np.ndarray, rows: np.ndarray) -> float:
    return float(errors[rows, chosen[rows]].sum() / ref_words[rows].sum())


def tune(asr: np.ndarray, features: list[np.ndarray], errors: np.ndarray, ref_words: np.ndarray,
         rows: np.ndarray, rounds: int = 3) -> list[float]:
    """Coordinate search: each weight in turn over WEIGHT_GRID, the others held; ties keep the smaller |w|."""
    weights = [0.0] * len(features)
    sub_asr, sub_features, sub_errors = asr[rows], [f[rows] for f in features], errors[rows]
    words = ref_words[rows].sum()
    for _ in range(rounds if len(features) > 1 else 1):
        for index in range(len(features)):
            best = None
            for value in WEIGHT_GRID:
                trial = [*weights[:index], value, *weights[index + 1:]]
                chosen = choose(sub_asr, sub_features, trial)
                key = (float(sub_errors[np.arange(len(rows)), chosen].sum() / words), abs(value))
                if best is None or key < best[0]:
                    best = (key, value)
            weights[index] = float(best[1])
    return weights


def cv_wer(asr: np.ndarray, features: list[np.ndarray], errors: np.ndarray, ref_words: np.ndarray,
           sentences: list[str], seed: int) -> float:
    """Dev WER of the tuning procedure on held-out folds of sentences (all conditions of a sentence together)."""
    names = sorted(set(sentences))
    fold_of = dict(zip(np.random.default_rng(seed).permutation(names), np.arange(len(names)) % FOLDS, strict=True))
    folds = np.array([fold_of[s] for s in sentences])
    wrong = words = 0.0
    for fold in range(FOLDS):
        train, held = np.where(folds != fold)[0], np.where(folds == fold)[0]
        chosen = choose(asr[held], [f[held] for f in features], tune(asr, features, errors, ref_words, train))
        wrong += errors[held, chosen].sum()
        words += ref_words[held].sum()
    return float(wrong / words)


def paired_interval(a: np.ndarray, b: np.ndarray, ref_words: np.ndarray, groups: list[str], seed: int,
                    rounds: int = 2000) -> list[float]:
    """95% interval of WER(a) - WER(b) (per-utterance errors of two systems), resampling sentences."""
    names = sorted(set(groups))
    index = {name: i for i, name in enumerate(names)}
    group = np.array([index[g] for g in groups])
    per = lambda values: np.bincount(group, weights=values, minlength=len(names))  # noqa: E731
    diff, words = per(a - b), per(ref_words)
    samples = np.random.default_rng(seed).integers(0, len(names), size=(rounds, len(names)))
    stats = diff[samples].sum(axis=1) / words[samples].sum(axis=1)
    return [float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))]


# ------------------------------------------------------------------------------------------------ confidence

def confidence_metrics(p_wrong_dev: np.ndarray, wrong_dev: np.ndarray, p_wrong: np.ndarray, wrong: np.ndarray
                       ) -> dict[str, float]:
    """ROC AUC of p(wrong) for wrong words, and NCE of p(correct) after a Platt map fitted on dev. With several
    sources (columns: [words, sources]) one logistic regression on their logits, fitted on dev, combines them;
    the AUC is then the combination's."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    def logit(p: np.ndarray) -> np.ndarray:
        p = np.clip(p, 1e-6, 1 - 1e-6)
        return np.log(p / (1 - p)).reshape(len(p), -1)

    platt = LogisticRegression().fit(logit(p_wrong_dev), wrong_dev)
    p_mapped = platt.predict_proba(logit(p_wrong))[:, 1]
    p_correct = np.clip(1 - p_mapped, 1e-6, 1 - 1e-6)
    correct = 1 - wrong
    rate = correct.mean()
    base = -(rate * np.log2(rate) + (1 - rate) * np.log2(1 - rate))
    model = -np.mean(correct * np.log2(p_correct) + wrong * np.log2(1 - p_correct))
    ranked = p_wrong if p_wrong.ndim == 1 else p_mapped
    return {"auc": float(roc_auc_score(wrong, ranked)), "nce": float((base - model) / base),
            "words": int(len(wrong)), "error_rate": float(wrong.mean())}


def word_labels(utts: list[Utterance], raw: dict, detectors: dict[str, Any]) -> dict[str, list]:
    """Per word of each 1-best: wrong (1/0), each detector's p(wrong), the recogniser's 1 - posterior; words
    without a label (punctuation) or without a posterior are left out of all."""
    texts = [u.hyps[0].text for u in utts]
    scored = {label: detector.score(texts) for label, detector in detectors.items()}
    rows: dict[str, list] = {"wrong": [], "recogniser": [], **{label: [] for label in detectors}}
    for index, utt in enumerate(utts):
        labels = hypothesis_word_errors(utt.ref, utt.hyps[0].text) if utt.hyps[0].text.strip() else []
        posteriors = raw[utt.id]["hyp_1"].get("word_posteriors")
        if posteriors is None or len(posteriors) != len(labels):
            continue
        ours = {label: word_confidence(results[index]) for label, results in scored.items()}
        for position, (label, posterior) in enumerate(zip(labels, posteriors, strict=True)):
            if label is None:
                continue
            rows["wrong"].append(label)
            rows["recogniser"].append(1.0 - posterior)
            for name, words in ours.items():
                rows[name].append(words[position]["p_wrong"])
    return rows


# ------------------------------------------------------------------------------------------------ main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lists", required=True, help="folder with dev.json, test.json and manifest.json")
    ap.add_argument("--model", required=True, help="run dir (discriminator/, and generator/ for --pll)")
    ap.add_argument("--also", action="append", default=[], metavar="NAME=DIR",
                    help="another detector (e.g. an ASR-aware fine-tune) scored the same way, beside --model")
    ap.add_argument("--reranker", action="append", default=[], metavar="NAME=DIR",
                    help="a `rerank train` directory, used with its learned weights (and its words' confidence)")
    ap.add_argument("--pll", action="store_true", help="also the generator's PLL (slow: one pass per token)")
    ap.add_argument("--pll-model", help="run dir whose generator gives PLL (default: --model)")
    ap.add_argument("--ngram-corpus", nargs="*", default=None)
    ap.add_argument("--score-cache", default=str(ROOT / "runs" / "rescore-cache"),
                    help="PLL scores are kept here (keyed by model and texts), so a later run with other systems "
                         "reuses them ('' = none)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results" / "asr_rescore"))
    args = ap.parse_args()

    from electra_detect.detector import Detector

    data = load_lists(Path(args.lists))
    detectors = {"ELECTRA": Detector.load(args.model, engine="auto")}
    for name, path in pairs(args.also, "--also"):
        detectors[name] = Detector.load(path, engine="auto")
    rerankers: dict[str, Reranker] = {}
    for name, path in pairs(args.reranker, "--reranker"):
        detectors[name] = Detector.load(path, engine="auto")
        reranker = Reranker.load(detectors[name].model_dir)
        if reranker is None:
            raise SystemExit(f"error: {path} holds no reranker.json: make it with `electra-detect rerank train`")
        rerankers[name] = reranker
    for name, detector in detectors.items():
        print(f"{name}: {detector.describe()}", file=sys.stderr)

    # Phase 1: features of every hypothesis (one Detector pass; PLL and the 5-gram when asked), timed on test.
    scorers: dict[str, Any] = {}
    if args.pll:
        from electra_detect.tasks.pll import GeneratorScorer

        scorers["generator PLL"] = pll_scorer(GeneratorScorer.load(args.pll_model or args.model), args.batch_size)
    if args.ngram_corpus is not None:
        from benchmarks.common.ngram import KneserNeyLM, corpus_sentences

        ngram = KneserNeyLM(5).fit(corpus_sentences(args.ngram_corpus))
        scorers["5-gram"] = lambda texts: [ngram.sentence_logprob(t) for t in texts]
    seconds: dict[str, float] = {}
    from_cache: set[str] = set()  # scorers whose scores (and timing) came from --score-cache: not this process's
    for split, part in data.items():
        utts = part["utts"]
        texts = [h.text for u in utts for h in u.hyps]
        flat = {"words": [float(word_count(t)) for t in texts]}
        for label, detector in detectors.items():
            started = time.perf_counter()
            results = detector.score(texts, batch_size=args.batch_size)
            if split == "test":
                seconds[label] = (time.perf_counter() - started) / len(utts)
            flat[f"{label} sum"] = [r.sentence_sum for r in results]
            flat[f"{label} mean"] = [r.sentence_mean for r in results]
            flat[f"{label} per-word"] = [float(np.sum(np.log1p(-np.clip([w.score for w in r.words], 0, 1 - 1e-7))))
                                         for r in results]
            pooled = np.array([pooled_features(np.array([token.p_replaced for token in r.tokens]), word_count(text))
                               for r, text in zip(results, texts, strict=True)]).reshape(len(texts), len(FEATURES))
            for column, feature in enumerate(FEATURES):
                if feature not in ("words", "sum", "mean"):
                    flat[f"{label} {feature}"] = list(pooled[:, column])
            if label in rerankers:  # the learned total (without the recogniser's score), from the same pass
                flat[f"{label} learned"] = list(pooled @ rerankers[label].vector)
                trained = rerankers[label].training.get("weights_trained")  # before --refit-on, when refitted
                if trained:
                    flat[f"{label} trained"] = list(pooled @ Reranker(trained).vector)
        for name, scorer in scorers.items():
            cache = cached_scores_path(args.score_cache, name, args.pll_model or args.model, texts)
            if cache and cache.exists():
                stored = json.loads(cache.read_text())
                flat[name], per_utterance = stored["scores"], stored["seconds_per_utterance"]
                from_cache.add(name)
            else:
                started = time.perf_counter()
                flat[name] = list(scorer(texts))
                per_utterance = (time.perf_counter() - started) / len(utts)
                if cache:
                    atomic_write_json(cache, {"scores": flat[name], "seconds_per_utterance": per_utterance})
            if split == "test":
                seconds[name] = per_utterance
            print(json.dumps({"scored": name, "split": split, "hypotheses": len(texts)}), file=sys.stderr)
        errors, ref_words = [], []
        for u in utts:
            e, n = word_errors(u.ref, [h.text for h in u.hyps])
            errors.append(list(e))
            ref_words.append(n)
        part["features"] = {name: padded(utts, split_by_utterance(utts, values), 0.0) for name, values in flat.items()}
        part["asr"] = padded(utts, [[h.asr_score for h in u.hyps] for u in utts], -np.inf)
        words = np.maximum(part["features"]["words"], 1.0)
        part["asr/words"] = np.where(np.isfinite(part["asr"]), part["asr"] / words, -np.inf)
        part["errors"] = padded(utts, errors, np.inf)
        part["ref_words"] = np.array(ref_words, dtype=float)

    # Phase 2: systems, tuned on all of dev, judged by dev cross-validation, then measured on test.
    systems: dict[str, tuple[str, list[str]]] = {"1-best": ("asr", []), "length only": ("asr", ["words"])}
    fixed: dict[str, list[float]] = {}  # systems whose weights were learned elsewhere: used as they are
    for label in detectors:
        if label in rerankers:
            systems[f"{label} (learned weights)"] = ("asr", [f"{label} learned"])
            fixed[f"{label} (learned weights)"] = [1.0]
            if rerankers[label].training.get("weights_trained"):  # learned weights refitted on dev: dev is in-sample
                systems[f"{label} (trained weights, before the refit)"] = ("asr", [f"{label} trained"])
                fixed[f"{label} (trained weights, before the refit)"] = [1.0]
            for name in scorers:
                systems[f"{label} + {name}"] = ("asr", [f"{label} learned", name, "words"])
            for other in detectors:  # beside a token-level detector's mean (the recogniser-error fine-tune)
                if other not in rerankers and other != "ELECTRA":
                    systems[f"{label} + {other} mean"] = ("asr", [f"{label} learned", f"{other} mean", "words"])
        for form in ("sum", "mean", "per-word"):
            systems[f"{label} {form}"] = ("asr", [f"{label} {form}", "words"])
    systems["ELECTRA pooled"] = ("asr", ["words", *(f"ELECTRA {f}" for f in FEATURES if f != "words")])
    systems["ELECTRA sum, ASR/words"] = ("asr/words", ["ELECTRA sum", "words"])
    for name in scorers:
        systems[name] = ("asr", [name, "words"])
        systems[f"ELECTRA sum + {name}"] = ("asr", ["ELECTRA sum", name, "words"])
    dev, test = data["dev"], data["test"]
    rows_dev = np.arange(len(dev["utts"]))
    conditions = sorted(set(test["condition"]), key=lambda c: (c != "clean", -float(c) if c != "clean" else 0))
    report: dict[str, Any] = {}
    chosen_errors: dict[str, np.ndarray] = {}
    for name, (asr_form, features) in systems.items():
        dev_f, test_f = [dev["features"][f] for f in features], [test["features"][f] for f in features]
        if name == "1-best":
            weights, cv = [], corpus_wer(dev["errors"], dev["ref_words"], np.zeros(len(rows_dev), int), rows_dev)
        elif name in fixed:
            weights = fixed[name]
            cv = corpus_wer(dev["errors"], dev["ref_words"], choose(dev[asr_form], dev_f, weights), rows_dev)
        else:
            weights = tune(dev[asr_form], dev_f, dev["errors"], dev["ref_words"], rows_dev)
            cv = cv_wer(dev[asr_form], dev_f, dev["errors"], dev["ref_words"], dev["sentence"], args.seed)
        chosen = np.zeros(len(test["utts"]), int) if name == "1-best" else choose(test[asr_form], test_f, weights)
        chosen_errors[name] = test["errors"][np.arange(len(chosen)), chosen]
        report[name] = {"features": features, "asr": asr_form, "weights": dict(zip(features, weights, strict=True)),
                        "dev_cv_wer": cv}
        print(json.dumps({"system": name, "dev_cv_wer": round(cv, 4), "weights": weights}), file=sys.stderr)
    oracle = test["errors"].min(axis=1)
    by_condition: dict[str, Any] = {}
    for condition in conditions:
        mask = np.array([c == condition for c in test["condition"]])
        groups = [s for s, m in zip(test["sentence"], mask, strict=True) if m]
        words = test["ref_words"][mask]
        base = chosen_errors["1-best"][mask]
        rows = {}
        for name in systems:
            errs = chosen_errors[name][mask]
            wer = float(errs.sum() / words.sum())
            row = {"wer": wer, "relative_to_1best": wer / float(base.sum() / words.sum()) - 1}
            if name != "1-best":
                row["vs_1best_ci"] = paired_interval(errs, base, words, groups, args.seed)
            if "generator PLL" in chosen_errors and name not in ("1-best", "generator PLL"):
                row["vs_pll_ci"] = paired_interval(errs, chosen_errors["generator PLL"][mask], words, groups, args.seed)
            rows[name] = row
        by_condition[condition] = {"utterances": int(mask.sum()), "ref_words": int(words.sum()),
                                   "oracle_wer": float(oracle[mask].sum() / words.sum()), "systems": rows}

    # Phase 3: word confidence on each condition's 1-best (Platt maps fitted on the same condition's dev 1-best).
    confidence: dict[str, Any] = {}
    for condition in conditions:
        picked = {}
        for split in ("dev", "test"):
            part = data[split]
            utts = [u for u, c in zip(part["utts"], part["condition"], strict=True) if c == condition]
            picked[split] = {k: np.array(v) for k, v in word_labels(utts, part["raw"], detectors).items()}
        confidence[condition] = {
            source: confidence_metrics(picked["dev"][source], picked["dev"]["wrong"], picked["test"][source],
                                       picked["test"]["wrong"]) for source in [*detectors, "recogniser"]}
        for label in detectors:  # the detector beside the recogniser's posterior: what a deployment would use
            both = {split: np.stack([picked[split][label], picked[split]["recogniser"]], axis=1)
                    for split in ("dev", "test")}
            confidence[condition][f"{label} + recogniser"] = confidence_metrics(
                both["dev"], picked["dev"]["wrong"], both["test"], picked["test"]["wrong"])

    trained_on = {name: reranker.training.get("train_lists") for name, reranker in rerankers.items()}
    result = {"benchmark": "asr_rescore", "model": args.model, "also": args.also, "rerankers": args.reranker,
              "reranker_train_lists": trained_on,
              "pll_model": args.pll_model or (args.model if args.pll else None),
              "engine": detectors["ELECTRA"].describe().splitlines()[0],
              "lists": args.lists, "dev_utterances": len(dev["utts"]), "test_utterances": len(test["utts"]),
              "systems": report, "by_condition": by_condition, "confidence": confidence,
              "seconds_per_utterance": seconds, "timed_in_an_earlier_run": sorted(from_cache),
              "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
              "command": command_line()}
    out = Path(args.out_dir)
    atomic_write_json(out / "result.json", result)
    atomic_write_text(out / "table.md", markdown(result))
    plot(result, out / "plot.png")
    if len([n for n in trained_on.values() if n]) > 1:
        curve_plot(result, out / "curve.png")
    clean = by_condition.get("clean", {}).get("systems", {}).get("ELECTRA sum", {})
    print(json.dumps({"benchmark": "asr_rescore", "clean_electra_relative": clean.get("relative_to_1best"),
                      "clean_confidence_auc": confidence.get("clean", {}).get("ELECTRA", {}).get("auc")}))
    return 0


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# ASR n-best rescoring and word confidence, by condition: `{result['model']}`", "",
             f"Command: `{result['command']}` ({result['date']}); {result['engine']}. {result['dev_utterances']} dev "
             f"and {result['test_utterances']} test utterances (every sentence in every condition). Weights tuned on "
             "all of dev; *dev CV* is the WER of that tuning on held-out fifths of the dev sentences. Intervals: "
             "95% paired bootstrap over sentences of the system's test WER minus 1-best's (and minus PLL's).", "",
             "| system | dev CV WER | weights |", "|---|---:|---|"]
    for name, row in result["systems"].items():
        weights = ", ".join(f"{k} {v:.3g}" for k, v in row["weights"].items()) or "–"
        lines.append(f"| {name} | {row['dev_cv_wer']:.4f} | {row['asr']}; {weights} |")
    for condition, block in result["by_condition"].items():
        title = "clean speech" if condition == "clean" else f"{condition} dB SNR (white noise)"
        lines += ["", f"## Test, {title}: {block['utterances']} utterances, {block['ref_words']:,} words, "
                      f"oracle WER {block['oracle_wer']:.4f}", "",
                  "| system | WER | vs 1-best | 95% CI of Δ vs 1-best | 95% CI of Δ vs PLL |",
                  "|---|---:|---:|---|---|"]
        for name, row in block["systems"].items():
            ci = row.get("vs_1best_ci")
            pll = row.get("vs_pll_ci")
            lines.append(f"| {name} | {row['wer']:.4f} | {row['relative_to_1best']:+.1%} | "
                         f"{f'[{ci[0]:+.4f}, {ci[1]:+.4f}]' if ci else '–'} | "
                         f"{f'[{pll[0]:+.4f}, {pll[1]:+.4f}]' if pll else '–'} |")
    lines += ["", "## Word confidence of the test 1-best", "",
              "AUC: how well p(wrong) ranks wrong words above right ones; NCE: normalised cross-entropy of "
              "p(correct) after a Platt map fitted on the same condition's dev 1-best (0 = no better than the "
              "error rate, higher is better).", "",
              "| condition | words | error rate | source | AUC | NCE |", "|---|---:|---:|---|---:|---:|"]
    for condition, block in result["confidence"].items():
        for source, row in block.items():
            lines.append(f"| {condition} | {row['words']:,} | {row['error_rate']:.3f} | {source} | {row['auc']:.3f} | "
                         f"{row['nce']:.3f} |")
    speed, earlier = result["seconds_per_utterance"], result.get("timed_in_an_earlier_run", [])
    if earlier:  # a ratio across two runs on a shared machine is no measurement: the times only, marked
        lines += ["", "Scoring seconds per test utterance: " + ", ".join(
            f"{k} {v:.4f}" + (" (timed in the earlier run that filled --score-cache)" if k in earlier else "")
            for k, v in speed.items()) + "; speed ratios: benchmarks/quality/asr/speed.py (side by side).", ""]
        return "\n".join(lines)
    lines += ["", "Scoring seconds per test utterance (this process): " +
              ", ".join(f"{k} {v:.4f}" for k, v in speed.items()) +
              (f"; PLL / ELECTRA = **{speed['generator PLL'] / speed['ELECTRA']:.1f}×**." if "generator PLL" in speed
               else "."), ""]
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    conditions = list(result["by_condition"])
    names = [n for n in result["systems"] if n != "1-best"]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / max(len(conditions), 1)
    for i, condition in enumerate(conditions):
        rows = result["by_condition"][condition]["systems"]
        values = [100 * rows[n]["relative_to_1best"] for n in names]
        ax.barh(np.arange(len(names)) + i * width, values, height=width, label=condition)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(np.arange(len(names)) + width * (len(conditions) - 1) / 2, names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("test WER change vs the recogniser's 1-best (%)")
    ax.legend(title="condition")
    fig.tight_layout()
    atomic_save_figure(fig, path)


def curve_plot(result: dict[str, Any], path: Path) -> None:
    """Test WER change of each reranker (learned weights) against the number of lists it was trained on, with the
    95% paired-bootstrap interval of the change (relative to the 1-best's WER)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = sorted((n, name) for name, n in result["reranker_train_lists"].items() if n)
    fig, ax = plt.subplots(figsize=(6, 4))
    for condition, block in result["by_condition"].items():
        base = block["systems"]["1-best"]["wer"]
        rows = [block["systems"][f"{name} (learned weights)"] for _, name in points]
        values = np.array([100 * r["relative_to_1best"] for r in rows])
        low = np.array([100 * r["vs_1best_ci"][0] / base for r in rows])
        high = np.array([100 * r["vs_1best_ci"][1] / base for r in rows])
        ax.errorbar([n for n, _ in points], values, yerr=[values - low, high - values], marker="o", capsize=3,
                    label=str(condition))
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("training lists (rerank train)")
    ax.set_ylabel("test WER change vs 1-best (%)")
    ax.legend(title="condition")
    fig.tight_layout()
    atomic_save_figure(fig, path)


if __name__ == "__main__":
    sys.exit(main())
