"""One typed run configuration: model preset, data and trainer settings.

Why: DESIGN.md's "configs are data" rule. The same dataclasses are read from TOML,
overridden from the CLI, written into the run dir, and compared on ``--resume`` so a
checkpoint is never silently continued under different settings.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from transformers import ElectraConfig


class ConfigError(ValueError):
    """A configuration value is invalid or unknown."""


# Discriminator shapes. ``small`` is the paper's ELECTRA-Small; ``tiny`` is a CPU preset;
# ``micro`` exists only so the test-suite trains in seconds.
PRESETS: dict[str, dict[str, int]] = {
    "micro": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, embedding_size=32,
                  intermediate_size=64, max_position_embeddings=64),
    "tiny": dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=2, embedding_size=128,
                 intermediate_size=512, max_position_embeddings=128),
    "small": dict(hidden_size=256, num_hidden_layers=12, num_attention_heads=4, embedding_size=128,
                  intermediate_size=1024, max_position_embeddings=512),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, embedding_size=768,
                 intermediate_size=3072, max_position_embeddings=512),
}


@dataclass
class ModelConfig:
    """Discriminator preset plus the generator's relative size."""

    preset: str = "tiny"
    vocab_size: int = 16000
    gen_fraction: float = 0.25  # generator width relative to the discriminator (paper: 1/4 for Small)
    tie_all: bool = False  # gen_fraction == 1.0 only: share the whole encoder, as the paper's tied variant
    dropout: float = 0.1

    def validate(self) -> None:
        if self.preset not in PRESETS:
            raise ConfigError(f"unknown preset {self.preset!r}; choose one of {sorted(PRESETS)}")
        if not 0.0 < self.gen_fraction <= 1.0:
            raise ConfigError(f"gen_fraction must be in (0, 1], got {self.gen_fraction}")
        if self.tie_all and self.gen_fraction != 1.0:
            raise ConfigError("tie_all needs gen_fraction = 1.0 (generator and discriminator of one size)")
        if self.vocab_size < 100:
            raise ConfigError(f"vocab_size must be at least 100, got {self.vocab_size}")

    def discriminator_config(self, vocab_size: int | None = None) -> ElectraConfig:
        shape = PRESETS[self.preset]
        return ElectraConfig(
            vocab_size=vocab_size or self.vocab_size,
            hidden_dropout_prob=self.dropout,
            attention_probs_dropout_prob=self.dropout,
            **shape,
        )

    def generator_config(self, vocab_size: int | None = None) -> ElectraConfig:
        """Same depth and embedding size; width, heads and FFN scaled by ``gen_fraction``.

        Mirrors ``get_generator_config`` in Google's electra/run_pretraining.py.
        """
        shape = dict(PRESETS[self.preset])
        hidden = max(8, round(shape["hidden_size"] * self.gen_fraction))
        heads = max(1, round(shape["num_attention_heads"] * self.gen_fraction))
        while hidden % heads:
            heads -= 1
        shape.update(hidden_size=hidden, num_attention_heads=heads, intermediate_size=4 * hidden)
        return ElectraConfig(
            vocab_size=vocab_size or self.vocab_size,
            hidden_dropout_prob=self.dropout,
            attention_probs_dropout_prob=self.dropout,
            **shape,
        )


@dataclass
class DataConfig:
    corpus: list[str] = field(default_factory=list)  # files, folders or globs; empty = embedded SOTU corpus
    doc_split: str = "blank"  # "blank": documents end at blank lines; "line": one document per line
    seq_len: int = 128
    lowercase: bool = True
    val_fraction: float = 0.02
    min_val_blocks: int = 8
    cache_dir: str = ""  # default: <out>/../.cache/electra-detect or $ELECTRA_DETECT_CACHE

    def validate(self) -> None:
        if self.doc_split not in ("blank", "line"):
            raise ConfigError(f"doc_split must be 'blank' or 'line', got {self.doc_split!r}")
        if self.seq_len < 8:
            raise ConfigError(f"seq_len must be at least 8, got {self.seq_len}")
        if not 0.0 < self.val_fraction < 0.5:
            raise ConfigError(f"val_fraction must be in (0, 0.5), got {self.val_fraction}")


