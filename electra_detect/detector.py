"""The one scoring path: text in, per-token replaced probabilities out.

Every product (CLI, GED, reranking, calibration, demo, server) calls ``Detector.score``; none
tokenizes for inference or runs the model itself. The Detector decides inference once: the engine
(``electra_detect.engines``: torch, onnx, or ``auto``), the flag threshold (in the probability space it
was tuned in) and whether scores are calibrated (a per-call option); fronts only translate requests.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from electra_detect.engines import ENGINES, Engine
from electra_detect.engines.torch_engine import TorchEngine, load_discriminator, replaced_logits  # noqa: F401
from electra_detect.errors import DetectorError

__all__ = ["Detector", "DetectorError", "ScoringJob", "TextScores", "TokenScore", "WordScore", "Engine",
           "TorchEngine", "load_discriminator", "replaced_logits", "resolve_model_dir", "task_model_path",
           "pad_ids", "check_threshold", "tuned_threshold", "GED_FILE", "GED_DIR", "TASKS"]


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


def pad_ids(rows: Sequence[Sequence[int]], pad_id: int, cls_id: int | None = None,
            sep_id: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rows of token ids, each wrapped in ``cls_id`` ... ``sep_id`` when given, right-padded with ``pad_id``:
    (input_ids, attention_mask), both int64 [batch, width]. The one padding helper of the project."""
    head = [] if cls_id is None else [cls_id]
    tail = [] if sep_id is None else [sep_id]
    width = max((len(r) for r in rows), default=0) + len(head) + len(tail)
    input_ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    attention = np.zeros((len(rows), width), dtype=np.int64)
    for index, row in enumerate(rows):
        seq = [*head, *row, *tail]
        input_ids[index, :len(seq)] = seq
        attention[index, :len(seq)] = 1
    return input_ids, attention


def resolve_model_dir(path: str | Path) -> Path:
    """Accept a run dir (uses its ``discriminator/``), any HF ELECTRA discriminator dir, or an ONNX
    export dir (``export.json`` in place of safetensors weights; only the onnx engine runs it)."""
    path = Path(path)
    if not path.exists():
        raise DetectorError(f"model path not found: {path}")
    if (path / "discriminator").is_dir():
        path = path / "discriminator"
    if not (path / "config.json").exists():
        raise DetectorError(f"{path} is not a model directory (no config.json); train one with "
                            f"`electra-detect pretrain` or pass an ELECTRA discriminator directory")
    if not any((path / name).exists() for name in ("tokenizer.json", "vocab.txt")):
        raise DetectorError(f"{path} has no tokenizer (tokenizer.json or vocab.txt)")
    if not any(path.glob("*.safetensors")) and not (path / "export.json").exists():
        raise DetectorError(f"{path} has no safetensors weights (pickled weights are not loaded)")
    return path


GED_FILE = "ged.json"
GED_DIR = "ged"  # a model directory's fine-tuned GED discriminator (`ged train --out MODEL/ged`)
TASKS = ("score", "ged")
SPACES = ("raw", "calibrated")  # the probability space a ged.json threshold was tuned in


def task_model_path(path: str | Path, task: str = "score") -> Path:
    """The directory a task runs on: ``ged`` takes a model directory's fine-tuned ``ged/`` when it holds one;
    ``score`` (and any explicit discriminator or ``ged/`` path) takes what it is given."""
    if task not in TASKS:
        raise DetectorError(f"unknown task {task!r}; expected one of {', '.join(TASKS)}")
    path = Path(path)
    if task == "ged" and (path / GED_DIR / "config.json").exists():
        return path / GED_DIR
    return path


def check_threshold(value: float, name: str = "threshold") -> float:
    """A flag threshold someone gave: a finite probability in [0, 1] (nan and 5 are refused)."""
    if not (isinstance(value, int | float) and math.isfinite(value) and 0 <= value <= 1):
        raise DetectorError(f"{name} must be a number in [0, 1], got {value:g}")
    return float(value)


