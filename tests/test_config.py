"""Run configs: TOML/YAML/JSON files, CLI overrides, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from electra_detect.training.pretraining.config import ConfigError, RunConfig


@pytest.mark.parametrize("suffix,text", [
    (".toml", '[model]\npreset = "small"\ngen_layers = 3\n[train]\ndisc_weight = 20.0\n'),
    (".yaml", "model:\n  preset: small\n  gen_layers: 3\ntrain:\n  disc_weight: 20.0\n"),
    (".json", '{"model": {"preset": "small", "gen_layers": 3}, "train": {"disc_weight": 20.0}}'),
])
def test_config_files_and_overrides(tmp_path: Path, suffix: str, text: str) -> None:
    path = tmp_path / f"run{suffix}"
    path.write_text(text)
    config = RunConfig.from_file(path)
    assert config.model.preset == "small" and config.model.gen_layers == 3
    assert config.train.disc_weight == 20.0 and config.train.mask_prob == 0.15
    config.override("train", disc_weight=None, lr=3e-4)  # None = flag not given
    assert config.train.disc_weight == 20.0 and config.train.lr == 3e-4
    assert RunConfig.from_dict(config.to_dict()) == config.validate()


def test_config_errors(tmp_path: Path) -> None:
    bad_key = tmp_path / "a.toml"
    bad_key.write_text("[train]\nlearning_rate = 1.0\n")
    with pytest.raises(ConfigError, match="unknown train settings"):
        RunConfig.from_file(bad_key)
    broken = tmp_path / "b.toml"
    broken.write_text("[train\n")
    with pytest.raises(ConfigError, match="cannot parse"):
        RunConfig.from_file(broken)
    with pytest.raises(ConfigError, match="cannot read"):
        RunConfig.from_file(tmp_path / "missing.toml")
    config = RunConfig()
    config.data.seq_len = 512
    with pytest.raises(ConfigError, match="exceeds"):
        config.validate()


def test_presets_carry_their_own_sequence_length() -> None:
    from electra_detect.training.pretraining.config import PRESET_SEQ_LEN, PRESETS, RunConfig

    for preset in PRESETS:
        config = RunConfig()
        config.model.preset = preset
        config.validate().resolve()  # the defaults fit every preset (micro has 64 positions)
        assert config.data.seq_len == PRESET_SEQ_LEN[preset] <= PRESETS[preset]["max_position_embeddings"]
    assert RunConfig().validate().resolve().data.seq_len == 128  # the default preset (tiny) keeps its 128
    given = RunConfig()
    given.model.preset, given.data.seq_len = "micro", 32
    assert given.validate().resolve().data.seq_len == 32  # a length given is kept
