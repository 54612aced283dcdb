"""The HTTP server as Ray Serve replicas: ``electra-detect serve --ray`` (docs/serving.md, docs/scale_out.md).

Each replica is a Ray actor that loads its own ``Detector`` and builds the same FastAPI app the one-process server
runs (``create_app``: every route, the keys, admission and the LanguageTool API), through Serve's
``__serve_build_asgi_app__``: nothing but the settings crosses the wire. Ray Serve's proxy spreads requests over
the replicas, restarts one that dies, and scales their number between bounds. The same deployment runs on a
laptop (a local Ray started for it) and on a cluster (``--address``, or ``serve run`` with
:func:`app_builder` and a config file).
"""

from __future__ import annotations

import logging
import signal
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

from electra_detect.errors import UserError

DEPLOYMENT = "electra_detect"


class RayServeError(UserError, RuntimeError):
    """A Serve deployment that cannot start (Ray Serve missing, bad bounds, no cluster at the address)."""


@dataclass(frozen=True)
class ReplicaConfig:
    """What every replica loads and serves (plain data: Ray ships it to each replica)."""

    model: str
    settings: dict[str, Any]  # ServerSettings' fields
    engine: str = "auto"
    variant: str | None = None
    device: str | None = None
    calibrated: bool = True
    threads: int | None = None


class CheckerReplica:
    """One replica: its own Detector (never pickled), then the one-process server's app over it."""

    def __init__(self, config: dict[str, Any]) -> None:
        from electra_detect.detector import Detector

        self.config = ReplicaConfig(**config)
        c = self.config
        self.detector = Detector.load(c.model, task="ged", device=c.device, calibrated=c.calibrated, engine=c.engine,
                                      variant=c.variant if c.engine != "torch" else None, threads=c.threads,
                                      assemble=False)  # a replica never assembles: `export` does, before serving
        self.detector.score(["warm up the engine"])  # the first call allocates; keep it out of request latency

    def __serve_build_asgi_app__(self) -> Any:
        from electra_detect.app.http.server import create_app
        from electra_detect.app.settings import ServerSettings

        return create_app(self.detector, ServerSettings(**self.config.settings))


def deployment(config: ReplicaConfig, replicas: int | None = None, min_replicas: int | None = None,
               max_replicas: int | None = None, cpus_per_replica: float = 1.0) -> Any:
    """The bound Serve application: ``replicas`` fixed, or autoscaled between ``min_replicas`` and
    ``max_replicas`` (by requests in flight per replica)."""
    from ray import serve

    options: dict[str, Any] = {"name": DEPLOYMENT, "ray_actor_options": {"num_cpus": cpus_per_replica},
                               "health_check_period_s": 2, "health_check_timeout_s": 10,
                               "max_ongoing_requests": max(8, int(config.settings.get("max_requests") or 8))}
    if min_replicas is not None or max_replicas is not None:
        low, high = min_replicas or 1, max_replicas or max(min_replicas or 1, 1)
        if not 1 <= low <= high:
            raise RayServeError(f"--min-replicas {low} and --max-replicas {high}: need 1 <= min <= max")
        options["autoscaling_config"] = {"min_replicas": low, "max_replicas": high, "initial_replicas": low,
                                         "target_ongoing_requests": 4}
    else:
        if replicas is not None and replicas < 1:
            raise RayServeError(f"--replicas must be >= 1, got {replicas}")
        options["num_replicas"] = replicas or 2
    ingress = serve.ingress()(CheckerReplica)
    return serve.deployment(ingress, **options).bind(asdict(config))


def app_builder(args: dict[str, str]) -> Any:
    """``serve run electra_detect.app.http.ray_serve:app_builder model=PATH replicas=N``: the deployment for a config
    file or the ``serve run`` command line on a cluster (ServerSettings' defaults; keys from the environment)."""
    import os

    from electra_detect.app.settings import ServerSettings

    key = os.environ.get(args.get("api_key_env", "ELECTRA_DETECT_API_KEY")) or None
    settings = asdict(ServerSettings(api_key=key))
    config = ReplicaConfig(model=args["model"], settings=settings, engine=args.get("engine", "auto"))
    replicas = int(args["replicas"]) if "replicas" in args else None
    low = int(args["min_replicas"]) if "min_replicas" in args else None
    high = int(args["max_replicas"]) if "max_replicas" in args else None
    return deployment(config, replicas, low, high)


def run(config: ReplicaConfig, host: str, port: int, replicas: int | None = None, min_replicas: int | None = None,
        max_replicas: int | None = None, address: str | None = None) -> None:
    """Start (or join) Ray, deploy, and serve until Ctrl-C or SIGTERM; then delete the deployment (and stop the local
    Ray this started)."""
    try:
        import ray
        from ray import serve
    except ImportError:
        raise RayServeError("serve --ray needs Ray Serve: pip install 'electra-detect[cluster]'") from None
    ray.init(address=address, include_dashboard=False, logging_level=logging.ERROR)
    # Ray's core installs a handler that aborts on SIGTERM (exit -6); ours makes SIGTERM a Ctrl-C from here on,
    # during the deploy too, so both end in the clean shutdown below.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        serve.start(http_options={"host": host, "port": port}, logging_config={"log_level": "WARNING"})
        serve.run(deployment(config, replicas, min_replicas, max_replicas), name=DEPLOYMENT, route_prefix="/")
        print(f"serving on http://{host}:{port} through Ray Serve ({replicas or f'{min_replicas}-{max_replicas}'} "
              f"replicas)", file=sys.stderr, flush=True)
        while True:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for stop_signal in (signal.SIGINT, signal.SIGTERM):  # a second signal must not cut the shutdown short
            signal.signal(stop_signal, signal.SIG_IGN)
        try:
            serve.shutdown() if address is None else serve.delete(DEPLOYMENT)  # on a cluster, only what this started
        finally:
            ray.shutdown()


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
