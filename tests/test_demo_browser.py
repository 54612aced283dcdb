"""End-to-end: the demo as a person uses it, in Debian's chromium driven by Playwright for Python.

The demo runs as a real ``electra-detect demo`` process on a free port with a micro model trained by
the test session; the browser types, clicks and reads the page. Every request the page makes to any
host but the demo's own is blocked and recorded, and the tests assert there was none (offline).

Needs /usr/bin/chromium and the ``playwright`` package (``scripts/install_browser.sh`` installs both;
``make test`` runs it). Without them the tests skip and say so. Never ``playwright install``.

Also a script, to make the README screenshot with a real model::

    python tests/test_demo_browser.py --model models/electra-tiny --out docs/images/demo.png
"""

from __future__ import annotations

import math
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("ELECTRA_DETECT_CHROMIUM", "/usr/bin/chromium"))
ROOT = Path(__file__).resolve().parent.parent
SENTENCE = "The farmer go to the market yesterday and buyed three apple."
NBEST = ("the farmer saw a red house yesterday\t-4.0\n"
         "the farmer saw a red horse yesterday\t-3.9\n"
         "farmer the saw red a house yesterday\t-3.6\n")


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not CHROMIUM.exists():
        return f"{CHROMIUM} not found: run scripts/install_browser.sh (Debian package chromium) for the browser tests"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed: run scripts/install_browser.sh to run the browser tests"
    return None


# ----------------------------------------------------------------------------------- helpers (also the script's)

class DemoProcess:
    """``electra-detect demo --port 0`` in a child process; the URL is read from its first line."""

    def __init__(self, model: Path, timeout: float = 120.0, *args: str) -> None:
        env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONUNBUFFERED": "1"}
        started = time.perf_counter()
        self.proc = subprocess.Popen([sys.executable, "-m", "electra_detect.cli", "demo", "--model", str(model),
                                      "--port", "0", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        self.url = ""
        deadline = started + timeout
        while not self.url:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.perf_counter()))
            except queue.Empty:
                self.stop()
                raise RuntimeError(f"demo did not start in {timeout:.0f} s:\n{''.join(self.output)}") from None
            found = re.search(r"serving at (http://\S+?)/?(?:\s|$)", line)
            if found:
                self.url = found.group(1) + "/"
            elif self.proc.poll() is not None and self.lines.empty():
                raise RuntimeError(f"demo exited with {self.proc.returncode}:\n{''.join(self.output)}")
        _wait_http(self.url, deadline)
        self.startup_s = time.perf_counter() - started

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)
            self.lines.put(line)
        self.lines.put("")  # wake the reader when the process ends

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)


def _wait_http(url: str, deadline: float) -> None:
    import urllib.request

    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            if time.perf_counter() > deadline:
                raise
            time.sleep(0.2)


def open_page(browser: Any, url: str, external: list[str], height: int = 1000) -> Any:
    """A page that may load only from the demo's own origin; anything else is aborted and recorded."""
    page = browser.new_page(viewport={"width": 1200, "height": height})
    origin = url.rstrip("/")

    def route(r: Any) -> None:
        target = r.request.url
        if target.startswith(origin) or target.startswith(("data:", "blob:")):
            r.continue_()
        else:
            external.append(target)
            r.abort()

    page.route("**/*", route)
    page.goto(url)
    page.wait_for_selector("#text-input textarea", timeout=60_000)
    return page


def set_threshold(page: Any, value: float) -> None:
    box = page.locator("#threshold input[type=number]")
    box.fill(f"{value:.2f}")
    box.press("Enter")
    page.wait_for_function("v => Math.abs(parseFloat(document.querySelector('#threshold input[type=range]').value)"
                           " - v) < 1e-9", arg=round(value, 2), timeout=10_000)


def score_sentence(page: Any, text: str, threshold: float) -> list[str]:
    """Type, submit, wait for this threshold's result; the highlighted words in page order."""
    set_threshold(page, threshold)
    page.locator("#text-input textarea").fill(text)
    page.locator("#score-button").click()
    page.wait_for_function("t => document.querySelector('#status-highlight').innerText.includes(t)",
                           arg=f"at threshold {threshold:.2f}", timeout=30_000)
    return [t.strip() for t in page.locator("#highlighted .token.highlighted .text").all_inner_texts()]


