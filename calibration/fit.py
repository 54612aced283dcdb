"""Fit calibration on one split, report on the other, and store the chosen method with the model."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from electra_detect.calibration import CalibrationError
from electra_detect.calibration.data import ged_pairs, rtd_pairs
from electra_detect.calibration.metrics import all_metrics
from electra_detect.calibration.plots import reliability_diagram
from electra_detect.calibrators import METHODS, save_calibration, sigmoid
from electra_detect.detector import Detector
from electra_detect.tasks.ged.readers import GedSentence


def _halves(items: Sequence, seed: int) -> tuple[list, list]:
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    cut = len(order) // 2
    return [items[i] for i in sorted(order[:cut])], [items[i] for i in sorted(order[cut:])]


def calibrate(model: str | Path, *, texts: Sequence[str] = (), sentences: Sequence[GedSentence] = (),
              method: str = "temperature", seed: int = 0, plot: Path | None = None,
              save: bool = True) -> dict[str, Any]:
    """Texts (source ``rtd``, needs the run's ``generator/``) or GED sentences (source ``ged``)."""
    if method not in METHODS:
        raise CalibrationError(f"unknown method {method!r}; choose one of {sorted(METHODS)}")
    detector = Detector.load(model, calibrated=False)
    if texts:
        generator = Path(model) / "generator"
        if not generator.is_dir():
            raise CalibrationError(f"source rtd needs the run dir's generator/ next to discriminator/ ({model})")
        fit_part, report_part = _halves(list(texts), seed)
        fit = rtd_pairs(detector, generator, fit_part, seed)
        held = rtd_pairs(detector, generator, report_part, seed + 1)
        source = "rtd"
    elif sentences:
        fit_part, report_part = _halves(list(sentences), seed)
        fit, held = ged_pairs(detector, fit_part), ged_pairs(detector, report_part)
        source = "ged"
    else:
        raise CalibrationError("nothing to calibrate on: give texts (rtd) or GED sentences")
    report: dict[str, Any] = {"source": source, "fit_tokens": len(fit[1]), "report_tokens": len(held[1]),
                              "raw": all_metrics(sigmoid(held[0]), held[1])}
    fitted = {name: cls().fit(*fit) for name, cls in METHODS.items()}
    for name, calibrator in fitted.items():
        report[name] = {**all_metrics(calibrator.transform(held[0]), held[1]), **calibrator.to_dict()}
    report["chosen"] = method
    if plot:
        curves = {"raw": sigmoid(held[0])}  # every method, the chosen one marked
        curves.update({name + (" (chosen)" if name == method else ""): calibrator.transform(held[0])
                       for name, calibrator in fitted.items()})
        reliability_diagram(curves, held[1], plot, f"{source}: report split, {len(held[1]):,} tokens")
        report["plot"] = str(plot)
    if save:
        report["saved_to"] = str(save_calibration(detector.model_dir, fitted[method], report))
    return report
