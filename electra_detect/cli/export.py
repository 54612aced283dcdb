"""``electra-detect export``: ONNX variants with a parity report, optionally a Triton model repository.

Only argparse at the top: the exporters (torch, optimum, onnxruntime) load inside the verb.
"""

from __future__ import annotations

import argparse
import json
import sys

from electra_detect.cli import verb
from electra_detect.cli.engine import add_model_arg


def add_parser(sub: argparse._SubParsersAction) -> None:
    from electra_detect.onnx.export import VARIANTS  # light: numpy and the detector module, no torch

    p = verb(sub, "export", run,
             help="export the discriminator to ONNX (fp32, optimized, fp16, int8) with parity",
             description="Export a discriminator (pre-trained or GED fine-tuned) to ONNX. Each variant is "
                         "checked against PyTorch on held-out text (fp32: max |Δlogit| <= 1e-4; fp16/int8: "
                         ">= 99%% of tokens flagged alike); an fp16 or int8 variant that fails is dropped with a "
                         "warning (--strict: any failure exports nothing). Tokenizer, config, calibration.json and "
                         "ged.json travel with the model.")
    add_model_arg(p, "run dir or discriminator dir, or a trained part (assembled first, once) (an existing export "
                     "dir with --triton: only the Triton repo)")
    p.add_argument("--out", help="export dir (default: the first-use cache for MODEL's weights, where score, ged "
                                 "and serve find it; nothing is written inside MODEL)")
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help=f"comma-separated subset of {','.join(VARIANTS)} (default: all)")
    p.add_argument("--text", help="held-out text for the parity check, one text per line (default: built-in sentences)")
    p.add_argument("--exporter", choices=("auto", "optimum", "torch"), default="auto",
                   help="auto: optimum, falling back to torch.onnx.export")
    p.add_argument("--opset", type=int, default=18)
    p.add_argument("--threshold", type=float, help="flag threshold for the fp16/int8 agreement check "
                                                   "(default: the model's ged.json threshold, else 0.5)")
    p.add_argument("--tolerance", type=float, default=1e-4, help="max |Δlogit| allowed for fp32 variants")
    p.add_argument("--min-agreement", type=float, default=0.99, help="flag agreement required for fp16/int8")
    p.add_argument("--strict", action="store_true",
                   help="all or nothing: a variant failing its gate exports nothing (default: drop it, keep the rest)")
    p.add_argument("--triton", metavar="REPO", help="also write a Triton Inference Server model repository here")
    p.add_argument("--triton-variant", default="optimized", help="variant served by Triton (default optimized)")
    p.add_argument("--triton-name", default="electra_detect", help="Triton model name")
    p.add_argument("--triton-max-batch", type=int, default=64, help="Triton max_batch_size")
    p.add_argument("--triton-delay-us", type=int, default=2000, help="Triton dynamic batching max queue delay")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _read_texts(path: str) -> list[str]:
    from electra_detect.errors import ExportError

    try:
        with open(path, encoding="utf-8") as handle:
            texts = [line.strip() for line in handle if line.strip()]
    except FileNotFoundError:
        raise ExportError(f"parity text file not found: {path}") from None
    except UnicodeDecodeError:
        raise ExportError(f"parity text file is not UTF-8 text: {path}") from None
    if not texts:
        raise ExportError(f"parity text file {path} holds no text")
    return texts


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from electra_detect.cli.texts import check_unit_interval
    from electra_detect.errors import ExportError
    from electra_detect.model_dir import resolve_model_dir
    from electra_detect.onnx.export import export_model
    from electra_detect.onnx.manifest import MANIFEST
    from electra_detect.onnx.triton import write_triton_repo
    from electra_detect.trained_part import runnable_dir

    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if args.tolerance <= 0 or not 0 < args.min_agreement <= 1:
        raise ExportError("--tolerance must be > 0 and --min-agreement in (0, 1]")
    check_unit_interval(args.threshold, "--threshold")
    model_dir = resolve_model_dir(runnable_dir(args.model))  # a trained part: assembled now (progress on stderr)
    summary: dict[str, object] = {}
    if not any(model_dir.glob("*.safetensors")) and (model_dir / MANIFEST).exists():
        if not args.triton:
            raise ExportError(f"{model_dir} is already an ONNX export; "
                              f"give --triton REPO to build a Triton repo from it")
        export_dir = model_dir
    else:
        texts = _read_texts(args.text) if args.text else None
        result = export_model(model_dir, args.out, variants=variants, parity_texts=texts,
                              exporter=args.exporter, opset=args.opset,
                              tolerance=args.tolerance, min_agreement=args.min_agreement, threshold=args.threshold,
                              progress=not args.no_progress, strict=args.strict)
        for reason in result.dropped.values():
            print(f"warning: dropped {reason}", file=sys.stderr)
        export_dir = result.out_dir
        summary.update({"out": str(result.out_dir), "exporter": result.manifest["exporter"],
                        "parity": {v: {"max_abs_logit_diff": row["max_abs_logit_diff"],
                                       "flag_agreement": row["flag_agreement"], "passed": row["passed"]}
                                   for v, row in result.parity["variants"].items()},
                        "kept": list(result.manifest["variants"]), "dropped": result.dropped})
    if args.triton:
        summary["triton"] = str(write_triton_repo(Path(export_dir), args.triton, args.triton_variant, args.triton_name,
                                                  args.triton_max_batch, args.triton_delay_us))
    print(json.dumps(summary))
    return 0
