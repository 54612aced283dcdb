"""Request bodies as the server reads them and declares them (OpenAPI), with the limits a body is checked to."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from electra_detect.app.api_errors import ApiError
from electra_detect.app.settings import ServerSettings
from electra_detect.errors import GedOptionsError
from electra_detect.tasks.ged.options import GedOptions, build_ged_options

WEIGHT_LIMIT = 1e6  # |lm_weight|, |length_weight|
SCORE_LIMIT = 1e12  # |recogniser score|


def _finite(limit: float, low: float | None = None) -> AfterValidator:
    """A JSON number (int or float) in [low, limit] (low defaults to -limit), as a float. Checked before any
    arithmetic, so a 400-digit integer or 1e308 is a 422, not an OverflowError or an infinite total."""
    low = -limit if low is None else low

    def check(value: float | int) -> float:
        if isinstance(value, float) and not math.isfinite(value) or not low <= value <= limit:
            raise ValueError(f"must be a finite number in [{low:g}, {limit:g}]")
        return float(value)

    return AfterValidator(check)


Number = StrictFloat | StrictInt  # bool is not a number here: StrictInt rejects true/false
# A text with a character outside Python's str.isspace() set, spelled out so that the server's check, pydantic's
# (Rust) regex and a client's JSON-schema regex all agree on what "blank" means.
NOT_BLANK = r"[^\t-\r\x1c- \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
Text = Annotated[StrictStr, Field(json_schema_extra={"pattern": NOT_BLANK})]  # checked in check_texts, after
# pydantic: a lone surrogate must still reach the text check and its invalid_text answer

# The one-string n-best form as the rerank reader parses it (str.splitlines, then an optional score after the first
# TAB or " ||| "), spelled as a regex so the schema and the server's check agree: a hypothesis per line, blank lines
# skipped, a score a plain decimal below 1e9. Every line ends at one terminator character (a CRLF is a line and a
# blank one), so the regex has one parse and no catastrophic backtracking.
_END = r"\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029"
_INLINE_BLANK = r"\x1f \xa0\u1680\u2000-\u200a\u202f\u205f\u3000"
_NO_SEP = r"(?! \|\|\| )"
_HYPOTHESIS_LINE = (rf"(?:{_NO_SEP}[{_INLINE_BLANK}])*{NOT_BLANK}(?:{_NO_SEP}[^\t{_END}])*"
                    rf"(?:(?:\t| \|\|\| )[\t{_INLINE_BLANK}]*-?[0-9]{{1,9}}(?:\.[0-9]{{1,9}})?[\t{_INLINE_BLANK}]*)?")
NBEST_LINES = rf"^(?=[\s\S]*{NOT_BLANK})(?:(?:{_HYPOTHESIS_LINE}|[\t{_INLINE_BLANK}]*)[{_END}])*" \
              rf"(?:{_HYPOTHESIS_LINE}|[\t{_INLINE_BLANK}]*)$"
NbestLines = Annotated[StrictStr, Field(json_schema_extra={"pattern": NBEST_LINES})]  # checked in the handler


def _bounds(limit: float, low: float | None = None) -> Any:
    """The same bounds as :func:`_finite`, declared in the OpenAPI schema (the check itself stays _finite's)."""
    return Field(json_schema_extra={"minimum": -limit if low is None else low, "maximum": limit})


Weight = Annotated[Number, _finite(WEIGHT_LIMIT), _bounds(WEIGHT_LIMIT)]
Threshold = Annotated[Number, _bounds(1.0, 0.0)]  # declared here, checked by build_ged_options (422 in ged_options)
AsrScore = Annotated[Number, _finite(SCORE_LIMIT), _bounds(SCORE_LIMIT)]


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    texts: list[Text] = Field(min_length=1,
                              description="texts to score (1 to max_texts, each 1 to max_chars characters, "
                                          "together at most max_tokens model tokens)")
    tokens: StrictBool = Field(True, description="include per-subword scores (true or false; not 1 or \"yes\")")


# An id holds a character that is neither a comma nor blank (Python's whitespace, as NOT_BLANK): checked in
# ged_options, declared as a pattern (the lists of ids are comma-separated strings in LanguageTool's form).
_ID_CHAR = r"[^,\t-\r\x1c- \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
RuleId = Annotated[StrictStr, Field(max_length=200, json_schema_extra={"pattern": _ID_CHAR})]
DictionaryWord = Annotated[StrictStr, Field(max_length=200)]
MAX_IDS = 1000  # rule or category ids, or dictionary words, in one request
# enabled_only needs an enabled rule or category: a rule across fields, declared for clients (and schemathesis).
_ENABLED_ONLY_NEEDS = {"if": {"properties": {"enabled_only": {"const": True}}, "required": ["enabled_only"]},
                       "then": {"anyOf": [{"required": [name], "properties": {name: {"minItems": 1}}}
                                          for name in ("enabled_rules", "enabled_categories")]}}


class GedRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_ENABLED_ONLY_NEEDS)
    texts: list[Text] = Field(min_length=1, description="texts to check (limits as for /v1/score)")
    threshold: Threshold | None = Field(None, description="in [0, 1]; default: the server's --ged-threshold, else the "
                                                          "model's ged.json at the level, else 0.5")
    level: Literal["default", "picky"] = Field("default", description="picky flags more: the lower threshold tuned "
                                                                      "for it (LanguageTool's level)")
    disabled_rules: list[RuleId] = Field([], max_length=MAX_IDS, description="rule ids never flagged "
                                                                              "(docs/ged_rules.md); unknown ids are "
                                                                              "ignored")
    enabled_rules: list[RuleId] = Field([], max_length=MAX_IDS, description="with enabled_only: the rules kept")
    disabled_categories: list[RuleId] = Field([], max_length=MAX_IDS,
                                              description="categories never flagged: GRAMMAR, TYPOS, PUNCTUATION, "
                                                          "CASING, STYLE")
    enabled_categories: list[RuleId] = Field([], max_length=MAX_IDS, description="with enabled_only: the categories "
                                                                                  "kept")
    enabled_only: StrictBool = Field(False, description="flag only under enabled_rules and enabled_categories (one "
                                                        "of them must be given)")
    words: list[DictionaryWord] = Field([], max_length=MAX_IDS,
                                        description="this request's dictionary: words (or phrases) never flagged nor "
                                                    "suggested, beside the server's personal dictionary file; any "
                                                    "case, inflections included")
    suggest: StrictBool = Field(False, description="give each flagged word its suggestions (the type, rule and "
                                                   "message are the same without)")
    markup: Literal["text", "markdown", "latex"] = Field(
        "text", description="how each text is read: text (as it is), markdown or latex (its prose checked, code, "
                            "URLs, math and commands not; offsets stay those of the text given: docs/markup.md)")


