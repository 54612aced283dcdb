"""The demo's page: :class:`DemoApp`, its handlers (plain methods, testable without a browser; they never raise on
user input) and the Gradio Blocks that wire them."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from electra_detect.app.demo.errors import InputProblem
from electra_detect.app.demo.inputs import MAX_HYPOTHESES, MAX_NBEST_CHARS, check_text, own_words, slider_value
from electra_detect.app.demo.model import engine_label, engine_provider, model_label
from electra_detect.app.demo.view import (
    COLOR_MAP,
    EXAMPLES,
    GED_HEADERS,
    GED_WIDTHS,
    NBEST_EXAMPLES,
    ModelInfo,
    band,
    escape_md,
    suggestion_cell,
)


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
        from electra_detect.errors import GedOptionsError
        from electra_detect.tasks.ged.check import in_dictionary
        from electra_detect.tasks.ged.flags import FlaggedWord
        from electra_detect.tasks.ged.options import build_ged_options

        try:
            text = check_text(text)
            options = build_ged_options(threshold=slider_value(threshold), words=own_words(words))
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
        from electra_detect.errors import GedOptionsError
        from electra_detect.tasks.ged.options import build_ged_options

        try:
            text = check_text(text)
            options = build_ged_options(threshold=slider_value(threshold), level="picky" if picky else "default",
                                        disabled_categories=list(off or []), words=own_words(words), suggest=True,
                                        calibrated=calibration != "raw")
        except (InputProblem, GedOptionsError) as problem:
            return [], f"⚠️ {problem}"
        if picky:  # never a higher threshold than the model's picky one
            options = replace(options, threshold=min(options.threshold, self.picky_threshold(True, calibration)))
        threshold = options.threshold
        from electra_detect.app.api_errors import ApiError
        from electra_detect.app.message_quotes import quoted  # the record's *emphasis* as quotes, as /v2/check gives

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
