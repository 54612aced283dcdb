"""``electra-detect demo``: the Gradio page over the Detector. Heavy imports happen inside ``run``."""

from __future__ import annotations

import argparse
import os


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``demo`` verb (called by electra_detect.cli)."""
    default_model = os.environ.get("ELECTRA_DETECT_MODEL", "runs/quickstart")
    p = sub.add_parser("demo", help="browser demo: words coloured by replaced probability, GED spans, reranking",
                       description="Start the Gradio demo on this machine (offline; binds 127.0.0.1 by default).")
    p.add_argument("--model", default=default_model, help=f"run dir or discriminator dir (default {default_model})")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=7860, help="port (default 7860; 0 = any free port)")
    p.add_argument("--engine", choices=("auto", "torch", "onnx"), default="auto",
                   help="auto (default): ONNX when the model dir holds an export, else torch")
    p.add_argument("--variant", choices=("fp32", "optimized", "fp16", "int8"), default=None,
                   help="ONNX export variant (default: the engine's choice for the device)")
    p.add_argument("--threshold", type=float, default=None,
                   help="the slider's starting value (default: the model's ged.json threshold, else 0.5)")
    p.add_argument("--device", default=None, help="torch device (default: cuda when available, else cpu)")
    from electra_detect.app.demo import DemoError  # stdlib-only at import time; gradio loads inside run()

    p.set_defaults(func=run, known_errors=(DemoError,))


def run(args: argparse.Namespace) -> int:
    """Load the model, serve until Ctrl-C."""
    import time

    started = time.perf_counter()
    from electra_detect.app.demo import DemoError, build_app, launch

    if not 0 <= args.port <= 65535:
        raise DemoError(f"--port must be between 0 and 65535, got {args.port}")
    port = args.port or _free_port(args.host)
    app = build_app(args.model, engine=args.engine, device=args.device, variant=args.variant,
                    threshold=args.threshold)
    launch(app, host=args.host, port=port, block=True, started=started)
    return 0


def _free_port(host: str) -> int:
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]
