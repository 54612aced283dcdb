"""LanguageTool's API over ``/v1/ged``'s scores: ``/v2/check`` and ``/v2/languages`` (app/languagetool.py maps)."""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from electra_detect.app.api_errors import ERROR_RESPONSES, ApiError
from electra_detect.app.forms import FormError, parse_form
from electra_detect.app.languagetool import LANGUAGES, CheckError, check_answer, matches, parse_document, parse_language
from electra_detect.app.schemas import CHECK_FORM_BODY, NOT_BLANK, check_texts
from electra_detect.app.service import ServiceDep, check_cost, reply

router = APIRouter()


async def check_fields(request: Request) -> dict[str, str]:
    """The fields of a /v2/check request, decoded strictly (app/forms.py): every LanguageTool option is read from
    here, so a new one (or another way to send them) is added in one place."""
    try:
        return parse_form(await request.body(), request.headers.get("content-type"))
    except FormError as exc:
        raise ApiError(exc.status, exc.kind, exc.message) from None


@router.post("/v2/check", summary="LanguageTool-compatible check (form fields text or data, language)",
             openapi_extra={"requestBody": CHECK_FORM_BODY},
             responses={**ERROR_RESPONSES,
                        400: {"description": "bad_request: a form field is not valid UTF-8, or the body is not a "
                                             "form"},
                        413: {"description": "text_too_long, too_many_tokens, body_too_large, too_many_fields, or "
                                             "over_budget: the check's cost (its model tokens, times 1 + the "
                                             "suggestion factor with suggestions) is over the server's "
                                             "check_budget; refused before any scoring"},
                        415: {"description": "unsupported_media_type: send a form "
                                             "(application/x-www-form-urlencoded or multipart/form-data)"}})
async def languagetool_check(request: Request, service: ServiceDep) -> Response:
    """LanguageTool's /v2/check over /v1/ged's scores (its threshold): one match per flagged word, offsets in
    UTF-16 code units of the original text, ``replacements`` from the suggester (unless the server runs with
    ``--no-suggest``); other LanguageTool fields are accepted and ignored. Admitted by its cost before any work:
    its model tokens (times 1 + the suggestion factor) against ``check_budget`` and its client's share."""
    fields = await check_fields(request)
    try:
        found_language = parse_language(fields.get("language"))
        document = parse_document(fields.get("text"), fields.get("data"))
    except CheckError as exc:
        raise ApiError(422, "invalid_request", str(exc)) from None
    found: list[dict[str, Any]] = []
    if re.search(NOT_BLANK, document.checked):  # an empty document has no matches, as in LanguageTool
        settings = service.settings
        check_texts([document.checked], settings, "text")
        deadline = service.deadline()
        # Every word is at least one model token, so its words (+ [CLS]/[SEP]) bound its cost from below: a text
        # over budget by that count is refused on the event loop, before it queues for the tokenizer's thread.
        least = check_cost(len(document.checked.split()) + 2, settings.suggest)
        if least > settings.check_budget:
            service.metrics.refused.labels("check_budget").inc()
            raise ApiError(413, "over_budget", f"checking this text costs at least {least} model tokens (one a word, "
                                               f"with its suggestions' bound); this server's budget per check is "
                                               f"{settings.check_budget}: send less text")
        job = await service.prepare([document.checked], deadline)
        cost = check_cost(job.cost, settings.suggest)
        if cost > settings.check_budget:  # before planning suggestions or scoring anything
            service.metrics.refused.labels("check_budget").inc()
            how = f"{job.cost} to score it, and up to {cost - job.cost} for its suggestions" if settings.suggest \
                else "to score it"
            raise ApiError(413, "over_budget", f"checking this text may cost {cost} model tokens ({how}); this "
                                               f"server's budget per check is {settings.check_budget}: send less "
                                               f"text")
        with service.share(request, cost):
            service.check_load(request, cost, deadline)
            result = (await service.run(request, job, deadline))[0]
            flagged = result.flagged(service.ged_threshold)
            if settings.suggest and flagged:
                flagged = await service.suggested(request, document.checked, flagged, deadline, cost - job.cost)
        found = matches(document, flagged)
    return await reply(lambda: check_answer(found_language, found, request.app.version))


@router.get("/v2/languages", summary="LanguageTool-compatible list of the languages checked")
async def languagetool_languages() -> list[dict[str, str]]:
    return LANGUAGES