@dataclass
class TrainConfig:
    objective: str = "electra"  # training/objectives.py: electra, electra15, bert_mlm, replace_mlm, ...
    mlm_first_steps: int = 0  # two-stage option: generator MLM only for this many steps, then ELECTRA
    batch_size: int = 32  # sequences per step per process (before accumulation)
    grad_accum: int = 1
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup_steps: int = 100
    max_steps: int = 2000
    max_minutes: float = 0.0  # 0 = no time budget
    clip_norm: float = 1.0
    disc_weight: float = 50.0  # lambda in L_MLM + lambda * L_Disc
    mask_prob: float = 0.15
    keep_original_prob: float = 0.0  # 0.15 = the reference code's 85/15 [MASK]/keep split
    max_predictions: int = 0  # cap on masked positions per sequence; 0 = no cap
    temperature: float = 1.0  # generator sampling temperature
    seed: int = 0
    log_every: int = 10
    eval_every: int = 200
    eval_batches: int = 8
    save_every: int = 500
    keep_last: int = 2
    bf16: bool = True  # autocast to bf16 on CUDA only
    threads: int = 0  # torch intra-op threads on CPU; 0 = torch default

    def validate(self) -> None:
        positive = ("batch_size", "grad_accum", "max_steps", "log_every", "eval_every", "save_every", "keep_last")
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0.0 < self.mask_prob < 1.0:
            raise ConfigError(f"mask_prob must be in (0, 1), got {self.mask_prob}")
        if not 0.0 <= self.keep_original_prob < 1.0:
            raise ConfigError(f"keep_original_prob must be in [0, 1), got {self.keep_original_prob}")
        if self.temperature <= 0:
            raise ConfigError(f"temperature must be positive, got {self.temperature}")
        if self.lr <= 0:
            raise ConfigError(f"lr must be positive, got {self.lr}")
        from training.objectives import OBJECTIVES

        if self.objective not in OBJECTIVES:
            raise ConfigError(f"unknown objective {self.objective!r}; available: {', '.join(OBJECTIVES)}")
        if self.mlm_first_steps < 0:
            raise ConfigError(f"mlm_first_steps must be >= 0, got {self.mlm_first_steps}")
        if self.mlm_first_steps and self.objective != "electra":
            raise ConfigError("mlm_first_steps (two-stage training) needs objective 'electra'")
        if self.mlm_first_steps and self.mlm_first_steps >= self.max_steps:
            raise ConfigError(f"mlm_first_steps ({self.mlm_first_steps}) must be below max_steps ({self.max_steps})")


@dataclass
class RunConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def validate(self) -> RunConfig:
        self.model.validate()
        self.data.validate()
        self.train.validate()
        if self.train.mlm_first_steps and self.model.tie_all:
            raise ConfigError("two-stage training (mlm_first_steps) freezes the generator in stage 2, "
                              "so it cannot share the whole encoder (tie_all)")
        if self.data.seq_len > PRESETS[self.model.preset]["max_position_embeddings"]:
            raise ConfigError(
                f"seq_len {self.data.seq_len} exceeds the {self.model.preset} preset's "
                f"{PRESETS[self.model.preset]['max_position_embeddings']} positions"
            )
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> RunConfig:
        unknown = set(raw) - {"model", "data", "train"}
        if unknown:
            raise ConfigError(f"unknown config sections: {sorted(unknown)}")
        return cls(
            model=_build(ModelConfig, raw.get("model", {}), "model"),
            data=_build(DataConfig, raw.get("data", {}), "data"),
            train=_build(TrainConfig, raw.get("train", {}), "train"),
        )

    @classmethod
    def from_file(cls, path: str | Path) -> RunConfig:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read config {path}: {exc.strerror}") from exc
        try:
            if path.suffix == ".json":
                raw = json.loads(text)
            elif path.suffix in (".yaml", ".yml"):
                raw = yaml.safe_load(text) or {}
            else:
                raw = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, json.JSONDecodeError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot parse config {path}: {exc}") from exc
        if not isinstance(raw, dict):
            raise ConfigError(f"config {path} must be a mapping of sections (model, data, train)")
        return cls.from_dict(raw)

    def override(self, section: str, **values: Any) -> None:
        """Set fields that the CLI gave explicitly (``None`` means 'not given')."""
        target = getattr(self, section)
        for key, value in values.items():
            if value is None:
                continue
            if not hasattr(target, key):
                raise ConfigError(f"unknown {section} setting {key!r}")
            setattr(target, key, value)

    def model_fingerprint(self) -> dict[str, Any]:
        """What a checkpoint must agree on to be resumed (shapes, tokenizer inputs, objective)."""
        fingerprint = {
            "model": dataclasses.asdict(self.model),
            "seq_len": self.data.seq_len,
            "lowercase": self.data.lowercase,
            "objective": self.train.objective,
        }
        if self.train.mlm_first_steps:  # only when set, so checkpoints from before the option still resume
            fingerprint["mlm_first_steps"] = self.train.mlm_first_steps
        return fingerprint


def _build(kind: type, raw: dict[str, Any], section: str) -> Any:
    names = {f.name for f in dataclasses.fields(kind)}
    unknown = set(raw) - names
    if unknown:
        raise ConfigError(f"unknown {section} settings: {sorted(unknown)}")
    return kind(**raw)
