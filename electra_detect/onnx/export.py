"""Export the discriminator to ONNX (fp32, graph-optimised, fp16, int8) with a parity gate.

Why each step uses what it uses:
- fp32: optimum's exporter on the *model instance* (``task="token-classification"`` keeps our RTD
  head: the head's logits are [batch, seq] like a one-label token classifier). Pointing optimum at
  the folder would replace the head, so we never do. If optimum fails, ``torch.onnx.export`` with
  dynamic batch and sequence axes.
- optimized: onnxruntime's transformer optimiser (attention / LayerNorm / GELU fusions), at a
  provider-independent level so one file serves CPU and CUDA.
- fp16: onnxruntime's float16 converter with fp32 inputs/outputs kept, for GPUs.
- int8: onnxruntime dynamic quantisation (int8 weights, activations quantised on the fly), for CPUs.
  Candidates cheapest first (``int8_candidates``): every weight in int8 with per-tensor and per-channel scales,
  then per-channel with the classifier head kept in fp32 (a tag model's argmax over thousands of channels), then
  with the FFN output projections kept in fp32, then also the first and last layers; the first that passes the
  gate (flags, and a tag model's tags) is kept (the best one is reported when none does).

Parity: every variant runs on held-out text, in the batches ``Detector`` would build, against the
PyTorch logits. fp32 variants must agree to ``max|Δlogit| <= 1e-4``; fp16 and int8 must flag the
same tokens at the default threshold (>= 99%). A reduced-precision variant (fp16, int8) that fails is
dropped, and the report says why (``parity.json``: ``dropped``); an fp32 variant that fails, or any
failure under ``strict``, exports nothing, and the report is written beside the target as
``<name>.parity_failed.json``. The default target is the first-use cache (``onnx.cache.cache_root``), so
an export never writes inside a model directory unless ``out_dir`` says so.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from electra_detect.engines import is_tag_model, typed_channels, usable_positions
from electra_detect.engines.torch_engine import TorchEngine, load_discriminator, replaced_logits
from electra_detect.errors import DetectorError, ExportError
from electra_detect.fileio import atomic_write_dir, atomic_write_json, atomic_write_text, sha256_file
from electra_detect.model_dir import GED_FILE, resolve_model_dir, tuned_threshold
from electra_detect.onnx.cache import KEY_FILES, cache_root, export_key, export_lock
from electra_detect.onnx.engine import OnnxEngine
from electra_detect.onnx.manifest import MANIFEST, VARIANT_FILES
from electra_detect.onnx.parity import (
    FP32_TOLERANCE,
    MIN_FLAG_AGREEMENT,
    apply_gate,
    compare,
    gate_failure,
    parity_batches,
    parity_markdown,
    raise_parity_failure,
)
from electra_detect.onnx.timing import measure_preference

VARIANTS = ("fp32", "optimized", "fp16", "int8")
REDUCED_PRECISION = ("fp16", "int8")  # may be dropped when they fail the gate; the fp32 graphs may not
PARITY_FILE = "parity.json"
TRAVELLING_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                    "vocab.txt", "calibration.json", "ged.json")
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")

# Held-out parity text when the user gives none: plain, erroneous and long sentences (the last one
# spans several 128-token windows), none from the default training corpus.
DEFAULT_PARITY_TEXTS = [
    "The farmer saw a red house yesterday.",
    "He go to the store yesterday and buyed three apple.",
    "She has been working at the hospital since nineteen ninety-eight.",
    "Their going too the park on sunday, aren't they?",
    "A quick brown fox jumps over the lazy dog.",
    "The committee have decided to postpone the meeting until further notice.",
    "I am agree with you about this problem.",
    "Researchers at the university published results that surprised everyone in the field.",
    "Despite of the rain, we went outside.",
    "The children played in the garden while their parents cooked dinner.",
    "Can you tell me where is the station?",
    "Prices rose sharply in the third quarter, according to the report.",
    "Ok",
    "The the cat sat on on the mat.",
    " ".join(["The river runs past the old mill, under the stone bridge, and on towards the sea, where "
              "fishing boats wait for the tide and gulls circle above the harbour."] * 8),
]



@dataclass
class ExportResult:
    out_dir: Path
    manifest: dict[str, Any]
    parity: dict[str, Any]

    @property
    def dropped(self) -> dict[str, str]:
        """Variants left out because they failed the parity gate, and why."""
        return self.parity.get("dropped", {})




class _LogitsOnly:
    """Wraps a discriminator so torch.onnx.export sees tensors in and one [batch, seq] tensor out (a typed GED
    model: that and its type channels' logits [batch, seq, channels], named ``type_logits``)."""

    def __new__(cls, model: Any) -> Any:
        import torch

        class Wrapper(torch.nn.Module):
            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any = None) -> Any:
                extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
                logits = self.inner(input_ids=input_ids, attention_mask=attention_mask, **extra).logits
                if typed_channels(self.inner.config.to_dict()):
                    return logits[..., 0], logits[..., 1:]
                return replaced_logits(logits)

        return Wrapper(model).eval()


