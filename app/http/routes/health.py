"""``/healthz`` (liveness and what is loaded) and ``/metrics`` (Prometheus)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from electra_detect.app.clients import key_name
from electra_detect.app.http.routing import ServiceDep

router = APIRouter()


@router.get("/healthz", summary="liveness and what is loaded")
async def healthz(request: Request, service: ServiceDep) -> dict[str, Any]:
    """"ok" and the model's name for anyone (the route needs no key, so a load balancer can ask); the engine and
    its settings too when the server has no keys, and the model's path only to a client with a valid key."""
    keys = service.settings.api_keys
    if not keys:
        return {"status": "ok", **service.info}
    if key_name(dict(request.scope.get("headers") or []), keys) is None:
        return {"status": "ok", "model": service.info["model"]}
    return {"status": "ok", **service.info, "model_path": service.model_path}


@router.get("/metrics", summary="Prometheus metrics (text format)", response_class=Response,
            responses={200: {"description": "Prometheus text exposition format",
                             "content": {"text/plain": {"schema": {"type": "string"}}}}})
async def prometheus(service: ServiceDep) -> Response:
    from prometheus_client import CONTENT_TYPE_LATEST

    return Response(service.metrics.render(), media_type=CONTENT_TYPE_LATEST)
