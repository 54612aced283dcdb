"""Fairness between clients: who a request comes from, each client's share (429 past it), the batcher serving
clients in turn, and /v2/check admitted by its cost before any work (issue 53)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from electra_detect.app.clients import Refused, Shares, client_address
from electra_detect.app.settings import ServerSettings, SettingsError, read_keys_file
from electra_detect.detector import Detector

ALICE, BOB = "alice-key-0123456789", "bob-key-0123456789"
SENTENCE = "The farmer saw a red house yesterday."
LONG = "The farmer saw a red house yesterday and a doctor bought three apples. " * 4


class CountingEngine:
    """The real engine, slowed down, recording which texts' rows each call ran."""

    def __init__(self, engine: object, delay: float = 0.0) -> None:
        self.engine, self.delay, self.calls = engine, delay, 0
        self.name, self.provider, self.max_positions = engine.name, engine.provider, engine.max_positions

    def logits(self, input_ids: object, attention_mask: object) -> object:
        self.calls += 1
        time.sleep(self.delay)
        return self.engine.logits(input_ids, attention_mask)


@pytest.fixture(scope="module")
def detector(micro_run: Path) -> Detector:
    return Detector.load(micro_run / "discriminator", engine="torch")


@pytest.fixture
def counting(detector: Detector) -> Iterator[CountingEngine]:
    engine = detector.engine
    detector.engine = CountingEngine(engine)
    yield detector.engine
    detector.engine = engine


# ---------------------------------------------------------------------------------------------- who is asking

def test_keys_file_names_each_key(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"# clients\n{ALICE} alice\n\n{BOB}\n", encoding="utf-8")
    assert read_keys_file(keys) == {ALICE: "alice", BOB: "key4"}  # a key without a name is not named by itself
    for text, fragment in ((f"{ALICE}\n{ALICE} again\n", "already"), ("short\n", "at least"), ("# none\n", "no key")):
        keys.write_text(text, encoding="utf-8")
        with pytest.raises(SettingsError, match=fragment):
            read_keys_file(keys)
    settings = ServerSettings(api_key=ALICE, api_keys={BOB: "bob"})  # the single key keeps working beside a file
    assert settings.api_keys == {BOB: "bob", ALICE: "default"}


def test_forwarded_addresses_count_only_from_trusted_proxies() -> None:
    proxies = ("10.0.0.0/8",)
    assert client_address("1.2.3.4", "9.9.9.9", proxies) == "1.2.3.4"  # not a proxy: its own claim is ignored
    assert client_address("10.0.0.5", "9.9.9.9", proxies) == "9.9.9.9"
    assert client_address("10.0.0.5", "6.6.6.6, 9.9.9.9, 10.0.0.7", proxies) == "9.9.9.9"  # right-most untrusted
    assert client_address("10.0.0.5", "not-an-ip", proxies) == "10.0.0.5"
    assert client_address("10.0.0.5", "9.9.9.9", ()) == "10.0.0.5"  # opt-in: no proxies, no forwarding


def test_shares_refuse_past_a_clients_share_and_not_another_client() -> None:
    shares = Shares(ServerSettings(client_requests=2, client_tokens=100, max_requests=3), lambda: 50.0)
    shares.enter("a")
    shares.enter("a")
    with pytest.raises(Refused) as refused:
        shares.enter("a")
    assert refused.value.reason == "client_requests"
    shares.enter("b")  # another client still gets in
    with pytest.raises(Refused, match="server") as full:
        shares.enter("c")
    assert full.value.reason == "max_requests"
    shares.take("a", 500)  # nothing in flight: a request is let in whatever it costs (max_tokens bounds it)
    with pytest.raises(Refused) as tokens:
        shares.take("a", 1)
    assert tokens.value.reason == "client_tokens" and tokens.value.retry_after == 10  # 500 tokens at 50/s
    shares.take("b", 100)
    shares.give("a", 500)
    for client in ("a", "a", "b"):
        shares.leave(client)
    shares.give("b", 100)
    assert shares.clients == {} and shares.requests == 0


# --------------------------------------------------------------------------------------------- the batcher