def input_names(config: dict[str, Any]) -> tuple[str, ...]:
    """ELECTRA graphs take token_type_ids; encoders without type embeddings (ModernBERT, MPNet) do not."""
    return INPUT_NAMES if config.get("model_type", "electra") == "electra" else INPUT_NAMES[:2]


def export_fp32(model_dir: Path, target: Path, exporter: str = "auto", opset: int = 18) -> str:
    """Write ``target`` (model.onnx); returns the exporter that made it ("optimum" or "torch.onnx")."""
    import torch

    model = load_discriminator(model_dir).eval()
    names = input_names(model.config.to_dict())
    outputs = ["logits", "type_logits"] if typed_channels(model.config.to_dict()) else ["logits"]
    errors = []
    # optimum's token-classification export gives ELECTRA's [batch, seq] logits; other heads go through the wrapper.
    if exporter in ("auto", "optimum") and model.config.model_type == "electra" and len(outputs) == 1:
        try:
            from optimum.exporters.onnx import onnx_export_from_model

            with tempfile.TemporaryDirectory() as tmp:
                onnx_export_from_model(model, tmp, task="token-classification", opset=opset, do_validation=False)
                shutil.move(str(Path(tmp) / "model.onnx"), target)
            return "optimum"
        except Exception as exc:  # optimum raises many types; any failure means "use the fallback"
            if exporter == "optimum":
                raise ExportError(f"optimum export failed: {exc}") from exc
            errors.append(f"optimum: {exc}")
    axes = {name: {0: "batch_size", 1: "sequence_length"} for name in (*names, *outputs)}
    example = torch.full((2, 8), 5, dtype=torch.long)
    inputs = (example, torch.ones_like(example), torch.zeros_like(example))[:len(names)]
    for dynamo in (False, True):  # the TorchScript exporter first: faster, and dynamic_axes is native to it
        try:
            torch.onnx.export(_LogitsOnly(model), inputs, str(target), input_names=list(names),
                              output_names=outputs, dynamic_axes=axes, opset_version=opset, dynamo=dynamo,
                              external_data=False)
            return "torch.onnx" + (" (dynamo)" if dynamo else "")
        except Exception as exc:
            errors.append(f"torch.onnx.export(dynamo={dynamo}): {exc}")
    raise ExportError("every exporter failed: " + " | ".join(e[:300] for e in errors))


def optimize(source: Path, target: Path, config: dict[str, Any]) -> dict[str, int]:
    """Transformer fusions; opt_level 1 keeps the graph provider-independent (CPU and CUDA)."""
    from onnxruntime.transformers.optimizer import optimize_model

    model = optimize_model(str(source), model_type="bert", num_heads=int(config["num_attention_heads"]),
                           hidden_size=int(config["hidden_size"]), opt_level=1, use_gpu=False)
    model.save_model_to_file(str(target))
    return {k: int(v) for k, v in model.get_fused_operator_statistics().items() if v}


def to_fp16(source: Path, target: Path) -> None:
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    onnx.save(convert_float_to_float16(onnx.load(str(source)), keep_io_types=True), str(target))


def to_int8(source: Path, target: Path, per_channel: bool = False, keep_fp32: Sequence[str] = ()) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # DefaultTensorType: the fused contrib ops carry no type info the quantiser can infer
    quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, per_channel=per_channel,
                     nodes_to_exclude=list(keep_fp32), extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})


def weight_nodes(graph: Any) -> list[Any]:
    """The nodes dynamic quantisation turns to int8 (MatMul, Gemm, fused Attention with a weight), in graph order."""
    weights = {init.name for init in graph.initializer}
    return [n for n in graph.node
            if n.op_type in ("MatMul", "Gemm", "Attention") and any(i in weights for i in n.input)]


