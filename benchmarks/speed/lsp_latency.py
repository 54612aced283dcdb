"""Latency in the editor: `electra-detect lsp` against `ged --markup markdown` on the same Markdown text.

Two goals, each timed in one run on an idle machine:

- **one keystroke**: after a letter typed into one paragraph of a ``--words``-word (2,000) Markdown document that
  is already checked, its diagnostics arrive within the debounce plus 1.5x what ``ged --markup markdown`` takes for
  that paragraph (the changed paragraph alone as its document), and under 1 s;
- **a newly opened document**: its first diagnostics within 1.5x ``ged --markup markdown`` on the same file.

Model loading is excluded from both: the server is started and the benchmark waits for its "model loaded" log line
before opening anything; ``ged`` runs in this process through the verb's own code (``electra_detect.cli.main``),
its model and checker loaded once and reused (``warm_ged``). The server is driven over stdio by pygls' client, as an
editor drives it; each timing is from sending the notification to receiving its version's diagnostics. Each repeat
opens a document of its own (different sentences), so no paragraph comes from the server's cache on opening. The
server gives suggestions (its quick fixes), so ``ged --suggest`` is timed beside plain ``ged`` (the goals' baseline).

    python -m benchmarks.speed.lsp_latency [--words 2000] [--repeats 5] [--debounce 0.3]

Writes result.json, table.md and plot.png to ``--out-dir`` (default benchmarks/results/lsp_latency/); prints the
summary as one JSON line. Run it with nothing else on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import io
import json
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.common.run import command_line
from benchmarks.common.text import synthetic_text

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "benchmarks" / "results" / "lsp_latency"
MODEL = ROOT / "models" / "electra-minilm"
ERRORS = ("He go to the market yesterday.", "They was at the station before the storm.",
          "She have three apple in the small garden.")
LOAD_WAIT_S = 600.0
CHECK_WAIT_S = 600.0


def markdown_document(words: int, seed: int) -> str:
    """A Markdown document of about ``words`` prose words: headings, paragraphs of grammatical sentences with an
    error every third paragraph, a fenced code block and a link every fifth."""
    rng = random.Random(seed)
    paragraphs = synthetic_text(max(4, words // 40), seed).strip().split("\n\n")
    parts, count, section = [], 0, 0
    for number, paragraph in enumerate(paragraphs):
        if count >= words:
            break
        if number % 8 == 0:
            section += 1
            parts.append(f"## Section {section}")
        if number % 3 == 1:
            paragraph = f"{paragraph} {rng.choice(ERRORS)}"
        if number % 5 == 2:
            paragraph += f" See [the notes](https://example.com/notes/{number}) for more."
            parts.append("```python\nprint('the same words in code are not checked')\n```")
        parts.append(paragraph)
        count += len(paragraph.split())
    return "# Notes\n\n" + "\n\n".join(parts) + "\n"


def keystroke(document: str) -> tuple[str, str]:
    """The document after one letter typed at the end of a word in its middle paragraph, and that paragraph."""
    paragraphs = document.split("\n\n")
    middle = len(paragraphs) // 2
    while paragraphs[middle].startswith(("#", "```")):
        middle += 1
    words = paragraphs[middle].split(" ")
    words[1] += "s"
    paragraphs[middle] = " ".join(words)
    return "\n\n".join(paragraphs), paragraphs[middle]


@contextlib.contextmanager
def warm_ged(model: Path, suggest: bool) -> Iterator[Any]:
    """A function timing ``electra-detect ged --markup markdown [--suggest] --file PATH`` in this process: the
    verb's own code, with its Detector and its Checking (checker, typer, suggester) loaded once and reused."""
    from electra_detect.cli import ged as ged_verb
    from electra_detect.cli import main

    detector = ged_verb.load_detector(argparse.Namespace(model=str(model), engine="auto", variant=None, workers=0),
                                      task="ged", announce=False)
    made: dict[bool, Any] = {}
    real_checking, real_load = ged_verb.Checking, ged_verb.load_detector

    def checking(detector: Any, dictionary: Any, options: Any) -> Any:
        if options.suggest not in made:
            made[options.suggest] = real_checking(detector, dictionary, options)
        return made[options.suggest]

    ged_verb.Checking, ged_verb.load_detector = checking, lambda *args, **kwargs: detector
    try:
        def run(path: Path) -> float:
            argv = ["ged", "--output-format", "json", "--markup", "markdown", "--model", str(model), "--file",
                    str(path)]
            with contextlib.redirect_stdout(io.StringIO()) as out:
                started = time.perf_counter()
                if main(argv + (["--suggest"] if suggest else [])) != 0:
                    raise RuntimeError(f"ged failed on {path}")
                seconds = time.perf_counter() - started
            if not out.getvalue():
                raise RuntimeError(f"ged wrote nothing for {path}")
            return seconds

        yield run
    finally:
        ged_verb.Checking, ged_verb.load_detector = real_checking, real_load


