"""``/v1/ged``: the words flagged as grammatical errors, as the GED task flags them (``GedChecker``): typed, with
rule, category and message, filtered by the request's options and the personal dictionary. The route parses the
body and shapes the answer; ``Service.check`` admits and runs the check."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from electra_detect.app.api_errors import ERROR_RESPONSES
from electra_detect.app.routing import ServiceDep, client_of, disconnect_signal, reply
from electra_detect.app.schemas import GedRequest, check_texts, ged_options
from electra_detect.tasks.ged.flags import flagged_dicts

router = APIRouter()


@router.post("/v1/ged", summary="words flagged as grammatical errors", responses=ERROR_RESPONSES)
async def ged(body: GedRequest, request: Request, service: ServiceDep) -> Response:
    check_texts(body.texts, service.settings)
    options = ged_options(body)
    async with disconnect_signal(request) as cancel:
        checked = await service.check(body.texts, options, client_of(request), cancel)
    return await reply(lambda: {
        "threshold": checked.threshold, "level": checked.options.level, "calibration": service.detector.calibration,
        "results": [{"text": r.text, "flagged": flagged_dicts(words)}
                    for r, words in zip(checked.scores, checked.flagged, strict=True)]})
