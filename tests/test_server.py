"""The HTTP server as users run it: a real uvicorn process on a free loopback port, hit over HTTP."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from electra_detect.cli import main
from electra_detect.detector import Detector
from electra_detect.onnx.export import export_model

ROOT = Path(__file__).resolve().parents[1]
KEY = "test-key-123"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    def __init__(self, model: Path, log: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "electra_detect.cli", "serve", "--model", str(model), "--port", str(self.port),
             "--log-level", "warning", *args],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open(log, "wb"), env={**os.environ, **(env or {})})
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"server did not start: {log.read_text()[-2000:]}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture(scope="module")
def export_dir(micro_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import shutil

    source = tmp_path_factory.mktemp("srv") / "disc"
    shutil.copytree(micro_run / "discriminator", source)
    (source / "ged.json").write_text(json.dumps({"threshold": 0.123}))
    return export_model(source, source / "onnx", variants=["fp32", "optimized"], progress=False).out_dir


@pytest.fixture(scope="module")
def server(export_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    logs = tmp_path_factory.mktemp("log")
    srv = Server(export_dir, logs / "server.log", "--max-texts", "8", "--max-chars", "300",
                 "--max-body-bytes", "8192", "--timeout", "20", "--max-wait-ms", "20", "--max-batch", "64",
                 "--batching", "on", env={"ELECTRA_DETECT_DICTIONARY": str(logs / "no-dictionary.txt")})
    yield srv
    assert srv.stop() == 0


def post(server: Server, path: str, body: object, **kwargs: object) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", json=body, timeout=30, **kwargs)


def test_health_docs_and_openapi(server: Server) -> None:
    health = httpx.get(f"{server.url}/healthz").json()
    assert health["status"] == "ok" and health["engine"] == "onnx"
    assert health["provider"] == "CPUExecutionProvider"
    assert health["variant"] in ("fp32", "optimized")  # the one the export measured fastest here (no int8 exported)
    assert health["batching"] == "True"
    spec = httpx.get(f"{server.url}/openapi.json").json()
    assert {"/v1/score", "/v1/ged", "/v1/rerank", "/healthz", "/metrics"} <= set(spec["paths"])
    assert list(spec["paths"]["/metrics"]["get"]["responses"]["200"]["content"]) == ["text/plain"]
    schemas = spec["components"]["schemas"]
    assert schemas["ScoreRequest"]["properties"]["texts"]["minItems"] == 1  # the schema says what the server takes
    assert schemas["GedRequest"]["properties"]["texts"]["minItems"] == 1
    assert schemas["RerankRequest"]["properties"]["lists"]["minItems"] == 1
    from electra_detect.app.http.schemas import NOT_BLANK  # a blank text is declared invalid, as the server treats it

    assert schemas["ScoreRequest"]["properties"]["texts"]["items"]["pattern"] == NOT_BLANK
    threshold = schemas["GedRequest"]["properties"]["threshold"]["anyOf"]
    assert {"minimum": 0.0, "maximum": 1.0}.items() <= next(t for t in threshold if "minimum" in t).items()
    assert [bool(re.search(NOT_BLANK, t)) for t in ["", " \u3000\x1c\t", "a", " b "]] == [False, False, True, True]
    limits = spec["info"]["x-limits"]  # the server's own limits, declared where JSON Schema can state them
    assert schemas["ScoreRequest"]["properties"]["texts"]["maxItems"] == limits["max_texts"] == 8
    assert schemas["ScoreRequest"]["properties"]["texts"]["items"]["maxLength"] == limits["max_chars"] == 300
    assert schemas["Hypothesis"]["properties"]["text"]["maxLength"] == 300
    lists = schemas["RerankRequest"]["properties"]["lists"]
    assert lists["maxItems"] == 8
    assert [form["maxItems"] for form in lists["items"]["anyOf"] if form.get("type") == "array"] == [8]
    assert httpx.get(f"{server.url}/docs").status_code == 404  # the Swagger UI (a CDN page) only with --docs
    assert health["model"] == "disc" and "model_path" not in health  # a name, no path (a head's name has one /)
    assert "/tmp" not in str(health) and str(ROOT) not in str(health)
    assert str(ROOT) not in httpx.get(f"{server.url}/metrics").text and "/tmp" not in httpx.get(
        f"{server.url}/metrics").text


def test_score_matches_in_process_detector(server: Server, export_dir: Path) -> None:
    texts = ["The farmer saw a red house yesterday.", "A doctor bought three apples."]
    body = post(server, "/v1/score", {"texts": texts}).json()
    local = Detector.load(export_dir, engine="onnx").score(texts)
    assert [r["text"] for r in body["results"]] == texts
    for remote, mine in zip(body["results"], local, strict=True):
        assert [t["p_replaced"] for t in remote["tokens"]] == pytest.approx([t.p_replaced for t in mine.tokens],
                                                                            abs=1e-6)
        assert [w["word"] for w in remote["words"]] == [w.word for w in mine.words]
        assert remote["sentence_mean"] == pytest.approx(mine.sentence_mean, abs=1e-6)
    short = post(server, "/v1/score", {"texts": texts[:1], "tokens": False}).json()
    assert "tokens" not in short["results"][0] and short["results"][0]["words"]


def test_ged_gives_the_tasks_records_and_honours_the_options(server: Server) -> None:
    from electra_detect.tasks.ged.dictionary import Vocabulary
    from electra_detect.tasks.ged.rule_table import RULES_BY_ID

    text = "He go to the store yesterday ."

    def flagged(**options: object) -> list[dict[str, object]]:
        response = post(server, "/v1/ged", {"texts": [text], "threshold": 0, **options})
        assert response.status_code == 200, response.text
        return response.json()["results"][0]["flagged"]

    everything = flagged()
    assert len(everything) == 7 and all({"word", "start", "end", "score", "rule", "category", "message"} <= set(f)
                                        for f in everything)
    assert all(RULES_BY_ID[f["rule"]].category == f["category"] and f["message"] for f in everything)
    assert all("suggestions" not in f for f in everything)  # not asked for
    suggested = flagged(suggest=True)  # the same types, rules and messages' rule with suggestions shown
    assert [(f["word"], f["rule"], f.get("type")) for f in suggested] == [
        (f["word"], f["rule"], f.get("type")) for f in everything]
    assert all(isinstance(f["suggestions"], list) for f in suggested)
    rules, categories = [f["rule"] for f in everything], [f["category"] for f in everything]
    assert [f["rule"] for f in flagged(disabled_rules=[rules[0], "NO_SUCH_RULE"])] == [r for r in rules
                                                                                       if r != rules[0]]
    assert [f["rule"] for f in flagged(enabled_rules=[rules[0].lower()], enabled_only=True)] == [
        r for r in rules if r == rules[0]]
    assert [f["category"] for f in flagged(disabled_categories=[categories[0]])] == [
        c for c in categories if c != categories[0]]
    assert [f["category"] for f in flagged(enabled_categories=[categories[0]], enabled_only=True)] == [
        c for c in categories if c == categories[0]]
    values = [s["value"] for f in suggested for s in f["suggestions"] if s["value"].isalpha()]
    own = ["store", values[0]]
    known = Vocabulary.of(own)
    taught = flagged(words=own, suggest=True)
    assert not any(known.knows(f["word"]) for f in taught), (own, taught)
    assert not any(known.knows(s["value"]) for f in taught for s in f["suggestions"]), own
    for bad in ({"enabled_only": True}, {"level": "fussy"}, {"words": "store"}, {"disabled_rules": "X"},
                {"enabled_rules": [" , "], "enabled_only": True}, {"disabled_categories": [""]}):
        response = post(server, "/v1/ged", {"texts": [text], **bad})
        assert response.status_code == 422 and response.json()["error"]["type"] == "invalid_request", bad


def test_ged_with_suggestions_is_admitted_by_its_cost_like_a_check(micro_run: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """/v1/ged takes Service.check's admission, with or without suggestions: its texts' tokens within the check
    budget (413 over_budget before any scoring), its candidates as they really cost, cut to the budget's rest (before:
    17 x its tokens were reserved, and a check with suggestions under the budget's 1/17 was refused)."""
    from fastapi.testclient import TestClient

    from electra_detect.app.http.server import create_app
    from electra_detect.app.service import Service
    from electra_detect.app.settings import ServerSettings

    detector = Detector.load(micro_run / "discriminator", engine="torch")
    texts = ["He go home. She like it. They was late. " * 6]
    cost, rest = detector.job(texts).cost, 2000
    jobs, score_job = [], Service.score_job

    async def recording(self, job, client, cancel, deadline, refuse=True, **rest):  # noqa: ANN001, ANN003, ANN202
        jobs.append((job.cost, refuse))
        return await score_job(self, job, client, cancel, deadline, refuse, **rest)

    monkeypatch.setattr(Service, "score_job", recording)
    # admission, not speed: typing every word's flag by its edit takes a while on a loaded CI host
    settings = ServerSettings(check_budget=cost + rest, ged_threshold=0.0, dictionary=str(tmp_path / "none.txt"),
                              timeout_s=300)
    with TestClient(create_app(detector, settings)) as client:
        answer = client.post("/v1/ged", json={"texts": texts, "suggest": True})
        assert answer.status_code == 200, answer.text
        assert jobs[0] == (cost, True) and len(jobs) == 2 and 0 < jobs[1][0] <= rest and not jobs[1][1]
        flagged = answer.json()["results"][0]["flagged"]
        assert any(w["suggestions"] for w in flagged) and any(w["suggestions"] == [] for w in flagged)  # cut
    with TestClient(create_app(detector, ServerSettings(check_budget=cost - 1, timeout_s=300))) as client:
        for suggest in (True, False):
            refused = client.post("/v1/ged", json={"texts": texts, "suggest": suggest})
            assert refused.status_code == 413 and refused.json()["error"]["type"] == "over_budget", refused.text
    assert len(jobs) == 2  # refused before any scoring


