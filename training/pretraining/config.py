"""One typed run configuration: model preset, data and trainer settings.

Why: DESIGN.md's "configs are data" rule. The same dataclasses are read from TOML,
overridden from the CLI, written into the run dir, and compared on ``--resume`` so a
checkpoint is never silently continued under different settings.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from electra_detect.errors import UserError

if TYPE_CHECKING:  # transformers costs seconds to import; a bad flag is reported before it loads
    from transformers import ElectraConfig, ModernBertConfig


class ConfigError(UserError, ValueError):
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


# Each preset's default block length (``--seq-len`` / data.seq_len 0): micro has only 64 positions.
PRESET_SEQ_LEN: dict[str, int] = {"micro": 64, "tiny": 128, "small": 128, "base": 128}


ARCHITECTURES = ("modernbert", "electra")
EMBEDDING_SHARING = ("tied", "gdes", "none")
# The token ids every tokenizer of ours gives its special tokens (training/pretraining/data.py SPECIAL_TOKENS).
PAD_ID, CLS_ID, SEP_ID = 0, 2, 3
# The paper's model settings (ELECTRA-Small's shape ratios), reachable with ``pretrain --paper-recipe``.
PAPER_MODEL: dict[str, Any] = dict(architecture="electra", gen_fraction=0.25, gen_layers=0, gen_heads=0,
                                   embedding_sharing="tied", dropout=0.1, local_window=0)


@dataclass
class ModelConfig:
    """Discriminator preset, encoder family, and the generator's size relative to it.

    The defaults are the recipe the learning study (benchmarks/studies/learning.py) found to leave the
    masked-LM plateau on a CPU; ``--paper-recipe`` (cli) restores the paper's ELECTRA settings.
    """

    preset: str = "tiny"
    vocab_size: int = 16000
    # "modernbert": pre-LN, rotary positions, GeGLU (ModernBertFor{MaskedLM,TokenClassification});
    # "electra": the paper's post-LN BERT encoder (ElectraFor{MaskedLM,PreTraining}).
    architecture: str = "modernbert"
    gen_fraction: float = 1.0  # generator width relative to the discriminator (paper: 1/4 for Small)
    gen_layers: int = 0  # generator depth; 0 = half the discriminator's (DeBERTa-V3), or all of it for electra
    gen_heads: int = 0  # generator attention heads; 0 = the discriminator's, scaled by width, at least 2
    # "tied": one token table trained by both losses (paper; the study's best at our scale); "gdes": the
    # discriminator adds a residual to a stop-gradient copy of the generator's table (DeBERTa-V3); "none".
    embedding_sharing: str = "tied"
    tie_all: bool = False  # gen_fraction == 1.0 only: share the whole encoder, as the paper's tied variant
    dropout: float = 0.0
    # modernbert only: layers that are not global attend to +-window/2 tokens (ModernBERT's local attention);
    # uniform attention over 128 tokens dilutes the neighbours' signal, and local layers leave the plateau early.
    local_window: int = 32  # 0 = every layer global
    global_every: int = 2  # layer i is global when i % global_every == 0 (ModernBERT's rule: layer 0 is global)
    # The discriminator's shape (PRESETS' keys) when it is not a preset's: a warm start from a published encoder
    # (training/pretraining/encoders.py) copies that encoder's; empty = PRESETS[preset].
    shape: dict[str, int] = field(default_factory=dict)

    def discriminator_shape(self) -> dict[str, int]:
        return dict(self.shape or PRESETS[self.preset])

    def validate(self) -> None:
        if self.shape and set(self.shape) != set(PRESETS["tiny"]):
            raise ConfigError(f"model shape needs exactly the keys {sorted(PRESETS['tiny'])}, got {sorted(self.shape)}")
        if not self.shape and self.preset not in PRESETS:
            raise ConfigError(f"unknown preset {self.preset!r}; choose one of {sorted(PRESETS)}")
        if self.architecture not in ARCHITECTURES:
            raise ConfigError(f"unknown architecture {self.architecture!r}; choose one of {list(ARCHITECTURES)}")
        if self.embedding_sharing not in EMBEDDING_SHARING:
            raise ConfigError(f"unknown embedding_sharing {self.embedding_sharing!r}; "
                              f"choose one of {list(EMBEDDING_SHARING)}")
        if not 0.0 < self.gen_fraction <= 1.0:
            raise ConfigError(f"gen_fraction must be in (0, 1], got {self.gen_fraction}")
        if self.local_window < 0 or self.global_every < 1:
            raise ConfigError("local_window must be >= 0 and global_every >= 1")
        if self.gen_layers < 0 or self.gen_heads < 0:
            raise ConfigError("gen_layers and gen_heads must be >= 0 (0 = automatic)")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.tie_all and (self.gen_fraction != 1.0 or self.embedding_sharing != "tied"
                             or self.gen_layers not in (0, self.discriminator_shape()["num_hidden_layers"])):
            raise ConfigError("tie_all needs gen_fraction = 1.0, the full depth and embedding_sharing 'tied' "
                              "(generator and discriminator of one shape)")
        if (self.architecture == "modernbert" and self.embedding_sharing != "none"
                and self.generator_shape()["hidden_size"] != self.discriminator_shape()["hidden_size"]):
            raise ConfigError("a modernbert generator shares its token table only at the discriminator's width: "
                              "use gen_fraction 1.0 (and gen_layers for a smaller generator) or embedding_sharing "
                              "'none'")
        if self.vocab_size < 100 and not self.shape:  # a trained vocabulary; an encoder brings its own
            raise ConfigError(f"vocab_size must be at least 100, got {self.vocab_size}")

    def generator_shape(self) -> dict[str, int]:
        """Width, heads and FFN scaled by ``gen_fraction`` (Google's ``get_generator_config``); depth from
        ``gen_layers``."""
        shape = self.discriminator_shape()
        hidden = max(8, round(shape["hidden_size"] * self.gen_fraction))
        heads = self.gen_heads or max(1, round(shape["num_attention_heads"] * self.gen_fraction))
        if not self.gen_heads and self.architecture == "modernbert":
            heads = max(2, heads)  # one head cannot attend to both neighbours
        while hidden % heads:
            heads -= 1
        layers = self.gen_layers or (shape["num_hidden_layers"] if self.architecture == "electra" or self.tie_all
                                     else max(1, shape["num_hidden_layers"] // 2))
        # an encoder's generator keeps its FFN ratio, so its lowest layers load into the generator
        ffn = round(shape["intermediate_size"] * self.gen_fraction) if self.shape else 4 * hidden
        shape.update(hidden_size=hidden, num_attention_heads=heads, intermediate_size=ffn, num_hidden_layers=layers)
        return shape

    def discriminator_config(self, vocab_size: int | None = None) -> ElectraConfig | ModernBertConfig:
        return self._config(self.discriminator_shape(), vocab_size or self.vocab_size)

    def generator_config(self, vocab_size: int | None = None) -> ElectraConfig | ModernBertConfig:
        return self._config(self.generator_shape(), vocab_size or self.vocab_size)

    def _config(self, shape: dict[str, int], vocab_size: int) -> ElectraConfig | ModernBertConfig:
        from transformers import ElectraConfig, ModernBertConfig

        if self.architecture == "electra":
            return ElectraConfig(vocab_size=vocab_size, hidden_dropout_prob=self.dropout,
                                 attention_probs_dropout_prob=self.dropout, pad_token_id=PAD_ID, **shape)
        # GeGLU's two input projections: 2/3 of the plain FFN width keeps the parameter count.
        ffn = max(16, round(shape["intermediate_size"] * 2 / 3 / 16) * 16)
        config = ModernBertConfig(
            vocab_size=vocab_size, hidden_size=shape["hidden_size"], intermediate_size=ffn,
            num_hidden_layers=shape["num_hidden_layers"], num_attention_heads=shape["num_attention_heads"],
            max_position_embeddings=shape["max_position_embeddings"],
            global_attn_every_n_layers=self.global_every if self.local_window else 1,
            local_attention=self.local_window or shape["max_position_embeddings"],
            attention_dropout=self.dropout, embedding_dropout=self.dropout, mlp_dropout=self.dropout,
            pad_token_id=PAD_ID, cls_token_id=CLS_ID, sep_token_id=SEP_ID, bos_token_id=CLS_ID, eos_token_id=SEP_ID,
            reference_compile=False, tie_word_embeddings=True, num_labels=1,
        )
        config._attn_implementation = "sdpa"
        return config


@dataclass
class DataConfig:
    corpus: list[str] = field(default_factory=list)  # files, folders or globs; empty = embedded SOTU corpus
    doc_split: str = "blank"  # "blank": documents end at blank lines; "line": one document per line
    seq_len: int = 0  # block length in tokens; 0 = the model preset's (PRESET_SEQ_LEN: 128, micro 64)
    lowercase: bool = True
    val_fraction: float = 0.02
    min_val_blocks: int = 8
    cache_dir: str = ""  # tokenizer + token cache; empty = $ELECTRA_DETECT_CACHE or ~/.cache/electra-detect
    tokenizer: str = ""  # an existing tokenizer directory to tokenize with; empty = train one on the corpus

    def validate(self) -> None:
        if self.doc_split not in ("blank", "line"):
            raise ConfigError(f"doc_split must be 'blank' or 'line', got {self.doc_split!r}")
        if self.seq_len != 0 and self.seq_len < 8:  # 0: the model preset's
            raise ConfigError(f"seq_len must be at least 8 (or 0: the preset's), got {self.seq_len}")
        if not 0.0 < self.val_fraction < 0.5:
            raise ConfigError(f"val_fraction must be in (0, 0.5), got {self.val_fraction}")


@dataclass
class TrainConfig:
    objective: str = "electra"  # training/pretraining/objectives.py: electra, electra15, bert_mlm, replace_mlm, ...
    # two-stage option: generator MLM only for this many steps, then ELECTRA with the generator encoder frozen
    # (objectives.schedule)
    mlm_first_steps: int = 0
    init_from: str = ""  # a run or model directory whose weights start this run (fresh optimizer and warm-up)
    batch_size: int = 32  # sequences per step per process (before accumulation)
    grad_accum: int = 1
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup_steps: int = 100
    max_steps: int = 2000
    max_minutes: float = 0.0  # 0 = no time budget
    clip_norm: float = 1.0
    # "per_module": the generator and the discriminator are clipped each to clip_norm; one global clip (the paper's)
    # lets the 50x-weighted discriminator gradient shrink the generator's update every step.
    clip_scope: str = "per_module"
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
        if self.clip_scope not in ("per_module", "global"):
            raise ConfigError(f"clip_scope must be 'per_module' or 'global', got {self.clip_scope!r}")
        if self.lr <= 0:
            raise ConfigError(f"lr must be positive, got {self.lr}")
        from electra_detect.training.pretraining.objectives import OBJECTIVES

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
        positions = self.model.discriminator_shape()["max_position_embeddings"]
        if self.seq_len() > positions:
            raise ConfigError(f"seq_len {self.seq_len()} exceeds the {self.model.preset} model's {positions} positions")
        return self

    def seq_len(self) -> int:
        """The block length: data.seq_len, or the preset's own when it is 0 (not given)."""
        return self.data.seq_len or PRESET_SEQ_LEN.get(self.model.preset, 128)

    def resolve(self) -> RunConfig:
        """Fill the defaults that depend on other settings (seq_len 0 -> the preset's), so the run dir's
        run_config.json and the checkpoint fingerprint hold the value used."""
        self.data.seq_len = self.seq_len()
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
        except UnicodeDecodeError as exc:
            raise ConfigError(f"config {path} is not UTF-8 text (byte {exc.start})") from None
        try:
            if path.suffix == ".json":
                raw = json.loads(text)
            elif path.suffix in (".yaml", ".yml"):
                raw = yaml.safe_load(text) or {}
            else:
                raw = tomllib.loads(text)
        except RecursionError:  # the JSON and YAML parsers recurse per nesting level
            raise ConfigError(f"cannot parse config {path}: nested too deeply") from None
        except (tomllib.TOMLDecodeError, json.JSONDecodeError, yaml.YAMLError, TypeError) as exc:
            # YAML's messages quote the line over several lines; an unhashable YAML key is a TypeError
            raise ConfigError(f"cannot parse config {path}: {' '.join(str(exc).split())}") from None
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


def _build(kind: type, raw: Any, section: str) -> Any:
    if not isinstance(raw, dict):
        raise ConfigError(f"config section [{section}] must be a table of settings, got {type(raw).__name__}")
    names = {f.name for f in dataclasses.fields(kind)}
    unknown = set(raw) - names
    if unknown:
        raise ConfigError(f"unknown {section} settings: {sorted(unknown)}")
    hints = typing.get_type_hints(kind)
    for name, value in raw.items():
        if not _fits(value, hints[name]):
            raise ConfigError(f"{section}.{name} must be {_type_name(hints[name])}, got {value!r:.60}")
    return kind(**raw)


def _fits(value: Any, hint: Any) -> bool:
    """Whether a value read from a config file has a field's declared type (bool is not a number; int is a float)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is list:
        return isinstance(value, list) and all(_fits(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(_fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items())
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _type_name(hint: Any) -> str:
    origin = typing.get_origin(hint)
    names = {float: "a number", int: "an integer", bool: "true or false", str: "a string"}
    return {list: "a list", dict: "a table"}.get(origin) or names.get(hint, str(hint))
