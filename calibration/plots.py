"""Reliability diagrams (matplotlib PNG) with the token count of every bin shown."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from electra_detect.calibration.metrics import ece, reliability_bins


def reliability_diagram(curves: dict[str, np.ndarray], labels: np.ndarray, path: Path, title: str,
                        n_bins: int = 15) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from electra_detect.fileio import atomic_save_figure

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6, 7), height_ratios=[3, 1], sharex=True)
    top.plot([0, 1], [0, 1], "k:", label="perfect calibration")
    width = 1.0 / n_bins
    for offset, (name, probs) in enumerate(curves.items()):
        bins = reliability_bins(probs, labels, n_bins)
        centers = (bins.edges[:-1] + bins.edges[1:]) / 2
        filled = bins.counts > 0
        top.plot(bins.mean_prob[filled], bins.frequency[filled], "o-", label=f"{name} (ECE {ece(probs, labels):.3f})")
        share = width / len(curves)  # side-by-side count bars, one per curve
        bottom.bar(centers + (offset - (len(curves) - 1) / 2) * share, bins.counts, width=share, label=name)
    top.set_ylabel("observed frequency of label 1")
    top.set_title(title)
    top.legend(loc="upper left", fontsize=8)
    bottom.set_yscale("log")
    bottom.set_ylabel("tokens per bin")
    bottom.set_xlabel("predicted probability")
    fig.tight_layout()
    return atomic_save_figure(fig, path)