def test_ged_uses_model_threshold(server: Server) -> None:
    body = post(server, "/v1/ged", {"texts": ["He go to the store yesterday ."]}).json()
    assert body["threshold"] == pytest.approx(0.123)
    flagged = body["results"][0]["flagged"]
    assert all(f["score"] >= 0.123 for f in flagged)
    everything = post(server, "/v1/ged", {"texts": ["He go to the store yesterday ."], "threshold": 0}).json()
    assert len(everything["results"][0]["flagged"]) == 7
    assert post(server, "/v1/ged", {"texts": ["a"], "threshold": 2}).status_code == 422


def test_rerank_lists_and_line_format(server: Server) -> None:
    body = post(server, "/v1/rerank", {"lists": [
        [{"text": "the farmer saw a red house", "score": -1.0}, {"text": "the farmer saw a red house", "score": -5}],
        "a doctor bought apples\t-2.5\na doctor bot apples\t-0.5",
    ], "lm_weight": 1.0, "length_weight": 0.5}).json()
    first, second = (r["hypotheses"] for r in body["results"])
    assert [h["rank"] for h in first] == [1, 2] and first[0]["asr_score"] == -1.0  # same text: ASR decides
    assert {h["text"] for h in second} == {"a doctor bought apples", "a doctor bot apples"}
    for row in first + second:
        assert row["total"] == pytest.approx(row["asr_score"] + row["electra_score"] + 0.5 * row["length"])
    assert "confidence" not in body["results"][0]
    confident = post(server, "/v1/rerank", {"lists": ["a doctor bought apples\t-2.5\na doctor bot apples\t-0.5"],
                                            "confidence": True}).json()["results"][0]
    assert [w["word"] for w in confident["confidence"]] == confident["hypotheses"][0]["text"].split()
    assert all(0 <= w["p_wrong"] <= 1 for w in confident["confidence"])
    bad = post(server, "/v1/rerank", {"lists": ["ok hyp\t-1\nbad hyp\tnot-a-number"]})
    assert bad.status_code == 422 and "line 2" in bad.json()["error"]["message"]
    for text in ("a\t1e5", "a\t+5", "a\t1234567890"):  # parseable, but outside the schema's declared grammar
        outside = post(server, "/v1/rerank", {"lists": [text]})
        assert outside.status_code == 422 and "plain decimal" in outside.json()["error"]["message"], text