def tuned_threshold(model_dir: str | Path, calibrator: Any = None, calibrated: bool = True) -> float:
    """The flag threshold for scores of ``model_dir`` (its ``ged.json``, written by ``ged train``, else 0.5),
    in the probability space the scores are in: calibrated when ``calibrated`` and there is a ``calibrator``,
    else raw. ``ged.json`` says which space its threshold was tuned in (``"space"``; files without it: raw);
    the threshold is carried across by the calibrator's monotone map, so a word is flagged alike in both."""
    path = Path(model_dir) / GED_FILE
    if not path.exists():
        return 0.5
    try:
        spec = json.loads(path.read_text())
        threshold, space = float(spec["threshold"]), spec.get("space", "raw")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DetectorError(f"{path} is unreadable: {exc}") from exc
    if space not in SPACES:
        raise DetectorError(f"{path}: unknown probability space {space!r}; expected raw or calibrated")
    wanted = "calibrated" if calibrated and calibrator is not None else "raw"
    if space == wanted or calibrator is None:
        return threshold
    p = min(max(threshold, 1e-12), 1 - 1e-12)
    if wanted == "calibrated":  # raw p -> its logit -> the calibrated probability of that logit
        return float(np.asarray(calibrator.transform(np.array([math.log(p / (1 - p))])))[0])
    low, high = -60.0, 60.0  # calibrated -> raw: the smallest logit whose calibrated probability reaches p
    for _ in range(80):
        middle = (low + high) / 2
        if float(np.asarray(calibrator.transform(np.array([middle])))[0]) >= p:
            high = middle
        else:
            low = middle
    return float(1 / (1 + math.exp(-high)))


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

    def threshold(self, calibrated: bool = True) -> float:
        """The flag threshold for ``score(..., calibrated=calibrated)``: the one ``ged train`` tuned for these
        weights (``ged.json``), carried into the space the scores are in, else 0.5."""
        return tuned_threshold(self.model_dir, self.calibrator, calibrated)

    @classmethod
    def load(cls, path: str | Path, device: str | None = None, max_length: int | None = None,
             calibrated: bool = True, engine: str = "torch", variant: str | None = None,
             require_gpu: bool = False, threads: int | None = None, task: str = "score") -> Detector:
        """``calibrated``: load the model dir's calibration.json when there is one (the default); ``score``
        applies it unless called with ``calibrated=False``.

        ``task="ged"`` loads the model directory's fine-tuned GED model (``ged/``) when it has one.

        ``engine="onnx"`` runs onnxruntime over the export written by ``electra-detect export``
        (``path`` may be the export dir, or a run/discriminator dir holding one in ``onnx/``);
        ``variant`` picks fp32 / optimized / fp16 / int8, ``device`` "cpu" or "cuda" (default: CUDA
        when onnxruntime has it, else CPU, with a warning when CUDA was there but could not be used);
        ``require_gpu`` turns that fallback into an error. ``threads`` caps onnxruntime's intra-op pool.
        ``engine="auto"``: the ONNX export when the model dir holds a usable one, else torch; a fallback
        from an unusable export is said in ``note``.
        """
        if engine not in ENGINES:
            raise DetectorError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")
        path = task_model_path(path, task)
        options = dict(device=device, max_length=max_length, calibrated=calibrated, require_gpu=require_gpu,
                       threads=threads)
        if engine != "auto":
            return cls._load(path, engine=engine, variant=variant, **options)
        from electra_detect.engines.onnx_engine import find_export_dir

        resolve_model_dir(path)  # a bad path fails here, before transformers or onnxruntime is imported
        try:
            find_export_dir(path)
        except DetectorError:
            if variant is not None:
                raise DetectorError("--variant picks an ONNX export variant; it needs an export and engine "
                                    "auto or onnx") from None
            return cls._load(path, engine="torch", **options)
        try:
            return cls._load(path, engine="onnx", variant=variant, **options)
        except (DetectorError, ImportError, RuntimeError, ValueError) as exc:
            if variant is not None:
                raise DetectorError(f"the ONNX engine failed: {exc}") from exc
            detector = cls._load(path, engine="torch", **options)
            detector.note = f"⚠️ ONNX export found but not usable ({exc}); running on the torch engine."
            return detector

    @classmethod
    def _load(cls, path: Path, engine: str, device: str | None, max_length: int | None, calibrated: bool,
              variant: str | None = None, require_gpu: bool = False, threads: int | None = None) -> Detector:
        if engine == "onnx":
            from electra_detect.engines.onnx_engine import (
                OnnxEngine,
                find_export_dir,
                load_export_calibration,
                load_tokenizer,
            )

            model_dir = find_export_dir(path)
            calibrator = load_export_calibration(model_dir) if calibrated else None
            runner: Engine = OnnxEngine(model_dir, variant=variant, device=device, require_gpu=require_gpu,
                                        threads=threads)
            tokenizer = load_tokenizer(model_dir)  # without transformers (and so torch) when it can
        else:
            from transformers import AutoTokenizer

            from electra_detect.calibrators import load_calibration

            if variant is not None:
                raise DetectorError("--variant picks an ONNX export variant; it applies to engine 'onnx' only")
            model_dir = resolve_model_dir(path)
            if not any(model_dir.glob("*.safetensors")):
                raise DetectorError(f"{model_dir} holds an ONNX export only (no safetensors weights); "
                                    f"load it with engine='onnx' (CLI: `serve`/`demo` --engine onnx)")
            calibrator = None
            if calibrated:
                try:
                    calibrator = load_calibration(model_dir)
                except ValueError as exc:
                    raise DetectorError(str(exc)) from exc
            runner = TorchEngine(model_dir, device=device)
            if require_gpu and runner.device.type != "cuda":
                raise DetectorError("a GPU was required but torch runs on the CPU here (no CUDA device)")
            tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        tokenizer.model_max_length = 1 << 30  # long texts are windowed by score(), not truncated
        if not tokenizer.is_fast:
            raise DetectorError(f"{model_dir}: a fast tokenizer is needed for character offsets")
        limit = min(runner.max_positions, max_length or runner.max_positions)
        return cls(model_dir, runner, tokenizer, limit, calibrator)

    def score(self, texts: str | Sequence[str], batch_size: int = 32, calibrated: bool = True) -> list[TextScores]:
        """Scores of each text; ``calibrated=False`` gives raw sigmoid probabilities even when the Detector
        holds a calibrator (same engine, same tokens: one model in memory serves both)."""
        job = self.job(texts, batch_size, calibrated)
        while not job.done:
            job.step()
        return job.results()

    def job(self, texts: str | Sequence[str], batch_size: int = 32, calibrated: bool = True) -> ScoringJob:
        """``score`` as a job run in steps (the server interleaves requests' steps and can drop a job
        between two of them); ``score`` is this job run to the end."""
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, Sequence) or not all(isinstance(t, str) for t in texts):
            raise DetectorError("score() takes a string or a list of strings")
        texts = list(texts)
        encodings = self.tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True) if texts else []
        return ScoringJob(self, texts, [encodings[i] for i in range(len(texts))], batch_size, calibrated)

    def raw_logits(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        """Uncalibrated logits for already-tokenised ids (calibration fitting needs them)."""
        return self.engine.logits(np.asarray(input_ids, dtype=np.int64), np.asarray(attention_mask, dtype=np.int64))

    def _windows(self, ids: list[int]) -> list[tuple[int, list[int]]]:
        body = self.max_length - 2
        if len(ids) <= body:
            return [(0, ids)]
        stride = max(1, body // 2)
        starts = list(range(0, len(ids) - body, stride)) + [len(ids) - body]
        return [(s, ids[s:s + body]) for s in starts]

    def windows(self, texts: Sequence[str]) -> list[list[int]]:
        """Every model window (ids without [CLS]/[SEP]) of the texts, as ``score`` runs them; export
        parity checks and benchmarks feed the engines exactly these."""
        encodings = self.tokenizer(list(texts), add_special_tokens=False)
        return [chunk for ids in encodings["input_ids"] for _, chunk in self._windows(ids)]

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

    def _assemble(self, text: str, encoding: Any, probs: np.ndarray, types: np.ndarray | None = None) -> TextScores:
        tokens = [TokenScore(tok, int(s), int(e), float(p))
                  for tok, (s, e), p in zip(encoding.tokens, encoding.offsets, probs, strict=False)]
        words: list[WordScore] = []
        for index, word_id in enumerate(encoding.word_ids):
            if word_id is None:
                continue
            if words and words[-1].tokens and encoding.word_ids[words[-1].tokens[-1]] == word_id:
                word = words[-1]
                word.end = tokens[index].end
                word.score = max(word.score, tokens[index].p_replaced)
                word.tokens.append(index)
            else:
                words.append(WordScore("", tokens[index].start, tokens[index].end, tokens[index].p_replaced, [index]))
        channels = self.channels
        for word in words:
            word.word = text[word.start:word.end]
            if types is not None and channels:  # the type its most suspicious subword names
                best = max(word.tokens, key=lambda i: tokens[i].p_replaced)
                op, main, p = types[best]
                word.operation = channels[int(op)][3:]
                word.error_type = channels[3 + int(main)][5:]
                word.type_score = float(p)
        log_fluency = [math.log1p(-min(t.p_replaced, 1 - 1e-12)) for t in tokens]
        total = float(sum(log_fluency))
        mean = total / len(log_fluency) if log_fluency else 0.0
        return TextScores(text, tokens, words, mean, total)


class ScoringJob:
    """The engine work of ``Detector.score`` over some texts, done a step at a time.

    Windows are batched by similar length (stable sort: a long text's equal-length windows keep
    their order), ``batch_size`` windows per engine run, as ``score`` always did: padding to the
    longest row wasted up to half the compute on mixed-length sentences. ``cost`` is the model
    tokens the job runs ([CLS] and [SEP] included, window overlap counted twice)."""

    def __init__(self, detector: Detector, texts: list[str], encodings: list[Any], batch_size: int = 32,
                 calibrated: bool = True) -> None:
        if batch_size < 1:
            raise DetectorError("batch_size must be >= 1")
        self.detector, self.texts, self.encodings, self.batch_size = detector, texts, encodings, batch_size
        self.calibrated = calibrated
        self.windows: list[tuple[int, int, list[int]]] = []  # (text index, first token, ids)
        for index, encoding in enumerate(encodings):
            for start, chunk in detector._windows(encoding.ids):
                self.windows.append((index, start, chunk))
        self.windows.sort(key=lambda window: len(window[2]))
        self.tokens = sum(len(e.ids) for e in encodings)
        self.cost = sum(len(chunk) + 2 for _, _, chunk in self.windows)
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
        return self.position >= len(self.windows)

    @property
    def remaining(self) -> int:
        """Model tokens still to run."""
        return sum(len(chunk) + 2 for _, _, chunk in self.windows[self.position:])

    def step(self, max_tokens: int = 0) -> int:
        """Run engine batches of up to ``batch_size`` windows until the job is done or ``max_tokens`` model tokens
        ran (0 = run to the end); a batch that would overrun the budget runs fewer rows, at least one window.
        Returns the model tokens run."""
        ran = 0
        while not self.done:
            batch = self.windows[self.position:self.position + self.batch_size]
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
