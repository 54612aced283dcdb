"""The demo's handlers and page without a browser: what each tab returns for good and bad input."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from electra_detect.app.demo.errors import DemoError
from electra_detect.app.demo.inputs import MAX_CHARS, MAX_HYPOTHESES
from electra_detect.app.demo.launch import build_app, launch
from electra_detect.app.demo.model import engine_label, find_export, load_detector
from electra_detect.app.demo.page import DemoApp
from electra_detect.app.demo.view import BANDS, COLOR_MAP, GED_HEADERS, band, suggestion_cell
from electra_detect.detector import Detector

SENTENCE = "The farmer go to the market yesterday."
CATEGORY, SUGGESTIONS = GED_HEADERS.index("category"), GED_HEADERS.index("suggestions")  # the Errors table's columns


@pytest.fixture(scope="module")
def dictionary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page's personal dictionary file (empty at first): never the user's own."""
    path = tmp_path_factory.mktemp("dictionary") / "dictionary.txt"
    path.write_text("", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def app(micro_run: Path, dictionary: Path) -> DemoApp:
    return build_app(micro_run, dictionary=dictionary)


@pytest.fixture(scope="module")
def torch_app(micro_run: Path, dictionary: Path) -> DemoApp:
    """The page on the torch engine: its scores do not depend on how a batch is made up (int8's dynamic
    quantization scales each batch by its own range, so the page's and the checker's batches may differ)."""
    return build_app(micro_run, engine="torch", dictionary=dictionary)


@pytest.fixture(scope="module")
def scores(app: DemoApp):
    return app.detector.score([SENTENCE])[0]


def test_bands_cover_zero_to_one_in_order() -> None:
    assert band(0.0) == "p < 0.1" and band(0.0999) == "p < 0.1"
    assert band(0.1) == "p 0.1–0.3" and band(0.5) == "p 0.5–0.7" and band(0.95) == "p ≥ 0.9" and band(1.0) == "p ≥ 0.9"
    lows = [low for low, _label, _colour in BANDS]
    assert lows == sorted(lows) and list(COLOR_MAP) == [label for _low, label, _c in BANDS]


def test_highlight_covers_the_text_and_flags_exactly_the_words_over_the_threshold(app: DemoApp, scores) -> None:
    top = max(w.score for w in scores.words)
    threshold = top - 1e-6  # at least the top word is over it, whatever the micro model learned
    pieces, summary = app.highlight(SENTENCE, threshold, "calibrated")
    assert "".join(piece for piece, _label in pieces) == SENTENCE
    flagged = [(piece, label) for piece, label in pieces if label is not None]
    expected = [w for w in scores.words if w.score >= threshold]
    assert [piece for piece, _ in flagged] == [w.word for w in expected]
    assert [label for _, label in flagged] == [band(w.score) for w in expected]
    assert f"{len(expected)} of {len(scores.words)} words flagged" in summary
    everything, _ = app.highlight(SENTENCE, 0.0, "calibrated")
    assert sum(label is not None for _, label in everything) == len(scores.words)
    nothing, _ = app.highlight(SENTENCE, 1.0, "calibrated") if top < 1.0 else ([], "")
    assert all(label is None for _, label in nothing)


@pytest.mark.parametrize("text, fragment", [("", "empty"), ("   \n\t", "empty"), (None, "empty"),
                                            ("word " * (MAX_CHARS // 5 + 1), "at most 5,000")])
def test_empty_or_huge_text_gives_a_message_not_an_exception(app: DemoApp, text, fragment: str) -> None:
    pieces, message = app.highlight(text, 0.5, "calibrated")
    assert pieces == [] and message.startswith("⚠️") and fragment in message
    rows, message = app.ged(text, 0.5, "calibrated")
    assert rows == [] and fragment in message


@pytest.mark.parametrize("threshold", [-0.1, 1.5, "abc", None])
def test_bad_threshold_gives_a_message(app: DemoApp, threshold) -> None:
    pieces, message = app.highlight(SENTENCE, threshold, "calibrated")
    assert pieces == [] and "threshold" in message


def test_ged_tab_shows_the_ged_tasks_records(torch_app: DemoApp) -> None:
    from electra_detect.app.message_quotes import quoted
    from electra_detect.tasks.ged.options import GedOptions

    app, scores = torch_app, torch_app.detector.score([SENTENCE])[0]

    rows, message = app.ged(SENTENCE, 0.0, "calibrated")  # every word flagged, each typed by its best edit
    expected = app.checker.check_texts([SENTENCE], GedOptions(threshold=0.0, suggest=True))[0]
    assert len(rows) == len(scores.words) == len(expected) and f"{len(rows)} flagged word(s)" in message
    for row, word in zip(rows, expected, strict=True):
        assert dict(zip(GED_HEADERS, row, strict=True)) == {
            "word": word.word, "start": word.start, "end": word.end, "p": round(word.score, 4),
            "type": f"{word.operation}:{word.type}" if word.type else "– (untyped model)",
            "category": word.rule.category, "rule": word.rule.id, "message": quoted(word.message),
            "suggestions": suggestion_cell(SENTENCE, word.suggestions)}
    types = [row[GED_HEADERS.index("type")] for row in rows]
    assert any(kind != "– (untyped model)" for kind in types)  # an untyped model's words typed by their edits
    top = max(scores.words, key=lambda w: w.score)
    rows, _ = app.ged(SENTENCE, top.score - 1e-6, "calibrated")
    assert top.word in [row[0] for row in rows]
    rows, message = app.ged(SENTENCE, 1.0, "calibrated") if top.score < 1.0 else ([], "No word")
    assert rows == [] and "No word" in message


def test_categories_off_picky_and_own_words_on_the_ged_tab(app: DemoApp, micro_run: Path, tmp_path: Path) -> None:
    from electra_detect.tasks.ged.dictionary import Vocabulary

    rows, _ = app.ged(SENTENCE, 0.0, "calibrated")
    category = rows[0][CATEGORY]
    off, message = app.ged(SENTENCE, 0.0, "calibrated", [category])
    assert [r[0] for r in off] == [r[0] for r in rows if r[CATEGORY] != category] and category in message
    suggested = [v.strip() for r in rows for v in r[SUGGESTIONS].split("→")[-1].split(",") if v.strip().isalpha()]
    own = [rows[1][0], suggested[0]]
    known = Vocabulary.of(own)
    taught, _ = app.ged(SENTENCE, 0.0, "calibrated", [], False, "\n".join(own))
    assert taught and not any(known.knows(r[0]) for r in taught), (own, taught)
    assert not any(known.knows(v.strip()) for r in taught for v in r[SUGGESTIONS].split("→")[-1].split(","))
    pieces, _ = app.highlight(SENTENCE, 0.0, "calibrated", ", ".join(own))
    assert not any(known.knows(piece) for piece, label in pieces if label is not None)
    assert app.ged(SENTENCE, 0.0, "calibrated", [], False, "w," * 1001)[1].startswith("⚠️")
    model = tmp_path / "picky"
    shutil.copytree(micro_run / "discriminator", model)
    (model / "ged.json").write_text(json.dumps({"threshold": 0.999, "levels": {"picky": 0.0}}))
    strict = build_app(model, dictionary=tmp_path / "none.txt")
    assert strict.threshold == 1.0 and (strict.picky_threshold(True), strict.picky_threshold(False)) == (0.0, 1.0)
    default, _ = strict.ged(SENTENCE, 1.0, "calibrated")
    picky, message = strict.ged(SENTENCE, 1.0, "calibrated", [], True)  # never above the model's picky threshold
    assert default == [] and len(picky) == len(rows) and "(picky)" in message


def test_the_dictionary_file_is_never_flagged_nor_suggested_on_the_page(app: DemoApp, dictionary: Path) -> None:
    rows, _ = app.ged(SENTENCE, 0.0, "calibrated")
    word = rows[0][0]
    try:
        dictionary.write_text(f"# mine\n{word.upper()}\n", encoding="utf-8")
        rows, _ = app.ged(SENTENCE, 0.0, "calibrated")
        assert word.lower() not in [r[0].lower() for r in rows]
        offered = [v.strip().lower() for r in rows for v in r[SUGGESTIONS].split("→")[-1].split(",")]
        assert word.lower() not in offered
        pieces, summary = app.highlight(SENTENCE, 0.0, "calibrated")
        assert word not in [piece for piece, label in pieces if label is not None]
    finally:
        dictionary.write_text("", encoding="utf-8")
    assert word in [r[0] for r in app.ged(SENTENCE, 0.0, "calibrated")[0]]  # read again once it changed


def test_rerank_uses_the_learned_reranker_when_the_model_has_one(micro_run: Path, tmp_path: Path) -> None:
    from electra_detect.tasks.rerank.fusion import rerank_hypotheses
    from electra_detect.tasks.rerank.listwise import Reranker
    from electra_detect.tasks.rerank.nbest import parse_hypothesis_lines

    model = tmp_path / "reranked"
    shutil.copytree(micro_run / "discriminator", model)
    Reranker({"sum": 0.5, "count": -3.0, "words": 0.25}).save(model)
    app = build_app(model, dictionary=tmp_path / "none.txt")
    assert app.hypothesis.reranker is not None and app.lm_label == "reranker"
    nbest = "the farmer saw a red house\t-3.5\nthe farmer go a red house\t-3.4\n"
    table, message = app.rerank(nbest, 1.0, 0.0)
    expected = rerank_hypotheses(app.detector, parse_hypothesis_lines(nbest))  # the task's choice: the reranker
    learned = Reranker.load(model).lm_scores(app.detector.score([h for h, _ in parse_hypothesis_lines(nbest)],
                                                                calibrated=False))
    assert [row[1] for row in table] == [row["text"] for row in expected]
    assert [row[3] for row in table] == [round(row["reranker_score"], 4) for row in expected]
    assert sorted(row[3] for row in table) == sorted(round(v, 4) for v in learned) and "learned" in message


def test_rerank_tab_matches_the_shared_rerank_api(app: DemoApp) -> None:
    from electra_detect.tasks.rerank.fusion import rerank_hypotheses
    from electra_detect.tasks.rerank.nbest import parse_hypothesis_lines

    nbest = "the farmer saw a red house\t-3.5\nthe farmer saw a red horse\t-3.4\n\nfarmer the saw red a house\t-3.0\n"
    table, message = app.rerank(nbest, 2.0, 0.5)
    expected = rerank_hypotheses(app.detector, parse_hypothesis_lines(nbest), lm_weight=2.0, length_weight=0.5)
    assert [row[1] for row in table] == [row["text"] for row in expected]
    assert [row[0] for row in table] == [1, 2, 3]
    for row, exp in zip(table, expected, strict=True):
        assert row[2:] == [round(exp["asr_score"], 4), round(exp["electra_score"], 4), exp["length"],
                           round(exp["total"], 4)]
        assert row[5] == pytest.approx(row[2] + 2.0 * row[3] + 0.5 * row[4], abs=1e-3)
    assert "3 hypotheses reranked" in message


@pytest.mark.parametrize("nbest, weight, fragment", [
    ("", 1.0, "Paste an n-best list"),
    ("\n\n  \n", 1.0, "Paste an n-best list"),
    ("a fine sentence\t-1\nanother one\tnot-a-number\n", 1.0, "line 2"),
    ("a fine sentence\t-1\n", "heavy", "LM weight"),
    ("one hypothesis\n" * (MAX_HYPOTHESES + 1), 1.0, f"at most {MAX_HYPOTHESES}"),
    ("x" * 60_000, 1.0, "at most 50,000"),
])
def test_rerank_bad_input_gives_a_message(app: DemoApp, nbest: str, weight, fragment: str) -> None:
    table, message = app.rerank(nbest, weight, 0.0)
    assert table == [] and message.startswith("⚠️") and fragment in message


def test_raw_toggle_shares_the_engine_and_undoes_calibration(tmp_path: Path, micro_run: Path) -> None:
    from electra_detect.calibrators import TemperatureScaling, save_calibration

    model = tmp_path / "model"
    shutil.copytree(micro_run / "discriminator", model)
    save_calibration(model, TemperatureScaling(4.0))
    app = build_app(model)
    assert app.has_calibration and app.info.calibration == "temperature"
    assert not hasattr(app, "raw")  # one Detector: raw is a per-call option, not a second (copied) detector
    assert app.detector.calibration == "temperature"  # the calibrated default is untouched
    raw_top = max(w.score for w in app.detector.score(SENTENCE, calibrated=False)[0].words)
    cal_top = max(w.score for w in app.detector.score(SENTENCE)[0].words)
    same_engine = Detector.load(model, engine="auto", calibrated=False)  # the demo's engine (onnx int8), raw
    expected_raw = max(w.score for w in same_engine.score(SENTENCE)[0].words)
    assert raw_top == pytest.approx(expected_raw, abs=1e-6) and abs(raw_top - cal_top) > 1e-4
    _, raw_summary = app.highlight(SENTENCE, 0.0, "raw")
    _, cal_summary = app.highlight(SENTENCE, 0.0, "calibrated")
    assert "(raw probabilities)" in raw_summary and "(temperature probabilities)" in cal_summary
    nbest = "the farmer saw a red house\nthe farmer go a red house\n"
    raw_rows, raw_msg = app.rerank(nbest, 1.0, 0.0, "raw")
    cal_rows, cal_msg = app.rerank(nbest, 1.0, 0.0, "calibrated")
    texts = nbest.split("\n")[:2]
    raw = app.detector.score(texts, calibrated=False)
    raw_sums = {t: round(r.sentence_sum, 4) for t, r in zip(texts, raw, strict=True)}
    assert {row[1]: row[3] for row in raw_rows} == raw_sums and "raw probabilities" in raw_msg
    assert [row[3] for row in cal_rows] != [row[3] for row in raw_rows] and "temperature probabilities" in cal_msg


def test_model_info_names_model_engine_and_provider(app: DemoApp, micro_run: Path) -> None:
    info = app.info
    assert info.name.startswith(micro_run.name) and "preset micro" in info.name
    assert info.engine == engine_label(app.detector.engine) and info.provider  # "onnx (int8)": auto is onnx now
    assert info.calibration == "raw"
    text = info.markdown()
    assert info.engine in text and info.provider in text and "raw" in text


def test_engine_choice_without_an_onnx_export(micro_run: Path, tmp_path: Path, monkeypatch) -> None:
    from electra_detect.errors import DetectorError
    from electra_detect.onnx import locate as inference

    assert find_export(micro_run) is None
    detector, note = load_detector(micro_run, engine="auto")  # exported once into the (test session's) cache
    assert detector.engine.name == "onnx" and note == ""
    assert detector.engine.export_dir.parent == inference.cache_root()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty"))
    with pytest.raises(DetectorError, match="no ONNX export"):  # and none to be made: strict onnx refuses
        Detector.load(micro_run, engine="onnx", export=False)
    with pytest.raises(DemoError, match="--variant"):
        load_detector(micro_run, engine="torch", variant="int8")
    with pytest.raises(DemoError, match="unknown engine"):
        load_detector(micro_run, engine="tpu")


def test_auto_engine_uses_the_onnx_export_and_shows_it(tmp_path: Path, micro_run: Path) -> None:
    from electra_detect.onnx.export import export_model

    run = tmp_path / "run"
    shutil.copytree(micro_run / "discriminator", run / "discriminator")
    shutil.copy(micro_run / "run_config.json", run / "run_config.json")
    export_model(run, run / "discriminator" / "onnx", variants=["fp32"], parity_texts=[SENTENCE], progress=False)
    onnx_app = build_app(run)
    assert find_export(run) == run / "discriminator" / "onnx"
    assert onnx_app.info.engine == "onnx (fp32)" and onnx_app.info.provider == "CPUExecutionProvider"
    assert onnx_app.info.name.startswith("run (preset micro")
    torch_app = build_app(run, engine="torch")
    assert torch_app.info.engine == "torch" and torch_app.info.provider == "cpu"
    onnx_scores = [w.score for w in onnx_app.detector.score(SENTENCE)[0].words]
    torch_scores = [w.score for w in torch_app.detector.score(SENTENCE)[0].words]
    assert onnx_scores == pytest.approx(torch_scores, abs=1e-4)
    threshold = sorted(torch_scores)[len(torch_scores) // 2]
    flagged = [piece for piece, label in onnx_app.highlight(SENTENCE, threshold)[0] if label]
    assert flagged and "ONNX" not in onnx_app.info.markdown()  # no fallback note


def test_page_has_every_widget_the_issue_asks_for(app: DemoApp) -> None:
    import gradio as gr

    page = app.build()
    assert isinstance(page, gr.Blocks)
    components = {getattr(block, "elem_id", None): block for block in page.blocks.values()}
    highlighted = components["highlighted"]
    assert isinstance(highlighted, gr.HighlightedText) and highlighted.show_legend
    assert highlighted.color_map == COLOR_MAP
    assert isinstance(components["threshold"], gr.Slider)
    assert isinstance(components["calibration"], gr.Radio)
    assert isinstance(components["ged-table"], gr.Dataframe) and isinstance(components["rerank-table"], gr.Dataframe)
    assert components["ged-table"].headers == GED_HEADERS  # each flagged word's type, category, rule and message
    assert isinstance(components["picky"], gr.Checkbox) and isinstance(components["own-words"], gr.Textbox)
    assert [value for _label, value in components["categories-off"].choices] == [
        "GRAMMAR", "TYPOS", "PUNCTUATION", "CASING", "STYLE"]
    assert app.info.engine in components["model-info"].value


def test_demo_cli_bad_model_is_one_error_line(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "electra_detect.cli", "demo", "--model", str(tmp_path / "nope")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: model path not found")
    result = subprocess.run([sys.executable, "-m", "electra_detect.cli", "demo", "--port", "70000"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "error: --port must be between 0 and 65535" in result.stderr


def test_port_in_use_is_a_demo_error(app: DemoApp) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(DemoError, match=f"port {port} on 127.0.0.1 is in use"):
            launch(app, port=port, block=False)


def test_slider_starts_at_the_tuned_ged_threshold(tmp_path: Path, micro_run: Path) -> None:
    import gradio as gr

    model = tmp_path / "model"
    shutil.copytree(micro_run / "discriminator", model)
    assert build_app(model).threshold == 0.5  # no ged.json
    (model / "ged.json").write_text(json.dumps({"threshold": 0.2345}))
    app = build_app(model)
    assert app.threshold == 0.23
    sliders = [b for b in app.build().blocks.values() if isinstance(b, gr.Slider)]
    assert [s.value for s in sliders] == [0.23]
    assert build_app(model, threshold=0.7).threshold == 0.7
    with pytest.raises(DemoError, match=r"number in \[0, 1\]"):
        build_app(model, threshold=1.5)


def test_a_model_dirs_ged_model_is_what_the_demo_shows(tmp_path: Path, micro_run: Path) -> None:
    model = tmp_path / "model"
    for part in ("discriminator", "generator"):
        shutil.copytree(micro_run / part, model / part)
    assert build_app(model).detector.model_dir == model / "discriminator"
    shutil.copytree(micro_run / "discriminator", model / "ged")
    assert build_app(model).detector.model_dir == model / "ged"


def test_logins_and_limits_are_checked(tmp_path: Path) -> None:
    from electra_detect.app.demo.limits import DemoLimits, parse_auth

    logins = tmp_path / "logins"
    logins.write_text("# who\nann:pa:ss\n\nbob:secret\n", encoding="utf-8")
    assert parse_auth(["cy:pw"], logins) == [("cy", "pw"), ("ann", "pa:ss"), ("bob", "secret")]
    for bad in (["nopassword"], [":pw"], ["user:"]):
        with pytest.raises(DemoError, match="username:password"):
            parse_auth(bad)
    for limits in ({"max_file_size": "lots"}, {"queue_size": 0}, {"concurrency": 0}):
        with pytest.raises(DemoError):
            DemoLimits(**limits)


def test_beyond_loopback_without_a_login_warns_like_serve(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from electra_detect.cli import main

    assert main(["demo", "--host", "0.0.0.0", "--model", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "warning: serving the demo on 0.0.0.0 without a login" in err and err.strip().splitlines()[-1].startswith(
        "error:")
    assert main(["demo", "--host", "0.0.0.0", "--auth", "a:b", "--model", str(tmp_path / "missing")]) == 2
    assert "warning" not in capsys.readouterr().err


def test_the_served_demo_asks_for_a_login_caps_uploads_bounds_its_queue_and_leaves_no_files(app: DemoApp) -> None:
    import httpx

    from electra_detect.app.demo.launch import shutdown
    from electra_detect.app.demo.limits import DemoLimits

    limits = DemoLimits(max_file_size="100kb", queue_size=3, concurrency=1, auth=[("ann", "secret")])
    page, url = launch(app, port=_free_port(), block=False, limits=limits)
    uploads = Path(page.electra_uploads)
    try:
        assert page._queue.max_size == 3  # a full queue answers at once instead of making the next user wait
        with httpx.Client(base_url=url.rstrip("/"), timeout=30) as client:
            assert client.get("/config").status_code == 401  # no login, no page
            assert client.post("/login", data={"username": "ann", "password": "wrong"}).status_code == 400
            assert client.post("/login", data={"username": "ann", "password": "secret"}).status_code == 200
            big = client.post("/gradio_api/upload", files={"files": ("big.txt", b"x" * 200_000)})
            assert big.status_code == 413, big.text  # over max_file_size
            small = client.post("/gradio_api/upload", files={"files": ("small.txt", b"hello")})
            assert small.status_code == 200 and Path(small.json()[0]).is_relative_to(uploads)
        assert any(uploads.rglob("small.txt"))
    finally:
        shutdown(page)
    assert not uploads.exists()  # the uploaded file is not left on disk after shutdown


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_errors_tab_takes_the_services_one_request_path(app: DemoApp, monkeypatch: pytest.MonkeyPatch) -> None:
    from electra_detect.app.service import Service

    calls, check = [], Service.check

    async def counted(self, texts, options, client="-", cancel=None):  # noqa: ANN001, ANN202
        calls.append((texts, client))
        return await check(self, texts, options, client, cancel)

    monkeypatch.setattr(Service, "check", counted)
    rows, _message = app.ged(SENTENCE, 0.0, "calibrated")
    assert calls == [([SENTENCE], "demo")] and rows  # admission, options and the check: Service.check's
    app.service.settings.check_budget = 2  # what the service refuses, the page says in one line
    try:
        rows, message = app.ged(SENTENCE, 0.0, "calibrated")
    finally:
        app.service.settings.check_budget = 32_768
    assert rows == [] and message.startswith("⚠️") and "budget" in message


def test_the_demos_uploads_are_bounded_in_total(app: DemoApp) -> None:
    import httpx

    from electra_detect.app.demo.launch import shutdown
    from electra_detect.app.demo.limits import DemoLimits

    limits = DemoLimits(max_file_size="100kb", max_total_uploads="250kb")
    page, url = launch(app, port=_free_port(), block=False, limits=limits)
    uploads = Path(page.electra_uploads)
    try:
        with httpx.Client(base_url=url.rstrip("/"), timeout=30) as client:
            statuses = [client.post("/gradio_api/upload", files={"files": (f"f{n}.txt", b"x" * 90_000)}).status_code
                        for n in range(6)]
        assert statuses[:2] == [200, 200] and statuses[2:] == [413] * 4, statuses  # before: 200 six times
        held = sum(p.stat().st_size for p in uploads.rglob("*") if p.is_file())
        assert held <= 250 * 1024
    finally:
        shutdown(page)
    assert not uploads.exists()


def test_sigterm_leaves_no_temp_directory(micro_run: Path, tmp_path: Path) -> None:
    """systemd and docker stop a service with SIGTERM: the demo removes its files as on Ctrl-C (before: the temp
    directory was left behind)."""
    import os
    import signal
    import time

    import httpx

    port = _free_port()
    env = {**os.environ, "TMPDIR": str(tmp_path), "ELECTRA_DETECT_DICTIONARY": str(tmp_path / "none.txt")}
    proc = subprocess.Popen([sys.executable, "-m", "electra_detect.cli", "demo", "--model", str(micro_run),
                             "--engine", "torch", "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            try:
                if httpx.get(f"http://127.0.0.1:{port}/", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        assert list(tmp_path.glob("electra-detect-demo-*")), "the demo made its temp directory"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not list(tmp_path.glob("electra-detect-demo-*"))


def test_a_stopped_demo_leaves_nothing_in_the_temp_dir_nor_onnxruntimes_telemetry(micro_run: Path,
                                                                                 tmp_path: Path) -> None:
    """After SIGTERM the demo's temp dir holds nothing of it (issue 68; before: onnxruntime's telemetry session file
    ``.ses`` and gradio's ``gradio/vibe_edit_history`` folder stayed, and onnxruntime wrote a device id under
    ``~/.cache/Microsoft``)."""
    import os
    import signal
    import time

    import httpx

    temp, home = tmp_path / "tmp", tmp_path / "home"
    temp.mkdir()
    home.mkdir()
    port = _free_port()
    env = {**os.environ, "TMPDIR": str(temp), "HOME": str(home), "ELECTRA_DETECT_DICTIONARY": str(tmp_path / "none")}
    env.pop("ORT_DISABLE_TELEMETRY", None)  # the demo's own choice, not the test's
    proc = subprocess.Popen([sys.executable, "-m", "electra_detect.cli", "demo", "--model", str(micro_run),
                             "--engine", "onnx", "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            try:
                if httpx.get(f"http://127.0.0.1:{port}/", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # torchinductor_<user> is torch's compile cache, shared by every torch process of the user: torch's, not the demo's
    assert [p.name for p in temp.iterdir() if not p.name.startswith("torchinductor_")] == []
    assert not (home / ".cache" / "Microsoft").exists()
