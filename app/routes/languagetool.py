"""LanguageTool's API over ``/v1/ged``'s scores: ``/v2/check`` and ``/v2/languages`` (app/languagetool.py maps)."""

from __future__ import annotations

import asyncio
import re
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from electra_detect.app.api_errors import ERROR_RESPONSES, ApiError
from electra_detect.app.languagetool import LANGUAGES, CheckError, check_answer, matches, parse_document, parse_language
from electra_detect.app.schemas import NOT_BLANK, check_texts
from electra_detect.app.service import ServiceDep, reply

router = APIRouter()


@router.post("/v2/check", summary="LanguageTool-compatible check (form fields text or data, language)",
             responses={**ERROR_RESPONSES, 415: {"description": "unsupported_media_type: send a form "
                                                                "(application/x-www-form-urlencoded or "
                                                                "multipart/form-data)"}})
async def languagetool_check(
        request: Request,
        service: ServiceDep,
        text: Annotated[str | None, Form(description="the text to check (or data)")] = None,
        data: Annotated[str | None, Form(description='LanguageTool annotation JSON: {"annotation": [{"text": '
                                                     '...}, {"markup": ..., "interpretAs": ...}]}')] = None,
        language: Annotated[str | None, Form(description="en, en-US, ... or auto (English only)")] = None,
) -> Response:
    """LanguageTool's /v2/check over /v1/ged's scores (its threshold): one match per flagged word, offsets in
    UTF-16 code units of the original text, ``replacements`` from the suggester (unless the server runs with
    ``--no-suggest``); other LanguageTool fields are accepted and ignored."""
    form = await request.form()  # parsed once (cached); FastAPI reads an empty field as missing, LanguageTool not
    text, data, language = (form[name] if isinstance(form.get(name), str) else None
                            for name in ("text", "data", "language"))
    try:
        found_language, document = parse_language(language), parse_document(text, data)
    except CheckError as exc:
        raise ApiError(422, "invalid_request", str(exc)) from None
    found: list[dict[str, Any]] = []
    if re.search(NOT_BLANK, document.checked):  # an empty document has no matches, as in LanguageTool
        check_texts([document.checked], service.settings, "text")
        deadline = asyncio.get_running_loop().time() + service.settings.timeout_s
        result = (await service.scored(request, [document.checked], deadline))[0]
        flagged = result.flagged(service.ged_threshold)
        if service.settings.suggest and flagged:
            flagged = await service.suggested(request, document.checked, flagged, deadline)
        found = matches(document, flagged)
    return await reply(lambda: check_answer(found_language, found, request.app.version))


@router.get("/v2/languages", summary="LanguageTool-compatible list of the languages checked")
async def languagetool_languages() -> list[dict[str, str]]:
    return LANGUAGES
