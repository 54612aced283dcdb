"""Where ONNX exports are cached: one dir per weights hash. Shared by ``inference`` (first use) and ``export``
(its default target) without either importing the other."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/electra-detect/onnx`` (XDG base directory spec: ``~/.cache`` when unset or empty)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "electra-detect" / "onnx"


def weights_key(model_dir: Path) -> str:
    """SHA-256 of the weights, remembered per (path, size, mtime) so a start need not re-read large weights."""
    import json

    from electra_detect.calibrators import weights_sha256
    from electra_detect.fileio import atomic_write_json

    files = sorted(Path(model_dir).glob("*.safetensors"))
    stamp = [[str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns] for f in files]
    memo = cache_root() / "keys" / f"{_text_sha(json.dumps(stamp))}.json"
    try:
        saved = json.loads(memo.read_text())
        if saved.get("files") == stamp:
            return str(saved["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        pass  # no memo yet, or a broken one: hash the weights
    key = weights_sha256(model_dir)
    try:
        atomic_write_json(memo, {"files": stamp, "sha256": key})
    except OSError:
        pass  # a read-only cache only costs the hash next time
    return key


def _text_sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()