@pytest.mark.parametrize("body, status, kind", [
    ({"texts": []}, 422, "invalid_request"),
    ({"texts": ["ok", 3]}, 422, "invalid_request"),
    ({"texts": "not a list"}, 422, "invalid_request"),
    ({"text": ["misspelt field"]}, 422, "invalid_request"),
    ({"texts": ["ok"], "extra": 1}, 422, "invalid_request"),
    ({"texts": ["   "]}, 422, "invalid_request"),
    ({"texts": ["a"] * 9}, 413, "too_many_texts"),
    ({"texts": ["x" * 301]}, 413, "text_too_long"),
    ([1, 2], 422, "invalid_request"),
    (None, 422, "invalid_request"),
])
def test_bad_json_bodies(server: Server, body: object, status: int, kind: str) -> None:
    response = post(server, "/v1/score", body)
    assert response.status_code == status, response.text
    assert response.json()["error"]["type"] == kind


def test_bad_raw_bodies(server: Server) -> None:
    headers = {"content-type": "application/json"}

    def raw(data: bytes | object, **extra: object) -> httpx.Response:
        return httpx.post(f"{server.url}/v1/score", content=data, headers={**headers, **extra.pop("headers", {})},
                          timeout=30, **extra)

    cases = [
        (raw(b'{"texts": ["unclosed'), 400, "malformed_json"),
        (raw(b'{"texts": ["\xff\xfe bad bytes"]}'), 400, "bad_request"),
        (raw(b'{"texts": ["\\ud800 lone surrogate"]}'), 422, "invalid_text"),
        (raw(b'{"texts": ["' + b"a" * 9000 + b'"]}'), 413, "body_too_large"),
        (raw(b"x" * 1024 for _ in range(12)), 413, "body_too_large"),  # chunked: no Content-Length
        (raw(b'{"texts": ["ok"]}', headers={"content-type": "text/plain"}), 415, "unsupported_media_type"),
        (httpx.get(f"{server.url}/v1/score"), 405, "http_error"),
        (httpx.get(f"{server.url}/v2/nothing"), 404, "not_found"),
    ]
    for response, status, kind in cases:
        assert response.status_code == status, response.text
        assert response.json()["error"]["type"] == kind, response.text
        if status == 405:
            assert response.headers["allow"] == "POST", response.headers
    assert httpx.get(f"{server.url}/healthz").status_code == 200  # still up


