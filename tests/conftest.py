"""Shared fixtures: a small synthetic corpus the tests write themselves, and a micro run."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.common.text import ENDINGS, OBJECTS, SUBJECTS, VERBS, synthetic_text  # noqa: F401 (tests import them from here)
from electra_detect.training.pretraining.config import PAPER_MODEL, RunConfig


@pytest.fixture(scope="session", autouse=True)
def _onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Exports made on first use go to a session temp dir, never to the user's ~/.cache (one per session: each
    micro model is exported once). A test wanting an empty cache sets XDG_CACHE_HOME itself."""
    import os

    saved = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield Path(os.environ["XDG_CACHE_HOME"])
    if saved is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = saved


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text(synthetic_text(600), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


def micro_config(corpus: Path, cache: Path, paper: bool = False, **train: object) -> RunConfig:
    """The default recipe at micro size; ``paper=True``: the paper's ELECTRA model (``--paper-recipe``)."""
    config = RunConfig()
    if paper:
        config.override("model", **PAPER_MODEL)
    config.model.preset = "micro"
    config.model.vocab_size = 200
    config.data.corpus = [str(corpus)]
    config.data.seq_len = 32
    config.data.cache_dir = str(cache)
    config.train.batch_size = 8
    config.train.max_steps = 20
    config.train.warmup_steps = 5
    config.train.log_every = 1
    config.train.eval_every = 10
    config.train.eval_batches = 2
    config.train.save_every = 10
    config.train.lr = 2e-3
    config.train.threads = 1
    for key, value in train.items():
        setattr(config.train, key, value)
    return config


@pytest.fixture(scope="session")
def micro_run(tmp_path_factory: pytest.TempPathFactory, corpus_file: Path, cache_dir: Path) -> Path:
    """A finished micro pre-training run (discriminator/, generator/, checkpoints, metrics)."""
    from electra_detect.training.pretraining.trainer import Trainer

    out = tmp_path_factory.mktemp("runs") / "micro"
    Trainer(micro_config(corpus_file, cache_dir, max_steps=30), out, show_progress=False).run()
    return out


@pytest.fixture(scope="session")
def micro_paper_run(tmp_path_factory: pytest.TempPathFactory, corpus_file: Path, cache_dir: Path) -> Path:
    """The same, with the paper's model: an ``ElectraForPreTraining`` discriminator, as Google releases them."""
    from electra_detect.training.pretraining.trainer import Trainer

    out = tmp_path_factory.mktemp("runs") / "micro_paper"
    Trainer(micro_config(corpus_file, cache_dir, paper=True, max_steps=30), out, show_progress=False).run()
    return out


@pytest.fixture()
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "electra-detect" / "onnx"


@pytest.fixture()
def run_copy(micro_run: Path, tmp_path: Path) -> Path:
    """A run of its own: tests that calibrate or export must not change the shared micro run."""
    return Path(shutil.copytree(micro_run / "discriminator", tmp_path / "model"))