def rerank_list(page: Any, nbest: str) -> list[list[str]]:
    page.get_by_role("tab", name="Rerank").click()
    page.locator("#nbest-input textarea").fill(nbest)
    page.locator("#rerank-button").click()
    page.wait_for_function("() => document.querySelector('#status-rerank').innerText.includes('reranked')",
                           timeout=30_000)
    rows = []
    for r in range(sum(1 for line in nbest.splitlines() if line.strip())):
        rows.append([page.locator(f"#rerank-table [data-testid='cell-{r}-{c}']").inner_text().strip()
                     for c in range(6)])
    return rows


def find_errors(page: Any, text: str, threshold: float) -> list[dict[str, str]]:
    """The Errors tab's table for ``text`` at ``threshold`` (with the controls as they are set): one dict a row."""
    page.get_by_role("tab", name="Errors").click()
    set_threshold(page, threshold)
    page.locator("#ged-input textarea").fill(text)
    page.locator("#ged-button").click()
    return read_errors(page, f"at threshold {threshold:.2f}")


def read_errors(page: Any, status: str) -> list[dict[str, str]]:
    """The Errors table's rows once the status line says ``status`` (or that nothing is flagged)."""
    from electra_detect.app.demo.view import GED_HEADERS

    # the page's first check loads spaCy and ERRANT in the demo: once over 30 s on a loaded two-core host
    page.wait_for_function("t => document.querySelector('#status-ged').innerText.includes(t)", arg=status,
                           timeout=90_000)
    count = page.locator("#ged-table [data-testid^='cell-'][data-testid$='-0']").count()
    if "flagged word" not in page.locator("#status-ged").inner_text():
        return []
    return [{name: page.locator(f"#ged-table [data-testid='cell-{r}-{c}']").inner_text().strip()
             for c, name in enumerate(GED_HEADERS)} for r in range(count)]


def threshold_for(words: list[Any]) -> tuple[Any, float]:
    """The top-scoring word and a 2-decimal slider value at or under its score, so it is always flagged."""
    top = max(words, key=lambda w: w.score)
    return top, math.floor(top.score * 100) / 100


# ----------------------------------------------------------------------------------------------- tests

MISSING = browser_missing()
pytestmark = [pytest.mark.slow, pytest.mark.serial, pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]


@pytest.fixture(scope="module")
def demo(micro_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoProcess]:
    dictionary = tmp_path_factory.mktemp("dictionary") / "dictionary.txt"
    dictionary.write_text("", encoding="utf-8")  # never the user's own
    process = DemoProcess(micro_run, 120.0, "--dictionary", str(dictionary))
    print(f"\ndemo start-up: {process.startup_s:.1f} s (process start to HTTP 200)")
    yield process
    process.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import Error, sync_playwright

    with sync_playwright() as playwright:
        try:
            chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        except Error as exc:
            pytest.skip(f"{CHROMIUM} is installed but does not start headless here: {exc}")
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def detector(micro_run: Path) -> Any:
    from electra_detect.detector import Detector

    return Detector.load(micro_run, engine="auto")  # the page's engine: onnx int8 from the cache


