"""Hostile documents and headers (issue 68): an error of input is a JSON 4xx on every route, a markup document is
read under its check's admission, and two X-API-Key headers are refused. Each a status code or a call count, never a
timing; each failed on the code before its fix."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from electra_detect.app.settings import ServerSettings
from electra_detect.detector import Detector
from electra_detect.errors import GedOptionsError, MarkupError

DEEP_BRACES = "{" * 500 + "Some prose." + "}" * 500  # 1 KB of LaTeX the probe answered with a 500
KEY, OTHER = "editor-key-0123456789", "other-key-0123456789"


@pytest.fixture(scope="module")
def detector(micro_run: Path) -> Detector:
    return Detector.load(micro_run / "discriminator", engine="torch")


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The documents the markup reader was asked to read."""
    from electra_detect import markup

    seen: list[str] = []
    real = markup.prose_blocks
    monkeypatch.setattr(markup, "prose_blocks", lambda document, kind: seen.append(document) or real(document, kind))
    yield seen


def _client(app: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", timeout=120)


def _app(detector: Detector, tmp_path: Path, **settings: object) -> object:
    from electra_detect.app.http.server import create_app

    return create_app(detector, ServerSettings(dictionary=str(tmp_path / "none.txt"), **settings))


# ------------------------------------------------------------------------------------ errors of input: a 4xx

def test_500_nested_braces_of_latex_are_a_4xx_not_a_500(detector: Detector, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    with TestClient(_app(detector, tmp_path)) as client:
        answer = client.post("/v1/ged", json={"texts": [DEEP_BRACES], "markup": "latex"})
        assert 400 <= answer.status_code < 500, answer.text
        assert answer.json()["error"]["type"] == "invalid_markup"
        assert client.post("/v1/ged", json={"texts": ["He go home."], "markup": "latex"}).status_code == 200


@pytest.mark.parametrize("error, kind", [(MarkupError("cannot read the LaTeX: unbalanced"), "invalid_markup"),
                                         (GedOptionsError("enabledOnly needs enabledRules"), "invalid_request")])
def test_the_cores_input_errors_are_a_422_on_every_route(detector: Detector, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch, error: Exception,
                                                         kind: str) -> None:
    """Wherever the core raises an error of input under a route (the service's check or scoring), the answer is a
    JSON 422 naming it, not the 500 of a bug."""
    from fastapi.testclient import TestClient

    from electra_detect.app.service import Service

    async def refuse(*_: object, **__: object) -> None:
        raise error

    monkeypatch.setattr(Service, "check", refuse)
    monkeypatch.setattr(Service, "scored", refuse)
    with TestClient(_app(detector, tmp_path)) as client:
        answers = [client.post("/v1/ged", json={"texts": ["He go home."]}),
                   client.post("/v1/ged", json={"texts": ["He go home."], "markup": "markdown"}),
                   client.post("/v2/check", data={"text": "He go home.", "language": "en-US"}),
                   client.get("/v2/check", params={"text": "He go home.", "language": "en-US"}),
                   client.post("/v1/score", json={"texts": ["He go home."]}),
                   client.post("/v1/rerank", json={"lists": [["He go home.", "He goes home."]]})]
    assert [(a.status_code, a.json()["error"]["type"]) for a in answers] == [(422, kind)] * len(answers)
    assert all(str(error) in a.json()["error"]["message"] for a in answers)


# ----------------------------------------------------------------------- markup under the check's admission

def test_a_markup_documents_raw_words_count_against_the_check_budget_before_it_is_read(
        detector: Detector, tmp_path: Path, reads: list[str]) -> None:
    """LaTeX of 300 commands around one sentence: its raw words are over the budget (the reader's work grows with
    them), so it is a 413 before the reader runs (before: read first, its one sentence checked, 200)."""
    from fastapi.testclient import TestClient

    document = "\\relax " * 300 + "He go home."
    with TestClient(_app(detector, tmp_path, check_budget=200)) as client:
        answer = client.post("/v1/ged", json={"texts": [document], "markup": "latex"})
        assert (answer.status_code, answer.json()["error"]["type"]) == (413, "over_budget"), answer.text
        assert reads == []
        assert client.post("/v1/ged", json={"texts": ["He go home."], "markup": "latex"}).status_code == 200
        assert reads == ["He go home."]  # within the budget: read, then checked


def test_a_markup_document_past_its_clients_request_share_is_refused_before_it_is_read(
        detector: Detector, tmp_path: Path, reads: list[str]) -> None:
    """A client at its share of requests in flight: its markup document is a 429 and never reaches the reader
    (before: read on a thread first, whatever the client held)."""
    app = _app(detector, tmp_path, client_requests=1)
    shares = app.state.service.shares

    async def run() -> httpx.Response:
        async with app.router.lifespan_context(app), _client(app) as client:
            for small in (False, True):  # the client's one request in flight, and its one small one
                shares.enter("ip:127.0.0.1", small)
            try:
                return await client.post("/v1/ged", json={"texts": [DEEP_BRACES], "markup": "latex"})
            finally:
                for small in (False, True):
                    shares.leave("ip:127.0.0.1", small)

    answer = asyncio.run(run())
    assert (answer.status_code, answer.json()["error"]["type"]) == (429, "too_many_requests"), answer.text
    assert reads == []


def test_a_document_without_prose_is_answered_without_a_check(detector: Detector, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    with TestClient(_app(detector, tmp_path)) as client:
        answer = client.post("/v1/ged", json={"texts": ["```\nx = 1\n```\n"], "markup": "markdown"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["results"] == [{"text": "```\nx = 1\n```\n", "flagged": []}]


# --------------------------------------------------------------------------------------------- two keys

def test_two_x_api_key_headers_are_a_400_whichever_comes_last(detector: Detector, tmp_path: Path) -> None:
    """(wrong, good) was let in as the good key's client (the last header won); now two keys are refused, on every
    route, and one good key still works."""
    from fastapi.testclient import TestClient

    with TestClient(_app(detector, tmp_path, api_keys={KEY: "editor", OTHER: "other"})) as client:
        for keys in (["wrong-key-0123456789", KEY], [KEY, "wrong-key-0123456789"], [KEY, OTHER], [KEY, KEY]):
            headers = [("x-api-key", key) for key in keys]
            for answer in (client.post("/v1/score", json={"texts": ["Hi there."]}, headers=headers),
                           client.post("/v2/check", data={"text": "Hi there.", "language": "en"}, headers=headers),
                           client.get("/healthz", headers=headers)):
                assert (answer.status_code, answer.json()["error"]["type"]) == (400, "bad_request"), (keys, answer)
                assert "more than once" in answer.json()["error"]["message"]
        assert client.post("/v1/score", json={"texts": ["Hi there."]}, headers={"x-api-key": KEY}).status_code == 200
