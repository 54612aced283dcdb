"""A GED fine-tune that trains and saves only part of a base encoder (``ged train --part``): the trained part.

``lora[:RANK]`` puts LoRA (peft) on every encoder layer's attention and feed-forward linear modules and trains the
heads in full (peft's ``modules_to_save``); ``top:N`` trains the top N encoder layers and the heads, the rest frozen.
:func:`save_trained_part` writes the model directory of the trained-part format instead of full weights:
``trained_part.json`` (the base, its weights' hash, the part), the full model's ``config.json``, the trained tensors
in fp16 (``part.safetensors``; for LoRA its matrices in peft's ``adapter_model.safetensors`` + ``adapter_config.json``
and the heads in ``part.safetensors``). Assembly on the user's machine adds them back onto the base.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from electra_detect.fileio import atomic_write_json, sha256_file
from electra_detect.training.pretraining.config import ConfigError
from electra_detect.training.pretraining.encoders import is_run_dir, resolve_encoder

PART_FILE = "part.safetensors"
PART_META = "trained_part.json"
ADAPTER_FILE = "adapter_model.safetensors"  # peft's names, so PeftModel.from_pretrained reads them as they are
ADAPTER_CONFIG = "adapter_config.json"
FORMAT = 1
DEFAULT_RANK = 16
LORA_DROPOUT = 0.1  # as the encoder's own hidden dropout
ELECTRA_FAMILIES = ("bert", "electra")  # they train as ELECTRA discriminators, whose names are not the base's
_LAYER = re.compile(r"(?:^|\.)encoder\.layer\.(\d+)\.")


@dataclass(frozen=True)
class PartSpec:
    kind: str  # "lora" or "top_layers" (trained_part.json's names)
    rank: int = 0  # lora
    alpha: int = 0  # lora: 2 * rank
    layers: int = 0  # top_layers: how many of the top encoder layers train


def parse_part(spec: str) -> PartSpec:
    """``lora``, ``lora:RANK`` or ``top:N`` -> the part to train; a ConfigError for anything else."""
    kind, _, number = spec.partition(":")
    try:
        value = int(number) if number else (DEFAULT_RANK if kind == "lora" else 0)
    except ValueError:
        value = 0
    if kind == "lora" and value > 0:
        return PartSpec("lora", rank=value, alpha=2 * value)
    if kind == "top" and value > 0:
        return PartSpec("top_layers", layers=value)
    raise ConfigError(f"--part {spec}: expected lora[:RANK] or top:N with a positive number (e.g. lora:16, top:4)")


def part_base(model: str, spec: PartSpec) -> Path:
    """The base encoder's folder behind ``--model`` when a part may train on it; a ConfigError when ``--model`` is
    a run dir or a discriminator (its weights are no installed base) or a BERT/ELECTRA (trained under ELECTRA's
    names), or when ``top:N`` asks for more layers than it has."""
    path = Path(model)
    if is_run_dir(path) or (path / "discriminator").is_dir():
        raise ConfigError(f"--part trains on a base encoder (mpnet or an encoder folder), not on the run dir {model}")
    folder = resolve_encoder(model)
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--part: {folder} is not an encoder folder (no readable config.json)") from exc
    if any(str(a).endswith("ForTokenClassification") for a in config.get("architectures") or ()):
        raise ConfigError(f"--part trains on a base encoder (mpnet or an encoder folder), not on the trained "
                          f"model {model}")
    if config.get("model_type") in ELECTRA_FAMILIES:
        raise ConfigError(f"--part needs an encoder that trains as its own token classifier (mpnet), not the "
                          f"{config.get('model_type')} encoder {model}")
    if not (folder / "model.safetensors").exists():
        raise ConfigError(f"--part: {folder} holds no model.safetensors (its hash names the base)")
    layers = int(config.get("num_hidden_layers", 0))
    if spec.kind == "top_layers" and spec.layers > layers:
        raise ConfigError(f"--part top:{spec.layers}: the encoder {model} has {layers} layers")
    return folder


def head_names(model: Any) -> list[str]:
    """The full model's heads: its top-level modules with weights outside the encoder (``classifier``)."""
    return [name for name, module in model.named_children()
            if name != model.base_model_prefix and any(True for _ in module.parameters())]


def lora_targets(model: Any) -> list[str]:
    """Every linear module of an encoder layer, named from inside the layer (``attention.attn.q``, ...,
    ``output.dense``): peft matches these suffixes in every layer."""
    found: list[str] = []
    for name, module in model.named_modules():
        match = _LAYER.search(name + ".")
        if isinstance(module, torch.nn.Linear) and match:
            inner = (name + ".")[match.end():].rstrip(".")
            if inner and inner not in found:
                found.append(inner)
    return found


