"""The one scoring path: text in, per-token replaced probabilities out.

Every product (CLI, GED, reranking, calibration, demo, server) calls ``Detector.score``; none
tokenizes for inference or runs the model itself. The Detector decides inference once: the engine
(``electra_detect.engines``: torch, onnx, or ``auto``), the flag threshold (in the probability space it
was tuned in) and whether scores are calibrated (a per-call option); fronts only translate requests.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from electra_detect.engines import ENGINES, Engine
from electra_detect.engines.torch_engine import TorchEngine
from electra_detect.errors import DetectorError
from electra_detect.model_dir import resolve_model_dir, task_model_path, tuned_threshold
from electra_detect.windows import TextEncoding, encode_texts, pad_ids, text_windows

__all__ = ["Detector", "ScoringJob", "TextEncoding", "TextScores", "TokenScore", "WordScore"]


@dataclass
class TokenScore:
    token: str
    start: int  # character offsets into the scored text
    end: int
    p_replaced: float


@dataclass
class WordScore:
    """A pre-tokenizer word (whitespace/punctuation split); score = max over its subwords. A typed GED model also
    names the error its highest-scoring subword shows: ERRANT operation (M/R/U) and main type, with the type's
    probability; they are None for other models."""

    word: str
    start: int
    end: int
    score: float
    tokens: list[int] = field(default_factory=list)  # indices into TextScores.tokens
    operation: str | None = None
    error_type: str | None = None
    type_score: float | None = None

    def typed(self, digits: int | None = None) -> dict[str, Any]:
        """The type fields as JSON (empty for an untyped model); ``digits`` rounds the type's probability."""
        if self.error_type is None or self.type_score is None:
            return {}
        score = self.type_score if digits is None else round(self.type_score, digits)
        return {"operation": self.operation, "type": self.error_type, "type_score": score}


@dataclass
class TextScores:
    text: str
    tokens: list[TokenScore]
    words: list[WordScore]
    sentence_mean: float  # mean log(1 - p) over the text's tokens; higher = more fluent
    sentence_sum: float  # sum of the same terms

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def flagged(self, threshold: float, digits: int | None = None) -> list[dict[str, Any]]:
        """The words with score >= threshold as JSON objects (word, start, end, score): the one shape the CLI,
        the server and the demo give flagged words in. ``digits`` rounds the scores."""
        return [{"word": w.word, "start": w.start, "end": w.end,
                 "score": w.score if digits is None else round(w.score, digits), **w.typed(digits)}
                for w in self.words if w.score >= threshold]