def ffn_output_projections(graph: Any, config: dict[str, Any]) -> list[Any]:
    """MatMuls whose weight maps the FFN's intermediate width back to the hidden size: the layers whose int8
    error the probe found largest (their inputs are the GELU's long-tailed activations)."""
    shapes = {init.name: tuple(init.dims) for init in graph.initializer}
    wide = (int(config.get("intermediate_size", 0)), int(config.get("hidden_size", 0)))
    return [n for n in weight_nodes(graph) if n.op_type == "MatMul" and any(shapes.get(i) == wide for i in n.input)]


def first_and_last_layers(graph: Any, config: dict[str, Any]) -> list[Any]:
    """Weight nodes of the first and the last transformer layer: a layer ends at its FFN output projection."""
    nodes, ends = weight_nodes(graph), ffn_output_projections(graph, config)
    if len(ends) < 2:
        return []
    position = {id(n): i for i, n in enumerate(nodes)}
    first_end, before_last, last_end = position[id(ends[0])], position[id(ends[-2])], position[id(ends[-1])]
    return nodes[:first_end + 1] + nodes[before_last + 1:last_end + 1]


def output_head(graph: Any, config: dict[str, Any]) -> list[Any]:
    """Weight nodes after the last layer's FFN output projection: the classifier head (a tag model's thousands of
    channels, whose argmax int8 error moves where detection's one logit holds)."""
    nodes, ends = weight_nodes(graph), ffn_output_projections(graph, config)
    if not ends:
        return []
    last = next(i for i, n in enumerate(nodes) if n is ends[-1])
    return nodes[last + 1:]


def int8_candidates(source: Path, config: dict[str, Any]) -> list[tuple[str, bool, list[str]]]:
    """(name, per-channel scales, node names kept in fp32), smallest and fastest first."""
    import onnx

    graph = onnx.load(str(source), load_external_data=False).graph
    ffn_out = [n.name for n in ffn_output_projections(graph, config)]
    ends = [n.name for n in first_and_last_layers(graph, config)]
    head = [n.name for n in output_head(graph, config)]
    candidates = [("per-tensor", False, []), ("per-channel", True, [])]
    if head:
        candidates.append(("per-channel, head fp32", True, head))
    if ffn_out:
        candidates.append(("per-channel, FFN outputs fp32", True, ffn_out))
    if ends:
        candidates.append(("per-channel, FFN outputs and first/last layers fp32", True,
                           list(dict.fromkeys(ffn_out + ends))))
    return candidates


def quantise_int8(source: Path, target: Path, config: dict[str, Any], check: Callable[[Path], dict[str, Any]],
                  min_agreement: float) -> dict[str, Any]:
    """Write ``target`` as the first int8 candidate that passes the gate (``check(path)`` gives the parity row: its
    flag agreement reaches ``min_agreement`` and, for a tag model, its tag agreement ``MIN_TAG_AGREEMENT``), of the
    two fully int8 ones the better; when none does, the best of all (passing tags first, then flags)."""
    from electra_detect.onnx.parity import MIN_TAG_AGREEMENT

    def rank(row: dict[str, Any]) -> tuple[bool, bool, float]:
        tags_ok = row.get("tag_agreement", 1.0) >= MIN_TAG_AGREEMENT
        return tags_ok and row["flag_agreement"] >= min_agreement, tags_ok, row["flag_agreement"]

    chosen: dict[str, Any] = {}
    agreement: dict[str, float] = {}
    tag_agreement: dict[str, float] = {}
    for index, (name, per_channel, keep_fp32) in enumerate(int8_candidates(source, config)):
        candidate = target.with_name(f"{target.stem}.candidate{index}.onnx")
        to_int8(source, candidate, per_channel, keep_fp32)
        row = check(candidate)
        agreement[name] = row["flag_agreement"]
        if "tag_agreement" in row:
            tag_agreement[name] = row["tag_agreement"]
        if not chosen or rank(row) > rank(chosen):  # a tie keeps the smaller one
            os.replace(candidate, target)
            chosen = {**row, "int8_choice": name, "fp32_nodes": len(keep_fp32)}
        candidate.unlink(missing_ok=True)
        if rank(chosen)[0] and name != "per-tensor":  # per-channel always gets its try
            break
    extra = {"tag_agreement_by_int8_candidate": tag_agreement} if tag_agreement else {}
    return {**chosen, "flag_agreement_by_int8_candidate": agreement, **extra}