def test_typed_sentence_is_highlighted_and_the_top_word_flagged(demo: DemoProcess, browser: Any, detector: Any,
                                                               tmp_path: Path) -> None:
    external: list[str] = []
    page = open_page(browser, demo.url, external)
    info = page.locator("#model-info").inner_text()
    assert "engine" in info and detector.engine.name in info and "provider" in info and "calibration" in info
    words = detector.score([SENTENCE])[0].words
    top, threshold = threshold_for(words)
    highlighted = score_sentence(page, SENTENCE, threshold)
    assert highlighted, "no highlighted span appeared"
    assert top.word in highlighted
    # the page flags what the Detector says: every clear case on its side of the threshold
    assert all(w.word in highlighted for w in words if w.score >= threshold + 1e-4)
    assert not any(w.word in highlighted for w in words if w.score < threshold - 1e-4 and
                   sum(v.word == w.word for v in words) == 1)
    legend = page.locator("[data-testid='highlighted-text:category-legend'] .legend-item").all_inner_texts()
    assert legend == ["p < 0.1", "p 0.1–0.3", "p 0.3–0.5", "p 0.5–0.7", "p 0.7–0.9", "p ≥ 0.9"]
    # raising the slider over every score clears the highlights without pressing Score again
    if max(w.score for w in words) < 0.99:
        set_threshold(page, 1.0)
        page.wait_for_function("() => document.querySelector('#status-highlight').innerText.includes('1.00')")
        assert page.locator("#highlighted .token.highlighted").count() == 0
    # the Errors tab lists the same top word among its flagged words
    rows = find_errors(page, SENTENCE, threshold)
    assert rows and top.word in [row["word"] for row in rows]
    page.get_by_role("tab", name="Highlight").click()
    set_threshold(page, threshold)
    page.screenshot(path=str(tmp_path / "demo.png"), full_page=True)
    assert (tmp_path / "demo.png").stat().st_size > 10_000
    assert external == [], f"the page tried to load external assets: {external}"


def test_errors_tab_shows_messages_and_categories_and_honours_the_controls(demo: DemoProcess, browser: Any,
                                                                          detector: Any) -> None:
    from electra_detect.tasks.ged.rule_table import RULES_BY_ID

    external: list[str] = []
    page = open_page(browser, demo.url, external)
    rows = find_errors(page, SENTENCE, 0.0)  # every word flagged, each with its type, category, rule and message
    assert len(rows) == len(detector.score([SENTENCE])[0].words)
    assert all(RULES_BY_ID[row["rule"]].category == row["category"] and row["message"] for row in rows)
    assert any(f'"{row["word"]}"' in row["message"] for row in rows)  # the message names the word
    category = rows[0]["category"]
    page.locator("#categories-off").get_by_label(re.compile(rf"\({category}\)")).check()
    off = read_errors(page, f"Categories off: {category}")
    assert [row["word"] for row in off] == [row["word"] for row in rows if row["category"] != category]
    page.locator("#categories-off").get_by_label(re.compile(rf"\({category}\)")).uncheck()
    page.wait_for_function("() => !document.querySelector('#status-ged').innerText.includes('Categories off')",
                           timeout=30_000)
    word = next(row["word"] for row in rows if row["word"].isalpha() and row["word"].lower() != "the")
    page.locator("#own-words textarea").fill(word)
    page.locator("#own-words textarea").press("Tab")
    page.wait_for_function("n => document.querySelectorAll(\"#ged-table [data-testid^='cell-'][data-testid$='-0']\")"
                           ".length < n", arg=len(rows), timeout=30_000)
    taught = read_errors(page, "flagged word")
    assert word not in [row["word"] for row in taught]
    assert not any(word.lower() in row["suggestions"].split("→")[-1].lower().split(", ") for row in taught)
    page.locator("#picky input").check()  # the slider moves to the model's picky threshold
    picky = round(detector.threshold(level="picky"), 2)
    page.wait_for_function("v => Math.abs(parseFloat(document.querySelector('#threshold input[type=range]').value)"
                           " - v) < 1e-9", arg=picky, timeout=10_000)
    assert external == []


def test_rerank_tab_shows_the_reranked_table(demo: DemoProcess, browser: Any, detector: Any,
                                             tmp_path: Path) -> None:
    from electra_detect.tasks.rerank.fusion import rerank_hypotheses
    from electra_detect.tasks.rerank.nbest import parse_hypothesis_lines

    external: list[str] = []
    page = open_page(browser, demo.url, external)
    rows = rerank_list(page, NBEST)
    expected = rerank_hypotheses(detector, parse_hypothesis_lines(NBEST))
    assert [row[1] for row in rows] == [e["text"] for e in expected]
    assert [row[0] for row in rows] == ["1", "2", "3"]
    for row, e in zip(rows, expected, strict=True):
        assert float(row[2]) == pytest.approx(e["asr_score"], abs=1e-3)
        assert float(row[3]) == pytest.approx(e["electra_score"], abs=1e-3)
        assert float(row[5]) == pytest.approx(e["total"], abs=1e-3)
    page.screenshot(path=str(tmp_path / "demo-rerank.png"), full_page=True)
    # a bad score line is a message in the page, not an error dialog
    page.locator("#nbest-input textarea").fill("fine line\t-1\nbad line\tminus three\n")
    page.locator("#rerank-button").click()
    page.wait_for_function("() => document.querySelector('#status-rerank').innerText.includes('line 2')",
                           timeout=30_000)
    assert external == []


