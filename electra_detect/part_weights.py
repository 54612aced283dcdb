"""A trained part's full model in fp32: the stock token classifier of the part's config.json with the base encoder's
weights (mapped as training's start maps them: ``from_pretrained`` on the base folder), then the part's tensors
applied: the heads and top layers loaded in place, the LoRA matrices merged with peft (W' = W + alpha/rank * B @ A).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from electra_detect.errors import DetectorError

PART_WEIGHTS = "part.safetensors"  # a trained part's tensors (fp16), named as in the full model's state_dict
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")  # peft's save_pretrained, for a lora part
PEFT_PREFIX = "base_model.model."  # peft's name for the wrapped model, in front of every saved key
LORA_MARKERS = (".lora_A.", ".lora_B.", ".lora_embedding_A", ".lora_embedding_B", ".lora_magnitude_vector")
ADAPTER = "default"  # the adapter name peft gives a loaded adapter (in live parameter names, not in saved ones)


def build_from_base(model_dir: Path, base: Path) -> Any:
    """The stock ``AutoModelForTokenClassification`` of ``model_dir``'s config.json, in fp32, with the base
    folder's encoder weights (the heads stay fresh: the part brings them)."""
    import torch
    from transformers import AutoConfig, AutoModelForTokenClassification
    from transformers.utils import logging as transformers_logging

    config = AutoConfig.from_pretrained(str(model_dir))
    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()  # "classifier newly initialized", "pooler not used": expected
    try:
        model, info = AutoModelForTokenClassification.from_pretrained(
            str(base), config=config, dtype=torch.float32, use_safetensors=True, output_loading_info=True)
    except (OSError, ValueError) as exc:  # no stock token classifier, or weights that cannot be read
        raise DetectorError(f"{model_dir}: cannot build it from the base {base} "
                            f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from exc
    finally:
        transformers_logging.set_verbosity(verbosity)
    missing = [k for k in info["missing_keys"] if not k.startswith("classifier.")]
    if missing or info.get("mismatched_keys"):
        raise DetectorError(f"{model_dir}: the base {base} does not fit {type(model).__name__} "
                            f"(missing {missing[:3]}, mismatched {list(info.get('mismatched_keys') or [])[:3]})")
    return model.float()


def saved_name(key: str) -> str:
    """A tensor's name as peft saves it, without the wrapper's prefix or the adapter's name (a live parameter's
    name, a saved adapter's, and the full model's all come to this)."""
    key = key[len(PEFT_PREFIX):] if key.startswith(PEFT_PREFIX) else key
    return key.replace(f".{ADAPTER}.", ".").replace(".modules_to_save.", ".")


def is_lora(key: str) -> bool:
    return any(marker in key for marker in LORA_MARKERS)


def load_in_place(model: Any, tensors: dict[str, Any], record: Any) -> None:
    """Load full-model tensors (heads, top layers) into ``model``, every one of them into a parameter or buffer of
    its name and shape (else a DetectorError naming the first that found no place)."""
    if not tensors:
        return
    try:
        result = model.load_state_dict({k: v.float() for k, v in tensors.items()}, strict=False)
    except RuntimeError as exc:  # a tensor of another shape than the model's
        reason = str(exc).splitlines()[-1].strip()
        raise DetectorError(f"{record.path}: the part does not fit the model ({reason})") from exc
    if result.unexpected_keys:
        raise DetectorError(f"{record.path}: the part's tensor {result.unexpected_keys[0]} found no place in the "
                            f"model ({len(result.unexpected_keys)} of {len(tensors)} did not)")


def apply_part(model: Any, record: Any) -> Any:
    """``model`` with ``record``'s part (a ``trained_part.TrainedPart``) applied: for a LoRA part the merged stock
    model (peft's modules gone)."""
    from safetensors.torch import load_file

    part_file = record.path / PART_WEIGHTS
    tensors = load_file(str(part_file)) if part_file.is_file() else {}
    full = {saved_name(k): v for k, v in tensors.items() if not is_lora(k)}
    load_in_place(model, full, record)  # before any merge: LoRA deltas go on top of these weights
    if record.part == "top_layers":
        layers = int(getattr(model.config, "num_hidden_layers", record.top_layers))
        if record.top_layers > layers:
            raise DetectorError(f"{record.path}: top_layers {record.top_layers} > the model's {layers} layers")
        return model
    lora = {PEFT_PREFIX + saved_name(k): v for k, v in tensors.items() if is_lora(k)}
    return merged_lora(model, record, lora)


def merged_lora(model: Any, record: Any, lora: dict[str, Any]) -> Any:
    """peft's ``PeftModel.from_pretrained`` over the part's adapter (peft's files, or one written from
    part.safetensors and trained_part.json's rank, alpha and target modules), checked, then ``merge_and_unload``."""
    try:
        from peft import LoraConfig, PeftModel
    except ImportError as exc:
        raise DetectorError(f"{record.path} is a LoRA part: merging it needs peft: "
                            f"pip install 'electra-detect[teacher]'") from exc
    from safetensors.torch import load_file, save_file

    with tempfile.TemporaryDirectory(prefix="electra-detect-adapter-") as scratch:
        if record.has_adapter:
            adapter_dir = record.path
            lora = {PEFT_PREFIX + saved_name(k): v for k, v in load_file(str(record.path / ADAPTER_FILES[1])).items()}
        else:
            if not lora:
                raise DetectorError(f"{record.path}: a LoRA part whose {PART_WEIGHTS} holds no LoRA matrices")
            adapter_dir = Path(scratch)
            settings = record.lora
            LoraConfig(r=settings["rank"], lora_alpha=settings["alpha"], target_modules=settings["target_modules"],
                       lora_dropout=0.0).save_pretrained(str(adapter_dir))
            save_file({k: v.float().contiguous() for k, v in lora.items()}, str(adapter_dir / ADAPTER_FILES[1]))
        try:
            wrapped = PeftModel.from_pretrained(model, str(adapter_dir))
        except (OSError, ValueError, KeyError, RuntimeError, json.JSONDecodeError) as exc:
            raise DetectorError(f"{record.path}: peft cannot load the LoRA part "
                                f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from exc
    check_lora_loaded(wrapped, lora, record)
    return wrapped.merge_and_unload()


def check_lora_loaded(wrapped: Any, lora: dict[str, Any], record: Any) -> None:
    """Every LoRA matrix of the part sits, with its values, in a LoRA parameter of the wrapped model, and every LoRA
    parameter got one (a target module the part has no matrices for would merge peft's random start)."""
    live = {PEFT_PREFIX + saved_name(k[len(PEFT_PREFIX):]): v for k, v in wrapped.state_dict().items() if is_lora(k)}
    for key, value in lora.items():
        if key not in live or tuple(live[key].shape) != tuple(value.shape) or not bool(
                (live[key].float() == value.float()).all()):
            raise DetectorError(f"{record.path}: the part's LoRA tensor {key} found no place in the model "
                                f"(are target_modules and the base the ones it was trained with?)")
    unfilled = sorted(set(live) - set(lora))
    if unfilled:
        raise DetectorError(f"{record.path}: the part has no values for the LoRA parameter {unfilled[0]} "
                            f"({len(unfilled)} missing)")