def test_batcher_serves_clients_in_turn(detector: Detector, counting: CountingEngine) -> None:
    from electra_detect.app.batcher import MicroBatcher
    from electra_detect.app.metrics import Metrics

    counting.delay = 0.01
    settings = ServerSettings(step_tokens=64, model_batch=4, batching=False)

    async def run() -> None:
        batcher = MicroBatcher(detector, settings, Metrics())
        await batcher.start()
        done: list[str] = []

        async def one(client: str, n: int) -> None:
            job = detector.job([f"A doctor opened window {n}."], settings.model_batch)
            await batcher.submit(job, client)
            done.append(client)

        flood = [asyncio.ensure_future(one("flooder", n)) for n in range(30)]
        await asyncio.sleep(0)
        light = asyncio.ensure_future(one("light", 99))
        await asyncio.gather(light, *flood)
        assert done.index("light") <= 3, done  # served in turn: not after the 30 queued before it
        await batcher.stop()

    asyncio.run(run())


def test_a_clients_first_long_request_takes_a_slot_before_anothers_third(detector: Detector) -> None:
    from electra_detect.app.batcher import LONG_SLOTS, MicroBatcher
    from electra_detect.app.metrics import Metrics

    settings = ServerSettings(step_tokens=64, model_batch=4, batching=False)

    async def run() -> None:
        batcher = MicroBatcher(detector, settings, Metrics())
        await batcher.start()
        flood = [detector.job([LONG] * 4, settings.model_batch) for _ in range(4)]
        futures = [batcher.submit(job, "flooder") for job in flood]
        while not flood[0].position:  # the flooder's requests are in the long queue before the light client's
            await asyncio.sleep(0.001)
        light = detector.job([LONG] * 4, settings.model_batch)
        light_future = batcher.submit(light, "light")
        assert batcher.wait_estimate(light.cost, "light") < batcher.wait_estimate(light.cost, "flooder") or \
            not batcher.rate  # the flooder's queue is the flooder's wait, not the light client's
        await light_future
        assert sum(job.done for job in flood) < LONG_SLOTS + 1, "the light client waited for the flooder's queue"
        await asyncio.gather(*futures)
        assert batcher.backlog == batcher.long_backlog == 0 and not batcher.long_by_client
        await batcher.stop()

    asyncio.run(run())


def test_wait_estimate_counts_a_clients_own_queue_and_as_much_of_the_others(detector: Detector) -> None:
    from electra_detect.app.batcher import MicroBatcher
    from electra_detect.app.metrics import Metrics

    batcher = MicroBatcher(detector, ServerSettings(), Metrics())
    batcher.rate = 100.0  # no long work lately: long work gets half of it
    batcher.long_by_client["flooder"] = 10_000
    assert batcher.wait_estimate(100, "light") == pytest.approx(200 / 50)  # its own 100, the flooder's next 100
    assert batcher.wait_estimate(100, "flooder") == pytest.approx(10_100 / 50)
    batcher.executor.shutdown()


# ------------------------------------------------------------------------------------------- over HTTP (ASGI)

async def _concurrently(app: object, requests: list[tuple[str, str, dict]]) -> list[httpx.Response]:
    """Each (path, key, form-or-json) sent at once through the app, its lifespan running."""
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        async def send(path: str, key: str, body: dict) -> httpx.Response:
            kwargs = {"data": body} if path == "/v2/check" else {"json": body}
            return await c.post(path, headers={"x-api-key": key}, timeout=60, **kwargs)

        return list(await asyncio.gather(*(send(*r) for r in requests)))


def test_past_its_share_a_client_gets_429_with_retry_after_and_another_client_does_not(
        detector: Detector, counting: CountingEngine) -> None:
    from electra_detect.app.http.server import create_app

    counting.delay = 0.2
    app = create_app(detector, ServerSettings(api_keys={ALICE: "alice", BOB: "bob"}, client_requests=2,
                                              batching=False, suggest=False))
    answers = asyncio.run(_concurrently(app, [("/v1/score", ALICE, {"texts": [SENTENCE]})] * 5 +
                                        [("/v1/score", BOB, {"texts": [SENTENCE]})]))
    alice, bob = answers[:5], answers[5]
    assert sorted(r.status_code for r in alice) == [200, 200, 429, 429, 429]
    refused = next(r for r in alice if r.status_code == 429)
    assert refused.json()["error"]["type"] == "too_many_requests" and int(refused.headers["retry-after"]) >= 1
    assert bob.status_code == 200
    metrics = asyncio.run(_get(app, "/metrics", ALICE)).text
    assert 'electra_refused_requests_total{reason="client_requests"} 3.0' in metrics