class Detector:
    """Scores texts with an ELECTRA discriminator.

    Texts longer than the model's window are scored in overlapping windows; each token takes
    its probability from the window in which it sits farthest from an edge.
    """

    def __init__(self, model_dir: Path, engine: Engine, tokenizer: Any, max_length: int,
                 calibrator: Any = None, note: str = "") -> None:
        self.model_dir = model_dir
        self.engine = engine
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.calibrator = calibrator  # maps logits to probabilities; None = raw sigmoid
        self.note = note  # why the engine is not the one asked for (``engine="auto"`` fell back to torch)

    @property
    def calibration(self) -> str:
        """What the scores are: 'raw' or the calibration method (shown by the demo and server)."""
        return self.calibrator.to_dict()["method"] if self.calibrator else "raw"

    def threshold(self, calibrated: bool = True, level: str = "default") -> float:
        """The flag threshold for ``score(..., calibrated=calibrated)``: the one ``ged train`` tuned for these
        weights (``ged.json``; ``level="picky"``: its lower one, when it has one), carried into the space the
        scores are in, else 0.5."""
        return tuned_threshold(self.model_dir, self.calibrator, calibrated, level)

    @classmethod
    def load(cls, path: str | Path, device: str | None = None, max_length: int | None = None,
             calibrated: bool = True, engine: str = "torch", variant: str | None = None,
             require_gpu: bool = False, threads: int | None = None, task: str = "score",
             export: bool = True) -> Detector:
        """``calibrated``: load the model dir's calibration.json when there is one (the default); ``score``
        applies it unless called with ``calibrated=False``.

        ``task="ged"`` loads the model directory's fine-tuned GED model (``ged/``) when it has one.

        ``engine="onnx"`` runs onnxruntime over an ONNX export: the one shipped with the model (``path`` is an
        export dir, or holds one in ``onnx/``), else the one cached for its weights, else (``export``) one made
        now and cached (``electra_detect.onnx.locate``); ``variant`` picks fp32 / optimized / fp16 / int8 (default:
        int8 on CPU when it passed the parity gate), ``device`` "cpu" or "cuda" (default: CUDA when onnxruntime
        has it, else CPU, with a warning when CUDA was there but could not be used); ``require_gpu`` turns that
        fallback into an error. ``threads`` caps onnxruntime's intra-op pool (torch's: process-wide).
        ``engine="auto"``: onnx whenever it can serve the model, else torch; the fallback is said in ``note``.
        """
        if engine not in ENGINES:
            raise DetectorError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")
        path = task_model_path(path, task)
        options = dict(device=device, max_length=max_length, calibrated=calibrated, require_gpu=require_gpu,
                       threads=threads)
        if engine == "torch":
            if variant is not None:
                raise DetectorError("--variant picks an ONNX export variant; it applies to engine 'onnx' only")
            return cls._load_torch(path, **options)
        from electra_detect.onnx.locate import locate

        resolve_model_dir(path)  # a bad path fails here, before onnxruntime (or torch) is imported
        try:
            return cls._load_onnx(locate(path, make=export), variant=variant, **options)
        except (DetectorError, ImportError, RuntimeError, ValueError) as exc:
            if engine == "onnx" or variant is not None:
                raise DetectorError(f"the ONNX engine failed: {exc}") from exc
            detector = cls._load_torch(path, **options)
            detector.note = f"⚠️ the ONNX engine cannot serve this model ({exc}); running on the torch engine."
            return detector

    @classmethod
    def _load_onnx(cls, source: Any, device: str | None, max_length: int | None, calibrated: bool,
                   variant: str | None = None, require_gpu: bool = False, threads: int | None = None) -> Detector:
        """A Detector over an ``inference.ExportSource``; a cached export takes calibration.json and ged.json from
        the weights it was made from (``calibrate`` after the export writes there), checked by their hash."""
        from electra_detect.onnx.engine import OnnxEngine
        from electra_detect.onnx.manifest import load_export_calibration, load_tokenizer

        export_dir = source.export_dir
        if source.weights_dir is None:
            calibrator = load_export_calibration(export_dir) if calibrated else None
        else:
            from electra_detect.calibrators import CALIBRATION_FILE, read_calibration

            path = source.weights_dir / CALIBRATION_FILE
            calibrator = None
            if calibrated and path.exists():
                try:
                    calibrator = read_calibration(path, source.weights_sha256,
                                                  "refit it with `electra-detect calibrate`")
                except ValueError as exc:
                    raise DetectorError(str(exc)) from exc
        runner = OnnxEngine(export_dir, variant=variant, device=device, require_gpu=require_gpu, threads=threads)
        tokenizer = load_tokenizer(export_dir)  # without transformers (and so torch) when it can
        return cls._finish(source.weights_dir or export_dir, runner, tokenizer, max_length, calibrator)

    @classmethod
    def _load_torch(cls, path: Path, device: str | None, max_length: int | None, calibrated: bool,
                    require_gpu: bool = False, threads: int | None = None) -> Detector:
        from transformers import AutoTokenizer

        from electra_detect.calibrators import load_calibration

        model_dir = resolve_model_dir(path)
        if not any(model_dir.glob("*.safetensors")):
            raise DetectorError(f"{model_dir} holds an ONNX export only (no safetensors weights); "
                                f"load it with engine='onnx' (CLI: --engine onnx)")
        calibrator = None
        if calibrated:
            try:
                calibrator = load_calibration(model_dir)
            except ValueError as exc:
                raise DetectorError(str(exc)) from exc
        runner = TorchEngine(model_dir, device=device, threads=threads)
        if require_gpu and runner.device.type != "cuda":
            raise DetectorError("a GPU was required but torch runs on the CPU here (no CUDA device)")
        return cls._finish(model_dir, runner, AutoTokenizer.from_pretrained(str(model_dir)), max_length, calibrator)

    @classmethod
    def _finish(cls, model_dir: Path, runner: Engine, tokenizer: Any, max_length: int | None,
                calibrator: Any) -> Detector:
        tokenizer.model_max_length = 1 << 30  # long texts are windowed by score(), not truncated
        if not tokenizer.is_fast:
            raise DetectorError(f"{model_dir}: a fast tokenizer is needed for character offsets")
        limit = min(runner.max_positions, max_length or runner.max_positions)
        return cls(model_dir, runner, tokenizer, limit, calibrator)

    def describe(self) -> str:
        """One line for stderr: which engine runs, on what, from where (and why, after a fallback)."""
        engine = self.engine
        if engine.name == "onnx":
            where = "CUDA" if "CUDA" in str(engine.provider) else "CPU"
            line = f"engine: onnxruntime {engine.variant} ({where}) from {engine.export_dir}"
        else:
            line = f"engine: torch ({engine.provider}) from {self.model_dir}"
        return f"{line}\n{self.note}" if self.note else line

    def score(self, texts: str | Sequence[str], batch_size: int = 32, calibrated: bool = True) -> list[TextScores]:
        """Scores of each text; ``calibrated=False`` gives raw sigmoid probabilities even when the Detector
        holds a calibrator (same engine, same tokens: one model in memory serves both)."""
        job = self.job(texts, batch_size, calibrated)
        while not job.done:
            job.step()
        return job.results()

    def stream(self, batches: Iterable[Sequence[str]], batch_size: int = 32, calibrated: bool = True,
               workers: int | None = None) -> Iterator[list[TextScores]]:
        """``score`` over a stream of text batches, yielding each batch's scores in input order while later
        batches are tokenised and run on other cores (``electra_detect.pipeline``); memory stays bounded by a
        few batches in flight, whatever the stream's length."""
        from electra_detect.pipeline import score_stream

        return score_stream(self, batches, batch_size, calibrated, workers)

    def job(self, texts: str | Sequence[str], batch_size: int = 32, calibrated: bool = True) -> ScoringJob:
        """``score`` as a job run in steps (the server interleaves requests' steps and can drop a job
        between two of them); ``score`` is this job run to the end."""
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, Sequence) or not all(isinstance(t, str) for t in texts):
            raise DetectorError("score() takes a string or a list of strings")
        texts = list(texts)
        for index, text in enumerate(texts):
            try:
                text.encode("utf-8")  # the tokenizer (Rust) takes valid Unicode only
            except UnicodeEncodeError as exc:
                raise DetectorError(f"text {index} is not valid Unicode (a lone surrogate at character "
                                    f"{exc.start})") from None
        return ScoringJob(self, texts, self.encode(texts), batch_size, calibrated)

    def encode(self, texts: Sequence[str]) -> list[TextEncoding]:
        """Each text's tokens as the model sees them (``windows.encode_texts``): its sentences tokenised apart and
        joined, offsets into the text; a paragraph is scored as the sentences the GED model was trained on."""
        return encode_texts(self.tokenizer, texts)

    def raw_logits(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        """Uncalibrated logits for already-tokenised ids (calibration fitting needs them)."""
        return self.engine.logits(np.asarray(input_ids, dtype=np.int64), np.asarray(attention_mask, dtype=np.int64))

    def window_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Every model window (ids without [CLS]/[SEP]) of the texts, as ``score`` runs them; export
        parity checks and benchmarks feed the engines exactly these."""
        return text_windows(self.tokenizer, texts, self.max_length - 2)

    def pad_batch(self, chunks: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """[CLS] chunk [SEP], right-padded: (input_ids, attention_mask), both int64 [batch, width]."""
        return pad_ids(chunks, self.tokenizer.pad_token_id, self.tokenizer.cls_token_id, self.tokenizer.sep_token_id)

    @property
    def channels(self) -> list[str]:
        """A typed GED model's channels after ``error`` (``op:M``, ..., ``type:DET``, ...); [] otherwise."""
        return list(getattr(self.engine, "channels", []))

    def _probabilities(self, chunks: list[list[int]], calibrated: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
        """p(error) [batch, seq] and, for a typed model, [batch, seq, 3]: operation index, main-type index and the
        main type's softmax probability (one engine pass gives both)."""
        from electra_detect.calibrators import sigmoid

        input_ids, attention = self.pad_batch(chunks)
        outputs = getattr(self.engine, "outputs", None)  # an engine with logits() only is an untyped one
        logits, type_logits = outputs(input_ids, attention) if outputs else (self.engine.logits(input_ids, attention),
                                                                             None)
        probs = self.calibrator.transform(logits) if calibrated and self.calibrator is not None else sigmoid(logits)
        if type_logits is None:
            return probs, None
        ops, mains = type_logits[..., :3], type_logits[..., 3:]
        main_p = np.exp(mains - mains.max(-1, keepdims=True))
        main_p /= main_p.sum(-1, keepdims=True)
        return probs, np.stack([ops.argmax(-1), main_p.argmax(-1), main_p.max(-1)], axis=-1)

    def _assemble(self, text: str, encoding: TextEncoding, probs: np.ndarray,
                  types: np.ndarray | None = None) -> TextScores:
        # vectorised: this runs once per text and was the largest Python cost of scoring a file after the model
        values = probs.tolist()
        offsets = encoding.offsets
        tokens = [TokenScore(tok, s, e, p) for tok, (s, e), p in zip(encoding.tokens, offsets, values, strict=False)]
        words: list[WordScore] = []
        if values:
            word_ids = np.array([-1 if w is None else w for w in encoding.word_ids])
            firsts = np.flatnonzero(np.r_[True, word_ids[1:] != word_ids[:-1]])  # a word = a run of one word id
            lasts = np.r_[firsts[1:], len(values)] - 1
            maxima = np.maximum.reduceat(probs, firsts).tolist()
            for first, last, score in zip(firsts.tolist(), lasts.tolist(), maxima, strict=True):
                if word_ids[first] < 0:  # a token outside any word (a special token) is in no word
                    continue
                start, end = offsets[first][0], offsets[last][1]
                words.append(WordScore(text[start:end], start, end, score, list(range(first, last + 1))))
            if any(mark in text for mark in _APOSTROPHES):
                words = join_contractions(text, words)
        channels = self.channels
        if types is not None and channels:
            for word in words:  # the type its most suspicious subword names
                best = max(word.tokens, key=lambda i: values[i])
                op, main, p = types[best]
                word.operation = channels[int(op)][3:]
                word.error_type = channels[3 + int(main)][5:]
                word.type_score = float(p)
        log_fluency = np.log1p(-np.minimum(probs, 1 - 1e-12))
        total = float(log_fluency.sum())
        mean = total / len(values) if values else 0.0
        return TextScores(text, tokens, words, mean, total)


class ScoringJob:
    """The engine work of ``Detector.score`` over some texts, done a step at a time.

    Windows are batched by similar length (stable sort: a long text's equal-length windows keep
    their order), ``batch_size`` windows per engine run, as ``score`` always did: padding to the
    longest row wasted up to half the compute on mixed-length sentences. ``cost`` is the model
    tokens the job runs ([CLS] and [SEP] included, window overlap counted twice)."""

    def __init__(self, detector: Detector, texts: list[str], encodings: list[TextEncoding], batch_size: int = 32,
                 calibrated: bool = True) -> None:
        if batch_size < 1:
            raise DetectorError("batch_size must be >= 1")
        self.detector, self.texts, self.encodings, self.batch_size = detector, texts, encodings, batch_size
        self.calibrated = calibrated
        self.chunks: list[tuple[int, int, list[int]]] = []  # every window: (text index, first token, ids)
        for index, encoding in enumerate(encodings):
            for start, chunk in encoding.windows(detector.max_length - 2):
                self.chunks.append((index, start, chunk))
        self.chunks.sort(key=lambda window: len(window[2]))
        self.tokens = sum(len(e.ids) for e in encodings)
        self.cost = sum(len(chunk) + 2 for _, _, chunk in self.chunks)
        self.position = 0  # windows scored so far
        self.probs = [np.full(len(e.ids), np.nan) for e in encodings]
        self.margin = [np.full(len(e.ids), -1) for e in encodings]
        typed = bool(detector.channels)  # operation, main type, its probability per token
        self.types = [np.zeros((len(e.ids), 3)) for e in encodings] if typed else None

    @classmethod
    def merge(cls, jobs: Sequence[ScoringJob]) -> ScoringJob:
        """One job over the texts of several jobs not yet started (the server's micro-batching)."""
        if any(job.position for job in jobs):
            raise DetectorError("only jobs not yet started can be merged")
        first = jobs[0]
        if any(job.calibrated != first.calibrated for job in jobs):
            raise DetectorError("only jobs in one probability space (calibrated or raw) can be merged")
        return cls(first.detector, [t for job in jobs for t in job.texts],
                   [e for job in jobs for e in job.encodings], first.batch_size, first.calibrated)

    @property
    def done(self) -> bool:
        return self.position >= len(self.chunks)

    @property
    def remaining(self) -> int:
        """Model tokens still to run."""
        return sum(len(chunk) + 2 for _, _, chunk in self.chunks[self.position:])

    def step(self, max_tokens: int = 0) -> int:
        """Run engine batches of up to ``batch_size`` windows until the job is done or ``max_tokens`` model tokens
        ran (0 = run to the end); a batch that would overrun the budget runs fewer rows, at least one window.
        Returns the model tokens run."""
        ran = 0
        while not self.done:
            batch = self.chunks[self.position:self.position + self.batch_size]
            if max_tokens:  # fewer rows when long windows would overrun the budget; the first window always runs
                taken, total = [], ran
                for window in batch:
                    total += len(window[2]) + 2
                    if total > max_tokens and (taken or ran):
                        break
                    taken.append(window)
                if not taken:
                    break
                batch = taken
            self._run(batch)
            self.position += len(batch)
            ran += sum(len(chunk) + 2 for _, _, chunk in batch)
            if max_tokens and ran >= max_tokens:
                break
        return ran

    def _run(self, batch: list[tuple[int, int, list[int]]]) -> None:
        p, types = self.detector._probabilities([chunk for _, _, chunk in batch], self.calibrated)
        for row, (index, start, chunk) in enumerate(batch):
            n = len(chunk)
            positions = np.arange(n)
            edge = np.minimum(positions, n - 1 - positions)  # distance from the window's edge
            target = slice(start, start + n)
            better = edge > self.margin[index][target]
            self.probs[index][target] = np.where(better, p[row, 1:n + 1], self.probs[index][target])
            if types is not None and self.types is not None:
                self.types[index][target] = np.where(better[:, None], types[row, 1:n + 1], self.types[index][target])
            self.margin[index][target] = np.maximum(edge, self.margin[index][target])

    def results(self, start: int = 0, stop: int | None = None) -> list[TextScores]:
        """The scores of texts[start:stop] (a merged job's requests each take their own slice)."""
        if not self.done:
            raise DetectorError("the job is not finished")
        stop = len(self.texts) if stop is None else stop
        return [self.detector._assemble(self.texts[i], self.encodings[i], self.probs[i],
                                        None if self.types is None else self.types[i]) for i in range(start, stop)]


_APOSTROPHES = ("'", "\u2019")


def join_contractions(text: str, words: list[WordScore]) -> list[WordScore]:
    """Words as the user wrote them: the pre-tokenizer's ``don`` ``'`` ``t`` (touching, an apostrophe between
    letters) become one word ``don't`` whose score is the highest of the three."""
    joined: list[WordScore] = []
    index = 0
    while index < len(words):
        word = words[index]
        while (index + 2 < len(words) and words[index + 1].word in _APOSTROPHES
               and word.end == words[index + 1].start and words[index + 1].end == words[index + 2].start
               and word.word[-1:].isalnum() and words[index + 2].word[:1].isalpha()):
            apostrophe, tail = words[index + 1], words[index + 2]
            word = WordScore(text[word.start:tail.end], word.start, tail.end,
                             max(word.score, apostrophe.score, tail.score),
                             word.tokens + apostrophe.tokens + tail.tokens)
            index += 2
        joined.append(word)
        index += 1
    return joined
