"""``/v1/ged``: the words flagged as grammatical errors, as the GED task flags them (``GedChecker``): typed, with
rule, category and message, filtered by the request's options and the personal dictionary; with ``markup``
(markdown, latex) each text's prose only, read through the markup layer (``electra_detect.markup``) by
``Service.check``, under the check's admission. The route parses the body and shapes the answer; ``Service.check``
admits, reads and runs the check."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from electra_detect.app.http.errors import ERROR_RESPONSES
from electra_detect.app.http.routing import ServiceDep, client_of, disconnect_signal, reply
from electra_detect.app.http.schemas import GedRequest, check_texts, ged_options
from electra_detect.app.service import Checked
from electra_detect.tasks.ged.flags import flagged_dicts

router = APIRouter()


@router.post("/v1/ged", summary="words flagged as grammatical errors", responses=ERROR_RESPONSES)
async def ged(body: GedRequest, request: Request, service: ServiceDep) -> Response:
    check_texts(body.texts, service.settings)
    options = ged_options(body)
    async with disconnect_signal(request) as cancel:
        checked = await service.check(body.texts, options, client_of(request), cancel, body.markup)
    if checked.blocks is not None:
        return await ged_documents(body, service, checked)
    return await reply(lambda: {
        "threshold": checked.threshold, "level": checked.options.level, "calibration": service.detector.calibration,
        "results": [{"text": r.text, "flagged": flagged_dicts(words)}
                    for r, words in zip(checked.scores, checked.flagged, strict=True)]})


async def ged_documents(body: GedRequest, service: ServiceDep, checked: Checked) -> Response:
    """Each text read as a ``body.markup`` document (by ``Service.check``, under the check's admission): each flagged
    word of its prose blocks (and its suggestions) placed back in the document, flags on a stand-in (code, math, a
    URL) dropped."""
    found: list[list[dict[str, Any]]] = [[] for _ in body.texts]
    for (number, block), words in zip(checked.blocks or [], checked.flagged, strict=True):
        found[number] += [w for w in (block.place(word) for word in flagged_dicts(words)) if w is not None]
    return await reply(lambda: {
        "threshold": checked.threshold, "level": checked.options.level, "calibration": service.detector.calibration,
        "results": [{"text": text, "flagged": words} for text, words in zip(body.texts, found, strict=True)]})
