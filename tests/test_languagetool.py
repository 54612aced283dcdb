"""The LanguageTool-compatible routes: the translation, the routes in process, and a real LanguageTool client."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from electra_detect.app.languagetool import (
    CheckError,
    check_answer,
    matches,
    parse_document,
    parse_language,
    utf16_offsets,
)
from electra_detect.detector import Detector

TEXT = "She don't like it. The farmer saw a red house."


def test_typed_words_become_languagetool_rules() -> None:
    document = parse_document(TEXT, None)
    flagged = [{"word": "don't", "start": 4, "end": 9, "score": 0.91, "operation": "R", "type": "VERB:SVA"},
               {"word": "farmer", "start": 23, "end": 29, "score": 0.6, "operation": "R", "type": "SPELL"},
               {"word": "red", "start": 36, "end": 39, "score": 0.7, "operation": "U", "type": "PUNCT"},
               {"word": "house", "start": 40, "end": 45, "score": 0.8}]
    found = matches(document, flagged)
    assert [(m["offset"], m["length"]) for m in found] == [(4, 5), (23, 6), (36, 3), (40, 5)]
    sva, spell, punct, untyped = (m["rule"] for m in found)
    assert sva["id"] == "ELECTRA_DETECT_R_VERB_SVA" and sva["issueType"] == "grammar"
    assert sva["category"] == {"id": "GRAMMAR", "name": "Grammar"} and "subject-verb" in sva["description"]
    assert (spell["issueType"], spell["category"]["id"]) == ("misspelling", "TYPOS")
    assert (punct["id"], punct["issueType"]) == ("ELECTRA_DETECT_U_PUNCT", "typographical")
    assert untyped["id"] == "ELECTRA_DETECT_ERROR"
    first = found[0]
    assert first["sentence"] == "She don't like it." and found[1]["sentence"] == "The farmer saw a red house."
    context = first["context"]
    assert context["text"][context["offset"]:context["offset"] + context["length"]] == "don't"
    assert first["replacements"] == [] and first["message"] and first["shortMessage"]
    answer = check_answer(parse_language("en-US"), found, "1.2.3")
    assert answer["software"]["name"] == "electra-detect" and answer["software"]["apiVersion"] == 1
    assert answer["software"]["version"] == "1.2.3" and answer["language"]["code"] == "en-US"
    assert answer["language"]["detectedLanguage"]["code"] == "en-US"


def test_suggestions_become_replacements_over_the_text_they_replace() -> None:
    document = parse_document(TEXT, None)
    fix = [{"value": "doesn't", "start": 4, "end": 9}, {"value": "didn't", "start": 4, "end": 9}]
    flagged = [{"word": "don", "start": 4, "end": 7, "score": 0.9, "suggestions": fix},  # pieces of one word:
               {"word": "t", "start": 8, "end": 9, "score": 0.8, "suggestions": fix},  # one match
               {"word": "farmer", "start": 23, "end": 29, "score": 0.6, "suggestions": []},
               {"word": "red", "start": 36, "end": 39, "score": 0.7, "suggestions": [{"value": "", "start": 36,
                                                                                      "end": 39}]}]
    found = matches(document, flagged)
    assert [(m["offset"], m["length"]) for m in found] == [(4, 5), (23, 6), (36, 3)]
    assert [m["replacements"] for m in found] == [[{"value": "doesn't"}, {"value": "didn't"}], [], [{"value": ""}]]
    assert found[0]["context"]["length"] == 5
    marked = parse_document(None, json.dumps({"annotation": [{"text": "She do"}, {"markup": "<b>"},
                                                             {"text": "n't go."}]}))
    assert marked.checked == "She don't go."  # a word that runs into markup keeps its own span, no replacements
    found = matches(marked, [{"word": "do", "start": 4, "end": 6, "score": 0.9,
                              "suggestions": [{"value": "does", "start": 4, "end": 9}]}])
    assert [(m["offset"], m["length"], m["replacements"]) for m in found] == [(4, 2, [])]


def test_markup_is_not_checked_but_counts_for_offsets() -> None:
    data = {"annotation": [{"markup": "<p>"}, {"text": "She don't"}, {"markup": "<br/>", "interpretAs": "\n"},
                           {"text": "like it."}, {"markup": "</p>"}]}
    document = parse_document(None, json.dumps(data))
    assert document.original == "<p>She don't<br/>like it.</p>" and document.checked == "She don't\nlike it."
    found = matches(document, [{"word": "don't", "start": 4, "end": 9, "score": 0.9},
                               {"word": "like", "start": 10, "end": 14, "score": 0.9}])
    spans = [document.original[m["offset"]:m["offset"] + m["length"]] for m in found]
    assert spans == ["don't", "like"]
    stand_in = parse_document(None, json.dumps({"annotation": [{"markup": "", "interpretAs": "Some words"},
                                                               {"text": "are mine"}]}))
    found = matches(stand_in, [{"word": "words", "start": 5, "end": 10, "score": 0.9},  # not the user's text
                               {"word": "mine", "start": 14, "end": 18, "score": 0.9}])
    assert [(m["offset"], m["length"]) for m in found] == [(4, 4)]


def test_offsets_count_utf16_code_units_as_languagetool_does() -> None:
    text = "I \U0001F600 dont know."  # one emoji: two UTF-16 code units, one Python character
    assert utf16_offsets(text)[:5] == [0, 1, 2, 4, 5]
    found = matches(parse_document(text, None), [{"word": "dont", "start": 4, "end": 8, "score": 0.9}])
    assert (found[0]["offset"], found[0]["length"]) == (5, 4)


@pytest.mark.parametrize("text, data, language, fragment", [
    (None, None, "en-US", "missing text"),
    ("a", '{"annotation": []}', "en-US", "not both"),
    (None, "{not json", "en-US", "annotation JSON"),
    (None, '{"annotation": [{"text": 3}]}', "en-US", "annotation JSON"),
    (None, '{"annotation": [{"text": "a", "markup": "b"}]}', "en-US", "annotation JSON"),
    (None, '[1]', "en-US", "annotation JSON"),
    (None, '{"annotation": [{"text": "\\ud800"}]}', "en-US", "annotation JSON"),  # a lone surrogate
    ("text", None, "de-DE", "not supported"),
    ("text", None, "", "not supported"),
])
def test_bad_requests_are_check_errors(text: str | None, data: str | None, language: str, fragment: str) -> None:
    with pytest.raises(CheckError, match=re.escape(fragment)):
        parse_language(language)
        parse_document(text, data)


@pytest.fixture(scope="module")
def client(micro_run: Path) -> Iterator[object]:
    from fastapi.testclient import TestClient

    from electra_detect.app.server import create_app
    from electra_detect.app.settings import ServerSettings

    detector = Detector.load(micro_run / "discriminator", engine="torch")
    with TestClient(create_app(detector, ServerSettings(ged_threshold=0.0, max_chars=300))) as test_client:
        yield test_client


def test_check_flags_every_word_at_threshold_zero(client) -> None:
    response = client.post("/v2/check", data={"text": TEXT, "language": "en-US", "enabledOnly": "false",
                                              "motherTongue": "de"})
    assert response.status_code == 200, response.text
    body = response.json()
    words = [TEXT[m["offset"]:m["offset"] + m["length"]] for m in body["matches"]]
    assert {"She", "farmer", "house"} <= set(words)  # threshold 0: every word, at its own offset
    assert body["software"]["name"] == "electra-detect" and body["language"]["code"] == "en-US"
    assert all(m["rule"]["id"] == "ELECTRA_DETECT_ERROR" for m in body["matches"])  # an untyped model
    marked = client.post("/v2/check", files={"data": (None, json.dumps(
        {"annotation": [{"markup": "<b>"}, {"text": "farmer"}, {"markup": "</b>"}]})), "language": (None, "auto")})
    assert marked.status_code == 200, marked.text  # multipart too
    assert [(m["offset"], m["length"]) for m in marked.json()["matches"]] == [(3, 6)]
    for blank in ("  ", ""):  # an empty document: no matches (an empty field is given, not missing)
        empty = client.post("/v2/check", data={"text": blank, "language": "en"})
        assert empty.status_code == 200 and empty.json()["matches"] == [], blank
    replacements = [r for m in body["matches"] for r in m["replacements"]]
    assert replacements and all(set(r) == {"value"} and isinstance(r["value"], str) for r in replacements)


def test_no_suggest_answers_without_replacements(micro_run: Path) -> None:
    from fastapi.testclient import TestClient

    from electra_detect.app.server import create_app
    from electra_detect.app.settings import ServerSettings

    detector = Detector.load(micro_run / "discriminator", engine="torch")
    with TestClient(create_app(detector, ServerSettings(ged_threshold=0.0, suggest=False))) as test_client:
        body = test_client.post("/v2/check", data={"text": TEXT, "language": "en-US"}).json()
    assert body["matches"] and all(m["replacements"] == [] for m in body["matches"])


def test_check_errors_are_json_4xx(client) -> None:
    cases = [({"language": "en-US"}, 422, "invalid_request"), ({"text": "x" * 301}, 413, "text_too_long"),
             ({"text": "Hello there.", "language": "fr"}, 422, "invalid_request"),
             ({"text": "Hello there.", "language": ""}, 422, "invalid_request"),
             ({"data": "{bad"}, 422, "invalid_request")]
    for form, status, kind in cases:
        response = client.post("/v2/check", data=form)
        assert (response.status_code, response.json()["error"]["type"]) == (status, kind), form
    bare = client.post("/v2/check")  # no body at all: no text, as for the JSON routes
    assert bare.status_code == 422 and bare.json()["error"]["type"] == "invalid_request"
    untyped = client.post("/v2/check", content=b"text=Hello.")  # a body without a Content-Type
    assert untyped.status_code == 415
    as_json = client.post("/v2/check", json={"text": "Hello."})
    assert as_json.status_code == 415 and as_json.json()["error"]["type"] == "unsupported_media_type"
    assert client.post("/v1/ged", data={"texts": "a"}).status_code == 415  # JSON routes still read only JSON


def test_forms_are_decoded_strictly_with_errors_about_the_form(client) -> None:
    form = {"content-type": "application/x-www-form-urlencoded"}
    cases = [(b"text=%ff%fe&language=en", form, 400, "bad_request", "UTF-8"),  # percent-encoded bytes, not UTF-8
             (b"text=caf\xe9&language=en", form, 400, "bad_request", "UTF-8"),  # raw Latin-1 bytes
             ("&".join(f"f{i}=1" for i in range(5000)).encode(), form, 413, "too_many_fields", "fields")]
    for body, headers, status, kind, fragment in cases:
        response = client.post("/v2/check", content=body, headers=headers)
        assert (response.status_code, response.json()["error"]["type"]) == (status, kind), response.text
        assert fragment in response.json()["error"]["message"] and "JSON" not in response.json()["error"]["message"]
    multipart = client.post("/v2/check", files={"text": (None, b"caf\xe9"), "language": (None, "en")})
    assert multipart.status_code == 400 and "UTF-8" in multipart.json()["error"]["message"]
    many = client.post("/v2/check", files={f"f{i}": (None, "1") for i in range(1500)})
    assert many.status_code == 413 and many.json()["error"]["type"] == "too_many_fields"
    fine = client.post("/v2/check", content=b"text=caf%C3%A9+au+lait&language=en", headers=form)
    assert fine.status_code == 200  # UTF-8, percent-encoded and '+' for spaces: read as before


def test_languages_and_openapi(client) -> None:
    languages = client.get("/v2/languages").json()
    assert {"name": "English (US)", "code": "en", "longCode": "en-US"} in languages
    spec = client.get("/openapi.json").json()
    assert {"/v2/check", "/v2/languages"} <= set(spec["paths"])
    form = spec["paths"]["/v2/check"]["post"]["requestBody"]["content"]
    assert "application/x-www-form-urlencoded" in form
    body = spec["components"]["schemas"][form["application/x-www-form-urlencoded"]["schema"]["$ref"].split("/")[-1]]
    text, language, data = (body["properties"][name] for name in ("text", "language", "data"))
    assert text["type"] == "string" and text["maxLength"] == 300  # the server's max_chars, as for /v1/ged's texts
    assert [bool(re.search(data["pattern"], d)) for d in ['{"annotation": [{"text": "a"}]}', "null", "{}"]] == [
        True, False, False]  # a form field is a string: "null" is no annotation
    assert [bool(re.search(language["pattern"], c)) for c in ["en-US", "EN", "auto", "de-DE", "english"]] == [
        True, True, True, False, False]
    assert body["anyOf"] == [{"required": ["text"]}, {"required": ["data"]}]
    assert spec["paths"]["/v2/check"]["post"]["requestBody"]["required"] is True


def test_a_real_languagetool_client_reads_the_matches(micro_run: Path, tmp_path: Path, monkeypatch) -> None:
    import language_tool_python
    import language_tool_python.download_lt as download_lt

    from tests.test_server import Server

    def no_download(*args: object, **kwargs: object) -> None:
        raise AssertionError("language_tool_python tried to download LanguageTool")

    monkeypatch.setattr(download_lt.LocalLanguageTool, "download", no_download)
    server = Server(micro_run, tmp_path / "server.log", "--engine", "torch", "--ged-threshold", "0")
    try:
        tool = language_tool_python.LanguageTool("en-US", remote_server=server.url)
        text = "I \U0001F600 saw a red house."
        found = tool.check(text)
        words = [text[m.offset:m.offset + m.error_length] for m in found]
        assert {"saw", "red", "house"} <= set(words), words  # code-point offsets after the emoji, as the client fixes
        assert all(m.rule_id == "ELECTRA_DETECT_ERROR" and m.category == "GRAMMAR" for m in found)
        tool.close()
    finally:
        assert server.stop() == 0


def test_a_real_languagetool_client_gets_the_shipped_models_replacements(tmp_path: Path, monkeypatch) -> None:
    import language_tool_python
    import language_tool_python.download_lt as download_lt

    from tests.test_server import Server

    def no_download(*args: object, **kwargs: object) -> None:
        raise AssertionError("language_tool_python tried to download LanguageTool")

    monkeypatch.setattr(download_lt.LocalLanguageTool, "download", no_download)
    shipped = Path(__file__).resolve().parent.parent / "models" / "electra-minilm"
    server = Server(shipped, tmp_path / "server.log", "--engine", "torch")
    try:
        tool = language_tool_python.LanguageTool("en-US", remote_server=server.url)
        text = "She go to school every day. Their is a problem with the the car."
        found = {text[m.offset:m.offset + m.error_length]: m.replacements for m in tool.check(text)}
        assert "goes" in found["go"] and found["Their"][0] == "There", found
        assert "" in found["the"]  # the repeated word: delete it
        corrected = language_tool_python.utils.correct(text, [m for m in tool.check(text) if m.replacements])
        assert corrected.startswith("She went to school") or corrected.startswith("She goes to school"), corrected
        tool.close()
    finally:
        assert server.stop() == 0