def test_empty_and_huge_input_give_a_friendly_message(demo: DemoProcess, browser: Any) -> None:
    external: list[str] = []
    page = open_page(browser, demo.url, external)
    page.locator("#score-button").click()
    page.wait_for_function("() => document.querySelector('#status-highlight').innerText.includes('empty')",
                           timeout=30_000)
    page.locator("#text-input textarea").fill("word " * 1500)
    page.locator("#score-button").click()
    page.wait_for_function("() => document.querySelector('#status-highlight').innerText.includes('at most 5,000')",
                           timeout=30_000)
    assert page.locator("#highlighted .token.highlighted").count() == 0
    assert page.locator(".toast-body").count() == 0  # no error pop-up
    assert external == []


# ----------------------------------------------------------------------------------------------- script

def main(argv: list[str] | None = None) -> int:
    """Make the README screenshot: start the demo on MODEL, score an example, save a PNG."""
    import argparse

    from playwright.sync_api import sync_playwright

    from electra_detect.detector import Detector

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", default="docs/images/demo.png")
    parser.add_argument("--messages-out", default="docs/images/demo_messages.png",
                        help="the Errors tab's screenshot (each flagged word's type, category, rule and message)")
    parser.add_argument("--text", default="He go to the store yesterday and buyed three apple.")
    parser.add_argument("--nbest", default="i want to recognize speech\\t-12.1\\ni want to wreck a nice beach\\t-11.8"
                        "\\neye want to recognise speech\\t-12.6\\ni want two recognize speech\\t-12.0",
                        help="n-best list for the rerank screenshot (\\t and \\n are read as TAB and newline)")
    parser.add_argument("--threshold", type=float, default=None,
                        help="slider value (default: the model's ged.json threshold, else 0.5)")
    args = parser.parse_args(argv)
    missing = browser_missing()
    if missing:
        print(f"error: {missing}", file=sys.stderr)
        return 2
    detector = Detector.load(args.model, task="ged")
    threshold = args.threshold if args.threshold is not None else detector.threshold()
    words = detector.score([args.text])[0].words
    dictionary = Path(os.environ.get("TMPDIR", "/tmp")) / "electra-detect-screenshot-dictionary.txt"
    dictionary.write_text("", encoding="utf-8")  # the screenshot shows the model, not the maker's own words
    process = DemoProcess(Path(args.model), 120.0, "--dictionary", str(dictionary))
    print(f"start-up {process.startup_s:.1f} s; " + ", ".join(f"{w.word} {w.score:.3f}" for w in words))
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
            external: list[str] = []
            page = open_page(chromium, process.url, external, height=720)  # full_page grows to the content
            score_sentence(page, args.text, threshold)
            out = Path(args.out)
            out.parent.mkdir(parents=True, exist_ok=True)
            _save(page, out)
            rows = find_errors(page, args.text, threshold)
            print("errors tab: " + "; ".join(f"{r['word']} {r['type']} {r['category']} {r['message']}" for r in rows))
            messages_out = Path(args.messages_out)
            _save(page, messages_out)
            rerank_list(page, args.nbest.replace("\\t", "\t").replace("\\n", "\n"))
            rerank_out = out.with_name(f"{out.stem}-rerank{out.suffix}")
            _save(page, rerank_out)
            chromium.close()
            print(f"wrote {out}, {messages_out} and {rerank_out}; external requests: {external or 'none'}")
    finally:
        process.stop()
    return 0


def _save(page: Any, out: Path) -> None:
    tmp = out.with_suffix(".tmp.png")
    page.screenshot(path=str(tmp), full_page=True)
    os.replace(tmp, out)  # atomic


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
