"""The server's Prometheus metrics."""

from __future__ import annotations


class Metrics:
    """Prometheus metrics in a registry of their own (several apps may live in one test process)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

        self.registry = CollectorRegistry()
        self.requests = Counter("electra_requests", "HTTP requests", ["path", "status"], registry=self.registry)
        self.latency = Histogram("electra_request_seconds", "request latency", ["path"], registry=self.registry,
                                 buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
        self.batch_texts = Histogram("electra_batch_texts", "texts per model call", registry=self.registry,
                                     buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256))
        self.model_seconds = Histogram("electra_model_seconds", "seconds per model call", registry=self.registry,
                                       buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10))
        self.texts = Counter("electra_texts", "texts scored", registry=self.registry)
        self.tokens = Counter("electra_tokens", "tokens scored", registry=self.registry)
        self.queue = Gauge("electra_queue_requests", "requests waiting for the model", registry=self.registry)
        self.inflight = Gauge("electra_inflight_requests", "requests being handled", registry=self.registry)
        self.abandoned = Counter("electra_abandoned_requests", "requests given up before they were scored",
                                 ["reason"], registry=self.registry)
        self.dropped = Counter("electra_dropped_requests", "abandoned requests the model stopped working on",
                               registry=self.registry)
        self.refused = Counter("electra_refused_requests", "requests refused past a share or budget (429, 413 "
                               "over_budget) before any work", ["reason"], registry=self.registry)
        self.info = Info("electra_engine", "engine the server runs", registry=self.registry)

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)
