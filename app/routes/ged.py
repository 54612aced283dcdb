"""``/v1/ged``: the words flagged as grammatical errors, as the GED task flags them (``GedChecker``): typed, with
rule, category and message, filtered by the request's options and the personal dictionary; with ``markup``
(markdown, latex) each text's prose only, read through the markup layer (``electra_detect.markup``). The route
parses the body and shapes the answer; ``Service.check`` admits and runs the check."""

from __future__ import annotations

import asyncio
from typing import Any

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
    if body.markup != "text":
        return await ged_documents(body, request, service, options)
    async with disconnect_signal(request) as cancel:
        checked = await service.check(body.texts, options, client_of(request), cancel)
    return await reply(lambda: {
        "threshold": checked.threshold, "level": checked.options.level, "calibration": service.detector.calibration,
        "results": [{"text": r.text, "flagged": flagged_dicts(words)}
                    for r, words in zip(checked.scores, checked.flagged, strict=True)]})


async def ged_documents(body: GedRequest, request: Request, service: ServiceDep, options: Any) -> Response:
    """Each text read as a ``body.markup`` document: its prose blocks checked in one ``Service.check``, each flagged
    word (and its suggestions) placed back in the document, flags on a stand-in (code, math, a URL) dropped."""
    from electra_detect.cli.ged import in_document  # ged --markup's placing of a flag, shared
    from electra_detect.markup import prose_blocks

    blocks = await asyncio.to_thread(lambda: [(number, block) for number, text in enumerate(body.texts)
                                              for block in prose_blocks(text, body.markup)])
    found: list[list[dict[str, Any]]] = [[] for _ in body.texts]
    if blocks:
        async with disconnect_signal(request) as cancel:
            checked = await service.check([block.text for _, block in blocks], options, client_of(request), cancel)
        threshold, level = checked.threshold, checked.options.level
        for (number, block), words in zip(blocks, checked.flagged, strict=True):
            found[number] += [w for w in (in_document(word, block) for word in flagged_dicts(words)) if w is not None]
    else:  # no prose at all (a code block, front matter): nothing to check
        served = service.options(options)
        threshold, level = service.checker.threshold(served), served.level
    return await reply(lambda: {
        "threshold": threshold, "level": level, "calibration": service.detector.calibration,
        "results": [{"text": text, "flagged": words} for text, words in zip(body.texts, found, strict=True)]})
