"""Trained-part model directories: what training changed on top of a base encoder (``trained_part.json``, the full
model's config.json, ``part.safetensors``) recognised, checked, and assembled once into an ordinary model directory.

The assembly lives in ``$XDG_CACHE_HOME/electra-detect/assembled/<key>/`` (written atomically). The key hashes the
part's files, the base's recorded hash and the versions of the tools that build it, so a changed part or tool is
assembled again and a stale assembly is never used; after that the assembled directory is a model directory like
any other (the ONNX export cache takes it as it is). The tensors' work is in ``electra_detect.part_weights``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from electra_detect.errors import DetectorError
from electra_detect.fileio import cache_home
from electra_detect.onnx.cache import file_sha256, tool_versions
from electra_detect.part_weights import ADAPTER_FILES, PART_WEIGHTS, apply_part, build_from_base

TRAINED_PART_FILE = "trained_part.json"
FORMAT = 1
PARTS = ("lora", "top_layers")
COPIED_FILES = ("ged.json", "edit_tags.json", "inflections.json", "README.md")  # from the part, as they are
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "vocab.json",
                   "merges.txt", "added_tokens.json", "sentencepiece.bpe.model", "spiece.model")
KEY_TOOLS = ("torch", "transformers", "peft", "safetensors")
ASSEMBLY_VERSION = 1  # raised whenever assembly writes a different directory: older assemblies are then not used
STEPS = 4
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class TrainedPart:
    """A checked ``trained_part.json`` and the directory it is in."""

    path: Path
    base: str  # a short name base_encoders.resolve_encoder knows, or a directory
    base_sha256: str  # of the base folder's model.safetensors bytes
    part: str  # "lora" or "top_layers"
    lora: dict[str, Any] = field(default_factory=dict)  # rank, alpha, target_modules (part == "lora")
    top_layers: int = 0  # part == "top_layers"

    @property
    def has_adapter(self) -> bool:
        """Whether the LoRA matrices come as peft's adapter files (else inside part.safetensors)."""
        return all((self.path / name).is_file() for name in ADAPTER_FILES)


def is_trained_part(path: str | Path) -> bool:
    """Whether ``path`` is a trained-part directory (it holds ``trained_part.json``)."""
    return (Path(path) / TRAINED_PART_FILE).is_file()