def time_ged(model: Path, folder: Path, documents: list[str], paragraphs: list[str]) -> dict[str, Any]:
    """``ged --markup markdown`` (and with ``--suggest``) on each document and on each changed paragraph alone:
    seconds, the best of three (after a warm-up run)."""
    out: dict[str, Any] = {}
    for suggest in (False, True):
        with warm_ged(model, suggest) as run:
            run(write(folder / "warm.md", documents[0]))
            name = "ged_suggest" if suggest else "ged"
            out[name] = {
                "document_s": [min(run(write(folder / f"doc{i}.md", d)) for _ in range(3))
                               for i, d in enumerate(documents)],
                "paragraph_s": [min(run(write(folder / f"par{i}.md", p + "\n")) for _ in range(3))
                                for i, p in enumerate(paragraphs)]}
    return out


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


async def time_lsp(model: Path, folder: Path, documents: list[str], changed: list[str],
                   debounce: float) -> dict[str, Any]:
    """The server over stdio: for each document, seconds from didOpen to its first diagnostics, then from one
    keystroke's didChange to that version's diagnostics."""
    from lsprotocol import types
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("lsp-latency", "1")
    arrived: dict[tuple[str, int], float] = {}
    logged: list[str] = []

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def published(ls: Any, params: types.PublishDiagnosticsParams) -> None:
        arrived.setdefault((params.uri, params.version), time.perf_counter())

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def log(ls: Any, params: types.LogMessageParams) -> None:
        logged.append(params.message)

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def show(ls: Any, params: types.ShowMessageParams) -> None:
        logged.append(params.message)

    async def until(condition: Any, timeout: float, what: str) -> None:
        deadline = time.perf_counter() + timeout
        while not condition():
            if time.perf_counter() > deadline:
                raise RuntimeError(f"no {what} within {timeout:g} s; the server said: {logged[-5:]}")
            await asyncio.sleep(0.002)

    await client.start_io(sys.executable, "-m", "electra_detect.cli", "lsp", "--model", str(model),
                          "--debounce", str(debounce))
    try:
        await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities(),
                                                             root_uri=folder.as_uri()))
        client.initialized(types.InitializedParams())
        await until(lambda: any("model loaded" in m for m in logged), LOAD_WAIT_S, "model")
        engine = next(m for m in logged if "model loaded" in m).split("model loaded: ", 1)[1]
        opened, typed, flags = [], [], []
        for number, (document, after) in enumerate(zip(documents, changed, strict=True)):
            uri = (folder / f"lsp{number}.md").as_uri()
            sent = time.perf_counter()
            client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
                uri=uri, language_id="markdown", version=1, text=document)))
            await until(lambda uri=uri: (uri, 1) in arrived, CHECK_WAIT_S, "diagnostics on opening")
            opened.append(arrived[(uri, 1)] - sent)
            sent = time.perf_counter()
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=after)]))
            await until(lambda uri=uri: (uri, 2) in arrived, CHECK_WAIT_S, "diagnostics after the keystroke")
            typed.append(arrived[(uri, 2)] - sent)
            flags.append(next((m for m in reversed(logged) if f"{uri} version 2: " in m and "blocks checked" in m),
                              ""))
        await client.shutdown_async(None)
        client.exit(None)
    finally:
        await client.stop()
    return {"open_s": opened, "keystroke_s": typed, "engine": engine, "keystroke_checks": flags}


