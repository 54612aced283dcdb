"""``/healthz`` (liveness and what is loaded) and ``/metrics`` (Prometheus)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

from electra_detect.app.service import ServiceDep

router = APIRouter()


@router.get("/healthz", summary="liveness and what is loaded")
async def healthz(service: ServiceDep) -> dict[str, Any]:
    return {"status": "ok", **service.info}


@router.get("/metrics", summary="Prometheus metrics (text format)", response_class=Response,
            responses={200: {"description": "Prometheus text exposition format",
                             "content": {"text/plain": {"schema": {"type": "string"}}}}})
async def prometheus(service: ServiceDep) -> Response:
    from prometheus_client import CONTENT_TYPE_LATEST

    return Response(service.metrics.render(), media_type=CONTENT_TYPE_LATEST)
