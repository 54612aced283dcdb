"""Where the ONNX export a model runs on comes from: shipped beside it, cached, or exported once now.

``Detector.load`` asks ``locate`` for an export; the inference verbs then run onnxruntime without importing
torch or transformers. A model without a shipped export (``<model>/onnx``) is exported once, on first use,
into ``$XDG_CACHE_HOME/electra-detect/onnx/<key>/`` (default ``~/.cache``; ``cache.export_key``: the content
of everything the export is made from, and the tools' versions), through the same parity gate and rule as
``electra-detect export`` (a failing fp16/int8 variant is left out); changed weights, tokenizer or tools get a
new key, so a stale export is never used, and a variant whose bytes no longer match its manifest is exported
again (``rebuild``). ``electra-detect export`` without ``--out`` writes here too; two processes take turns.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from electra_detect.errors import DetectorError, ExportError
from electra_detect.onnx.cache import cache_root, export_key, export_lock, file_sha256
from electra_detect.onnx.manifest import MANIFEST, find_export_dir

CACHE_VARIANTS = ("fp32", "optimized", "int8")  # CPU variants; fp16 is added where onnxruntime has CUDA


@dataclass
class ExportSource:
    export_dir: Path
    origin: str  # "shipped", "cached" or "exported" (made by this call)
    weights_dir: Path | None = None  # the safetensors dir a cached export was made from
    key: str = ""  # the cache key (``cache.export_key``)

    @property
    def weights_sha256(self) -> str:
        """The weights' hash that calibration.json is bound to (``calibrators.weights_sha256``)."""
        if self.weights_dir is None:
            return ""
        files = sorted(self.weights_dir.glob("*.safetensors"))
        if len(files) == 1:  # the same bytes hashed: the remembered hash serves
            return file_sha256(files[0])
        from electra_detect.calibrators import weights_sha256

        return weights_sha256(self.weights_dir)


def locate(path: Path, make: bool = True, log: Callable[[str], None] | None = None,
           rebuild: bool = False, skip_shipped: bool = False, model_dir: Path | None = None) -> ExportSource:
    """The export for model ``path``: shipped (``path`` is one, or holds ``onnx/``), else the cached one for its
    weights, else (``make``) one exported into the cache now. ``skip_shipped``: the cached or a new one even where one
    is shipped (the shipped one failed its check); ``rebuild``: export again from the weights into the cache, whatever
    is shipped or cached (the cached one failed its check). ``DetectorError`` when there is none to be had.
    ``model_dir``: ``resolve_model_dir(path)``, when the caller holds it."""
    from electra_detect.model_dir import resolve_model_dir

    if not (rebuild or skip_shipped):
        try:
            return ExportSource(find_export_dir(path), "shipped")
        except DetectorError:
            pass
    model_dir = model_dir or resolve_model_dir(path)  # the Detector has resolved it already
    if not any(model_dir.glob("*.safetensors")):
        what = "its shipped export failed its check" if rebuild or skip_shipped else "no ONNX export"
        raise DetectorError(f"{what} and there are no safetensors weights in {model_dir} to export from")
    key = export_key(model_dir)
    target = cache_root() / key
    if (target / MANIFEST).exists() and not rebuild:
        return ExportSource(target, "cached", model_dir, key)
    if not make:
        raise DetectorError(f"no ONNX export in {path} (no export.json) and none cached for its weights; create one "
                            f"with `electra-detect export --model {path}` or load with engine auto")
    with export_lock(target):  # another process may be exporting the same weights: wait, then use its export
        if (target / MANIFEST).exists() and not rebuild:
            return ExportSource(target, "cached", model_dir, key)
        export_to_cache(model_dir, target, log or _stderr)
    return ExportSource(target, "exported", model_dir, key)


def export_to_cache(model_dir: Path, target: Path, log: Callable[[str], None]) -> None:
    """Export ``model_dir`` into ``target`` (atomically, by ``export_model``): by its rule, a reduced-precision
    variant that fails the parity gate is left out, with one line saying why."""
    try:
        import onnxruntime

        from electra_detect.onnx.export import export_model  # torch and the exporters: only on this first use
    except ImportError as exc:
        raise DetectorError(f"cannot export {model_dir} to ONNX here ({exc})") from exc
    variants = list(CACHE_VARIANTS)
    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        variants.append("fp16")
    log(f"exporting {model_dir} to ONNX once, into {target} (later runs start from it)")
    try:
        with _quiet():
            result = export_model(model_dir, target, variants=variants, progress=False)
    except ExportError as exc:
        raise DetectorError(f"ONNX export of {model_dir} failed: {exc}") from exc
    finally:  # a failure's report is in the message; the cache keeps exports only
        target.with_name(f"{target.name}.parity_failed.json").unlink(missing_ok=True)
    for reason in result.dropped.values():
        log(f"left out of the export, it failed the parity gate: {reason}")


@contextmanager
def _quiet() -> Iterator[None]:
    """The exporters' chatter (tracer warnings, graph dumps) off the user's terminal: it goes to fd 1 and 2 from
    C++ as well as Python, so the file descriptors themselves point elsewhere for the export's few seconds."""
    import logging
    import tempfile
    import warnings

    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile() as sink, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        level = logging.root.level
        logging.root.setLevel(logging.ERROR)
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            logging.root.setLevel(level)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
