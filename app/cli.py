"""The app layer's verbs: ``serve`` (the HTTP inference server, FastAPI + uvicorn, over the ONNX engine) and
``demo`` (the Gradio page). Registered through the ``electra_detect.verbs`` entry points.

Only argparse at the top: the engine, FastAPI, uvicorn and gradio load inside the verbs.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace

from electra_detect.app.settings import ServerSettings, read_keys_file, serve_flags
from electra_detect.cli import DEFAULT_MODEL, verb
from electra_detect.cli.engine import add_engine_args, add_model_arg, check_engine_args
from electra_detect.cli.options import add_dictionary_arg, add_threshold_arg, check_dictionary_file
from electra_detect.errors import UserError

LOOPBACK = ("127.0.0.1", "localhost", "::1")


class ServeError(UserError, ValueError):
    """A setting the server cannot run with."""


def add_serve(sub: argparse._SubParsersAction) -> None:
    p = verb(sub, "serve", run_serve,
             help="HTTP server: /v1/score, /v1/ged, /v1/rerank, /healthz, /metrics, /docs",
             description="Serve a model over HTTP with micro-batching. Runs onnxruntime (the model's ONNX export, or "
                         "one made once and cached); --engine torch serves the PyTorch weights instead. "
                         "Binds 127.0.0.1 unless --host says otherwise; set an API key (read from the "
                         "environment variable named by --api-key-env) before binding elsewhere.")
    add_model_arg(p, help="export dir, or a run/discriminator dir holding one in onnx/")
    add_engine_args(p, workers=False, device=True, threads=True)  # --engine, --variant, --device, --threads: shared
    p.add_argument("--require-gpu", action="store_true", help="fail instead of falling back to CPU")
    p.add_argument("--no-calibration", action="store_true", help="serve raw sigmoid scores")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--api-key-env", default="ELECTRA_DETECT_API_KEY",
                   help="environment variable holding the API key clients send in X-API-Key (unset: no key)")
    p.add_argument("--api-keys-file", metavar="FILE",
                   help="API keys, one a line, each optionally followed by a client name (fairness and 429s count "
                        "per key); with --api-key-env's key too when both are set")
    p.add_argument("--trusted-proxy", action="append", default=[], metavar="ADDRESS",
                   help="a reverse proxy (IP address or network) whose X-Forwarded-For names the client, for "
                        "per-address fairness without keys; repeat for several (default: none, the peer address)")
    p.add_argument("--allowed-host", action="append", default=[], metavar="HOST",
                   help="a Host header value served (e.g. localhost, api.example.com, *.example.com); repeat for "
                        "several; others get 400 (against DNS rebinding; default: any)")
    add_dictionary_arg(p, help="personal dictionary, one word a line, never flagged nor suggested through /v1/ged and "
                               "/v2/check, read again when it changes (default: $ELECTRA_DETECT_DICTIONARY, else "
                               "$XDG_CONFIG_HOME/electra-detect/dictionary.txt when it exists; docs/writers.md)")
    p.add_argument("--docs", action="store_true",
                   help="serve the Swagger UI at /docs (its scripts load from a public CDN; /openapi.json is always "
                        "served)")
    p.add_argument("--batching", choices=("auto", "on", "off"), default="auto",
                   help="micro-batching; auto = on when the engine runs on CUDA, off on CPU, where one call per "
                        "request served more requests/s in benchmarks/speed/server_load.py")
    p.add_argument("--no-batching", action="store_true", help="same as --batching off")
    for _name, flag, _default, options in serve_flags():  # the limits, from ServerSettings' own fields
        p.add_argument(flag, **options)
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    r = p.add_argument_group("Ray Serve: the same app as replicas behind one endpoint (docs/scale_out.md)")
    r.add_argument("--ray", action="store_true", help="serve through Ray Serve (the cluster extra): replicas that "
                                                     "Ray restarts when they die")
    r.add_argument("--replicas", type=int, help="a fixed number of replicas (default 2)")
    r.add_argument("--min-replicas", type=int, help="autoscale between --min-replicas and --max-replicas")
    r.add_argument("--max-replicas", type=int)
    r.add_argument("--address", help="a running Ray cluster: auto, ray://HOST:10001 (default: a local Ray started "
                                     "for the server and stopped after it)")


def run_serve(args: argparse.Namespace) -> int:
    from electra_detect.detector import Detector

    if not 0 < args.port < 65536:
        raise ServeError(f"--port {args.port} is not a TCP port")
    check_engine_args(args)
    check_dictionary_file(args.dictionary)
    api_key = os.environ.get(args.api_key_env) or None
    settings = ServerSettings(**{name: getattr(args, name) for name, *_ in serve_flags()},  # checks every value
                              api_key=api_key, api_keys=read_keys_file(args.api_keys_file) if args.api_keys_file
                              else {}, trusted_proxies=tuple(args.trusted_proxy),
                              allowed_hosts=tuple(args.allowed_host), docs=args.docs, dictionary=args.dictionary)
    if args.host not in LOOPBACK and not settings.api_keys:
        print(f"warning: serving on {args.host} without an API key; anyone who can reach the port can use it "
              f"(set ${args.api_key_env} or --api-keys-file)", file=sys.stderr)
    if args.ray:
        return run_on_ray(args, settings)
    if args.replicas or args.min_replicas or args.max_replicas or args.address:
        raise ServeError("--replicas, --min-replicas, --max-replicas and --address go with --ray")
    from electra_detect.app.http.server import serve

    detector = Detector.load(args.model, task="ged", device=args.device, calibrated=not args.no_calibration,
                             engine=args.engine, variant=args.variant if args.engine != "torch" else None,
                             require_gpu=args.require_gpu, threads=args.threads, assemble=False)
    print(detector.describe(), file=sys.stderr, flush=True)
    on_gpu = "cuda" in str(detector.engine.provider).lower()
    batching = False if args.no_batching else on_gpu if args.batching == "auto" else args.batching == "on"
    settings = replace(settings, batching=batching)
    engine = detector.engine
    print(f"serving {detector.model_dir} on http://{args.host}:{args.port} (engine {engine.name}, "
          f"provider {engine.provider}, variant {getattr(engine, 'variant', '-')}, "
          f"batching {f'{args.max_batch} texts / {args.max_wait_ms:g} ms' if batching else 'off'}); "
          f"{'docs at /docs' if args.docs else 'schema at /openapi.json'}", file=sys.stderr, flush=True)
    try:
        serve(detector, settings, args.host, args.port, args.log_level)
    except OSError as exc:  # the server could not bind its address (serve says which): one error line, as a flag
        raise ServeError(str(exc)) from None
    return 0


def run_on_ray(args: argparse.Namespace, settings: ServerSettings) -> int:
    """``serve --ray``: the settings checked here, the model loaded by each replica (docs/scale_out.md)."""
    from dataclasses import asdict
    from pathlib import Path

    from electra_detect.app.http.ray_serve import ReplicaConfig, run
    from electra_detect.model_dir import task_model_path
    from electra_detect.trained_part import runnable_dir

    runnable_dir(task_model_path(args.model, "ged"), allow_assembly=False)  # an unassembled part: refused at start
    if args.replicas is not None and (args.min_replicas is not None or args.max_replicas is not None):
        raise ServeError("--replicas is a fixed number; --min-replicas/--max-replicas autoscale: give one or the other")
    on_gpu = args.device is not None and args.device.startswith("cuda")
    batching = False if args.no_batching else on_gpu if args.batching == "auto" else args.batching == "on"
    config = ReplicaConfig(model=str(Path(args.model).resolve()), settings=asdict(replace(settings, batching=batching)),
                           engine=args.engine, variant=args.variant, device=args.device,
                           calibrated=not args.no_calibration, threads=args.threads)
    run(config, args.host, args.port, args.replicas, args.min_replicas, args.max_replicas, args.address)
    return 0


def add_demo(sub: argparse._SubParsersAction) -> None:
    """The ``demo`` verb: the Gradio page over one Detector."""
    p = verb(sub, "demo", run_demo,
             help="browser demo: words coloured by replaced probability, GED spans, reranking",
             description="Start the Gradio demo on this machine (offline; binds 127.0.0.1 by default).")
    add_model_arg(p, help=f"run dir or discriminator dir (default {DEFAULT_MODEL})")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=7860, help="port (default 7860; 0 = any free port)")
    add_engine_args(p, workers=False, device=True)  # --engine, --variant, --device: as every verb has them
    add_threshold_arg(p, "slider")
    add_dictionary_arg(p)
    p.add_argument("--auth", action="append", default=[], metavar="USER:PASSWORD",
                   help="ask for this login (repeat for several; note that a command line is visible to other "
                        "users of the machine, --auth-file is not)")
    p.add_argument("--auth-file", metavar="FILE", help="logins, one username:password a line")
    p.add_argument("--max-file-size", default="1mb",
                   help="largest upload Gradio's server takes (default 1mb; the page itself uploads nothing)")
    p.add_argument("--max-total-uploads", default="32mb",
                   help="all uploads together the demo keeps (default 32mb); past it an upload is refused 413")
    p.add_argument("--queue-size", type=int, default=16,
                   help="jobs that may wait; more are told the queue is full at once (default 16)")
    p.add_argument("--concurrency", type=int, default=1,
                   help="jobs run at a time (default 1: the model scores one request at a time anyway)")


def run_demo(args: argparse.Namespace) -> int:
    """Load the model, serve until Ctrl-C."""
    import time

    started = time.perf_counter()
    from electra_detect.app.demo.errors import DemoError
    from electra_detect.app.demo.launch import build_app, launch
    from electra_detect.app.demo.limits import DemoLimits, parse_auth

    if not 0 <= args.port <= 65535:
        raise DemoError(f"--port must be between 0 and 65535, got {args.port}")
    limits = DemoLimits(max_file_size=args.max_file_size, max_total_uploads=args.max_total_uploads,
                        queue_size=args.queue_size, concurrency=args.concurrency,
                        auth=parse_auth(args.auth, args.auth_file))
    if args.host not in LOOPBACK and not limits.auth:
        print(f"warning: serving the demo on {args.host} without a login; anyone who can reach the port can use it "
              f"(--auth or --auth-file)", file=sys.stderr)
    check_dictionary_file(args.dictionary)
    port = args.port or _free_port(args.host)
    app = build_app(args.model, engine=args.engine, device=args.device, variant=args.variant,
                    threshold=args.threshold, dictionary=args.dictionary)
    print(app.detector.describe(), file=sys.stderr, flush=True)
    launch(app, host=args.host, port=port, block=True, started=started, limits=limits)
    return 0


def _free_port(host: str) -> int:
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]
