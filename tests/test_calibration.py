"""Calibration metrics against hand computation; temperature scaling recovers a known temperature."""

from __future__ import annotations

import numpy as np
import pytest

from electra_detect.calibration.metrics import all_metrics, brier, ece, mce, nll, reliability_bins
from electra_detect.calibrators import IsotonicCalibration, PlattScaling, TemperatureScaling, from_dict, sigmoid


def test_ece_by_hand() -> None:
    probs = np.array([0.05, 0.15, 0.85, 0.95, 0.9, 0.1])
    labels = np.array([0, 1, 1, 1, 0, 0])
    # 2 bins [0, .5) and [.5, 1]: low bin mean p = 0.1, freq 1/3; high bin mean p = 0.9, freq 2/3
    expected = 0.5 * abs(0.1 - 1 / 3) + 0.5 * abs(0.9 - 2 / 3)
    assert ece(probs, labels, n_bins=2) == pytest.approx(expected)
    assert mce(probs, labels, n_bins=2) == pytest.approx(max(abs(0.1 - 1 / 3), abs(0.9 - 2 / 3)))
    assert brier(probs, labels) == pytest.approx(np.mean((probs - labels) ** 2))
    assert nll(np.array([0.5]), np.array([1])) == pytest.approx(np.log(2))
    bins = reliability_bins(probs, labels, n_bins=2)
    assert bins.counts.tolist() == [3, 3]


def test_adaptive_bins_hold_equal_counts_and_perfect_calibration_scores_zero() -> None:
    rng = np.random.default_rng(0)
    p = rng.uniform(size=200_000)
    y = rng.uniform(size=p.size) < p  # calibrated by construction
    assert ece(p, y) < 0.01 and ece(p, y, adaptive=True) < 0.01
    counts = reliability_bins(p, y, n_bins=10, adaptive=True).counts
    assert counts.min() >= 0.99 * counts.max()
    with pytest.raises(ValueError, match="same length"):
        ece(p[:3], y[:2])


def test_temperature_fit_recovers_a_known_temperature() -> None:
    rng = np.random.default_rng(1)
    true_logits = rng.normal(0, 2, size=100_000)
    labels = (rng.uniform(size=true_logits.size) < sigmoid(true_logits)).astype(float)
    overconfident = true_logits * 2.5  # the model's logits are 2.5x too sharp
    scaler = TemperatureScaling().fit(overconfident, labels)
    assert scaler.temperature == pytest.approx(2.5, rel=0.03)
    before, after = all_metrics(sigmoid(overconfident), labels), all_metrics(scaler.transform(overconfident), labels)
    assert after["ece"] < before["ece"] / 2
    assert after["auc"] == pytest.approx(before["auc"])  # a temperature never changes the ranking


def test_platt_and_isotonic_fit_and_round_trip() -> None:
    rng = np.random.default_rng(2)
    logits = rng.normal(0, 2, size=20_000)
    labels = (rng.uniform(size=logits.size) < sigmoid(0.5 * logits - 1.0)).astype(float)
    platt = PlattScaling().fit(logits, labels)
    assert platt.a == pytest.approx(0.5, abs=0.05) and platt.b == pytest.approx(-1.0, abs=0.06)
    iso = IsotonicCalibration().fit(logits, labels)
    assert ece(iso.transform(logits), labels) < 0.02
    for method in (platt, iso, TemperatureScaling(1.7)):
        again = from_dict(method.to_dict())
        assert np.allclose(again.transform(logits[:50]), method.transform(logits[:50]))
    with pytest.raises(ValueError, match="unknown calibration method"):
        from_dict({"method": "magic"})