def top_layer_names(model: Any, layers: int) -> list[str]:
    """The state_dict names of the top ``layers`` encoder layers' tensors and of the heads."""
    count = int(model.config.num_hidden_layers)
    heads = tuple(f"{h}." for h in head_names(model))
    out = []
    for name in model.state_dict():
        match = _LAYER.search(name)
        if name.startswith(heads) or (match and name.startswith(f"{model.base_model_prefix}.")
                                      and int(match.group(1)) >= count - layers):
            out.append(name)
    return out


def prepare_part(model: Any, spec: PartSpec) -> Any:
    """The model to train: wrapped in LoRA (its heads in full) or with all but the top layers and heads frozen."""
    if spec.kind == "lora":
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError as exc:
            raise ConfigError("--part lora needs the package peft: pip install 'electra-detect[teacher]'") from exc

        config = LoraConfig(r=spec.rank, lora_alpha=spec.alpha, target_modules=lora_targets(model),
                            lora_dropout=LORA_DROPOUT, modules_to_save=head_names(model))
        return get_peft_model(model, config)
    trained = set(top_layer_names(model, spec.layers))
    for name, param in model.named_parameters():
        param.requires_grad_(name in trained)
    return model


def is_lora(model: Any) -> bool:
    """A peft-wrapped model; peft is not imported for it (a model is no PeftModel while peft is not loaded)."""
    peft = sys.modules.get("peft")
    return peft is not None and isinstance(model, peft.PeftModel)


def parameter_prefix(model: Any) -> str:
    """What the wrapping puts before the full model's parameter names (a peft model's ``base_model.model.``)."""
    return "base_model.model." if is_lora(model) else ""


def full_model(model: Any) -> Any:
    """The full model under a trained part's wrapping (peft's base model; the model itself for top layers)."""
    return model.get_base_model() if is_lora(model) else model


def base_name(base: str) -> str:
    """trained_part.json's ``base``: a short name as given, a directory as its absolute path."""
    path = Path(base)
    return str(path.resolve()) if path.is_dir() else base


def save_trained_part(model: Any, out_dir: str | Path, base: str, spec: PartSpec) -> None:
    """Write the trained part of ``model`` (as :func:`prepare_part` wrapped it) into ``out_dir`` in the
    trained-part format; ``base`` is ``--model``: the encoder's short name or folder."""
    from safetensors.torch import save_file

    out = Path(out_dir)
    full = full_model(model)
    meta: dict[str, Any] = {"format": FORMAT, "base": base_name(base),
                            "base_weights_sha256": sha256_file(resolve_encoder(base) / "model.safetensors"),
                            "part": spec.kind}
    if is_lora(model):
        from peft.utils import get_peft_model_state_dict

        config = model.peft_config[model.active_adapter]
        state = get_peft_model_state_dict(model)
        lora = {k: v.detach().half().contiguous() for k, v in state.items() if ".lora_" in k}
        prefix = parameter_prefix(model)
        heads = {k[len(prefix):]: v.detach().half().contiguous() for k, v in state.items()
                 if ".lora_" not in k}  # modules_to_save, named as in the full model
        save_file(lora, str(out / ADAPTER_FILE), metadata={"format": "pt"})
        adapter = config.to_dict()
        adapter.update(target_modules=sorted(config.target_modules), modules_to_save=None, inference_mode=True,
                       base_model_name_or_path=meta["base"], peft_type=str(config.peft_type.value))
        atomic_write_json(out / ADAPTER_CONFIG, adapter)  # the heads live in part.safetensors, not in the adapter
        meta["lora"] = {"rank": config.r, "alpha": config.lora_alpha, "target_modules": sorted(config.target_modules)}
    else:
        state = full.state_dict()
        heads = {k: state[k].detach().half().contiguous() for k in top_layer_names(full, spec.layers)}
        meta["top_layers"] = spec.layers
    save_file(heads, str(out / PART_FILE), metadata={"format": "pt"})
    full.config.architectures = [type(full).__name__]
    full.config.to_json_file(str(out / "config.json"))
    atomic_write_json(out / PART_META, meta)


@contextmanager
def scoring_dir(out_dir: str | Path, model: Any, tokenizer: Any) -> Iterator[Path]:
    """A directory ``Detector.load`` reads to score dev: ``out_dir`` itself, or for a trained part the full model
    (LoRA merged in) written with its tokenizer to a temporary folder."""
    if not (Path(out_dir) / PART_META).exists():
        yield Path(out_dir)
        return
    merged = model.merge_and_unload() if is_lora(model) else model
    with tempfile.TemporaryDirectory(prefix="electra-detect-part-") as tmp:
        merged.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        yield Path(tmp)
