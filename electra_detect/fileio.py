"""Atomic writes: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_open(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """A handle on a temp file beside ``path`` that replaces it only if the block ends without an
    exception: streamed output (rows written as they come) gets the same guarantee as whole contents."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the usual permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    with atomic_open(path, "wb") as handle:
        handle.write(data)


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def atomic_write_dir(path: str | Path, fill: Callable[[Path], None]) -> None:
    """Build a directory in a sibling temp dir with ``fill(tmp)``, then swap it into place.

    An existing directory at ``path`` is replaced only after the new one is complete.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp creates 0700
        fill(tmp)
        fsync_tree(tmp)  # the files' bytes reach the disk before the rename makes them visible
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def fsync_dir(path: str | Path) -> None:
    """Flush a directory's entries (a rename in it) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: str | Path) -> None:
    """Flush every file under ``root``, then the directories that hold them."""
    for folder, _, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(folder)


def sha256_files(paths: Iterable[str | Path]) -> str:
    """Hex SHA-256 of the files' bytes one after another, read in 1 MiB chunks (weights, checkpoints and
    exports can be large). The one file hasher: checkpoints, exports and calibration's weight fingerprint."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as handle:
            for chunk in iter(lambda h=handle: h.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of one file."""
    return sha256_files([path])


def atomic_save_figure(fig: Any, path: str | Path, dpi: int = 110) -> Path:
    """Save a matplotlib figure as PNG atomically and close it: a reader never sees half a plot."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    plt.close(fig)
    atomic_write_bytes(path, buffer.getvalue())
    return Path(path)


def cache_home() -> Path:
    """``$XDG_CACHE_HOME/electra-detect`` (the XDG base directory spec: ``~/.cache`` when unset or empty): the one
    folder under which ONNX exports, unpacked base encoders and assembled models are cached."""
    return Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "electra-detect"
