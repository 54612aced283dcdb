"""GED fine-tuning keeps the discriminator format and learns what the labels say."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from electra_detect.detector import Detector
from electra_detect.tasks.ged import GedSentence
from electra_detect.training.ged_finetune import FinetuneConfig, corpus_sentences, finetune, synthetic_examples
from tests.conftest import synthetic_text


def test_finetuned_model_learns_the_labelled_word(tmp_path: Path, micro_run: Path) -> None:
    sentences = [s.split() for s in synthetic_text(80, seed=5).replace(".", " .").split(" .") if s.strip()]
    train = [GedSentence(tokens, [int(t == "house") for t in tokens], [[] for _ in tokens]) for tokens in sentences]
    assert sum(sum(s.labels) for s in train) > 5
    dev = [s for s in train if sum(s.labels)][:10] + [s for s in train if not sum(s.labels)][:20]
    summary = finetune(micro_run, tmp_path / "ged", train, dev=dev,
                       config=FinetuneConfig(epochs=8, batch_size=16, lr=3e-3), show_progress=False)
    assert summary["last_loss"] < summary["first_loss"]
    detector = Detector.load(tmp_path / "ged")  # still a discriminator dir
    words = detector.score("My sister painted a red house in the morning.")[0].words
    house = next(w.score for w in words if w.word == "house")
    others = max(w.score for w in words if w.word != "house")
    assert house > others, [(w.word, round(w.score, 3)) for w in words]
    saved = json.loads((tmp_path / "ged" / "ged.json").read_text())
    assert 0 < saved["threshold"] < 1 and saved["dev"]["f05"] > 0.5


def test_synthetic_examples_from_a_corpus(corpus_file: Path) -> None:
    clean = corpus_sentences([str(corpus_file)], 50)
    assert len(clean) == 50 and all(4 <= len(s) <= 60 for s in clean)
    examples = synthetic_examples([str(corpus_file)], 50, seed=1)
    assert len(examples) == 50 and any(sum(e.labels) for e in examples)
    assert [e.tokens for e in synthetic_examples([str(corpus_file)], 50, seed=1)] == [e.tokens for e in examples]


def test_ged_train_cli_needs_data(tmp_path: Path, micro_run: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "electra_detect.cli", "ged", "train", "--model", str(micro_run),
                             "--out", str(tmp_path / "x")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "nothing to train on" in result.stderr
    assert not (tmp_path / "x").exists()