class Hypothesis(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: Text
    score: AsrScore | None = Field(None, description=f"recogniser (ASR) log score, |score| <= {SCORE_LIMIT:g}")


class RerankRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lists: list[Annotated[list[Hypothesis | Text], Field(min_length=1)] | NbestLines] = Field(
        min_length=1,
        description="n-best lists: each a list of hypotheses ({text, score} or plain text), or one string "
                    "with a hypothesis per line and an optional score after a TAB or ' ||| ' (a plain decimal, "
                    "at most 9 digits before the point). All hypotheses together count against max_texts and "
                    "max_tokens")
    lm_weight: Weight = Field(1.0, description=f"weight of the ELECTRA score, |lm_weight| <= {WEIGHT_LIMIT:g}")
    length_weight: Weight = Field(0.0, description=f"weight per word, |length_weight| <= {WEIGHT_LIMIT:g}")
    confidence: StrictBool = Field(False, description="add each word of the top hypothesis with its probability of "
                                                      "being wrong (word confidence for the recogniser)")


def check_texts(texts: list[str], settings: ServerSettings, what: str = "texts") -> None:
    if not texts:
        raise ApiError(422, "invalid_request", f"{what} must be a non-empty list")
    if len(texts) > settings.max_texts:
        raise ApiError(413, "too_many_texts", f"{len(texts)} {what} in one request; the limit is {settings.max_texts}")
    for index, text in enumerate(texts):
        if not re.search(NOT_BLANK, text):
            raise ApiError(422, "invalid_request", f"{what}[{index}] is empty")
        if len(text) > settings.max_chars:
            raise ApiError(413, "text_too_long", f"{what}[{index}] has {len(text)} characters; "
                                                 f"the limit is {settings.max_chars}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ApiError(422, "invalid_text", f"{what}[{index}] is not valid Unicode (lone surrogate)") from None


def rerank_lists(body: RerankRequest) -> list[list[tuple[str, float | None]]]:
    """The request's n-best lists as (hypothesis, recogniser score or None), checked as the schema declares them:
    finite weights, a non-empty list of non-empty lists, one-string scores plain decimals, scores in range."""
    from electra_detect.errors import RerankError
    from electra_detect.tasks.rerank.nbest import parse_hypothesis_lines

    for name in ("lm_weight", "length_weight"):
        if not math.isfinite(float(getattr(body, name))):
            raise ApiError(422, "invalid_request", f"{name} must be finite")
    if not body.lists:
        raise ApiError(422, "invalid_request", "lists must be a non-empty list of n-best lists")
    parsed: list[list[tuple[str, float | None]]] = []
    for index, nbest in enumerate(body.lists):
        try:
            hyps = parse_hypothesis_lines(nbest) if isinstance(nbest, str) else [
                (h, None) if isinstance(h, str) else (h.text, None if h.score is None else float(h.score))
                for h in nbest]
        except RerankError as exc:  # the reader names the line
            raise ApiError(422, "invalid_request", f"lists[{index}]: {exc}") from None
        if isinstance(nbest, str) and not re.search(NBEST_LINES, nbest):  # what the schema's pattern refuses
            raise ApiError(422, "invalid_request", f"lists[{index}]: a score in the one-string form is a plain "
                                                   f"decimal with at most 9 digits before the point")
        if not hyps:
            raise ApiError(422, "invalid_request", f"lists[{index}] holds no hypotheses")
        if any(s is not None and not (math.isfinite(s) and abs(s) <= SCORE_LIMIT) for _, s in hyps):
            raise ApiError(422, "invalid_request", f"lists[{index}]: scores must be finite numbers in "
                                                   f"[{-SCORE_LIMIT:g}, {SCORE_LIMIT:g}]")
        parsed.append(hyps)
    return parsed


def ged_options(body: GedRequest) -> GedOptions:
    """The GED options a /v1/ged body asks for (``build_ged_options``; ``Service.check`` adds the server's
    threshold); a blank id, a threshold out of [0, 1] or enabled_only with nothing enabled is a 422."""
    for name in ("disabled_rules", "enabled_rules", "disabled_categories", "enabled_categories"):
        if any(not re.search(_ID_CHAR, value) for value in getattr(body, name)):
            raise ApiError(422, "invalid_request", f"{name}: an id must not be blank")
    try:
        return build_ged_options(threshold=body.threshold, level=body.level, disabled_rules=body.disabled_rules,
                                 enabled_rules=body.enabled_rules, disabled_categories=body.disabled_categories,
                                 enabled_categories=body.enabled_categories, enabled_only=body.enabled_only,
                                 words=body.words, suggest=body.suggest)
    except GedOptionsError as exc:
        raise ApiError(422, "invalid_request", str(exc)) from None


LIMITS_DOC = (
    "Limits (each a JSON error): more than max_texts texts or hypotheses: 413 too_many_texts; a text over max_chars "
    "characters: 413 text_too_long; more than max_tokens model tokens in one request (the texts' windows with "
    "[CLS]/[SEP], overlap counted): 413 too_many_tokens; a body over max_body_bytes: 413 body_too_large; a body "
    "not sent within read_timeout: 408 request_timeout (and a request head not sent within it: the connection is "
    "closed); not scored within timeout, queueing included: 504 timeout (the model stops working on it); a "
    "request of more than step_tokens that could not finish before its deadline at the present load: 503 "
    "overloaded (Retry-After); past the client's share of requests or model tokens in flight (client_requests, "
    "client_tokens; a client is its API key, else its address) or the server's max_requests: 429 "
    "too_many_requests (Retry-After; a short request, step_tokens or less, is never refused for tokens); a check "
    "(/v1/ged, /v2/check) whose texts' model tokens are over check_budget: 413 over_budget before any scoring (its "
    "candidates, for suggestions, are cut to the rest of the budget and of the time left); a body "
    "without Content-Type: application/json: 415 unsupported_media_type; malformed JSON: 400 malformed_json, "
    "bad_request (not UTF-8), json_too_deep, number_too_long; a field of the wrong type or out of range (numbers "
    "must be finite and in range, booleans true/false): 422 invalid_request. See docs/serving.md.")


def declare_limits(schema: dict[str, Any], settings: ServerSettings) -> dict[str, Any]:
    """This server's limits in its OpenAPI schema, where JSON Schema can state them: texts and n-best lists per
    request and hypotheses per list (maxItems), characters per text (maxLength). Model tokens and body bytes
    per request cannot be stated there: they are answered 413, as the description says."""
    models = schema.get("components", {}).get("schemas", {})
    for name in ("ScoreRequest", "GedRequest"):
        texts = models.get(name, {}).get("properties", {}).get("texts", {})
        texts["maxItems"] = settings.max_texts
        texts.get("items", {})["maxLength"] = settings.max_chars
    models.get("Hypothesis", {}).get("properties", {}).get("text", {})["maxLength"] = settings.max_chars
    lists = models.get("RerankRequest", {}).get("properties", {}).get("lists", {})
    lists["maxItems"] = settings.max_texts
    for form in lists.get("items", {}).get("anyOf", []):
        if form.get("type") == "array":
            form["maxItems"] = settings.max_texts
            for item in form.get("items", {}).get("anyOf", []):
                if item.get("type") == "string":
                    item["maxLength"] = settings.max_chars
    _declare_check_form(schema, settings)
    schema.setdefault("info", {})["x-limits"] = {"max_texts": settings.max_texts, "max_chars": settings.max_chars,
                                                "max_tokens": settings.max_tokens,
                                                "max_body_bytes": settings.max_body_bytes,
                                                "client_requests": settings.client_requests,
                                                "client_tokens": settings.client_tokens,
                                                "max_requests": settings.max_requests,
                                                "check_budget": settings.check_budget,
                                                "max_head_bytes": settings.max_head_bytes}
    return schema


# /v2/check's body as the OpenAPI operation declares it (the route reads the form itself, app/http/forms.py); the
# CheckForm schema it names is added by declare_limits, with this server's max_chars.
CHECK_FORM_BODY = {"required": True,  # text or data: a request without a form is a 422
                   "content": {media: {"schema": {"$ref": "#/components/schemas/CheckForm"}}
                               for media in ("application/x-www-form-urlencoded", "multipart/form-data")}}


# A form field or query parameter holds no NUL character (U+0000): app/http/forms.py refuses one in any field, name or
# value (a 400), so the schema says so of every field, and schema-valid data is never refused for it.
NO_NUL = r"^[^\x00]*$"
# The LanguageTool options /v2/check reads (app/http/languagetool_api.py: parse_options), as the form and the query
# declare them.
CHECK_OPTIONS: dict[str, dict[str, Any]] = {
    "disabledRules": {"type": "string", "description": "comma-separated rule ids never flagged (docs/ged_rules.md); "
                                                       "unknown ids are ignored"},
    "enabledRules": {"type": "string", "description": "comma-separated rule ids kept with enabledOnly"},
    "disabledCategories": {"type": "string", "description": "comma-separated category ids never flagged: GRAMMAR, "
                                                            "TYPOS, PUNCTUATION, CASING, STYLE"},
    "enabledCategories": {"type": "string", "description": "comma-separated category ids kept with enabledOnly"},
    "level": {"type": "string", "enum": ["default", "picky"], "description": "picky flags more (a lower threshold)"},
    "words": {"type": "string", "description": "this request's dictionary (not LanguageTool's: its dicts names stored "
                                               "dictionaries): words or phrases never flagged nor suggested, comma- or "
                                               "newline-separated, at most 1000"},
    "apiKey": {"type": "string", "description": "the API key, when the server has keys and no X-API-Key header is "
                                                "sent (LanguageTool's field)"},
}
CHECK_OPTIONS = {name: spec if "enum" in spec else {**spec, "pattern": NO_NUL} for name, spec in CHECK_OPTIONS.items()}
ENABLED_ONLY = {"type": "string", "pattern": NO_NUL,
                "description": "true or yes: flag only under enabledRules and enabledCategories (one of them must name "
                               "an id); any other value: off"}
# A GET's query, declared: the text (required: a URL's text is the common case; data works too, undeclared, as
# does enabledOnly, which needs another field set and so cannot be stated parameter by parameter).
CHECK_QUERY_PARAMETERS: list[dict[str, Any]] = [
    {"name": "text", "in": "query", "required": True, "schema": {"type": "string", "pattern": NO_NUL},
     "description": "the text to check"},
    {"name": "language", "in": "query", "required": False, "schema": {"type": "string"},
     "description": "en, en-US, ... or auto (English only)"},
    *({"name": name, "in": "query", "required": False, "schema": {k: v for k, v in spec.items() if k != "description"},
       "description": spec["description"]} for name, spec in CHECK_OPTIONS.items())]


def _declare_check_form(schema: dict[str, Any], settings: ServerSettings) -> None:
    """/v2/check's form, as the route checks it: text or data (not both; a form field is a string, never null),
    text up to max_chars characters, data LanguageTool's annotation JSON (its grammar as a pattern), an English
    language code (or auto), LanguageTool's options (enabledOnly true needs an enabled id); other fields are accepted
    and ignored. The GET operation's query parameters get the same text and language bounds."""
    from electra_detect.app.http.languagetool_api import DATA_PATTERN, LANGUAGE_PATTERN, TRUE

    enabled = [{"required": [name], "properties": {name: {"pattern": _ID_CHAR}}}
               for name in ("enabledRules", "enabledCategories")]
    schema.setdefault("components", {}).setdefault("schemas", {})["CheckForm"] = {
        "title": "CheckForm", "type": "object",
        "properties": {
            "text": {"type": "string", "maxLength": settings.max_chars, "pattern": NO_NUL, "title": "Text",
                     "description": "the text to check (or data)"},
            "data": {"type": "string", "pattern": DATA_PATTERN, "title": "Data",
                     "description": 'LanguageTool annotation JSON: {"annotation": [{"text": ...}, {"markup": ..., '
                                    '"interpretAs": ...}]}'},
            "language": {"type": "string", "pattern": LANGUAGE_PATTERN, "title": "Language",
                         "description": "en, en-US, ... or auto (English only)"},
            **CHECK_OPTIONS, "enabledOnly": ENABLED_ONLY},
        # other fields are accepted and ignored, but read: a NUL in a name or a value is a 400 there too
        "propertyNames": {"pattern": NO_NUL}, "additionalProperties": {"type": "string", "pattern": NO_NUL},
        "allOf": [{"anyOf": [{"required": ["text"]}, {"required": ["data"]}]},
                  {"not": {"required": ["text", "data"]}},
                  {"if": {"required": ["enabledOnly"], "properties": {"enabledOnly": {"enum": list(TRUE)}}},
                   "then": {"anyOf": enabled}}]}
    for parameter in schema.get("paths", {}).get("/v2/check", {}).get("get", {}).get("parameters", []):
        if parameter["name"] == "text":
            parameter["schema"]["maxLength"] = settings.max_chars
        if parameter["name"] == "language":
            parameter["schema"]["pattern"] = LANGUAGE_PATTERN
