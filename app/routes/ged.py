"""``/v1/ged``: the words flagged as grammatical errors."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from electra_detect.app.api_errors import ERROR_RESPONSES
from electra_detect.app.schemas import GedRequest, check_texts, ged_threshold
from electra_detect.app.service import ServiceDep, reply

router = APIRouter()


@router.post("/v1/ged", summary="words flagged as grammatical errors", responses=ERROR_RESPONSES)
async def ged(body: GedRequest, request: Request, service: ServiceDep) -> Response:
    check_texts(body.texts, service.settings)
    threshold = ged_threshold(body, service.ged_threshold)
    results = await service.scored(request, body.texts)
    return await reply(lambda: {
        "threshold": threshold, "calibration": service.detector.calibration,
        "results": [{"text": r.text, "flagged": r.flagged(threshold)} for r in results]})
