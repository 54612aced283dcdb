"""The parity gate: every exported variant runs the windows ``Detector`` would run, against the PyTorch logits.

fp32 variants must agree to ``max|Δlogit| <= FP32_TOLERANCE``; fp16 and int8 must flag the same tokens at the
threshold (``MIN_FLAG_AGREEMENT``). ``export`` drops a reduced-precision variant that fails (or, ``strict``,
exports nothing) and writes the report this module renders.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from electra_detect.batching import pad_ids
from electra_detect.errors import ExportError
from electra_detect.fileio import atomic_write_json
from electra_detect.windows import text_windows

FP32_TOLERANCE = 1e-4
MIN_FLAG_AGREEMENT = 0.99
MIN_TAG_AGREEMENT = 0.98  # a tag model's edit tags at the reference's flagged tokens (every variant)


def parity_batches(tokenizer: Any, max_positions: int, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The windows ``Detector.score`` would run (``windows.text_windows``), in batches of 1, 4 and 32 (dynamic
    axes and padding)."""
    chunks = text_windows(tokenizer, texts, max_positions - 2)
    if not chunks:
        raise ExportError("the parity text holds no tokens")
    sizes, start, batches = [1, 4], 0, []
    while start < len(chunks):
        size = sizes.pop(0) if sizes else 32
        batches.append(pad_ids(chunks[start:start + size], tokenizer.pad_token_id, tokenizer.cls_token_id,
                               tokenizer.sep_token_id))
        start += size
    return batches


def compare(reference: list[np.ndarray], candidate: list[np.ndarray], masks: list[np.ndarray],
            to_prob: Any, threshold: float, reference_tags: list[np.ndarray] | None = None,
            candidate_tags: list[np.ndarray] | None = None) -> dict[str, Any]:
    """max |Δlogit| over real tokens, and agreement of flagged tokens at ``threshold`` (and at the
    reference's 90th percentile, a stricter look when few tokens reach the default threshold); for a tag model
    (``*_tags``: [batch, seq, tags] logits), agreement of the decoded tag (the best but ``$KEEP``) at the tokens
    the reference flags at its 90th percentile (the tokens a writer is told about, and enough of them to count)."""
    ref = np.concatenate([r[m.astype(bool)] for r, m in zip(reference, masks, strict=True)])
    new = np.concatenate([c[m.astype(bool)] for c, m in zip(candidate, masks, strict=True)])
    p_ref, p_new = to_prob(ref), to_prob(new)
    p90 = float(np.quantile(p_ref, 0.9))
    row = {"tokens": int(ref.size), "max_abs_logit_diff": float(np.max(np.abs(ref - new))),
           "mean_abs_logit_diff": float(np.mean(np.abs(ref - new))),
           "threshold": threshold, "flagged_reference": int((p_ref >= threshold).sum()),
           "flag_agreement": float(np.mean((p_ref >= threshold) == (p_new >= threshold))),
           "flag_agreement_p90": float(np.mean((p_ref >= p90) == (p_new >= p90))), "p90_threshold": p90}
    if reference_tags is not None and candidate_tags is not None:
        at = p_ref >= min(threshold, p90)

        def decoded(tags: list[np.ndarray]) -> np.ndarray:
            flat = np.concatenate([t[m.astype(bool)] for t, m in zip(tags, masks, strict=True)])
            return flat[at][:, 1:].argmax(1)

        row["tagged_tokens"] = int(at.sum())
        row["tag_agreement"] = float(np.mean(decoded(reference_tags) == decoded(candidate_tags))) if at.any() else 1.0
    return row


def apply_gate(variant: str, row: dict[str, Any], tolerance: float, min_agreement: float) -> None:
    if variant in ("fp32", "optimized"):
        row["gate"] = f"max_abs_logit_diff <= {tolerance:g}"
        row["passed"] = row["max_abs_logit_diff"] <= tolerance
    else:
        row["gate"] = f"flag_agreement >= {min_agreement:g}"
        row["passed"] = row["flag_agreement"] >= min_agreement
    if "tag_agreement" in row:
        row["gate"] += f", tag_agreement >= {MIN_TAG_AGREEMENT:g}"
        row["passed"] = row["passed"] and row["tag_agreement"] >= MIN_TAG_AGREEMENT


def gate_failure(variant: str, row: dict[str, Any]) -> str:
    """One line on why ``variant`` failed its gate."""
    tags = f", tag agreement {row['tag_agreement']:.4f}" if "tag_agreement" in row else ""
    return (f"{variant}: max|Δlogit| {row['max_abs_logit_diff']:.3g}, flag agreement {row['flag_agreement']:.4f}"
            f"{tags} (gate {row['gate']})")


def raise_parity_failure(report: dict[str, Any], failed: Sequence[str], out: Path) -> None:
    """Write the report beside ``out`` (``<name>.parity_failed.json``) and raise: nothing is exported."""
    failed_report = out.with_name(f"{out.name}.parity_failed.json")
    atomic_write_json(failed_report, report)
    details = "; ".join(gate_failure(v, report["variants"][v]) for v in failed)
    raise ExportError(f"parity check failed, nothing exported: {details} (report: {failed_report})")


def parity_markdown(parity: dict[str, Any]) -> str:
    lines = [f"# ONNX parity: {parity['source']}", "",
             f"{parity['texts']} held-out texts, {parity['windows']} windows; threshold {parity['threshold']:g} "
             f"({parity['threshold_source']}).", "",
             "| variant | tokens | max abs Δlogit | mean abs Δlogit | flagged (ref) | flag agreement | "
             "agreement @p90 | gate | passed |", "|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for name, row in parity["variants"].items():
        lines.append(f"| {name} | {row['tokens']} | {row['max_abs_logit_diff']:.2e} | {row['mean_abs_logit_diff']:.2e}"
                     f" | {row['flagged_reference']} | {row['flag_agreement']:.4f} | {row['flag_agreement_p90']:.4f}"
                     f" | {row['gate']} | {'yes' if row['passed'] else '**NO**'} |")
    if "int8" in parity["variants"]:
        int8 = parity["variants"]["int8"]
        tried = ", ".join(f"{name} {value:.4f}" for name, value in int8["flag_agreement_by_int8_candidate"].items())
        lines += ["", f"int8 candidates (flag agreement): {tried}; kept: {int8['int8_choice']}."]
        if int8.get("tag_agreement_by_int8_candidate"):
            tags = ", ".join(f"{n} {v:.4f}" for n, v in int8["tag_agreement_by_int8_candidate"].items())
            lines[-1] = lines[-1][:-1] + f" (tag agreement: {tags})."
    if parity.get("dropped"):
        lines += ["", "Dropped (failed the gate): " + "; ".join(parity["dropped"].values()) + "."]
    return "\n".join(lines) + "\n"
