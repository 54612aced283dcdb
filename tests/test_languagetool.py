"""The LanguageTool-compatible routes: the translation, the routes in process, and a real LanguageTool client."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from electra_detect.app.http.languagetool_api import (
    CheckError,
    check_answer,
    matches,
    parse_document,
    parse_language,
    utf16_offsets,
)
from electra_detect.detector import Detector
from electra_detect.tasks.ged.flags import FlaggedWord
from electra_detect.tasks.ged.rule_table import RULES_BY_ID, rule_for
from electra_detect.tasks.ged.suggestions import Suggestion

TEXT = "She don't like it. The farmer saw a red house."


def flag(word: str, start: int, end: int, score: float = 0.9, operation: str | None = None, main: str | None = None,
         suggestions: list[tuple[str, int, int]] | None = None) -> FlaggedWord:
    """A flagged-word record as the GED task makes one (its rule from the type)."""
    return FlaggedWord(word, start, end, score, operation, main, rule=rule_for(operation, main),
                       suggestions=None if suggestions is None else [Suggestion(v, a, b, 0.0, "test")
                                                                     for v, a, b in suggestions])


def test_typed_words_become_languagetool_rules() -> None:
    document = parse_document(TEXT, None)
    flagged = [flag("don't", 4, 9, 0.91, "R", "VERB:SVA"), flag("farmer", 23, 29, 0.6, "R", "SPELL"),
               flag("red", 36, 39, 0.7, "U", "PUNCT"), flag("house", 40, 45, 0.8)]
    found = matches(document, flagged)
    assert [(m["offset"], m["length"]) for m in found] == [(4, 5), (23, 6), (36, 3), (40, 5)]
    sva, spell, punct, untyped = (m["rule"] for m in found)
    assert sva["id"] == "ELECTRA_DETECT_R_VERB_SVA" and sva["issueType"] == "grammar"
    assert sva["category"] == {"id": "GRAMMAR", "name": "Grammar"} and "Subject-verb" in sva["description"]
    assert (spell["issueType"], spell["category"]["id"]) == ("misspelling", "TYPOS")
    assert found[1]["type"] == {"typeName": "UnknownWord"}  # a misspelling, as LanguageTool types one
    assert (punct["id"], punct["issueType"]) == ("ELECTRA_DETECT_U_PUNCT", "typographical")
    assert untyped["id"] == "ELECTRA_DETECT_ERROR"
    first = found[0]
    # the table's message, with LanguageTool's quotes where the record emphasises (*don't*)
    assert first["message"] == 'Subject-verb agreement: "don\'t" may be in the wrong form for its subject.'
    assert first["shortMessage"] == "Subject-verb agreement" and found[3]["shortMessage"] == "Possible error"
    assert first["sentence"] == "She don't like it." and found[1]["sentence"] == "The farmer saw a red house."
    context = first["context"]
    assert context["text"][context["offset"]:context["offset"] + context["length"]] == "don't"
    assert first["replacements"] == []
    answer = check_answer(parse_language("en-US"), found, "1.2.3")
    assert answer["software"]["name"] == "electra-detect" and answer["software"]["apiVersion"] == 1
    assert answer["software"]["version"] == "1.2.3" and answer["language"]["code"] == "en-US"
    assert answer["language"]["detectedLanguage"]["code"] == "en-US"


def test_suggestions_become_replacements_over_the_text_they_replace() -> None:
    document = parse_document(TEXT, None)
    fix = [("doesn't", 4, 9), ("didn't", 4, 9)]
    flagged = [flag("don", 4, 7, 0.9, "R", "VERB:SVA", fix), flag("t", 8, 9, 0.8, suggestions=fix),  # pieces of one
               flag("farmer", 23, 29, 0.6, suggestions=[]), flag("red", 36, 39, 0.7, "U", "ADJ", [("", 36, 39)])]
    found = matches(document, flagged)  # word: one match
    assert [(m["offset"], m["length"]) for m in found] == [(4, 5), (23, 6), (36, 3)]
    assert [m["replacements"] for m in found] == [[{"value": "doesn't"}, {"value": "didn't"}], [], [{"value": ""}]]
    assert found[0]["context"]["length"] == 5
    assert found[0]["message"] == 'Subject-verb agreement: "don" may need to be "doesn\'t".'
    marked = parse_document(None, json.dumps({"annotation": [{"text": "She do"}, {"markup": "<b>"},
                                                             {"text": "n't go."}]}))
    assert marked.checked == "She don't go."  # a word that runs into markup keeps its own span, no replacements
    found = matches(marked, [flag("do", 4, 6, suggestions=[("does", 4, 9)])])
    assert [(m["offset"], m["length"], m["replacements"]) for m in found] == [(4, 2, [])]


def test_markup_is_not_checked_but_counts_for_offsets() -> None:
    data = {"annotation": [{"markup": "<p>"}, {"text": "She don't"}, {"markup": "<br/>", "interpretAs": "\n"},
                           {"text": "like it."}, {"markup": "</p>"}]}
    document = parse_document(None, json.dumps(data))
    assert document.original == "<p>She don't<br/>like it.</p>" and document.checked == "She don't\nlike it."
    found = matches(document, [flag("don't", 4, 9), flag("like", 10, 14)])
    spans = [document.original[m["offset"]:m["offset"] + m["length"]] for m in found]
    assert spans == ["don't", "like"]
    stand_in = parse_document(None, json.dumps({"annotation": [{"markup": "", "interpretAs": "Some words"},
                                                               {"text": "are mine"}]}))
    found = matches(stand_in, [flag("words", 5, 10), flag("mine", 14, 18)])  # "words": not the user's text
    assert [(m["offset"], m["length"]) for m in found] == [(4, 4)]


def test_offsets_count_utf16_code_units_as_languagetool_does() -> None:
    text = "I \U0001F600 dont know."  # one emoji: two UTF-16 code units, one Python character
    assert utf16_offsets(text)[:5] == [0, 1, 2, 4, 5]
    found = matches(parse_document(text, None), [flag("dont", 4, 8)])
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
def dictionary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The server's personal dictionary file (empty at first): never the user's own."""
    path = tmp_path_factory.mktemp("dictionary") / "dictionary.txt"
    path.write_text("", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def client(micro_run: Path, dictionary: Path) -> Iterator[object]:
    from fastapi.testclient import TestClient

    from electra_detect.app.http.server import create_app
    from electra_detect.app.settings import ServerSettings

    detector = Detector.load(micro_run / "discriminator", engine="torch")
    settings = ServerSettings(ged_threshold=0.0, max_chars=300, dictionary=str(dictionary))
    with TestClient(create_app(detector, settings)) as test_client:
        yield test_client


OPTIONS_TEXT = "She go to the school yesterday and buyed three apple."


def check(client: object, method: str, **fields: str) -> list[dict[str, object]]:
    """The matches of a /v2/check sent as LanguageTool's clients send it: a POST form, or a GET with the same fields
    as query parameters."""
    fields = {"text": OPTIONS_TEXT, "language": "en-US", **fields}
    response = client.get("/v2/check", params=fields) if method == "GET" else client.post("/v2/check", data=fields)
    assert response.status_code == 200, response.text
    return response.json()["matches"]


def covered(matches: list[dict[str, object]], text: str = OPTIONS_TEXT) -> list[str]:
    return [text[m["offset"]:m["offset"] + m["length"]] for m in matches]


@pytest.mark.parametrize("method", ["POST", "GET"])
def test_languagetool_rule_and_category_switches_change_the_matches(client, method: str) -> None:
    everything = check(client, method)
    rules = [m["rule"]["id"] for m in everything]
    categories = [m["rule"]["category"]["id"] for m in everything]
    assert len(everything) >= 5 and all(rule in RULES_BY_ID for rule in rules)  # ids of the published table
    assert len(set(rules)) >= 2, rules  # the words are typed by their edits: more than one rule to switch
    rule, category = rules[0], categories[0]
    off = check(client, method, disabledRules=f"{rule},NO_SUCH_RULE")  # unknown ids are ignored
    assert [m["rule"]["id"] for m in off] == [r for r in rules if r != rule]
    off = check(client, method, disabledCategories=category.lower())  # ids in any case
    assert [m["rule"]["category"]["id"] for m in off] == [c for c in categories if c != category]
    only = check(client, method, enabledRules=f"{rule},NO_SUCH_RULE", enabledOnly="true")
    assert [m["rule"]["id"] for m in only] == [r for r in rules if r == rule]
    assert check(client, method, enabledRules=rule) == everything  # without enabledOnly, enabling changes nothing
    only = check(client, method, enabledCategories=category, enabledOnly="yes")
    assert [m["rule"]["category"]["id"] for m in only] == [c for c in categories if c == category]
    assert check(client, method, disabledRules=",".join(set(rules))) == []
    assert check(client, method, level="default") == everything  # the server's threshold (0) at its own level
    fields = {"text": OPTIONS_TEXT, "enabledOnly": "true"}  # enabledOnly with nothing enabled, an unknown level
    for bad in (fields, {"text": OPTIONS_TEXT, "level": "fussy"}):
        response = client.get("/v2/check", params=bad) if method == "GET" else client.post("/v2/check", data=bad)
        assert response.status_code == 422 and response.json()["error"]["type"] == "invalid_request", response.text


@pytest.mark.parametrize("method", ["POST", "GET"])
def test_a_requests_own_words_are_never_flagged_nor_suggested(client, method: str) -> None:
    from electra_detect.tasks.ged.dictionary import Vocabulary

    everything = check(client, method)
    suggested = [r["value"] for m in everything for r in m["replacements"] if r["value"].isalpha()]
    taught = [next(w for w in covered(everything) if w.isalpha() and w.lower() != "the"), suggested[0]]
    for words in (",".join(taught), "\n".join(taught)):
        known = Vocabulary.of(taught)
        found = check(client, method, words=words)
        assert found and not any(known.knows(w) for w in covered(found)), (taught, covered(found))
        assert not any(known.knows(r["value"]) for m in found for r in m["replacements"]), taught
    assert len(found) < len(everything)


def test_the_servers_dictionary_file_is_read_again_when_it_changes(client, dictionary: Path) -> None:
    text = "Kubernetes runs the cluster of Hamming nodes."
    before = covered(check(client, "POST", text=text), text)
    assert {"Kubernetes", "Hamming"} <= set(before)
    try:
        dictionary.write_text("# my words\nkubernetes\n", encoding="utf-8")
        matches = check(client, "POST", text=text)
        assert "Kubernetes" not in covered(matches, text) and "Hamming" in covered(matches, text)
        dictionary.write_text("# my words\nkubernetes\nHAMMING   # a name\n", encoding="utf-8")
        for method in ("POST", "GET"):
            matches = check(client, method, text=text)
            assert not {"Kubernetes", "Hamming"} & set(covered(matches, text))
            assert not any(r["value"].lower() in ("kubernetes", "hamming") for m in matches for r in m["replacements"])
        flagged = client.post("/v1/ged", json={"texts": [text], "suggest": True}).json()["results"][0]["flagged"]
        assert flagged and not {"Kubernetes", "Hamming"} & {f["word"] for f in flagged}
        assert not any(s["value"].lower() in ("kubernetes", "hamming") for f in flagged for s in f["suggestions"])
    finally:
        dictionary.write_text("", encoding="utf-8")


def test_picky_flags_with_the_models_picky_threshold(micro_run: Path, tmp_path: Path) -> None:
    import shutil

    from fastapi.testclient import TestClient

    from electra_detect.app.http.server import create_app
    from electra_detect.app.settings import ServerSettings

    model = tmp_path / "disc"
    shutil.copytree(micro_run / "discriminator", model)
    (model / "ged.json").write_text(json.dumps({"threshold": 0.999, "levels": {"picky": 0.0}}))
    settings = ServerSettings(max_chars=300, dictionary=str(tmp_path / "none.txt"), suggest=False)
    with TestClient(create_app(Detector.load(model, engine="torch"), settings)) as test_client:
        for method in ("POST", "GET"):
            default, picky = check(test_client, method), check(test_client, method, level="picky")
            assert len(default) < len(picky) and len(picky) >= 5, (default, picky)
        body = test_client.post("/v1/ged", json={"texts": [OPTIONS_TEXT], "level": "picky"}).json()
        assert body["threshold"] == 0.0 and body["level"] == "picky" and len(body["results"][0]["flagged"]) >= 5


def test_an_api_key_in_the_form_or_the_query_is_taken_and_counted_under_it(micro_run: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    from electra_detect.app.clients import Shares
    from electra_detect.app.http.server import create_app
    from electra_detect.app.settings import ServerSettings

    entered, enter = [], Shares.enter
    monkeypatch.setattr(Shares, "enter", lambda self, client, *a: entered.append(client) or enter(self, client, *a))
    keys = {"alice-key-0123456789": "alice", "bob-key-0123456789": "bob"}
    settings = ServerSettings(api_keys=keys, ged_threshold=0.0, dictionary=str(tmp_path / "none.txt"))
    with TestClient(create_app(Detector.load(micro_run / "discriminator", engine="torch"), settings)) as c:
        form = {"text": "She go home.", "language": "en-US"}
        assert c.post("/v2/check", data=form).status_code == 401
        wrong = c.post("/v2/check", data={**form, "apiKey": "alice-key-0000000000"})
        assert wrong.status_code == 401 and "apiKey" in wrong.json()["error"]["message"]
        assert c.post("/v2/check", data={**form, "apiKey": "alice-key-0123456789"}).status_code == 200
        assert c.post("/v2/check", files={**{k: (None, v) for k, v in form.items()},
                                          "apiKey": (None, "bob-key-0123456789")}).status_code == 200  # multipart
        assert c.get("/v2/check", params={**form, "apiKey": "bob-key-0123456789"}).status_code == 200
        assert c.get("/v2/check", params=form).status_code == 401
        assert c.post("/v2/check", data=form, headers={"x-api-key": "alice-key-0123456789"}).status_code == 200
        assert entered == ["key:alice", "key:bob", "key:bob", "key:alice"]
        bad = c.post("/v2/check", content=b"text=caf%ff", headers={"content-type": "application/x-www-form-urlencoded"})
        assert bad.status_code == 400 and "UTF-8" in bad.json()["error"]["message"]  # read for the key, strictly
        assert c.post("/v1/ged", json={"texts": ["a"], "apiKey": "alice-key-0123456789"}).status_code == 401


def test_check_flags_every_word_at_threshold_zero(client) -> None:
    response = client.post("/v2/check", data={"text": TEXT, "language": "en-US", "enabledOnly": "false",
                                              "motherTongue": "de"})
    assert response.status_code == 200, response.text
    body = response.json()
    words = [TEXT[m["offset"]:m["offset"] + m["length"]] for m in body["matches"]]
    assert {"She", "farmer", "house"} <= set(words)  # threshold 0: every word, at its own offset
    assert body["software"]["name"] == "electra-detect" and body["language"]["code"] == "en-US"
    assert all(m["rule"]["id"] in RULES_BY_ID for m in body["matches"])  # an untyped model: typed by the edits
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

    from electra_detect.app.http.server import create_app
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
    assert body["allOf"][:2] == [{"anyOf": [{"required": ["text"]}, {"required": ["data"]}]},
                                 {"not": {"required": ["text", "data"]}}]
    assert spec["paths"]["/v2/check"]["post"]["requestBody"]["required"] is True
    assert {"disabledRules", "enabledRules", "disabledCategories", "enabledCategories", "enabledOnly", "level",
            "words", "apiKey"} <= set(body["properties"])
    query = {p["name"]: p for p in spec["paths"]["/v2/check"]["get"]["parameters"]}
    assert query["text"]["required"] is True and query["text"]["schema"]["maxLength"] == 300
    assert query["level"]["schema"]["enum"] == ["default", "picky"] and "disabledRules" in query
    wrong = client.put("/v2/check", data={"text": "a"})  # a 405 names both methods of the path
    assert wrong.status_code == 405 and wrong.headers["allow"] == "GET, POST"
    assert client.delete("/v2/languages").headers["allow"] == "GET"
    ged = spec["components"]["schemas"]["GedRequest"]  # enabled_only needs an enabled id, declared as the server checks
    assert ged["if"]["properties"]["enabled_only"] == {"const": True} and len(ged["then"]["anyOf"]) == 2


def test_the_schema_refuses_a_nul_in_every_field_as_the_server_does(client) -> None:
    """Schemathesis sent a schema-valid apiKey holding NUL and got the form reader's 400 (issue 67): every field of the
    form, named or not, and every query parameter now declares what the server takes (no NUL), and the server
    refuses what the schema refuses."""
    def refuses(schema: dict, value: str) -> bool:  # a JSON Schema validator's word on a string, for the keys used
        return value not in schema["enum"] if "enum" in schema else bool(
            "pattern" in schema and not re.search(schema["pattern"], value))

    spec = client.get("/openapi.json").json()
    form = spec["components"]["schemas"]["CheckForm"]
    query = {p["name"]: p["schema"] for p in spec["paths"]["/v2/check"]["get"]["parameters"]}
    nul = "in\x00valid"
    for name, field in [*form["properties"].items(), ("anyOtherField", form.get("additionalProperties", {}))]:
        assert refuses(field, nul), name
        answer = client.post("/v2/check", data={"text": "She go home.", "language": "en-US", name: nul})
        assert (answer.status_code, answer.json()["error"]["type"]) == (400, "bad_request"), name
    assert refuses(form.get("propertyNames", {}), nul)
    assert client.post("/v2/check", data={"text": "She go home.", nul: "1"}).status_code == 400
    for name, schema in query.items():
        assert refuses(schema, nul), name
        assert client.get("/v2/check", params={"text": "She go home.", "language": "en", name: nul}).status_code == 400
    for schema in [form["properties"]["text"], form["properties"]["apiKey"], form["propertyNames"], query["words"]]:
        assert not refuses(schema, "a line\nand another\x01 with a control character")  # only NUL is refused


def head_in_pieces(port: int, start: bytes) -> bytes:
    """The answer to the start of a request line sent in two pieces, unfinished (so that the HTTP parser sees a head
    grow past its limit, as a slow network delivers a long URL)."""
    import socket
    import time

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        half = len(start) // 2
        sock.sendall(start[:half])
        time.sleep(0.3)
        sock.sendall(start[half:])
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_a_real_languagetool_client_reads_the_matches(micro_run: Path, tmp_path: Path, monkeypatch) -> None:
    import language_tool_python
    import language_tool_python.download_lt as download_lt

    from tests.test_server import Server

    def no_download(*args: object, **kwargs: object) -> None:
        raise AssertionError("language_tool_python tried to download LanguageTool")

    monkeypatch.setattr(download_lt.LocalLanguageTool, "download", no_download)
    (tmp_path / "dictionary.txt").write_text("", encoding="utf-8")
    server = Server(micro_run, tmp_path / "server.log", "--engine", "torch", "--ged-threshold", "0",
                    "--dictionary", str(tmp_path / "dictionary.txt"), "--max-chars", "600")  # a head of 16 KiB
    try:
        tool = language_tool_python.LanguageTool("en-US", remote_server=server.url)
        text = "I \U0001F600 saw a red house."
        found = tool.check(text)
        words = [text[m.offset:m.offset + m.error_length] for m in found]
        assert {"saw", "red", "house"} <= set(words), words  # code-point offsets after the emoji, as the client fixes
        assert all(m.rule_id in RULES_BY_ID and m.category == RULES_BY_ID[m.rule_id].category for m in found)
        assert all(m.message and m.message != m.rule_id for m in found)
        # what the client sends for its switches: disabledRules, disabledCategories, enabledRules + enabledOnly
        rule, category = found[0].rule_id, found[0].category
        tool.disabled_rules = {rule}
        assert [m.rule_id for m in tool.check(text)] == [m.rule_id for m in found if m.rule_id != rule]
        tool.disabled_rules, tool.disabled_categories = set(), {category}
        assert [m.category for m in tool.check(text)] == [m.category for m in found if m.category != category]
        tool.disabled_categories, tool.enabled_rules, tool.enabled_rules_only = set(), {rule}, True
        assert [m.rule_id for m in tool.check(text)] == [m.rule_id for m in found if m.rule_id == rule]
        tool.close()
        long_get = httpx.get(f"{server.url}/v2/check", params={"text": "a " * 9_000, "language": "en-US"})
        assert long_get.status_code == 414 and long_get.json()["error"]["type"] == "uri_too_long", long_get.text
        assert "POST" in long_get.json()["error"]["message"]
        assert b"uri_too_long" in head_in_pieces(server.port, b"GET /v2/check?text=" + b"a+" * 9_000)
        over = httpx.get(f"{server.url}/v2/check", params={"text": "a " * 400, "language": "en-US"})
        assert over.status_code == 413 and over.json()["error"]["type"] == "text_too_long"  # read: over max_chars
        fine = httpx.get(f"{server.url}/v2/check", params={"text": "She go home.", "language": "en-US"})
        assert fine.status_code == 200 and fine.json()["matches"]
        assert httpx.get(f"{server.url}/healthz").status_code == 200  # the server lives on
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
        assert "goes" in found["go"] and found["Their"], found  # the tag model's edit at each (goes, a word)
        assert "" in found[" the"]  # the repeated word: delete it, with the space before it
        corrected = language_tool_python.utils.correct(text, [m for m in tool.check(text) if m.replacements])
        assert corrected.startswith("She went to school") or corrected.startswith("She goes to school"), corrected
        tool.close()
    finally:
        assert server.stop() == 0