def read_trained_part(path: str | Path) -> TrainedPart:
    """``path``'s ``trained_part.json``, checked: anything wrong is a one-line DetectorError naming the file."""
    path = Path(path)
    spec_path = path / TRAINED_PART_FILE

    def bad(problem: str) -> DetectorError:
        return DetectorError(f"{spec_path}: {problem}")

    try:
        spec = json.loads(spec_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise bad(f"unreadable ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from exc
    if not isinstance(spec, dict):
        raise bad("not a JSON object")
    if spec.get("format") != FORMAT:
        raise bad(f"format {spec.get('format')!r} is not one this version reads ({FORMAT}); upgrade electra-detect")
    base, sha, part = spec.get("base"), spec.get("base_weights_sha256"), spec.get("part")
    if not isinstance(base, str) or not base:
        raise bad("no base (a short name such as mpnet, or a directory)")
    if not isinstance(sha, str) or not _SHA256.fullmatch(sha):
        raise bad("base_weights_sha256 is not a hex SHA-256")
    if part not in PARTS:
        raise bad(f"part {part!r} is not one of {', '.join(PARTS)}")
    if not (path / "config.json").is_file():
        raise bad("no config.json beside it (the full model's config)")
    record = TrainedPart(path, base, sha, part)
    if part == "top_layers":
        layers = spec.get("top_layers")
        if not isinstance(layers, int) or isinstance(layers, bool) or layers < 1:
            raise bad(f"top_layers must be a positive whole number, got {layers!r}")
        if not (path / PART_WEIGHTS).is_file():
            raise bad(f"no {PART_WEIGHTS} beside it")
        return TrainedPart(path, base, sha, part, top_layers=layers)
    lora = spec.get("lora")
    if lora is None and record.has_adapter:
        return record  # peft's adapter_config.json says rank, alpha and the target modules
    if not isinstance(lora, dict):
        raise bad("part lora needs a lora object (rank, alpha, target_modules)")
    rank, alpha, targets = lora.get("rank"), lora.get("alpha"), lora.get("target_modules")
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        raise bad(f"lora rank must be a positive whole number, got {rank!r}")
    if not isinstance(alpha, int | float) or isinstance(alpha, bool) or alpha <= 0:
        raise bad(f"lora alpha must be a positive number, got {alpha!r}")
    if not isinstance(targets, list) or not targets or not all(isinstance(t, str) and t for t in targets):
        raise bad("lora target_modules must be a non-empty list of module names")
    if not record.has_adapter and not (path / PART_WEIGHTS).is_file():
        raise bad(f"no {PART_WEIGHTS} (nor peft's {' and '.join(ADAPTER_FILES)}) beside it")
    return TrainedPart(path, base, sha, part, lora={"rank": rank, "alpha": alpha, "target_modules": list(targets)})


def assembled_root() -> Path:
    """``$XDG_CACHE_HOME/electra-detect/assembled`` (``~/.cache`` when unset or empty)."""
    return cache_home() / "assembled"


def assembly_key(record: TrainedPart) -> str:
    """SHA-256 over the part's files' hashes (remembered per file stamp), the base's recorded hash and the tools'
    versions."""
    files = sorted(p for p in record.path.iterdir() if p.is_file() and not p.name.startswith("."))
    content = {"files": {p.name: file_sha256(p) for p in files}, "base": record.base_sha256,
               "tools": tool_versions(KEY_TOOLS), "assembly": ASSEMBLY_VERSION}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def assembled_dir(path: str | Path) -> Path | None:
    """The cache directory ``path``'s assembly lives in, or None when it is not assembled yet."""
    target = assembled_root() / assembly_key(read_trained_part(path))
    return target if (target / "config.json").is_file() else None


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def assemble(path: str | Path, progress: Callable[[str], None] | None = None) -> Path:
    """Assemble the trained part at ``path`` into its cache directory (once: an assembly already there is kept) and
    return that directory. ``progress`` takes each step's line (default: printed on stderr)."""
    from electra_detect.base_encoders import resolve_encoder
    from electra_detect.errors import BaseEncoderError
    from electra_detect.fileio import atomic_write_dir
    from electra_detect.onnx.cache import export_lock, file_sha256

    record = read_trained_part(path)
    target = assembled_root() / assembly_key(record)
    say = progress or _stderr
    with export_lock(target):  # two processes assembling one part take turns; the second finds it done
        if (target / "config.json").is_file():
            return target
        prefix = f"assembling {record.path} from {record.base}"
        say(f"{prefix}: 1/{STEPS} finding the base and checking its weights")
        try:
            base = resolve_encoder(record.base)
        except BaseEncoderError as exc:
            raise DetectorError(str(exc)) from exc
        weights = base / "model.safetensors"
        if not weights.is_file():
            raise DetectorError(f"the base {record.base} ({base}) holds no model.safetensors")
        found = file_sha256(weights)
        if found != record.base_sha256:
            raise DetectorError(f"{record.path} was trained on a base whose model.safetensors has sha256 "
                                f"{record.base_sha256}, but {weights} has sha256 {found}: install the base it was "
                                f"trained on")

        def fill(tmp: Path) -> None:
            say(f"{prefix}: 2/{STEPS} building the full model from the base's weights")
            model = build_from_base(record.path, base)
            say(f"{prefix}: 3/{STEPS} " + ("merging the LoRA part into the weights" if record.part == "lora"
                                           else f"loading the top {record.top_layers} layers and the heads"))
            model = apply_part(model, record)
            say(f"{prefix}: 4/{STEPS} saving {target}")
            model.save_pretrained(str(tmp), safe_serialization=True)
            for name in TOKENIZER_FILES:
                if (base / name).is_file():
                    shutil.copyfile(base / name, tmp / name)
            for name in COPIED_FILES:
                if (record.path / name).is_file():
                    shutil.copyfile(record.path / name, tmp / name)

        atomic_write_dir(target, fill)
    return target


def runnable_dir(path: str | Path, allow_assembly: bool = True,
                 progress: Callable[[str], None] | None = None) -> Path:
    """``path`` itself, or for a trained part its assembled directory: assembled now when it is not yet and
    ``allow_assembly``, else a one-line DetectorError naming the command that assembles it."""
    path = Path(path)
    if not is_trained_part(path):
        return path
    ready = assembled_dir(path)
    if ready is not None:
        return ready
    if not allow_assembly:
        raise DetectorError(f"{path} is not assembled yet: run `electra-detect export --model {path}` first")
    return assemble(path, progress)
