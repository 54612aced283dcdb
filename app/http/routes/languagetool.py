"""LanguageTool's API over the GED task: ``/v2/check`` (POST form or GET query) and ``/v2/languages``
(app/http/languagetool_api.py maps)."""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from electra_detect.app.api_errors import ApiError
from electra_detect.app.http.errors import ERROR_RESPONSES
from electra_detect.app.http.forms import FIELDS_SCOPE_KEY, FormError, request_fields
from electra_detect.app.http.languagetool_api import (
    LANGUAGES,
    CheckError,
    check_answer,
    matches,
    parse_document,
    parse_language,
    parse_options,
)
from electra_detect.app.http.routing import ServiceDep, client_of, disconnect_signal, reply
from electra_detect.app.http.schemas import CHECK_FORM_BODY, CHECK_QUERY_PARAMETERS, NOT_BLANK, check_texts
from electra_detect.errors import GedOptionsError

router = APIRouter()
FORM_PATHS = frozenset({"/v2/check"})  # bodies are forms, as LanguageTool's clients send them (the Guard's media check)
KEY_FIELD_PATHS = frozenset({"/v2/check", "/v2/languages"})  # the key may come as LanguageTool's apiKey field


async def check_fields(request: Request) -> dict[str, str]:
    """The fields of a /v2/check request, decoded strictly (``forms.request_fields``: a GET's query string, a POST's
    form; the Guard's reading when it looked for an ``apiKey`` field): every LanguageTool option is read from here,
    so a new one (or another way to send them) is added in one place."""
    if FIELDS_SCOPE_KEY in request.scope:
        return request.scope[FIELDS_SCOPE_KEY]
    try:
        return request_fields(request.method, request.scope.get("query_string", b""), await request.body(),
                              request.headers.get("content-type"))
    except FormError as exc:
        raise ApiError(exc.status, exc.kind, exc.message) from None


CHECK_RESPONSES = {**ERROR_RESPONSES,
                   400: {"description": "bad_request: a field is not valid UTF-8, or the body is not a form"},
                   413: {"description": "text_too_long, too_many_tokens, body_too_large, too_many_fields, or "
                                        "over_budget: the text's model tokens are over the server's check_budget; "
                                        "refused before any scoring"},
                   415: {"description": "unsupported_media_type: send a form "
                                        "(application/x-www-form-urlencoded or multipart/form-data)"},
                   422: {"description": "invalid_request: no text or data, both, bad data JSON, a language other "
                                        "than English, an unknown level, enabledOnly without anything enabled"}}
CHECK_DOC = """LanguageTool's /v2/check over the GED task: one match per flagged word, with its rule id, category and
message from the rule table (docs/ged_rules.md), offsets in UTF-16 code units of the original text, ``replacements``
from the suggester (unless the server runs with ``--no-suggest``). Honours LanguageTool's ``disabledRules``,
``enabledRules``, ``disabledCategories``, ``enabledCategories``, ``enabledOnly``, ``level`` (picky) and ``apiKey``,
and this server's ``words`` (the request's own dictionary words); other LanguageTool fields are accepted and ignored.
Admitted by its cost before any work, as every check (``Service.check``): its model tokens against ``check_budget``
and its client's share; its candidates (suggestions) cost what they really score, cut to the rest of the budget."""


@router.post("/v2/check", summary="LanguageTool-compatible check (form fields text or data, language, options)",
             description=CHECK_DOC, openapi_extra={"requestBody": CHECK_FORM_BODY}, responses=CHECK_RESPONSES)
async def languagetool_check(request: Request, service: ServiceDep) -> Response:
    return await check(request, service)


@router.get("/v2/check", summary="LanguageTool-compatible check, its fields as query parameters",
            description=CHECK_DOC + " A URL over the server's request-head limit (info.x-limits.max_head_bytes: "
                                    "room for max_chars characters) is answered 414 uri_too_long: send long texts as "
                                    "a POST form.",
            openapi_extra={"parameters": CHECK_QUERY_PARAMETERS},
            responses={**CHECK_RESPONSES, 414: {"description": "uri_too_long: the URL is over the server's "
                                                               "request-head limit; POST the same fields as a form"}})
async def languagetool_check_get(request: Request, service: ServiceDep) -> Response:
    return await check(request, service)


async def check(request: Request, service: ServiceDep) -> Response:
    """Both methods' check: the fields read and the options built here, the check admitted and run by
    ``Service.check``, its flagged words shaped as LanguageTool's answer."""
    fields = await check_fields(request)
    settings = service.settings
    try:
        found_language = parse_language(fields.get("language"))
        document = parse_document(fields.get("text"), fields.get("data"))
        options = parse_options(fields, settings.suggest)
    except (CheckError, GedOptionsError) as exc:
        raise ApiError(422, "invalid_request", str(exc)) from None
    found: list[dict[str, Any]] = []
    if re.search(NOT_BLANK, document.checked):  # an empty document has no matches, as in LanguageTool
        check_texts([document.checked], settings, "text")
        async with disconnect_signal(request) as cancel:
            checked = await service.check([document.checked], options, client_of(request), cancel)
        found = matches(document, checked.flagged[0])
    return await reply(lambda: check_answer(found_language, found, request.app.version))


@router.get("/v2/languages", summary="LanguageTool-compatible list of the languages checked")
async def languagetool_languages() -> list[dict[str, str]]:
    return LANGUAGES