def summarize(ged: dict[str, Any], lsp: dict[str, Any], debounce: float) -> dict[str, Any]:
    median = statistics.median
    keystroke_bound = debounce + 1.5 * median(ged["ged"]["paragraph_s"])
    open_bound = 1.5 * median(ged["ged"]["document_s"])
    keystroke, opened = median(lsp["keystroke_s"]), median(lsp["open_s"])
    return {"keystroke_s": keystroke, "keystroke_bound_s": keystroke_bound,
            "keystroke_met": keystroke <= keystroke_bound and keystroke < 1.0,
            "open_s": opened, "open_bound_s": open_bound, "open_met": opened <= open_bound,
            "ged_paragraph_s": median(ged["ged"]["paragraph_s"]), "ged_document_s": median(ged["ged"]["document_s"]),
            "ged_suggest_paragraph_s": median(ged["ged_suggest"]["paragraph_s"]),
            "ged_suggest_document_s": median(ged["ged_suggest"]["document_s"])}


def table(result: dict[str, Any]) -> str:
    s, words, repeats = result["summary"], result["words"], result["repeats"]
    return "\n".join([
        f"# `electra-detect lsp` latency ({words}-word Markdown documents, median of {repeats})", "",
        f"`{result['command']}` at {result['revision']}, {result['when']}; {result['lsp']['engine']}", "",
        "| what | seconds | goal | met |", "|---|---:|---|---|",
        f"| one keystroke: didChange to diagnostics (debounce {result['debounce_s']:g} s) | {s['keystroke_s']:.3f} "
        f"| ≤ debounce + 1.5× ged on the paragraph = {s['keystroke_bound_s']:.3f}, and < 1 | "
        f"{'yes' if s['keystroke_met'] else 'no'} |",
        f"| a newly opened document: didOpen to diagnostics | {s['open_s']:.3f} | ≤ 1.5× ged on the file = "
        f"{s['open_bound_s']:.3f} | {'yes' if s['open_met'] else 'no'} |",
        f"| `ged --markup markdown`: the changed paragraph / the document | {s['ged_paragraph_s']:.3f} / "
        f"{s['ged_document_s']:.3f} | (baseline, model loaded) | |",
        f"| the same with `--suggest` (the server's quick fixes need suggestions) | "
        f"{s['ged_suggest_paragraph_s']:.3f} / {s['ged_suggest_document_s']:.3f} | | |", ""])


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from electra_detect.fileio import atomic_save_figure

    s = result["summary"]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for axis, (title, value, bound, parts) in zip(axes, (
            ("one keystroke", s["keystroke_s"], s["keystroke_bound_s"], ("lsp", "debounce + 1.5× ged")),
            ("newly opened document", s["open_s"], s["open_bound_s"], ("lsp", "1.5× ged"))), strict=True):
        axis.bar(parts, [value, bound], color=["#3b7dd8", "#bbbbbb"])
        axis.set_title(title)
        axis.set_ylabel("seconds")
    fig.suptitle(f"electra-detect lsp, {result['words']}-word Markdown (median of {result['repeats']})")
    fig.tight_layout()
    atomic_save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    import subprocess

    from electra_detect.fileio import atomic_write_json, atomic_write_text

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--words", type=int, default=2000, help="prose words of each document (default 2000)")
    p.add_argument("--repeats", type=int, default=5, help="documents opened and typed in (default 5)")
    p.add_argument("--debounce", type=float, default=0.3, help="the server's --debounce (default 0.3 s)")
    p.add_argument("--model", type=Path, default=MODEL)
    p.add_argument("--out-dir", type=Path, default=OUT_DIR)
    args = p.parse_args(argv)
    documents = [markdown_document(args.words, seed) for seed in range(args.repeats)]
    changed = [keystroke(d) for d in documents]
    with tempfile.TemporaryDirectory(prefix="lsp-latency-") as tmp:
        folder = Path(tmp)
        lsp = asyncio.run(time_lsp(args.model, folder, documents, [c[0] for c in changed], args.debounce))
        ged = time_ged(args.model, folder, documents, [c[1] for c in changed])
    revision = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
    result = {"benchmark": "lsp_latency", "command": command_line(), "revision": revision,
              "when": dt.datetime.now().isoformat(timespec="seconds"), "machine": platform.platform(),
              "words": args.words, "repeats": args.repeats, "debounce_s": args.debounce,
              "document_words": [len(d.split()) for d in documents], "summary": summarize(ged, lsp, args.debounce),
              "lsp": lsp, "ged": ged}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out_dir / "result.json", result)
    atomic_write_text(args.out_dir / "table.md", table(result))
    plot(result, args.out_dir / "plot.png")
    print(json.dumps({"benchmark": "lsp_latency", **result["summary"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