def test_fifty_concurrent_clients_are_batched(server: Server) -> None:
    texts = [f"The farmer saw {n} red houses yesterday." for n in range(150)]

    async def client(start: int, http: httpx.AsyncClient) -> list[tuple[int, str, str]]:
        seen = []
        for text in texts[start::50]:
            response = await http.post(f"{server.url}/v1/score", json={"texts": [text], "tokens": False})
            seen.append((response.status_code, text, response.json()["results"][0]["text"]))
        return seen

    async def run() -> list[tuple[int, str, str]]:
        limits = httpx.Limits(max_connections=50)
        async with httpx.AsyncClient(timeout=60, limits=limits) as http:
            return [row for rows in await asyncio.gather(*(client(i, http) for i in range(50))) for row in rows]

    before = _metric(server, "electra_batch_texts_count")
    rows = asyncio.run(run())
    assert len(rows) == 150 and all(status == 200 for status, _, _ in rows)
    assert all(sent == got for _, sent, got in rows)  # every client gets its own text back
    calls = _metric(server, "electra_batch_texts_count") - before
    assert 0 < calls < 150  # concurrent requests shared model calls
    assert _metric(server, 'electra_requests_total{path="/v1/score",status="200"}') >= 150


def _metric(server: Server, name: str) -> float:
    text = httpx.get(f"{server.url}/metrics").text
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    assert match, f"{name} not in /metrics"
    return float(match.group(1))


def test_api_key_and_graceful_shutdown(export_dir: Path, tmp_path: Path) -> None:
    srv = Server(export_dir, tmp_path / "server.log", "--max-wait-ms", "1500", "--max-batch", "64", "--batching", "on",
                 env={"ELECTRA_DETECT_API_KEY": KEY})
    try:
        assert httpx.get(f"{srv.url}/healthz").status_code == 200  # liveness stays open
        for headers in ({}, {"x-api-key": "wrong"}):
            response = post(srv, "/v1/score", {"texts": ["a"]}, headers=headers)
            assert response.status_code == 401 and response.json()["error"]["type"] == "unauthorized"
        assert httpx.get(f"{srv.url}/metrics").status_code == 401
        result: dict[str, object] = {}

        def slow_request() -> None:  # waits ~1.5 s in the batcher: in flight when SIGTERM arrives
            started = time.monotonic()
            result["response"] = post(srv, "/v1/score", {"texts": ["The farmer saw a red house."]},
                                      headers={"x-api-key": KEY})
            result["seconds"] = time.monotonic() - started

        thread = threading.Thread(target=slow_request)
        thread.start()
        deadline = time.monotonic() + 20  # poll, not sleep: on a loaded CPU the request may arrive late
        while time.monotonic() < deadline:
            metrics = httpx.get(f"{srv.url}/metrics", headers={"x-api-key": KEY}).text
            if re.search(r"^electra_queue_requests [1-9]", metrics, re.MULTILINE):  # waiting in the batcher
                break
            time.sleep(0.05)
        srv.proc.send_signal(signal.SIGTERM)
        thread.join(timeout=30)
        response = result["response"]
        assert isinstance(response, httpx.Response) and response.status_code == 200
        assert response.json()["results"][0]["text"] == "The farmer saw a red house."
        assert result["seconds"] >= 1.0
        assert srv.proc.wait(timeout=30) == 0
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{srv.url}/healthz")
    finally:
        srv.stop()


def test_request_timeout_is_a_json_504(export_dir: Path) -> None:
    from fastapi.testclient import TestClient

    from electra_detect.app.http.server import create_app
    from electra_detect.app.settings import ServerSettings

    detector = Detector.load(export_dir, engine="onnx")
    app = create_app(detector, ServerSettings(timeout_s=0.2, max_wait_ms=1500, max_batch=64))
    with TestClient(app) as client:
        response = client.post("/v1/score", json={"texts": ["The farmer saw a red house."]})
        assert response.status_code == 504 and response.json()["error"]["type"] == "timeout"


