"""``/v1/ged``: the words flagged as grammatical errors, as the GED task flags them (``GedChecker``): typed, with
rule, category and message, filtered by the request's options and the personal dictionary."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from electra_detect.app.api_errors import ERROR_RESPONSES
from electra_detect.app.schemas import GedRequest, check_texts, ged_options
from electra_detect.app.service import ServiceDep, check_cost, reply
from electra_detect.tasks.ged.flags import flagged_dicts

router = APIRouter()


@router.post("/v1/ged", summary="words flagged as grammatical errors", responses=ERROR_RESPONSES)
async def ged(body: GedRequest, request: Request, service: ServiceDep) -> Response:
    check_texts(body.texts, service.settings)
    options = service.options(ged_options(body))
    deadline = service.deadline()
    job = await service.prepare(body.texts, deadline)
    cost = service.ged_cost(job, options)
    if options.suggest:  # as /v2/check's
        most = check_cost(job.cost, True)
        service.admit_check(most, f"checking these texts with suggestions may cost {most} model tokens",
                            "send less text, or ask without suggestions")
    scored, flagged = await service.checked(request, job, cost, options, deadline)
    return await reply(lambda: {
        "threshold": service.checker.threshold(options), "level": options.level,
        "calibration": service.detector.calibration,
        "results": [{"text": r.text, "flagged": flagged_dicts(words)}
                    for r, words in zip(scored, flagged, strict=True)]})
