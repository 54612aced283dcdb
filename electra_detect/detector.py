"""The one scoring path: text in, per-token replaced probabilities out.

Every product (CLI, GED, reranking, calibration, demo, server) calls ``Detector.score``; none
tokenizes for inference or runs the model itself. The Detector decides inference once: the engine
(``electra_detect.engines``: torch, onnx, or ``auto``), the flag threshold (in the probability space it
was tuned in) and whether scores are calibrated (a per-call option); fronts only translate requests.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from electra_detect.batching import pad_ids, plan_windows
from electra_detect.edit_tags import TAG_PREFIX, EditTags
from electra_detect.engines import ENGINES, Engine
from electra_detect.engines.torch_engine import TorchEngine
from electra_detect.errors import CorruptExport, DetectorError
from electra_detect.model_dir import GedSettings, ModelFiles, resolve_model_dir, task_model_path
from electra_detect.scores import TextScores
from electra_detect.scoring_job import ScoringJob
from electra_detect.trained_part import runnable_dir
from electra_detect.windows import TextEncoding, encode_texts, encode_windows, text_windows

_SURROGATE = re.compile("[\ud800-\udfff]")


class Detector:
    """Scores texts with an ELECTRA discriminator.

    Texts longer than the model's window are scored in overlapping windows; each token takes
    its probability from the window in which it sits farthest from an edge.
    """

    def __init__(self, files: ModelFiles, engine: Engine, tokenizer: Any, max_length: int, note: str = "") -> None:
        self.files = files  # the model directory, read once at load: nothing after reads it again
        self.engine = engine
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.note = note  # why the engine is not the one asked for (``engine="auto"`` fell back to torch)
        # each engine batch is padded to a multiple of this width: 1 pads to the longest window only; 8 gives a
        # GPU fewer shapes and fp16 tensor cores aligned sizes (benchmarks.speed.gpu_check measures both)
        self.width_multiple = 1
        self._thresholds: dict[tuple[bool, str], float] = {}  # (calibrated, level) -> threshold, carried once

    @property
    def calibration(self) -> str:
        """What the scores are: 'raw' or the calibration method (shown by the demo and server)."""
        return self.calibrator.to_dict()["method"] if self.calibrator else "raw"

    def threshold(self, calibrated: bool = True, level: str = "default") -> float:
        """The flag threshold for ``score(..., calibrated=calibrated)``: the one ``ged train`` tuned for these
        weights (``ged.json``; ``level="picky"``: its lower one, when it has one), carried into the space the
        scores are in, else 0.5."""
        key = (calibrated, level)
        if key not in self._thresholds:
            self._thresholds[key] = self.files.ged.threshold_for(self.calibrator, calibrated, level)
        return self._thresholds[key]

    @property
    def model_dir(self) -> Path:
        """The directory the weights (or, for an export without them, the export) are in."""
        return self.files.path

    @property
    def calibrator(self) -> Any:
        """Maps logits to probabilities (the model dir's calibration.json); None: the raw sigmoid."""
        return self.files.calibrator

    @classmethod
    def load(cls, path: str | Path, device: str | None = None, max_length: int | None = None,
             calibrated: bool = True, engine: str = "torch", variant: str | None = None,
             require_gpu: bool = False, threads: int | None = None, task: str = "score",
             export: bool = True, assemble: bool = True) -> Detector:
        """``calibrated``: load the model dir's calibration.json when there is one (the default); ``score``
        applies it unless called with ``calibrated=False``.

        ``task="ged"`` loads the model directory's fine-tuned GED model (``ged/``) when it has one.

        A trained part (``electra_detect.trained_part``) loads its assembled directory; one not assembled yet is
        assembled now (progress on stderr) when ``assemble``, else refused with the command that assembles it (the
        fronts that must not assemble inside a request pass ``assemble=False``).

        ``engine="onnx"`` runs onnxruntime over an ONNX export: the one shipped with the model (``path`` is an
        export dir, or holds one in ``onnx/``), else the one cached for its weights, else (``export``) one made
        now and cached (``electra_detect.onnx.locate``); ``variant`` picks fp32 / optimized / fp16 / int8 (default:
        int8 on CPU when it passed the parity gate, optimized on CUDA), ``device`` "cpu" or "cuda" (default: CUDA
        when onnxruntime has it, else CPU, with a warning when CUDA was there but could not be used);
        ``require_gpu`` turns that fallback into an error. ``threads`` caps onnxruntime's intra-op pool (torch's:
        process-wide).
        ``engine="auto"``: onnx whenever it can serve the model, else torch; the fallback is said in ``note``.
        """
        if engine not in ENGINES:
            raise DetectorError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")
        path = runnable_dir(task_model_path(path, task), allow_assembly=assemble)
        model_dir = resolve_model_dir(path)  # once; a bad path fails here, before onnxruntime (or torch) is imported
        options = dict(device=device, max_length=max_length, calibrated=calibrated, require_gpu=require_gpu,
                       threads=threads)
        if engine == "torch":
            if variant is not None:
                raise DetectorError("--variant picks an ONNX export variant; it applies to engine 'onnx' only")
            return cls._load_torch(model_dir, **options)
        from electra_detect.onnx.locate import locate

        try:
            source = locate(path, make=export, model_dir=model_dir)
            try:
                return cls._load_onnx(source, variant=variant, **options)
            except CorruptExport as exc:  # a file changed since it was exported: never serve it
                if not export or not any(model_dir.glob("*.safetensors")):
                    raise CorruptExport(f"refusing a corrupt ONNX export: {exc}; no weights to export it again "
                                        f"from (restore the export, or give the model's weights)") from None
                warnings.warn(f"{exc}; exporting it again from the weights", RuntimeWarning, stacklevel=2)
                # a corrupt shipped export stays where it is: the cache's export of the weights serves, made once
                again = locate(path, make=True, skip_shipped=True, rebuild=source.origin != "shipped",
                               model_dir=model_dir)
                return cls._load_onnx(again, variant=variant, **options)
        except CorruptExport:
            raise
        except (DetectorError, ImportError, RuntimeError, ValueError) as exc:
            if engine == "onnx" or variant is not None:
                raise DetectorError(f"the ONNX engine failed: {exc}") from exc
            detector = cls._load_torch(model_dir, **options)
            detector.note = f"⚠️ the ONNX engine cannot serve this model ({exc}); running on the torch engine."
            return detector

    @classmethod
    def _load_onnx(cls, source: Any, device: str | None, max_length: int | None, calibrated: bool,
                   variant: str | None = None, require_gpu: bool = False, threads: int | None = None) -> Detector:
        """A Detector over an ``inference.ExportSource``; a cached export takes calibration.json and ged.json from
        the weights it was made from (``calibrate`` after the export writes there), checked by their hash."""
        from electra_detect.onnx.engine import OnnxEngine
        from electra_detect.onnx.manifest import load_export_calibration, load_tokenizer, read_manifest

        export_dir = source.export_dir
        manifest = read_manifest(export_dir)  # once: the engine, the calibration and the tokenizer read this copy
        if source.weights_dir is None:
            calibrator = load_export_calibration(export_dir, manifest) if calibrated else None
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
        runner = OnnxEngine(export_dir, variant=variant, device=device, require_gpu=require_gpu, threads=threads,
                            manifest=manifest)
        tokenizer = load_tokenizer(export_dir, manifest)  # without transformers (and so torch) when it can
        return cls._finish(source.weights_dir or export_dir, runner, tokenizer, max_length, calibrator, source)

    @classmethod
    def _load_torch(cls, model_dir: Path, device: str | None, max_length: int | None, calibrated: bool,
                    require_gpu: bool = False, threads: int | None = None) -> Detector:
        """``model_dir``: resolved (``resolve_model_dir``)."""
        from transformers import AutoTokenizer

        from electra_detect.calibrators import load_calibration

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
        # the model's config, read once by the engine, tells the tokenizer its class (no second read of config.json)
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir), config=runner.model.config)
        return cls._finish(model_dir, runner, tokenizer, max_length, calibrator)

    @classmethod
    def _finish(cls, model_dir: Path, runner: Engine, tokenizer: Any, max_length: int | None,
                calibrator: Any, export: Any = None) -> Detector:
        """The Detector over ``runner``, with the model directory's record (:class:`ModelFiles`) read here, once."""
        tokenizer.model_max_length = 1 << 30  # long texts are windowed by score(), not truncated
        if not tokenizer.is_fast:
            raise DetectorError(f"{model_dir}: a fast tokenizer is needed for character offsets")
        limit = min(runner.max_positions, max_length or runner.max_positions)
        channels = list(getattr(runner, "channels", []))
        tags = EditTags.load(model_dir, channels) if channels and channels[0].startswith(TAG_PREFIX) else None
        files = ModelFiles(model_dir, GedSettings.read(model_dir), calibrator, export, tags)
        return cls(files, runner, tokenizer, limit)

    @property
    def home_dir(self) -> Path:
        """The directory the model is named by: ``model_dir``, or the one above it when it is an export
        (``onnx/``) or a discriminator (``discriminator/``); a run's ``run_config.json`` sits there."""
        path = self.model_dir.resolve()
        while path.name in ("onnx", "discriminator") and path.parent != path:
            path = path.parent
        return path

    @property
    def name(self) -> str:
        """The model's name without its location (every front says it so): :attr:`home_dir`'s name, and a task's
        head named with the model dir it sits in (``electra-minilm/ged``)."""
        path = self.home_dir
        head = path.name == "ged" or (path.parent / "discriminator").is_dir()
        return f"{path.parent.name}/{path.name}" if head else path.name or "model"

    @property
    def variant(self) -> str:
        """What runs: the ONNX variant (``int8``, ``fp32``, ...) or ``torch``."""
        return str(getattr(self.engine, "variant", None) or self.engine.name)

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
        return self.job(texts, batch_size, calibrated).finish()

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
            # the tokenizer (Rust) takes valid Unicode only; an ASCII text (most) holds no surrogate
            surrogate = None if text.isascii() else _SURROGATE.search(text)
            if surrogate:
                raise DetectorError(f"text {index} is not valid Unicode (a lone surrogate at character "
                                    f"{surrogate.start()})")
        encodings, windows = encode_windows(self.tokenizer, texts, self.max_length - 2)
        tokenizer = self.tokenizer
        plan = plan_windows(windows, sum(len(e.ids) for e in encodings), tokenizer.cls_token_id,
                            tokenizer.sep_token_id, tokenizer.pad_token_id)
        return ScoringJob(self, texts, encodings, plan, batch_size, calibrated)

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

    @property
    def edit_tags(self) -> EditTags | None:
        """A tag model's vocabulary and inflection table (its ``edit_tags.json`` and ``inflections.json``, beside the
        weights, read at load); None for other models."""
        return self.files.tags
