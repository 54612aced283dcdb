"""Where ONNX exports are cached, the key they are filed under, and the checks that make a cached file trusted.

An export is filed under the SHA-256 of everything it is made from: the content of the weights and of every
file the export copies (config, tokenizer files), and the versions of the tools that made it. A file's hash is
remembered per (path, size, mtime, ctime, inode): a rewrite changes its ctime even when it keeps its size and
mtime (reproducible images normalise mtimes; no user can set a ctime), so a stale memo is never believed.
Shared by ``locate`` (first use) and ``export`` (its default target) without either importing the other.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from electra_detect.fileio import cache_home

KEY_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
KEY_TOOLS = ("onnx", "onnxruntime", "onnxruntime-gpu", "optimum", "optimum-onnx", "torch", "transformers",
             "tokenizers", "electra-detect")


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/electra-detect/onnx`` (XDG base directory spec: ``~/.cache`` when unset or empty)."""
    return cache_home() / "onnx"


def file_stamp(path: Path) -> list[int | str]:
    """What changes whenever a file's bytes may have: path, size, mtime, ctime, device and inode."""
    info = path.stat()
    return [str(path.resolve()), info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_dev, info.st_ino]


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes, remembered per ``file_stamp`` so a start need not re-read large files."""
    from electra_detect.fileio import atomic_write_json, sha256_file

    path = Path(path)
    stamp = file_stamp(path)
    memo = cache_root() / "hashes" / f"{_text_sha(json.dumps(stamp))}.json"
    try:
        saved = json.loads(memo.read_text())
        if saved.get("stamp") == stamp:
            return str(saved["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        pass  # no memo yet, or a broken one: hash the file
    digest = sha256_file(path)
    if file_stamp(path) == stamp:  # not rewritten while it was read
        try:
            atomic_write_json(memo, {"stamp": stamp, "sha256": digest})
        except OSError:
            pass  # a read-only cache only costs the hash next time
    return digest


def tool_versions(names: tuple[str, ...] = KEY_TOOLS) -> dict[str, str]:
    """The installed versions of ``names`` (default: the tools that make and run an export), from package metadata:
    nothing imported; a tool not installed is left out."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def export_key(model_dir: Path) -> str:
    """The cache key of a model dir's export: SHA-256 over its weights' and copied files' hashes and the tools."""
    model_dir = Path(model_dir)
    files = sorted(model_dir.glob("*.safetensors")) + [model_dir / n for n in KEY_FILES if (model_dir / n).exists()]
    content = {"files": {f.name: file_sha256(f) for f in files}, "tools": tool_versions()}
    return _text_sha(json.dumps(content, sort_keys=True))


_locks: dict[str, threading.RLock] = {}  # lock path -> the in-process lock (flock alone does not nest)
_handles: dict[str, tuple[object, int]] = {}  # lock path -> (open lock file, depth), kept by the holding thread
_locks_guard = threading.Lock()


@contextmanager
def export_lock(target: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``target`` (an export dir) across processes and threads: two exports of one
    target take turns (an advisory POSIX file lock beside it; re-entrant within a thread)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    path = str(target.parent / f".{target.name}.lock")
    with _locks_guard:
        lock = _locks.setdefault(path, threading.RLock())
    with lock:
        handle, depth = _handles.get(path, (None, 0))
        if not depth:
            handle = open(path, "a+")  # noqa: SIM115 - the lock lives as long as this handle
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        _handles[path] = (handle, depth + 1)
        try:
            yield
        finally:
            handle, depth = _handles.pop(path)
            if depth > 1:
                _handles[path] = (handle, depth - 1)
            else:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
                handle.close()


def _text_sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