def default_out_dir(model_path: str | Path) -> Path:
    """The first-use cache dir for the model's weights: ``Detector.load`` finds the export there, and the
    model directory (a checkout's shipped model, say) stays as it was."""
    return cache_root() / export_key(resolve_model_dir(model_path))


def export_model(model_path: str | Path, out_dir: str | Path | None = None, variants: Sequence[str] = VARIANTS,
                 parity_texts: Sequence[str] | None = None, exporter: str = "auto", opset: int = 18,
                 tolerance: float = FP32_TOLERANCE, min_agreement: float = MIN_FLAG_AGREEMENT,
                 threshold: float | None = None, progress: bool = True, strict: bool = False) -> ExportResult:
    """Export, check parity, and put the export dir in place atomically (default: the first-use cache dir for
    these weights, ``default_out_dir``). A failing fp16 or int8 variant is dropped (``ExportResult.dropped``)
    unless ``strict``, which exports nothing when any variant fails."""
    from tqdm import tqdm

    from electra_detect.calibrators import load_calibration, sigmoid, weights_sha256

    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        raise ExportError(f"unknown variant(s) {unknown}; choose from {', '.join(VARIANTS)}")
    variants = ["fp32", *[v for v in VARIANTS if v in variants and v != "fp32"]]  # fp32 is the base of all
    if "optimized" not in variants and any(v in variants for v in ("fp16", "int8")):
        variants.insert(1, "optimized")  # fp16 and int8 are made from the fused graph
    model_dir = resolve_model_dir(model_path)
    if not any(model_dir.glob("*.safetensors")):
        raise ExportError(f"{model_dir} has no safetensors weights to export (is it an export already?)")
    out = Path(out_dir) if out_dir else default_out_dir(model_dir)
    in_cache = out.resolve().parent == cache_root().resolve()
    if out.resolve() == model_dir.resolve():
        raise ExportError("--out must not be the model directory itself")
    from transformers import AutoTokenizer

    torch_engine = TorchEngine(model_dir)  # the reference: the torch engine the Detector runs without an export
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    tokenizer.model_max_length = 1 << 30  # long parity texts are windowed, as the Detector does, not truncated
    if not tokenizer.is_fast:
        raise ExportError(f"{model_dir}: a fast tokenizer is needed (the export carries its backend tokenizer.json)")
    try:
        calibrator = load_calibration(model_dir)
    except ValueError as exc:  # a calibration.json fitted for other weights: refuse to ship it
        raise ExportError(str(exc)) from exc
    to_prob = calibrator.transform if calibrator is not None else sigmoid
    if threshold is None:  # the tuned one, in the space the parity flags are compared in (calibrated if any)
        threshold = tuned_threshold(model_dir, calibrator)
        threshold_source = "ged.json" if (model_dir / GED_FILE).exists() else "default 0.5"
    else:
        threshold_source = "given"
    texts = [t for t in (parity_texts if parity_texts is not None else DEFAULT_PARITY_TEXTS) if t.strip()]
    batches = parity_batches(tokenizer, torch_engine.max_positions, texts)
    masks = [mask for _, mask in batches]
    outputs = [torch_engine.outputs(ids, mask) for ids, mask in batches]  # before export touches the model
    reference = [logits for logits, _ in outputs]
    config = json.loads((model_dir / "config.json").read_text())
    tag_channels = typed_channels(config) if is_tag_model(typed_channels(config)) else []
    reference_tags = [tags for _, tags in outputs] if tag_channels else None
    report: dict[str, Any] = {"source": str(model_dir), "texts": len(texts), "windows": int(sum(len(m) for m in masks)),
                              "threshold": threshold, "threshold_source": threshold_source,
                              "calibration": calibrator.to_dict()["method"] if calibrator else "raw",
                              "variants": {}}
    manifest: dict[str, Any] = {}

    def check(path: Path) -> dict[str, Any]:
        engine = OnnxEngine.from_file(path)  # the same input feed the Detector's ONNX engine uses
        engine.channels = tag_channels  # a tag model's tags are compared too
        found = [engine.outputs(ids, mask) for ids, mask in batches]
        return compare(reference, [logits for logits, _ in found], masks, to_prob, threshold, reference_tags,
                       [tags for _, tags in found] if tag_channels else None)

    def make_variant(variant: str, tmp: Path, made: dict[str, Any]) -> dict[str, Any]:
        """Write ``variant`` into ``tmp``; its parity row."""
        target = tmp / VARIANT_FILES[variant]
        if variant == "int8":  # made and checked together, candidate by candidate
            return quantise_int8(tmp / VARIANT_FILES["optimized"], target, config, check, min_agreement)
        if variant == "fp32":
            made["exporter"] = export_fp32(model_dir, target, exporter, opset)
        elif variant == "optimized":
            made["fusions"] = optimize(tmp / VARIANT_FILES["fp32"], target, config)
        else:
            to_fp16(tmp / VARIANT_FILES["optimized"], target)
        return check(target)

    def fill(tmp: Path) -> None:
        steps = tqdm(variants, desc="export", unit="variant", disable=not progress)
        made: dict[str, Any] = {}
        for variant in steps:
            steps.set_postfix_str(variant)
            target = tmp / VARIANT_FILES[variant]
            started = time.perf_counter()
            row = make_variant(variant, tmp, made)
            seconds = time.perf_counter() - started  # for int8: every candidate tried, with its parity run
            apply_gate(variant, row, tolerance, min_agreement)
            report["variants"][variant] = row
            made.setdefault("variants", {})[variant] = {"file": target.name, "bytes": target.stat().st_size,
                                                        "sha256": sha256_file(target), "seconds": round(seconds, 2)}
        failed = [v for v, row in report["variants"].items() if not row["passed"]]
        report["passed"] = not failed
        if strict or any(v not in REDUCED_PRECISION for v in failed):
            raise_parity_failure(report, failed, out)
        report["dropped"] = {v: gate_failure(v, report["variants"][v]) for v in failed}
        report["passed"] = True  # every variant written passed its gate
        for variant in failed:  # kept in the report, left out of the export
            (tmp / VARIANT_FILES[variant]).unlink()
            del made["variants"][variant]
        # which variant each device runs, measured here on the parity batches (the engine reads it)
        made["preferred"] = measure_preference({v: tmp / VARIANT_FILES[v] for v in made["variants"]}, batches)
        # a cached export is read with the weights dir beside it (calibration and ged.json are read there, checked
        # by their weights hash): it copies only what its key covers
        copied = [n for n in TRAVELLING_FILES if (model_dir / n).exists() and (not in_cache or n in KEY_FILES)]
        for name in copied:
            shutil.copy2(model_dir / name, tmp / name)
        # the exact backend HF builds from those files, so the ONNX engine can tokenize without transformers
        tok = tokenizer
        atomic_write_text(tmp / "backend_tokenizer.json", tok.backend_tokenizer.to_str())
        made["files"] = {name: sha256_file(tmp / name) for name in [*copied, "backend_tokenizer.json"]}
        made["tokenizer"] = {"file": "backend_tokenizer.json", "cls_token_id": tok.cls_token_id,
                             "sep_token_id": tok.sep_token_id, "pad_token_id": tok.pad_token_id}
        import onnx
        import onnxruntime
        import torch
        import transformers

        manifest.update({"format": 1, "source": str(model_dir), "source_weights_sha256": weights_sha256(model_dir),
                         "opset": opset, "max_positions": usable_positions(config),
                         "inputs": list(input_names(config)), "output": "logits",
                         "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                         "versions": {"onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__,
                                      "torch": torch.__version__, "transformers": transformers.__version__},
                         **made})
        atomic_write_json(tmp / MANIFEST, manifest)
        atomic_write_json(tmp / PARITY_FILE, report)
        atomic_write_text(tmp / "parity.md", parity_markdown(report))

    try:
        with export_lock(out):  # two processes exporting to one place take turns
            atomic_write_dir(out, fill)
    except (DetectorError, ExportError, OSError):
        raise
    except Exception as exc:  # ONNX tooling raises assorted types; report them as one export failure
        raise ExportError(f"export failed: {type(exc).__name__}: {exc}") from exc
    out.with_name(f"{out.name}.parity_failed.json").unlink(missing_ok=True)
    return ExportResult(out, manifest, report)
