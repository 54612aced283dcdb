"""Resumable checkpoints in safetensors + JSON (nothing is unpickled on load).

A checkpoint is a directory ``step_XXXXXXXX/`` built beside its final name and renamed into
place, then ``latest`` is rewritten atomically; a SHA-256 manifest catches truncated or edited
files, and a config fingerprint catches a checkpoint from a different model.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, load_model, save_file, save_model

from electra_detect.fileio import atomic_write_dir, atomic_write_json, atomic_write_text, sha256_file
from electra_detect.training.pretraining.errors import CheckpointError

STATE_FILE = "trainer_state.json"


def remove_orphans(root: Path, outputs: tuple[str, ...] = ()) -> list[str]:
    """Clear what a save killed midway (``kill -9``, power loss) leaves in checkpoint dir ``root``; returns
    the names removed or restored.

    ``atomic_write_dir`` builds ``.step_XXXXXXXX.<random>.tmp`` beside the final name and ``latest`` is
    written through ``.latest.<random>.tmp``: a kill before the rename leaves them for good (a full
    checkpoint's size each). A re-save of an existing step moves it to ``.step_XXXXXXXX.old`` for an instant;
    a kill then leaves the old copy there and no ``step_XXXXXXXX``: it is moved back, anything else removed.
    ``outputs``: names in ``root.parent`` written the same way (``discriminator``, ``summary.json``...), whose
    temp copies are removed too. Run it only when no save is under way (the trainer's start)."""
    touched: list[str] = []
    if root.is_dir():
        for old in sorted(root.glob(".step_*.old")):
            final = root / old.name[1:-len(".old")]
            if old.is_dir() and not final.exists():
                os.replace(old, final)
            else:
                shutil.rmtree(old, ignore_errors=True)
            touched.append(old.name)
        for tmp in [*root.glob(".step_*.tmp"), *root.glob(".latest.*.tmp")]:
            shutil.rmtree(tmp, ignore_errors=True) if tmp.is_dir() else tmp.unlink(missing_ok=True)
            touched.append(tmp.name)
    for name in outputs:
        old = root.parent / f".{name}.old"
        if old.exists():
            if not (root.parent / name).exists():
                os.replace(old, root.parent / name)
            else:
                shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink(missing_ok=True)
            touched.append(old.name)
        for tmp in root.parent.glob(f".{name}.*.tmp"):
            shutil.rmtree(tmp, ignore_errors=True) if tmp.is_dir() else tmp.unlink(missing_ok=True)
            touched.append(tmp.name)
    return touched


def _split_optimizer_state(state_dict: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for index, per_param in state_dict["state"].items():
        for name, value in per_param.items():
            if torch.is_tensor(value):
                tensors[f"{index}.{name}"] = value.detach().cpu().contiguous()
            else:
                scalars.setdefault(str(index), {})[name] = value
    return tensors, {"param_groups": state_dict["param_groups"], "scalars": scalars}


def _join_optimizer_state(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> dict[str, Any]:
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        index, name = key.split(".", 1)
        state.setdefault(int(index), {})[name] = value
    for index, values in meta["scalars"].items():
        state.setdefault(int(index), {}).update(values)
    return {"state": state, "param_groups": meta["param_groups"]}


def save_checkpoint(root: Path, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    scheduler: torch.optim.lr_scheduler.LRScheduler, rng_states: dict[str, torch.Tensor],
                    trainer_state: dict[str, Any], fingerprint: dict[str, Any], keep_last: int) -> Path:
    name = f"step_{step:08d}"

    def fill(tmp: Path) -> None:
        save_model(model, str(tmp / "model.safetensors"))
        opt_tensors, opt_meta = _split_optimizer_state(optimizer.state_dict())
        save_file(opt_tensors, str(tmp / "optimizer.safetensors"))
        save_file({k: v.contiguous() for k, v in rng_states.items()}, str(tmp / "rng.safetensors"))
        files = ["model.safetensors", "optimizer.safetensors", "rng.safetensors"]
        state = {
            "step": step,
            "fingerprint": fingerprint,
            "trainer": trainer_state,
            "optimizer": opt_meta,
            "scheduler": scheduler.state_dict(),
            "sha256": {f: sha256_file(tmp / f) for f in files},
        }
        atomic_write_json(tmp / STATE_FILE, state)

    target = root / name
    atomic_write_dir(target, fill)
    atomic_write_text(root / "latest", name + "\n")
    for old in sorted(root.glob("step_*"))[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    return target


def latest_checkpoint(root: Path) -> Path | None:
    pointer = root / "latest"
    if not pointer.exists():
        return None
    path = root / pointer.read_text().strip()
    if not path.is_dir():
        raise CheckpointError(f"{pointer} names {path.name}, which does not exist; the checkpoint dir is damaged")
    return path


def load_checkpoint(path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    scheduler: torch.optim.lr_scheduler.LRScheduler,
                    fingerprint: dict[str, Any]) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """Restore model/optimizer/scheduler in place; return (trainer state, RNG states)."""
    state_path = path / STATE_FILE
    try:
        state = json.loads(state_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"checkpoint {path} is unreadable ({state_path.name}: {exc})") from exc
    if state.get("fingerprint") != fingerprint:
        raise CheckpointError(
            f"checkpoint {path} was made with a different model/data configuration:\n"
            f"  checkpoint: {json.dumps(state.get('fingerprint'), sort_keys=True)}\n"
            f"  this run:   {json.dumps(fingerprint, sort_keys=True)}"
        )
    for filename, expected in state.get("sha256", {}).items():
        file = path / filename
        if not file.exists() or sha256_file(file) != expected:
            raise CheckpointError(f"checkpoint {path} is corrupt: {filename} is missing or does not match its checksum")
    try:
        missing, unexpected = load_model(model, str(path / "model.safetensors"), strict=False)
        if missing or unexpected:
            raise CheckpointError(f"checkpoint {path} does not fit the model (missing {missing[:3]}, "
                                  f"unexpected {unexpected[:3]})")
        optimizer.load_state_dict(_join_optimizer_state(load_file(str(path / "optimizer.safetensors")),
                                                        state["optimizer"]))
        rng = load_file(str(path / "rng.safetensors"))
    except (SafetensorError, RuntimeError, ValueError, KeyError) as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"checkpoint {path} cannot be loaded: {exc}") from exc
    scheduler.load_state_dict(state["scheduler"])
    return state["trainer"], rng
