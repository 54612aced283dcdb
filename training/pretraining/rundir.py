"""The run directory a pre-training run owns and writes (rank 0 only).

```
<out>/run_config.json    the resolved RunConfig (read back by --resume and --init-from)
      metrics.jsonl      one JSON row per log interval ("split": "train") and evaluation ("split": "val")
      checkpoints/       step_XXXXXXXX/ + latest (training/pretraining/checkpoint.py)
      discriminator/ generator/ [mlm/]   stock HF directories with the tokenizer
      summary.json       steps, tokens, minutes, stop reason, last train and val metrics
```
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path
from typing import Any

from electra_detect.fileio import atomic_write_dir, atomic_write_json, atomic_write_text
from electra_detect.training.pretraining.checkpoint import remove_orphans
from electra_detect.training.pretraining.config import ConfigError, RunConfig, TrainConfig
from electra_detect.training.pretraining.errors import CheckpointError
from electra_detect.training.pretraining.model import ElectraPretrainingModel

RUN_CONFIG_FILE = "run_config.json"
# What the trainer writes into the run dir through a temp copy (fileio's atomic writers).
ORPHAN_OUTPUTS = ("discriminator", "generator", "mlm", "summary.json", RUN_CONFIG_FILE, "metrics.jsonl")


def check_out_dir(out_dir: Path, resume: bool, overwrite: bool) -> None:
    """Refuse to resume nothing or to start over a run unless told (``overwrite`` removes that run dir)."""
    ckpt_dir = out_dir / "checkpoints"
    has_ckpt = ckpt_dir.exists() and any(ckpt_dir.glob("step_*"))
    if resume and not has_ckpt:
        raise CheckpointError(f"nothing to resume: {ckpt_dir} holds no checkpoint")
    if not resume and has_ckpt and overwrite:
        # only a run directory is ever removed: it holds our checkpoints (and nothing else is touched)
        shutil.rmtree(out_dir)
    elif not resume and has_ckpt:
        raise CheckpointError(f"{out_dir} already holds a run; pass --resume to continue it, "
                              f"--overwrite to start it again, or choose another --out")


def clear_interrupted_saves(out_dir: Path) -> None:
    """A save killed midway left temp copies behind: clear them before anything reads or saves."""
    removed = remove_orphans(out_dir / "checkpoints", ORPHAN_OUTPUTS)
    if removed:
        print(f"removed {len(removed)} unfinished checkpoint/output temp files from an interrupted save: "
              f"{', '.join(removed[:5])}{' ...' if len(removed) > 5 else ''}", file=sys.stderr)


def write_run_config(out_dir: Path, config: RunConfig) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out_dir / RUN_CONFIG_FILE, config.to_dict())


def log_metrics(out_dir: Path, row: dict[str, Any]) -> None:
    """Append one row to metrics.jsonl; NaN (a metric the objective does not have) is written as null."""
    clean = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
    with open(out_dir / "metrics.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(clean) + "\n")


def trim_metrics(out_dir: Path, step: int) -> None:
    """On resume, drop rows logged after the checkpoint so the curve continues without overlap."""
    path = out_dir / "metrics.jsonl"
    if not path.exists():
        return
    rows = [line for line in path.read_text().splitlines() if line.strip()]
    kept = [line for line in rows if json.loads(line)["step"] <= step]
    if len(kept) != len(rows):
        atomic_write_text(path, "".join(line + "\n" for line in kept))


def export(out_dir: Path, model: ElectraPretrainingModel, tokenizer: Any, summary: dict[str, Any]) -> None:
    """Write discriminator/ and generator/ (MLM objectives add mlm/: the discriminator encoder with its MLM
    head) as HF directories with the tokenizer, then summary.json, each atomically."""
    for name, module in model.exportable_modules().items():
        def fill(tmp: Path, module: Any = module) -> None:
            module.save_pretrained(str(tmp), safe_serialization=True)
            tokenizer.save_pretrained(str(tmp))
        atomic_write_dir(out_dir / name, fill)
    atomic_write_json(out_dir / "summary.json", summary)


def load_run_config(out_dir: Path) -> RunConfig:
    path = Path(out_dir) / RUN_CONFIG_FILE
    if not path.exists():
        raise ConfigError(f"{out_dir} has no {RUN_CONFIG_FILE}; it is not a run directory")
    return RunConfig.from_dict(json.loads(path.read_text()))


# Continued pre-training's peak rate unless one is given: at the from-scratch 1e-3 a warm-started discriminator
# collapsed to "original" everywhere and its encoder fell below the untouched one (docs/warmstart.md, lever-lr1e3).
CONTINUED_LR = 3e-4


def start_from(config: RunConfig, source: Path | str, gen_layers: int = 0) -> RunConfig:
    """Continued pre-training (``--init-from``): the source's model settings and tokenizer, the rest from ``config``
    (its learning rate ``CONTINUED_LR`` where ``config`` kept the from-scratch default; ``--lr`` still wins).

    ``source``: our run or shipped model directory, or a published encoder (a folder or a short name such as
    ``minilm``: training/pretraining/encoders.py), whose shape, tokenizer and weights start the discriminator."""
    from electra_detect.training.pretraining import encoders

    if config.train.lr == TrainConfig().lr:
        config.train.lr = CONTINUED_LR
    if not encoders.is_run_dir(Path(source)):
        folder = encoders.resolve_encoder(source)
        if encoders.is_run_dir(folder):
            return start_from(config, folder)
        config.model = encoders.encoder_model_config(folder, gen_layers)
        config.data.lowercase = True  # ignored with a given tokenizer: its own normaliser decides
        config.data.tokenizer = str(folder.resolve())
        config.train.init_from = str(folder.resolve())
        return config
    source = Path(source)
    origin = load_run_config(source)
    for part in ("generator", "discriminator"):
        if not (source / part / "config.json").exists():
            raise ConfigError(f"{source} has no exported {part}/; start from a finished run or a shipped model")
    config.model = origin.model
    config.data.lowercase = origin.data.lowercase
    config.data.tokenizer = str((source / "discriminator").resolve())  # absolute: a resumed run finds it again
    config.train.init_from = str(source.resolve())
    return config
