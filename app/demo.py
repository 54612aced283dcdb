"""Gradio demo: each word coloured by the discriminator's replaced probability.

Everything the page shows comes from one ``Detector`` (the same scoring path as the CLI, GED,
reranking and the server); the demo only turns its ``TextScores`` into widgets. The handlers are
plain methods of :class:`DemoApp` so they can be tested without a browser, and they never raise
on user input: an empty, huge or malformed input becomes a message in the page's status line.

Offline by construction: Gradio's default theme ships its fonts, analytics are switched off before
Gradio is imported, server-side rendering (which needs Node) is off, and nothing is fetched from a
hub. The server binds 127.0.0.1 unless told otherwise; bound beyond it, ``DemoLimits`` caps uploads (Gradio's
upload route takes files whatever the page shows), bounds the queue and can ask for a password, and the files
Gradio keeps live in a folder of this process, removed at shutdown.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from electra_detect.errors import UserError

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # before gradio is imported anywhere

MAX_CHARS = 5_000  # one page of text; longer input is refused with a message (the CLI scores files)
MAX_HYPOTHESES = 200
MAX_NBEST_CHARS = 50_000
DEFAULT_PORT = 7860
FILE_SIZE = r"(?i)[0-9]+(\.[0-9]+)?\s*(b|kb|mb|gb|tb)"
LOOPBACK = ("127.0.0.1", "localhost", "::1")

# Probability bands, low to high: the legend reads left to right as a colour scale. Only words at or
# above the threshold are coloured, each by the band its probability falls in.
BANDS: list[tuple[float, str, str]] = [
    (0.0, "p < 0.1", "#fef3c7"),
    (0.1, "p 0.1–0.3", "#fde047"),
    (0.3, "p 0.3–0.5", "#fb923c"),
    (0.5, "p 0.5–0.7", "#f87171"),
    (0.7, "p 0.7–0.9", "#ef4444"),
    (0.9, "p ≥ 0.9", "#b91c1c"),
]
COLOR_MAP = {label: colour for _low, label, colour in BANDS}

EXAMPLES = [
    "He go to the store yesterday and buyed three apple.",
    "The committee have decided to postpone the the meeting until next week.",
    "We must strengthen our economy and protect our nation.",
    "She don't like the new bridge near the school.",
]
NBEST_EXAMPLES = [  # (label shown on the button, list): a multi-line value would render as an empty button
    ("4-best with recogniser scores", "i want to recognize speech\t-12.1\ni want to wreck a nice beach\t-11.8\n"
                                      "eye want to recognise speech\t-12.6\ni want two recognize speech\t-12.0"),
    ("3-best, no scores", "their going to the station\nthey're going to the station\nthere going to the station"),
]

GED_HEADERS = ["word", "message", "category", "type", "rule", "suggestions", "p", "start", "end"]
GED_WIDTHS = ["8%", "27%", "9%", "11%", "18%", "12%", "7%", "4%", "4%"]  # the message gets the room
CSS = "#model-info p { margin: 0; } #status-highlight, #status-ged, #status-rerank { min-height: 1.5em; }"


@dataclass
class DemoLimits:
    """What the demo's server takes: ``max_file_size`` per upload (Gradio's size string, e.g. "1mb"),
    ``max_total_uploads`` all uploads together (the same form; past it an upload is refused 413), at most
    ``queue_size`` jobs waiting (more get "queue full" at once), ``concurrency`` jobs run at a time, and the
    (username, password) pairs that may log in (empty: no login)."""

    max_file_size: str = "1mb"
    queue_size: int = 16
    concurrency: int = 1
    auth: list[tuple[str, str]] = field(default_factory=list)
    max_total_uploads: str = "32mb"

    def __post_init__(self) -> None:
        if self.queue_size < 1 or self.concurrency < 1:
            raise DemoError("--queue-size and --concurrency must be >= 1")
        for flag, size in (("--max-file-size", self.max_file_size), ("--max-total-uploads", self.max_total_uploads)):
            if not re.fullmatch(FILE_SIZE, str(size).strip()):  # the sizes Gradio's launch() reads
                raise DemoError(f"{flag} {size!r} is not a size (e.g. 500kb, 1mb)")


def size_bytes(size: str) -> int:
    """Bytes of a size string as Gradio reads one ("1mb": 1024 ** 2 bytes; "500kb", "2 gb", "10b")."""
    number, unit = re.fullmatch(r"(?i)([0-9]+(?:\.[0-9]+)?)\s*(b|kb|mb|gb|tb)", size.strip()).groups()
    return int(float(number) * 1024 ** ("b", "kb", "mb", "gb", "tb").index(unit.lower()))


class UploadBudget:
    """ASGI middleware on Gradio's app: an upload (a POST to a path ending in ``/upload``) is refused 413 when the
    files the demo holds (``folder``) and the uploads in progress (their declared length, else ``per_upload``) would
    pass ``limit`` bytes. Gradio caps each file (``max_file_size``) but not their number: 150 uploads of 1 MB left
    145 MB behind. Here, not in Gradio (it has no such setting), so the cap holds whatever the page shows."""

    def __init__(self, app: Any, folder: str, limit: int, per_upload: int) -> None:
        self.app, self.folder, self.limit, self.per_upload = app, Path(folder), limit, per_upload
        self.in_flight = 0  # bytes reserved by uploads being received (the event loop's thread only)

    def held(self) -> int:
        """Bytes of the files under the folder now."""
        return sum(p.stat().st_size for p in self.folder.rglob("*") if p.is_file()) if self.folder.exists() else 0

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not scope["path"].endswith("/upload"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        reserve = int(declared) if declared.isdigit() else self.per_upload
        if self.held() + self.in_flight + reserve > self.limit:
            from starlette.responses import PlainTextResponse

            answer = PlainTextResponse(f"the demo holds its most uploads ({self.limit:,} bytes in all); none is "
                                       f"taken now", status_code=413)
            await answer(scope, receive, send)
            return
        self.in_flight += reserve
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= reserve


def parse_auth(pairs: list[str] | None = None, auth_file: str | Path | None = None) -> list[tuple[str, str]]:
    """(username, password) pairs from ``user:password`` strings and a file of such lines (blank lines and lines
    starting with # skipped); the password is what follows the first colon."""
    lines = list(pairs or [])
    if auth_file is not None:
        try:
            text = Path(auth_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise DemoError(f"--auth-file {auth_file}: cannot read it ({exc})") from None
        lines += [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        if not lines:
            raise DemoError(f"--auth-file {auth_file} holds no username:password line")
    found = []
    for line in lines:
        user, sep, password = line.partition(":")
        if not sep or not user or not password:
            raise DemoError("an auth entry must be username:password, both non-empty")
        found.append((user, password))
    return found


class DemoError(UserError, ValueError):
    """The demo cannot start (bad model dir, engine, port); printed as one ``error:`` line."""


class InputProblem(ValueError):
    """User input the demo refuses; shown as a message in the page, never as a traceback."""


@dataclass
class ModelInfo:
    """What the header shows: which weights, which engine on which provider, which probabilities."""

    name: str
    path: str
    engine: str
    provider: str
    calibration: str
    note: str = ""

    def markdown(self) -> str:
        line = (f"**Model** `{self.name}` · **engine** `{self.engine}` · **provider** `{self.provider}` · "
                f"**calibration** `{self.calibration}`")
        return line + (f"  \n{self.note}" if self.note else "")


def band(score: float) -> str:
    """The legend label of the band ``score`` falls in."""
    label = BANDS[0][1]
    for low, name, _colour in BANDS:
        if score >= low:
            label = name
    return label


def escape_md(text: str) -> str:
    """User text inside Markdown: HTML-escaped and with Markdown's special characters neutralised."""
    out = html.escape(text, quote=False)
    for char in "\\`*_{}[]()#+-.!|>~":
        out = out.replace(char, "\\" + char)
    return out


def check_text(text: Any, limit: int = MAX_CHARS) -> str:
    """The text to score, or InputProblem with a message a person can act on."""
    if not isinstance(text, str) or not text.strip():
        raise InputProblem("Type or paste a sentence first (the box is empty).")
    if len(text) > limit:
        raise InputProblem(f"That input is {len(text):,} characters; the demo scores at most {limit:,} at a time. "
                           f"Paste a shorter passage, or score whole files with `electra-detect score --file`.")
    return text


def check_threshold(threshold: Any) -> Any:
    """The slider's value, which must be there (the page's number box can be cleared); its range and type are
    checked where every front's are, in ``build_ged_options``."""
    if threshold is None:
        raise InputProblem("The threshold must be a number between 0 and 1 (the box is empty).")
    return threshold


def own_words(words: Any) -> tuple[str, ...]:
    """The personal-words box: words or phrases, one a line or comma-separated."""
    if words is None:
        return ()
    if not isinstance(words, str):
        raise InputProblem("Your words must be text: one word a line, or comma-separated.")
    from electra_detect.tasks.ged.dictionary import MAX_REQUEST_WORDS, request_words

    found = request_words(words)
    if len(found) > MAX_REQUEST_WORDS:
        raise InputProblem(f"{len(found):,} words in the box; the demo takes at most {MAX_REQUEST_WORDS:,}. Put more "
                           f"in your dictionary file (docs/writers.md).")
    return found


def suggestion_cell(text: str, suggestions: list[Any]) -> str:
    """A flagged word's suggestions in one cell: ``go → went, goes`` (a deletion is "(delete)")."""
    if not suggestions:
        return "–"
    target = text[suggestions[0].start:suggestions[0].end]
    return f"{target} → " + ", ".join(s.value or "(delete)" for s in suggestions)


# ------------------------------------------------------------------------------------- model loading

def find_export(model: str | Path) -> Path | None:
    """The ONNX export dir ``electra-detect export`` wrote for this model (or the model is one), else None."""
    from electra_detect.errors import DetectorError
    from electra_detect.onnx.manifest import find_export_dir

    try:
        return find_export_dir(model)
    except DetectorError:
        return None


def load_detector(model: str | Path, engine: str = "auto", device: str | None = None,
                  variant: str | None = None, task: str = "score") -> tuple[Any, str]:
    """The Detector on the engine ``Detector.load`` chooses (``auto``: the ONNX export when the model dir
    holds a usable one, else torch). Returns (detector, note); the note says why the torch engine was used
    when ONNX was possible but failed, so the page never hides a fallback."""
    from electra_detect.detector import Detector
    from electra_detect.errors import DetectorError

    try:
        detector = Detector.load(model, device=device, engine=engine, variant=variant, task=task)
    except DetectorError as exc:
        raise DemoError(str(exc)) from exc
    return detector, detector.note


def engine_provider(engine: Any) -> str:
    """The execution provider (ONNX Runtime) or device (torch) the engine runs on (``Engine.provider``)."""
    return str(engine.provider)


def engine_label(engine: Any) -> str:
    """``torch``, or ``onnx (optimized)``: the engine and, for ONNX, which exported variant runs."""
    name = str(getattr(engine, "name", type(engine).__name__))
    variant = getattr(engine, "variant", None)
    return f"{name} ({variant})" if variant else name


def model_label(detector: Any) -> str:
    """A readable name: the model's name (``Detector.name``, as every front says it), with its preset and size
    when the run says them."""
    model_dir, run_dir, name = Path(detector.model_dir), detector.home_dir, detector.name
    details = []
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        details.append(f"hidden {config.get('hidden_size')} × {config.get('num_hidden_layers')} layers")
    except (OSError, ValueError):
        pass
    try:
        run = json.loads((run_dir / "run_config.json").read_text(encoding="utf-8"))
        preset = run.get("model", {}).get("preset")
        if preset:
            details.insert(0, f"preset {preset}")
    except (OSError, ValueError, AttributeError):
        pass
    return f"{name} ({', '.join(details)})" if details else name


# ------------------------------------------------------------------------------------------ the app

class DemoApp:
    """The demo's state (one calibrated and one raw view of the same Detector) and its handlers."""

    def __init__(self, detector: Any, note: str = "", threshold: float = 0.5, dictionary: Any = None) -> None:
        from electra_detect.app.service import Service
        from electra_detect.app.settings import ServerSettings

        self.detector = detector
        # The Errors tab's checks take the one request path every front takes (Service.check: admission, options,
        # the GED task's flags, types, messages and suggestions); the page only shows its records.
        settings = ServerSettings(dictionary=None if dictionary is None else str(dictionary.path))
        self.service = Service(detector, settings)
        self._service_thread: Any = None  # started by the first check (it loads spaCy and ERRANT: seconds)
        self.hypothesis = self.service.hypothesis  # a learned reranker when the model has one
        self.threshold = threshold  # the slider's starting value
        self.has_calibration = detector.calibration != "raw"
        self.info = ModelInfo(name=model_label(detector), path=str(detector.model_dir),
                              engine=engine_label(detector.engine),
                              provider=engine_provider(detector.engine), calibration=detector.calibration,
                              note=note)
        self._lock = threading.Lock()  # one scoring call at a time: the tokenizer and engine are shared

    @property
    def checker(self) -> Any:
        """The GED task of the page's Service (its dictionary, suggester and typer)."""
        return self.service.checker

    def check(self, text: str, options: Any) -> Any:
        """``text`` checked through ``Service.check`` (started on first use, on its own event loop thread)."""
        from electra_detect.app.service import ServiceThread

        with self._lock:
            if self._service_thread is None:
                self._service_thread = ServiceThread(self.service)
            return self._service_thread.check([text], options, client="demo")

    def close(self) -> None:
        """Stop the Service's thread, when a check started it."""
        with self._lock:
            if self._service_thread is not None:
                self._service_thread.close()
                self._service_thread = None

    def _score(self, text: str, calibration: str) -> Any:
        with self._lock:
            return self.detector.score([text], calibrated=calibration != "raw")[0]

    # -- tab 1: highlighted words
    def highlight(self, text: Any, threshold: Any = 0.5, calibration: str = "calibrated", words: Any = ""
                  ) -> tuple[list[tuple[str, str | None]], str]:
        """(HighlightedText value, summary or message). Words with score >= threshold get their band, except the
        personal dictionary's and the page's own ``words`` (never flagged)."""
        from electra_detect.tasks.ged.check import in_dictionary
        from electra_detect.tasks.ged.flags import FlaggedWord
        from electra_detect.tasks.ged.options import GedOptionsError, build_ged_options

        try:
            text = check_text(text)
            options = build_ged_options(threshold=check_threshold(threshold), words=own_words(words))
            vocabulary = self.checker.vocabulary(options)
        except (InputProblem, GedOptionsError) as problem:
            return [], f"⚠️ {problem}"
        threshold = options.threshold
        scores = self._score(text, calibration)
        flagged = [w for w in scores.words if w.score >= threshold
                   and not in_dictionary(text, FlaggedWord.of_word(w), vocabulary)]
        shown = {(w.start, w.end) for w in flagged}
        pieces: list[tuple[str, str | None]] = []
        cursor = 0
        for word in scores.words:
            if word.start > cursor:
                pieces.append((text[cursor:word.start], None))
            pieces.append((word.word, band(word.score) if (word.start, word.end) in shown else None))
            cursor = word.end
        if cursor < len(text):
            pieces.append((text[cursor:], None))
        top = max(scores.words, key=lambda w: w.score, default=None)
        kind = "raw" if calibration == "raw" or not self.has_calibration else self.info.calibration
        summary = (f"**{len(flagged)} of {len(scores.words)} words flagged** at threshold {threshold:.2f} "
                   f"({kind} probabilities). Sentence score (mean log(1−p), higher = more fluent): "
                   f"{scores.sentence_mean:.3f}.")
        if top is not None:
            summary += f" Highest: “{escape_md(top.word)}” p = {top.score:.3f}."
        return pieces, summary

    def picky_threshold(self, picky: Any, calibration: str = "calibrated") -> float:
        """Where the slider goes when picky is switched on or off: the model's threshold at that level (``ged.json``;
        picky flags more), rounded to the slider's step."""
        level = "picky" if picky else "default"
        return round(self.detector.threshold(calibrated=calibration != "raw" and self.has_calibration, level=level), 2)

    # -- tab 2: the GED task's flagged words
    def ged(self, text: Any, threshold: Any = 0.5, calibration: str = "calibrated", off: Any = None,
            picky: Any = False, words: Any = "") -> tuple[list[list[Any]], str]:
        """The GED task's flagged words (``GedChecker``: typed, with rule, category, message and suggestions),
        with the categories in ``off`` switched off, ``picky`` (never a higher threshold than the model's picky
        one) and the page's own dictionary ``words``; in text order."""
        from electra_detect.tasks.ged.options import GedOptionsError, build_ged_options

        try:
            text = check_text(text)
            options = build_ged_options(threshold=check_threshold(threshold), level="picky" if picky else "default",
                                        disabled_categories=list(off or []), words=own_words(words), suggest=True,
                                        calibrated=calibration != "raw")
        except (InputProblem, GedOptionsError) as problem:
            return [], f"⚠️ {problem}"
        if picky:  # never a higher threshold than the model's picky one
            options = replace(options, threshold=min(options.threshold, self.picky_threshold(True, calibration)))
        threshold = options.threshold
        from electra_detect.app.api_errors import ApiError
        from electra_detect.app.languagetool import quoted  # the record's *emphasis* as quotes, as /v2/check gives

        try:
            flagged = self.check(text, options).flagged[0]
        except ApiError as refused:  # the Service's admission (busy, over budget, timed out): a message, as any
            return [], f"⚠️ {refused.message}"
        rows = [[w.word, quoted(w.message), w.rule.category, f"{w.operation}:{w.type}" if w.type else
                 "– (untyped model)", w.rule.id, suggestion_cell(text, w.suggestions or []), round(w.score, 4),
                 w.start, w.end] for w in flagged]
        switched = f" Categories off: {', '.join(sorted(options.disabled_categories))}." \
            if options.disabled_categories else ""
        if not rows and options.disabled_categories:
            return [], f"No flagged word at threshold {threshold:.2f} outside the categories switched off.{switched}"
        if not rows:
            return [], (f"No word reaches the threshold {threshold:.2f}{' (picky)' if picky else ''}; lower it to see "
                        f"weaker suspicions.")
        return rows, (f"**{len(rows)} flagged word(s)** at threshold {threshold:.2f}{' (picky)' if picky else ''}: "
                      f"each with its error type, category, rule and message.{switched}")

    # -- tab 3: n-best reranking
    def rerank(self, nbest: Any, lm_weight: Any = 1.0, length_weight: Any = 0.0,
               calibration: str = "calibrated") -> tuple[list[list[Any]], str]:
        """The pasted n-best list, best first, with each component of the total."""
        from electra_detect.errors import RerankError
        from electra_detect.tasks.rerank.fusion import rerank_hypotheses
        from electra_detect.tasks.rerank.nbest import parse_hypothesis_lines

        try:
            if not isinstance(nbest, str) or not nbest.strip():
                raise InputProblem("Paste an n-best list first: one hypothesis per line, "
                                   "optionally followed by a TAB and its recogniser score.")
            if len(nbest) > MAX_NBEST_CHARS:
                raise InputProblem(f"That list is {len(nbest):,} characters; the demo takes at most "
                                   f"{MAX_NBEST_CHARS:,}. Use `electra-detect rerank` for files.")
            hyps = parse_hypothesis_lines(nbest)
            if not hyps:
                raise InputProblem("The list holds no hypotheses (only blank lines).")
            if len(hyps) > MAX_HYPOTHESES:
                raise InputProblem(f"{len(hyps)} hypotheses; the demo reranks at most {MAX_HYPOTHESES} at a time.")
            weights = []
            for name, value in (("LM weight", lm_weight), ("length weight", length_weight)):
                try:
                    weights.append(float(value))
                except (TypeError, ValueError):
                    raise InputProblem(f"The {name} must be a number, got {value!r}.") from None
            chosen = self.hypothesis  # the task's ranker and its choice of score, as the CLI's and the server's
            with self._lock:
                rows = rerank_hypotheses(self.detector, hyps, weights[0], weights[1],
                                         calibrated=calibration != "raw", chosen=chosen)
        except (InputProblem, RerankError) as problem:
            return [], f"⚠️ {problem}"
        table = [[row["rank"], row["text"], round(row["asr_score"], 4), round(row[chosen.name], 4),
                  row["length"], round(row["total"], 4)] for row in rows]
        if chosen.reranker is not None:
            score = "the learned reranker's score (reranker.json; raw probabilities)"
        else:
            kind = "raw" if calibration == "raw" or not self.has_calibration else self.info.calibration
            score = f"sum of log(1−p) ({kind} probabilities)"
        return table, (f"**{len(rows)} hypotheses reranked**: total = ASR + {weights[0]:g} × {self.lm_label} "
                       f"+ {weights[1]:g} × length; {self.lm_label} = {score}. "
                       f"Best: “{escape_md(rows[0]['text'])}”.")

    @property
    def lm_label(self) -> str:
        """What the rerank table calls the model's sentence score."""
        return "reranker" if self.hypothesis.reranker is not None else "ELECTRA"

    # ------------------------------------------------------------------------------------ the page
    def build(self) -> Any:
        """The Gradio Blocks page (not yet launched)."""
        import gradio as gr

        from electra_detect.tasks.ged.rule_table import CATEGORIES  # the rule table's categories: the page's switches

        calib_choices = ["calibrated", "raw"]
        with gr.Blocks(title="electra-detect demo", analytics_enabled=False) as page:
            gr.Markdown("## electra-detect: which words look replaced?\n"
                        "Each word is coloured by the ELECTRA discriminator's probability that it was replaced "
                        "(max over its subwords); words under the threshold stay plain.")
            gr.Markdown(self.info.markdown(), elem_id="model-info")
            with gr.Row():
                threshold = gr.Slider(0.0, 1.0, value=self.threshold, step=0.01, label="Threshold",
                                      info="words with p(replaced) ≥ this are highlighted / flagged",
                                      elem_id="threshold")
                calibration = gr.Radio(calib_choices, value="calibrated" if self.has_calibration else "raw",
                                       label="Probabilities", interactive=self.has_calibration,
                                       info=(f"calibrated = {self.info.calibration} (calibration.json)"
                                             if self.has_calibration else
                                             "raw only: this model dir has no calibration.json"),
                                       elem_id="calibration")
            with gr.Row():
                picky = gr.Checkbox(False, label="Picky", elem_id="picky", scale=1,
                                    info="flag more: moves the threshold to the lower one tuned for it (ged.json)")
                off = gr.CheckboxGroup([(f"{name} ({key})", key) for key, name in CATEGORIES.items()], value=[],
                                       label="Switch categories off", elem_id="categories-off", scale=3,
                                       info="flags of these categories are not shown (GED tab)")
                words = gr.Textbox(label="Your words", lines=2, max_lines=6, elem_id="own-words", scale=2,
                                   placeholder="Kubernetes, Hamming",
                                   info="never flagged nor suggested, beside your dictionary file; one a line or "
                                        "comma-separated (inflections included)")
            with gr.Tabs():
                with gr.Tab("Highlight", id="highlight"):
                    text = gr.Textbox(label="Text", lines=3, max_lines=12, elem_id="text-input",
                                      placeholder="Type a sentence, e.g. He go to the store yesterday.")
                    button = gr.Button("Score", variant="primary", elem_id="score-button")
                    highlighted = gr.HighlightedText(label="Replaced probability per word", show_legend=True,
                                                     color_map=COLOR_MAP, combine_adjacent=False,
                                                     elem_id="highlighted")
                    status = gr.Markdown(elem_id="status-highlight")
                    gr.Examples(EXAMPLES, inputs=[text], label="Examples")
                with gr.Tab("Errors", id="ged"):
                    ged_text = gr.Textbox(label="Text", lines=3, max_lines=12, elem_id="ged-input")
                    ged_button = gr.Button("Find errors", variant="primary", elem_id="ged-button")
                    ged_table = gr.Dataframe(headers=GED_HEADERS,
                                             datatype=["str", "str", "str", "str", "str", "str", "number", "number",
                                                       "number"],
                                             interactive=False, wrap=True, column_widths=GED_WIDTHS,
                                             elem_id="ged-table", label="Flagged words")
                    ged_status = gr.Markdown(elem_id="status-ged")
                    gr.Examples(EXAMPLES, inputs=[ged_text], label="Examples")
                with gr.Tab("Rerank", id="rerank"):
                    nbest = gr.Textbox(label="n-best list (one hypothesis per line; optional TAB + ASR score)",
                                       lines=6, max_lines=20, elem_id="nbest-input")
                    with gr.Row():
                        lm_weight = gr.Number(1.0, label="LM weight (ELECTRA)", elem_id="lm-weight")
                        length_weight = gr.Number(0.0, label="length weight (per word)", elem_id="length-weight")
                    rerank_button = gr.Button("Rerank", variant="primary", elem_id="rerank-button")
                    rerank_table = gr.Dataframe(headers=["rank", "hypothesis", "ASR score", f"{self.lm_label} score",
                                                         "words", "total"],
                                                datatype=["number", "str", "number", "number", "number", "number"],
                                                interactive=False, elem_id="rerank-table", label="Reranked")
                    rerank_status = gr.Markdown(elem_id="status-rerank")
                    gr.Examples([[nbest_list] for _label, nbest_list in NBEST_EXAMPLES], inputs=[nbest],
                                label="Examples", example_labels=[label for label, _list in NBEST_EXAMPLES])

            highlight_io = dict(fn=self.highlight, inputs=[text, threshold, calibration, words],
                                outputs=[highlighted, status])
            button.click(**highlight_io)
            text.submit(**highlight_io)
            ged_io = dict(fn=self.ged, inputs=[ged_text, threshold, calibration, off, picky, words],
                          outputs=[ged_table, ged_status])
            ged_button.click(**ged_io)
            ged_text.submit(**ged_io)
            picky.input(fn=self.picky_threshold, inputs=[picky, calibration], outputs=[threshold])  # the slider moves
            for control in (threshold, calibration, off, words):  # re-check what is shown; say nothing while empty
                control.change(fn=self._quiet(self.highlight, 2), inputs=[text, threshold, calibration, words],
                               outputs=[highlighted, status])
                control.change(fn=self._quiet(self.ged, 2), inputs=[ged_text, threshold, calibration, off, picky,
                                                                    words], outputs=[ged_table, ged_status])
            rerank_io = dict(fn=self.rerank, inputs=[nbest, lm_weight, length_weight, calibration],
                             outputs=[rerank_table, rerank_status])
            rerank_button.click(**rerank_io)
            calibration.change(**{**rerank_io, "fn": self._quiet(self.rerank, 2)})
        return page

    @staticmethod
    def _quiet(handler: Any, outputs: int) -> Any:
        """The handler, except that it leaves the page alone while its text box is empty."""
        def run(text: Any, *rest: Any) -> Any:
            if not isinstance(text, str) or not text.strip():
                import gradio as gr

                return tuple(gr.skip() for _ in range(outputs))
            return handler(text, *rest)
        return run


def build_app(model: str | Path, engine: str = "auto", device: str | None = None,
              variant: str | None = None, threshold: float | None = None,
              dictionary: str | Path | None = None) -> DemoApp:
    """Load the model once and wrap it for the page.

    ``threshold`` starts the slider; by default the model's tuned ``ged.json`` threshold, else 0.5
    (a calibrated weak model may score every word far below 0.5, so a tuned start matters).
    """
    if threshold is not None:
        from electra_detect.errors import DetectorError
        from electra_detect.model_dir import check_threshold as check_flag_threshold

        try:
            check_flag_threshold(threshold, "--threshold")  # the one range check of a flag threshold
        except DetectorError as exc:
            raise DemoError(str(exc)) from None
    detector, note = load_detector(model, engine=engine, device=device, variant=variant, task="ged")
    threshold = detector.threshold() if threshold is None else threshold
    from electra_detect.tasks.ged.dictionary import PersonalDictionary

    personal = PersonalDictionary(Path(dictionary)) if dictionary is not None else PersonalDictionary()
    return DemoApp(detector, note=note, threshold=round(threshold, 2), dictionary=personal)


def launch(app: DemoApp, host: str = "127.0.0.1", port: int = DEFAULT_PORT, block: bool = True,
           started: float | None = None, limits: DemoLimits | None = None) -> tuple[Any, str]:
    """Serve the page (no share link, no SSR, no analytics) within ``limits``; returns (blocks, local URL). With
    ``block=False`` the caller ends it with :func:`shutdown`."""
    limits = limits or DemoLimits()
    main = block and threading.current_thread() is threading.main_thread()  # where a signal handler can be set
    # SIGTERM (systemd, docker) ends the demo as Ctrl-C does, from before the server is up: a stop that comes while
    # it starts would otherwise kill the process where it stands and leave the temp directory behind
    previous_handler = signal.signal(signal.SIGTERM, _stop_on_sigterm) if main else None
    uploads = tempfile.mkdtemp(prefix="electra-detect-demo-")  # Gradio's files of this process, gone at shutdown
    page = None
    try:
        page, url = _serve(app, host, port, limits, uploads)
        message = f"electra-detect demo: {app.info.name}, engine {app.info.engine} ({app.info.provider}), " \
                  f"calibration {app.info.calibration}; serving at {url}"
        if started is not None:
            message += f" (ready {time.perf_counter() - started:.1f} s after start)"
        print(message, flush=True)
        if block:
            try:
                page.block_thread()
            except KeyboardInterrupt:
                pass
            finally:
                shutdown(page)
    except KeyboardInterrupt:  # stopped while starting: what was made is removed
        if page is not None:
            shutdown(page)
        shutil.rmtree(uploads, ignore_errors=True)
        raise
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous_handler)
    return page, url


def _serve(app: DemoApp, host: str, port: int, limits: DemoLimits, uploads: str) -> tuple[Any, str]:
    """Build the page with Gradio's files in ``uploads`` and start its server in a thread; (page, local URL)."""
    from starlette.middleware import Middleware

    previous = os.environ.get("GRADIO_TEMP_DIR")
    os.environ["GRADIO_TEMP_DIR"] = uploads  # read when the page and its server are made, and by gradio's first import
    try:
        import gradio as gr

        made = _gradio_dirs_made()
        page = app.build()
        page.electra_uploads = uploads
        page.electra_app = app
        page.electra_made = made
        page.queue(max_size=limits.queue_size, default_concurrency_limit=limits.concurrency)
        budget = Middleware(UploadBudget, folder=uploads, limit=size_bytes(limits.max_total_uploads),
                            per_upload=size_bytes(limits.max_file_size))
        _app, url, _share = page.launch(server_name=host, server_port=port, share=False, ssr_mode=False,
                                        prevent_thread_lock=True, quiet=True, show_error=False,
                                        footer_links=["settings"], theme=gr.themes.Default(), css=CSS,
                                        max_file_size=limits.max_file_size, auth=limits.auth or None,
                                        app_kwargs={"middleware": [budget]})
    except OSError as exc:
        shutil.rmtree(uploads, ignore_errors=True)
        if "empty port" in str(exc):
            raise DemoError(f"port {port} on {host} is in use; choose another with --port (0 = any free port)") from exc
        raise DemoError(f"cannot serve on {host}:{port}: {exc}") from exc
    finally:
        if previous is None:
            os.environ.pop("GRADIO_TEMP_DIR", None)
        else:
            os.environ["GRADIO_TEMP_DIR"] = previous
    return page, url


def _gradio_dirs_made() -> list[Path]:
    """The folders gradio's server makes at start in its import-time temp dir (``$TMPDIR/gradio/vibe_edit_history``:
    outside the demo's own when gradio was imported before it was chosen) that are not there yet: removed at
    shutdown when still empty, deepest first."""
    from gradio import routes

    base = Path(getattr(routes, "DEFAULT_TEMP_DIR", "") or tempfile.gettempdir())
    return [folder for folder in (base / "vibe_edit_history", base) if not folder.exists()]


def _stop_on_sigterm(_signum: int, _frame: Any) -> None:
    """SIGTERM ends the demo as Ctrl-C does: its files are removed on the way out (the default action would kill the
    process where it stands and leave its temp directory behind)."""
    raise KeyboardInterrupt


def shutdown(page: Any) -> None:
    """Stop the page's server and the demo's Service, and remove the files Gradio kept for it (uploads included)."""
    try:
        page.close()
    finally:
        uploads = getattr(page, "electra_uploads", None)
        if uploads:
            shutil.rmtree(uploads, ignore_errors=True)
        for folder in getattr(page, "electra_made", ()):
            with contextlib.suppress(OSError):  # not empty (another gradio process's files) or gone: left alone
                folder.rmdir()
        app = getattr(page, "electra_app", None)
        if app is not None:
            app.close()