def test_serve_on_a_busy_port_is_a_one_line_error(export_dir: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        result = subprocess.run([sys.executable, "-m", "electra_detect.cli", "serve", "--model", str(export_dir),
                                 "--port", str(held.getsockname()[1])], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: the server could not start")


def test_serve_cli_errors(micro_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--model", str(tmp_path / "missing")]) == 2  # (no export is made on first use: not an error)
    assert "model path not found" in capsys.readouterr().err
    assert main(["serve", "--model", str(micro_run), "--max-batch", "0"]) == 2
    assert "--max-batch" in capsys.readouterr().err


# ------------------------------------------------------------------------------------- hardening (issue 16)

HUGE = "9" * 400


def raw_post(server: Server, path: str, data: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", content=data, timeout=30,
                      headers={"content-type": "application/json"} if headers is None else headers)


@pytest.mark.parametrize("path, body", [
    ("/v1/ged", f'{{"texts": ["a b"], "threshold": {HUGE}}}'),
    ("/v1/ged", '{"texts": ["a b"], "threshold": 1e308}'),
    ("/v1/ged", '{"texts": ["a b"], "threshold": NaN}'),
    ("/v1/ged", '{"texts": ["a b"], "threshold": true}'),
    ("/v1/ged", '{"texts": ["a b"], "threshold": "0.5"}'),
    ("/v1/rerank", f'{{"lists": [["a b", "a c"]], "lm_weight": {HUGE}}}'),
    ("/v1/rerank", f'{{"lists": [["a b", "a c"]], "length_weight": -{HUGE}}}'),
    ("/v1/rerank", '{"lists": [["a b", "a c"]], "lm_weight": Infinity}'),
    ("/v1/rerank", f'{{"lists": [[{{"text": "a b", "score": {HUGE}}}]]}}'),
    ("/v1/rerank", '{"lists": [[{"text": "a b", "score": 1e308}]], "length_weight": 1e308}'),
    ("/v1/rerank", '{"lists": ["a b\\t1e308"], "length_weight": 1}'),
    ("/v1/score", '{"texts": ["a"], "tokens": "yes"}'),
    ("/v1/score", '{"texts": ["a"], "tokens": 1}'),
    ("/v1/score", '{"texts": ["a"], "tokens": null}'),
])
def test_numbers_and_booleans_out_of_range_are_422(server: Server, path: str, body: str) -> None:
    response = raw_post(server, path, body.encode())
    assert response.status_code == 422, response.text
    assert response.json()["error"]["type"] == "invalid_request"


def test_rerank_in_range_extremes_stay_finite(server: Server) -> None:
    response = post(server, "/v1/rerank", {"lists": [[{"text": "a b", "score": -1e12}, "a c"]], "lm_weight": 1e6,
                                           "length_weight": -1e6})
    assert response.status_code == 200, response.text
    totals = [h["total"] for h in response.json()["results"][0]["hypotheses"]]
    assert all(isinstance(t, float) for t in totals)


def test_content_type_and_json_parse_errors_are_named(server: Server) -> None:
    no_type = raw_post(server, "/v1/score", b'{"texts": ["a"]}', headers={})
    assert no_type.status_code == 415 and no_type.json()["error"]["type"] == "unsupported_media_type"
    deep = raw_post(server, "/v1/score", b"[" * 4000 + b"]" * 4000)
    assert deep.status_code == 400 and deep.json()["error"]["type"] == "json_too_deep", deep.text
    digits = raw_post(server, "/v1/score", b'{"texts": ["a"], "n": ' + b"1" * 5000 + b"}")
    assert digits.status_code == 400 and digits.json()["error"]["type"] == "number_too_long", digits.text
    assert httpx.get(f"{server.url}/healthz").status_code == 200


def test_too_many_tokens_is_413_before_the_model(export_dir: Path) -> None:
    from fastapi.testclient import TestClient

    from electra_detect.app.http.server import create_app
    from electra_detect.app.settings import ServerSettings

    detector = Detector.load(export_dir, engine="onnx")
    app = create_app(detector, ServerSettings(max_tokens=40))
    with TestClient(app) as client:
        assert client.post("/v1/score", json={"texts": ["The farmer saw a red house."]}).status_code == 200
        response = client.post("/v1/score", json={"texts": ["The farmer saw a red house yesterday."] * 4})
        assert response.status_code == 413 and response.json()["error"]["type"] == "too_many_tokens"
        assert "limit is 40" in response.json()["error"]["message"]
        assert "max_tokens" in client.get("/openapi.json").json()["info"]["description"]


def test_a_long_request_that_cannot_finish_in_time_is_a_quick_503(export_dir: Path) -> None:
    from fastapi.testclient import TestClient

    from electra_detect.app.http.server import create_app
    from electra_detect.app.settings import ServerSettings

    detector = Detector.load(export_dir, engine="onnx")
    app = create_app(detector, ServerSettings(step_tokens=16, timeout_s=5))
    long = {"texts": ["The farmer saw a red house yesterday and a doctor bought three apples."] * 2}
    with TestClient(app) as client:
        assert client.post("/v1/score", json=long).status_code == 200  # no rate measured yet: taken
        assert app.state.batcher.backlog == app.state.batcher.long_backlog == 0 and app.state.batcher.rate > 0
        app.state.batcher.long_log.clear()  # no long work lately: half the model's rate is long work's
        app.state.batcher.rate = 10.0  # as if the model ran 10 tokens/s: the long request would need minutes
        started = time.monotonic()
        response = client.post("/v1/score", json=long)
        assert response.status_code == 503 and response.json()["error"]["type"] == "overloaded"
        assert response.headers["retry-after"] == "2" and time.monotonic() - started < 2
        assert client.post("/v1/score", json={"texts": ["Hi."]}).status_code == 200  # short ones still go


def test_engine_failure_is_a_json_500(export_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    from fastapi.testclient import TestClient

    from electra_detect.app.http.server import create_app
    from electra_detect.app.settings import ServerSettings

    class Broken:
        name, provider, max_positions = "broken", "cpu", 64

        def logits(self, input_ids: object, attention_mask: object) -> object:
            raise RuntimeError("engine exploded")

    detector = Detector.load(export_dir, engine="onnx")
    detector.engine = Broken()
    with TestClient(create_app(detector, ServerSettings()), raise_server_exceptions=False) as client, \
            caplog.at_level(logging.ERROR, logger="electra_detect.server"):
        response = client.post("/v1/score", json={"texts": ["a"]})
        assert response.status_code == 500 and response.json()["error"]["type"] == "internal_error"
        error_id = response.json()["error"]["id"]
        assert "exploded" not in response.text and "RuntimeError" not in response.text  # the body names an id only
        logged = [r for r in caplog.records if error_id in r.getMessage()]
        assert len(logged) == 1 and "engine exploded" in str(logged[0].exc_info[1])  # the log has the rest, once
        assert client.get("/healthz").status_code == 200


class SlowEngine:
    """The real engine, slowed down, counting its calls."""

    def __init__(self, engine: object, delay: float) -> None:
        self.engine, self.delay, self.calls, self.widths = engine, delay, 0, []
        self.name, self.provider, self.max_positions = engine.name, engine.provider, engine.max_positions

    def logits(self, input_ids: object, attention_mask: object) -> object:
        self.calls += 1
        self.widths.append(input_ids.shape[1])
        time.sleep(self.delay)
        return self.engine.logits(input_ids, attention_mask)


@pytest.mark.parametrize("batching", [False, True])
def test_a_small_request_overtakes_a_heavy_one_and_an_abandoned_one_stops(export_dir: Path, batching: bool) -> None:
    from electra_detect.app.batcher import MicroBatcher
    from electra_detect.app.metrics import Metrics
    from electra_detect.app.settings import ServerSettings

    detector = Detector.load(export_dir, engine="onnx")
    engine = SlowEngine(detector.engine, 0.02)
    detector.engine = engine
    heavy_texts = ["The farmer saw a red house yesterday and a doctor bought three apples. " * 4] * 8
    settings = ServerSettings(step_tokens=64, model_batch=4, batching=batching)

    async def run() -> None:
        batcher = MicroBatcher(detector, settings, Metrics())
        await batcher.start()
        heavy_job = detector.job(heavy_texts, settings.model_batch)
        assert heavy_job.cost > 10 * settings.step_tokens
        heavy = batcher.submit(heavy_job)
        await asyncio.sleep(0.1)
        before = engine.calls
        small = await batcher.score(["A doctor opened the window."])
        assert small[0].text == "A doctor opened the window."
        assert not heavy.done()  # the small request was answered while the heavy one was still running
        after = engine.widths[before:]  # engine runs since the small request came: the heavy one's are 64 wide
        assert min(after) < 64 and after.index(min(after)) <= 1  # at most the heavy step under way, then its own
        heavy.cancel()  # its client timed out or left
        await asyncio.sleep(0.1)
        calls = engine.calls
        await asyncio.sleep(0.3)
        assert engine.calls == calls  # the model stopped working on it
        assert not heavy_job.done
        await batcher.stop()

    asyncio.run(run())


def test_a_flood_of_small_requests_does_not_starve_one_in_progress(export_dir: Path) -> None:
    from electra_detect.app.batcher import MicroBatcher
    from electra_detect.app.metrics import Metrics
    from electra_detect.app.settings import ServerSettings

    detector = Detector.load(export_dir, engine="onnx")
    detector.engine = SlowEngine(detector.engine, 0.01)
    settings = ServerSettings(step_tokens=64, model_batch=4, batching=False)

    async def run() -> None:
        batcher = MicroBatcher(detector, settings, Metrics())
        await batcher.start()
        heavy_job = detector.job(["The farmer saw a red house yesterday and a doctor bought three apples. " * 4] * 8,
                                 settings.model_batch)
        heavy = batcher.submit(heavy_job)
        while heavy_job.position == 0:
            await asyncio.sleep(0.01)
        at_flood = heavy_job.position
        await asyncio.gather(*(batcher.score([f"A doctor opened window {n}."]) for n in range(20)))
        assert heavy_job.position - at_flood >= 3  # it kept taking turns with the 20 new requests
        await heavy
        await batcher.stop()

    asyncio.run(run())


def test_long_requests_take_turns_two_at_a_time_in_arrival_order(export_dir: Path) -> None:
    from electra_detect.app.batcher import LONG_SLOTS, MicroBatcher
    from electra_detect.app.metrics import Metrics
    from electra_detect.app.settings import ServerSettings

    detector = Detector.load(export_dir, engine="onnx")
    settings = ServerSettings(step_tokens=64, model_batch=4, batching=False)

    async def run() -> None:
        batcher = MicroBatcher(detector, settings, Metrics())
        await batcher.start()
        jobs = [detector.job(["The farmer saw a red house yesterday and a doctor bought three apples. " * 4] * 4,
                             settings.model_batch) for _ in range(LONG_SLOTS + 1)]
        futures = [batcher.submit(job) for job in jobs]
        while not all(f.done() for f in futures):  # sampled: a step may start between a job's end and its future's
            started = [j for j in jobs if j.position]
            assert len([j for j in started if not j.done]) <= LONG_SLOTS
            assert jobs[-1].position == 0 or any(j.done for j in jobs[:-1])  # the last waits for a freed slot
            assert not jobs[-1].position or jobs[1].position  # in arrival order
            await asyncio.sleep(0.001)
        await asyncio.gather(*futures)
        assert batcher.backlog == batcher.long_backlog == 0
        await batcher.stop()

    asyncio.run(run())


def test_scoring_job_steps_respect_the_budget_and_match_score(export_dir: Path) -> None:
    detector = Detector.load(export_dir, engine="onnx")
    texts = ["The farmer saw a red house yesterday. " * 12, "A doctor bought three apples.", "Hi."]
    job = detector.job(texts, 4)
    steps = []
    while not job.done:
        steps.append(job.step(100))
    longest = int(job.plan.sizes.max())  # model tokens of the longest window ([CLS] and [SEP] included)
    assert len(steps) > 1 and all(ran <= max(100, longest) for ran in steps)
    assert sum(steps) == job.cost
    whole = detector.score(texts)
    for stepped, direct in zip(job.results(), whole, strict=True):
        assert [t.p_replaced for t in stepped.tokens] == pytest.approx([t.p_replaced for t in direct.tokens], abs=1e-5)


def read_response(connection: socket.socket) -> bytes:
    """One whole HTTP/1.1 response (head and Content-Length body): TCP may hand them over in several pieces."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(4096)
        assert chunk, f"connection closed mid-response: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lengths = [line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")]
    while len(body) < int(lengths[0]):
        chunk = connection.recv(4096)
        assert chunk, f"connection closed mid-body: {data!r}"
        body += chunk
    return head + b"\r\n\r\n" + body


def test_slow_clients_are_dropped(export_dir: Path, tmp_path: Path) -> None:
    srv = Server(export_dir, tmp_path / "server.log", "--read-timeout", "1")
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as head:
            head.sendall(b"POST /v1/score HTTP/1.1\r\nHost: x\r\n")  # a head that never ends
            started = time.monotonic()
            assert head.recv(1024) == b""  # closed by the server
            assert time.monotonic() - started < 5
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as body:
            body.sendall(b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100\r\n\r\n{\"texts\"")  # a body that never ends
            started = time.monotonic()
            reply = b""
            while chunk := body.recv(4096):
                reply += chunk
            assert reply.startswith(b"HTTP/1.1 408") and b"request_timeout" in reply
            assert time.monotonic() - started < 5
        assert httpx.get(f"{srv.url}/healthz").status_code == 200
        # An idle keep-alive connection is not a slow client: it outlives --read-timeout and httpx's 5-s pool
        # expiry (a server closing at the client's own expiry races the client's next request: ReadError).
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as idle:
            for pause in (5.5, 0):
                idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                assert read_response(idle).startswith(b"HTTP/1.1 200")
                time.sleep(pause)
    finally:
        assert srv.stop() == 0


def test_serve_flags_are_the_settings_fields_and_the_settings_check_themselves() -> None:
    from dataclasses import fields

    from electra_detect.app.settings import ServerSettings, SettingsError, serve_flags

    flags = {name: flag for name, flag, _, _ in serve_flags()}
    assert flags["timeout_s"] == "--timeout" and flags["suggest"] == "--no-suggest"
    assert set(flags) == {f.name for f in fields(ServerSettings) if "flag" in f.metadata}
    assert {"api_key", "api_keys", "batching", "keep_alive_s", "trusted_proxies", "allowed_hosts",
            "docs"}.isdisjoint(flags)  # set by `serve` from other flags, or fixed
    for bad, fragment in (({"max_tokens": 0}, "--max-tokens"), ({"timeout_s": float("inf")}, "--timeout"),
                          ({"max_wait_ms": -1.0}, "--max-wait-ms"), ({"ged_threshold": float("nan")}, "--ged-thr"),
                          ({"max_texts": 2.5}, "--max-texts"), ({"timeout_s": "30"}, "--timeout"),
                          ({"client_requests": 0}, "--client-requests"), ({"check_budget": -1}, "--check-budget"),
                          ({"batching": "yes"}, "batching"), ({"trusted_proxies": ("proxy",)}, "--trusted-proxy"),
                          ({"allowed_hosts": ("a/b",)}, "--allowed-host"), ({"api_key": "short"}, "API key"),
                          ({"api_keys": {"a key with spaces": "x"}}, "API key")):
        with pytest.raises(SettingsError, match=fragment):
            ServerSettings(**bad)
    assert ServerSettings(max_wait_ms=0.0).max_wait_ms == 0.0


@pytest.mark.parametrize("flags, fragment", [
    (["--max-tokens", "0"], "--max-tokens"), (["--step-tokens", "0"], "--step-tokens"),
    (["--read-timeout", "nan"], "--read-timeout"), (["--timeout", "inf"], "--timeout"),
    (["--max-wait-ms", "nan"], "--max-wait-ms"), (["--ged-threshold", "nan"], "--ged-threshold"),
    (["--threads", "-4"], "--threads"), (["--client-tokens", "0"], "--client-tokens"),
    (["--trusted-proxy", "not-an-address"], "--trusted-proxy"), (["--api-keys-file", "/nonexistent/keys"],
                                                                 "--api-keys-file"),
])
def test_serve_cli_rejects_bad_limits(micro_run: Path, capsys: pytest.CaptureFixture[str], flags: list[str],
                                      fragment: str) -> None:
    assert main(["serve", "--model", str(micro_run), *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error:") and fragment in err[-1]


def test_keys_file_healthz_allowed_hosts_and_docs(export_dir: Path, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("alice-key-0123456789 alice\nbob-key-0123456789 bob\n", encoding="utf-8")
    srv = Server(export_dir, tmp_path / "server.log", "--api-keys-file", str(keys), "--allowed-host", "127.0.0.1",
                 "--allowed-host", "*.example.org", "--docs", env={"ELECTRA_DETECT_API_KEY": KEY})
    try:
        public = httpx.get(f"{srv.url}/healthz").json()
        assert public == {"status": "ok", "model": "disc"}  # no key: ok and the model's name, nothing else
        assert httpx.get(f"{srv.url}/healthz", headers={"x-api-key": "wrong-key-123"}).json() == public
        full = httpx.get(f"{srv.url}/healthz", headers={"x-api-key": "bob-key-0123456789"}).json()
        assert full["engine"] == "onnx" and full["model_path"] == str(export_dir)
        for key in ("alice-key-0123456789", "bob-key-0123456789", KEY):  # the file's keys and the single key
            assert post(srv, "/v1/score", {"texts": ["a"]}, headers={"x-api-key": key}).status_code == 200
        assert post(srv, "/v1/score", {"texts": ["a"]}).status_code == 401
        rebound = httpx.get(f"{srv.url}/healthz", headers={"host": "evil.example.com"})  # DNS rebinding
        assert rebound.status_code == 400 and rebound.json()["error"]["type"] == "invalid_host"
        assert httpx.get(f"{srv.url}/healthz", headers={"host": "api.example.org:8080"}).status_code == 200
        assert httpx.get(f"{srv.url}/docs", headers={"x-api-key": KEY}).status_code == 200  # --docs
    finally:
        assert srv.stop() == 0


def test_pins_match_the_private_uvicorn_apis_used() -> None:
    """guard.py subclasses uvicorn's H11Protocol and overrides its keep-alive handler; server.py clears uvicorn's
    _captured_signals. Those are private: pyproject pins fastapi and uvicorn to the versions checked here, and this
    fails when an upgrade moves them."""
    import tomllib
    from importlib.metadata import version

    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol

    pins = [d for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["app"]
            if d.split("=")[0].split(">")[0].split("[")[0] in ("fastapi", "uvicorn")]
    assert sorted(pins) == [f"fastapi=={version('fastapi')}", f"uvicorn=={version('uvicorn')}"]
    for name in ("timeout_keep_alive_handler", "on_response_complete", "data_received", "connection_made"):
        assert callable(getattr(H11Protocol, name, None)), name
    assert isinstance(uvicorn.Server(uvicorn.Config(lambda *a: None))._captured_signals, list)