def test_past_its_token_share_a_client_gets_429_for_long_work_never_for_a_short_request(
        detector: Detector, counting: CountingEngine) -> None:
    """The share bounds a client's long work (over one step); a short request (a sentence) is let in whatever the
    client holds, so a light editor behind a busy address or key still gets its sentence checked."""
    from electra_detect.app.http.server import create_app

    counting.delay = 0.2
    app = create_app(detector, ServerSettings(api_keys={ALICE: "alice", BOB: "bob"}, client_tokens=30, step_tokens=8,
                                              batching=False, suggest=False))
    answers = asyncio.run(_concurrently(app, [("/v1/score", ALICE, {"texts": [SENTENCE * 2]})] * 3 +
                                        [("/v1/score", BOB, {"texts": [SENTENCE * 2]})] +
                                        [("/v1/score", ALICE, {"texts": ["Hi."]})]))
    assert sorted(r.status_code for r in answers[:3]) == [200, 429, 429] and answers[3].status_code == 200
    assert "model tokens" in next(r for r in answers if r.status_code == 429).json()["error"]["message"]
    assert answers[4].status_code == 200, answers[4].text  # short: never refused for tokens (429 before)


async def _get(app: object, path: str, key: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        return await client.get(path, headers={"x-api-key": key})


def test_a_check_over_its_budget_is_refused_before_any_scoring_or_planning(
        detector: Detector, counting: CountingEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    from electra_detect.app.http.server import create_app
    from electra_detect.tasks.ged.suggestions import Suggester

    planned, plan = [], Suggester.plan
    monkeypatch.setattr(Suggester, "plan", lambda self, *a, **k: planned.append(a) or plan(self, *a, **k))
    text = "x " * 2000  # 2,000 words: at least 2,002 model tokens, over a budget of 1,000 by its words alone
    with TestClient(create_app(detector, ServerSettings(check_budget=1000, max_chars=10_000))) as client:
        for path, body in (("/v2/check", {"data": {"text": text, "language": "en-US"}}),
                           ("/v1/ged", {"json": {"texts": [text]}})):  # every check, not only /v2/check
            response = client.post(path, **body)
            assert response.status_code == 413 and response.json()["error"]["type"] == "over_budget", response.text
            assert "at least 2002" in response.json()["error"]["message"]
        assert counting.calls == 0 and not planned  # refused on its word count: nothing scored, nothing planned
    dense = " ".join(["a,b,c,d,e,f,g,h"] * 50)  # 50 words: under budget by its words, over once tokenised
    with TestClient(create_app(detector, ServerSettings(check_budget=500))) as client:
        response = client.post("/v2/check", data={"text": dense, "language": "en-US"})
        assert response.status_code == 413 and "costs 1536 model tokens" in response.json()["error"]["message"]
        assert counting.calls == 0 and not planned
        small = client.post("/v2/check", data={"text": "x " * 20, "language": "en-US"})
        assert small.status_code == 200 and counting.calls > 0 and planned  # under budget: scored, then planned


# ------------------------------------------------------------- a sentence beside a flood at its address (issue 68)

def test_a_clients_small_requests_hold_a_share_of_their_own() -> None:
    """The address's share of requests is full of a batch job's paragraphs; an editor's sentence at the same address
    is let in (it is small: a share of its own), until the address holds its share of small ones too; the server's
    limit bounds both."""
    from electra_detect.app.clients import small

    settings = ServerSettings(client_requests=2, max_requests=5)
    assert small(settings.step_tokens // 4, settings) and not small(settings.step_tokens // 4 + 1, settings)
    shares = Shares(settings, lambda: 100.0)
    shares.enter("ip:a")
    shares.enter("ip:a")
    with pytest.raises(Refused, match="2 requests") as refused:
        shares.enter("ip:a")
    assert refused.value.reason == "client_requests"
    shares.enter("ip:a", small=True)  # the editor's sentence: let in past the full share of paragraphs
    shares.enter("ip:a", small=True)
    with pytest.raises(Refused, match="2 small requests"):
        shares.enter("ip:a", small=True)
    shares.enter("ip:b", small=True)
    with pytest.raises(Refused, match="server"):  # the server's limit bounds small ones too
        shares.enter("ip:c", small=True)
    shares.leave("ip:a", small=True)
    shares.leave("ip:a")
    assert shares.clients["ip:a"].requests == 2 and shares.clients["ip:a"].small == 1


def test_a_sentence_goes_ahead_of_its_addresss_bigger_requests(detector: Detector,
                                                               counting: CountingEngine) -> None:
    """One address, no keys: 24 paragraphs of a batch job queued, a connection each, then an editor's sentence: the
    sentence is answered after at most the few already under way (before: an address's requests were served first
    come, first served, the sentence after all 24)."""
    from electra_detect.app.http.server import create_app

    counting.delay = 0.05
    settings = ServerSettings(batching=False, suggest=False, step_tokens=64)
    app = create_app(detector, settings)
    paragraph = LONG[:120]
    assert settings.step_tokens // 4 < detector.job([paragraph]).cost <= settings.step_tokens  # short, not small

    async def run() -> list[str]:
        answered: list[str] = []

        async def post(port: int, text: str) -> None:
            transport = httpx.ASGITransport(app=app, client=("10.0.0.7", port))
            async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=60) as client:
                assert (await client.post("/v1/score", json={"texts": [text], "tokens": False})).status_code == 200
            answered.append("editor" if port == 50_000 else "pool")

        async with app.router.lifespan_context(app):
            batcher = app.state.batcher
            flood = [asyncio.ensure_future(post(40_000 + n, f"{paragraph} {n}")) for n in range(24)]
            while batcher.backlog < 20 * detector.job([paragraph]).cost:  # the pool's requests queued (a few may run)
                await asyncio.sleep(0.005)
            await asyncio.gather(post(50_000, "Hi."), *flood)
        return answered

    answered = asyncio.run(run())
    assert answered.index("editor") <= 4, answered


def test_a_sentence_is_never_merged_into_a_step_of_bigger_requests(detector: Detector,
                                                                  counting: CountingEngine) -> None:
    """With batching on, thirty short requests of nearly a step each and another client's sentence, queued together:
    the sentence runs after at most one of them, alone (before: it was merged into one job with the thirty, 30 steps
    of work, and waited for all of it)."""
    from electra_detect.app.batcher import MicroBatcher
    from electra_detect.app.metrics import Metrics

    counting.delay = 0.01
    settings = ServerSettings(step_tokens=64, model_batch=4, batching=True, max_batch=32)
    big, small = detector.job([LONG[:120]]), detector.job(["Hi."])
    assert settings.step_tokens // 4 < big.cost <= settings.step_tokens and small.cost <= 16

    async def run() -> int:
        batcher = MicroBatcher(detector, settings, Metrics())
        await batcher.start()
        flood = [batcher.submit(detector.job([LONG[:120]], settings.model_batch), "flooder") for _ in range(30)]
        await batcher.submit(detector.job(["Hi."], settings.model_batch), "light")
        ran = counting.calls
        await asyncio.gather(*flood)
        await batcher.stop()
        return ran

    assert asyncio.run(run()) <= 3  # one of the flood's (its rows a call at a time), then its own


def test_a_sentence_behind_a_flooding_address_keeps_its_checks(detector: Detector,
                                                              counting: CountingEngine) -> None:
    """One address, no keys: six connections of a batch job's paragraphs hold the address's share of four requests
    (two of them 429); an editor's sentence at the same address is a 200 (before: 429, the address's share was full),
    and the batch job's next paragraph is still a 429."""
    from electra_detect.app.http.server import create_app

    counting.delay = 0.3
    settings = ServerSettings(client_requests=4, batching=False, suggest=False, step_tokens=64)
    app = create_app(detector, settings)
    shares = app.state.service.shares
    paragraph = LONG[:200]
    assert len(paragraph.split()) + 2 > settings.step_tokens // 4  # not small by its words

    async def run() -> tuple[list[httpx.Response], httpx.Response, httpx.Response]:
        async def post(port: int, text: str) -> httpx.Response:
            transport = httpx.ASGITransport(app=app, client=("10.0.0.7", port))
            async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=60) as client:
                return await client.post("/v1/ged", json={"texts": [text]})

        async with app.router.lifespan_context(app):
            flood = [asyncio.ensure_future(post(40_000 + n, paragraph)) for n in range(6)]
            while shares.clients.get("ip:10.0.0.7") is None or shares.clients["ip:10.0.0.7"].requests < 4:
                await asyncio.sleep(0.01)
            light, heavy = await asyncio.gather(post(50_000, SENTENCE), post(40_000, paragraph))
            return list(await asyncio.gather(*flood)), light, heavy

    flood, light, heavy = asyncio.run(run())
    assert sorted(r.status_code for r in flood) == [200, 200, 200, 200, 429, 429]
    assert light.status_code == 200, light.text
    assert heavy.status_code == 429
