"""onnxruntime engine: the exported discriminator without PyTorch, CUDA first with a loud CPU fallback.

The engine reads an export dir written by ``electra_detect.onnx.export`` (``export.json`` lists the
variants; tokenizer, config and calibration files sit beside them). It maps the same padded ids to
the same logits as ``TorchEngine``, so ``Detector`` is unchanged above it.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from electra_detect.engines import typed_channels, usable_positions
from electra_detect.errors import DetectorError
from electra_detect.onnx.manifest import VARIANT_FILES, read_manifest, verified_path
from electra_detect.onnx.preference import pick_variant
from electra_detect.onnx.session import open_session

_warned: set[str] = set()  # warn once per process and message kind, however many engines are built


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _wants_cuda(device: str | None) -> tuple[bool, int, bool]:
    """(try CUDA, device id, explicitly asked for)."""
    if device is None or device == "auto":
        return True, 0, False
    if device == "cpu":
        return False, 0, False
    if device in ("cuda", "gpu"):
        return True, 0, True
    if device.startswith("cuda:") and device[5:].isdigit():
        return True, int(device[5:]), True
    raise DetectorError(f"unknown device {device!r}; expected cpu, cuda or cuda:N")


class OnnxEngine:
    """One onnxruntime session over one exported variant.

    ``provider`` is the execution provider the session actually uses (onnxruntime-gpu lists CUDA
    even where it cannot load it, and then silently runs on CPU; we check and say so).
    """

    name = "onnx"

    def __init__(self, export_dir: str | Path, variant: str | None = None, device: str | None = None,
                 require_gpu: bool = False, threads: int | None = None, manifest: dict[str, Any] | None = None) -> None:
        import onnxruntime as ort

        self.export_dir = Path(export_dir)
        manifest = self.manifest = manifest if manifest is not None else read_manifest(self.export_dir)
        exported = [v for v in manifest.get("variants", {}) if (self.export_dir / VARIANT_FILES.get(v, "-")).exists()]
        if not exported:
            raise DetectorError(f"{self.export_dir}: the export holds no model files")
        if variant is not None and variant not in exported:
            raise DetectorError(f"variant {variant!r} is not in {self.export_dir} (exported: {', '.join(exported)})")
        try_cuda, device_id, explicit = _wants_cuda(device)
        available = ort.get_available_providers()
        cuda_listed = "CUDAExecutionProvider" in available
        if try_cuda and not cuda_listed and (explicit or require_gpu):
            self._no_gpu(f"CUDA was requested but this onnxruntime build has no CUDAExecutionProvider "
                         f"(available: {', '.join(available)}); install the gpu extra (onnxruntime-gpu)",
                         require_gpu)
        use_cuda = try_cuda and cuda_listed
        self.variant = variant or pick_variant(manifest, exported, use_cuda)
        self.session = self._session(ort, self.variant, use_cuda, device_id, threads)
        self.provider = self.session.get_providers()[0]
        if use_cuda and self.provider != "CUDAExecutionProvider":
            self._no_gpu(f"onnxruntime lists CUDAExecutionProvider but could not use it (no GPU, or CUDA/cuDNN "
                         f"libraries missing); running on {self.provider}", require_gpu)
            on_cpu = pick_variant(manifest, exported, False)
            if variant is None and self.variant != on_cpu:
                self.variant = on_cpu
                self.session = self._session(ort, self.variant, False, 0, threads)
                self.provider = self.session.get_providers()[0]
        self.input_names = [i.name for i in self.session.get_inputs()]
        config = json.loads((self.export_dir / "config.json").read_text())
        self.max_positions = usable_positions(config)
        self.channels = typed_channels(config)

    @staticmethod
    def _no_gpu(message: str, require_gpu: bool) -> None:
        if require_gpu:
            raise DetectorError(message)
        _warn_once(message.split(";")[0], message)

    def _session(self, ort: Any, variant: str, cuda: bool, device_id: int, threads: int | None) -> Any:
        return open_session(ort, verified_path(self.export_dir, variant, self.manifest), cuda, device_id, threads)

    @classmethod
    def from_file(cls, path: str | Path, max_positions: int = 0) -> OnnxEngine:
        """An engine over one ``.onnx`` file on the CPU, before any manifest exists (the export's parity check and
        its timing of the variants)."""
        import onnxruntime as ort

        engine = cls.__new__(cls)
        engine.export_dir, engine.variant = Path(path).parent, None
        engine.session = open_session(ort, Path(path), False, 0, None)
        engine.provider = engine.session.get_providers()[0]
        engine.input_names = [i.name for i in engine.session.get_inputs()]
        engine.max_positions = max_positions
        engine.channels = []  # the parity check compares the error logits only
        return engine

    def logits(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        return self.outputs(input_ids, attention_mask)[0]

    def outputs(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        feed = {"input_ids": input_ids.astype(np.int64, copy=False),
                "attention_mask": attention_mask.astype(np.int64, copy=False)}
        if "token_type_ids" in self.input_names:
            feed["token_type_ids"] = np.zeros_like(feed["input_ids"])
        names = ["logits", "type_logits"] if self.channels else ["logits"]
        results = [np.asarray(out, dtype=np.float32) for out in self.session.run(names, feed)]
        logits = results[0][..., 0] if results[0].ndim == 3 else results[0]  # a token classifier's one label
        return logits, results[1] if self.channels else None
