"""`rerank train`: pooled features (numpy = torch), the list losses, the weights' fit, token labels, and a reranker
directory that `rerank` and the server use with its learned weights."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from electra_detect.cli import main
from electra_detect.detector import Detector
from electra_detect.errors import RerankError
from electra_detect.tasks.rerank.listwise import FEATURES, Reranker, pooled_features
from electra_detect.training.finetune.rerank_train import (
    EncodedList,
    ListScorer,
    fit_weights,
    list_loss,
    list_wer,
    pooled,
    token_labels,
)

LISTS = {
    f"u{i}": {"hyp_1": {"score": -10.0, "text": "the farmer saw a red house the the"},
              "hyp_2": {"score": -10.01, "text": "the farmer saw a red house"},
              "hyp_3": {"score": -10.3, "text": "a farmer saw red house"},
              "ref": "the farmer saw a red house"} for i in range(6)
}


def test_pooled_features_numpy_and_torch_agree() -> None:
    logits = torch.tensor([[0.3, -2.0, 4.0, 9.0, 0.0], [1.5, -1.0, 0.0, 0.0, 0.0], [0.0] * 5])
    mask = torch.tensor([[0, 1, 1, 1, 0], [0, 1, 1, 0, 0], [0, 0, 0, 0, 0]])
    words = torch.tensor([3.0, 2.0, 0.0])
    ours = pooled(logits, mask.bool(), words).numpy()
    for row in range(3):
        p = torch.sigmoid(logits[row][mask[row].bool()]).numpy().astype(np.float64)
        assert np.allclose(ours[row], pooled_features(p, int(words[row])), rtol=1e-4, atol=1e-4)  # p is float32
    assert list(pooled_features(np.array([0.9, 0.1]), 2)) == pytest.approx(
        [2, np.log(0.1) + np.log(0.9), (np.log(0.1) + np.log(0.9)) / 2, np.log(0.1), 1.0, 1.0])


def test_mwer_and_softmax_losses_prefer_the_right_hypothesis() -> None:
    errors = torch.tensor([[2.0, 0.0, 1.0]])
    valid = torch.ones(1, 3, dtype=torch.bool)
    words = torch.tensor([6.0])
    right = torch.tensor([[0.0, 3.0, 1.0]])  # the 0-error hypothesis on top
    wrong = torch.tensor([[3.0, 0.0, 1.0]])
    for kind in ("mwer", "softmax"):
        assert list_loss(right, errors, words, valid, torch.tensor(1.0), kind) < \
               list_loss(wrong, errors, words, valid, torch.tensor(1.0), kind)
    padded = torch.tensor([[True, True, False]])  # a padded slot never counts, whatever its total
    assert list_loss(torch.tensor([[0.0, 1.0, 99.0]]), errors, words, padded, torch.tensor(1.0), "mwer") < 0


def test_fit_weights_learns_a_feature_that_predicts_the_errors() -> None:
    rng = np.random.default_rng(0)
    lists, features = [], []
    for _ in range(40):
        errors = rng.integers(0, 4, size=5).astype(float)
        f = rng.normal(size=(5, len(FEATURES)))
        f[:, FEATURES.index("sum")] = -errors + rng.normal(scale=0.1, size=5)  # fluent = few errors
        lists.append(EncodedList([[0]] * 5, [[-1]] * 5, rng.normal(scale=0.01, size=5), np.ones(5), errors, 10))
        features.append(f)
    scorer = ListScorer(torch.nn.Linear(1, 1), 0.01, np.ones(len(FEATURES)))
    before = list_wer(lists, features, dict.fromkeys(FEATURES, 0.0))
    fit_weights(scorer, lists, features, "mwer")
    after = list_wer(lists, features, scorer.raw_weights())
    oracle = sum(item.errors.min() for item in lists) / sum(item.ref_words for item in lists)
    assert after <= oracle + 0.01 and before > after + 0.05
    assert scorer.raw_weights()["sum"] > 0


def test_token_labels_follow_the_words_they_sit_in(micro_run: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(micro_run / "discriminator"))
    ids, labels = token_labels(tokenizer, "the farmers saw it", [0, 1, 0, None])
    pieces = tokenizer.convert_ids_to_tokens(ids)
    assert len(ids) == len(labels) >= 4
    wrong = [piece for piece, label in zip(pieces, labels, strict=True) if label]
    assert wrong and "".join(w.lstrip("#") for w in wrong).lower().startswith("farm")


def test_rerank_train_writes_a_reranker_that_rerank_and_the_server_use(micro_run: Path, tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    lists = tmp_path / "train.json"
    lists.write_text(json.dumps(LISTS), encoding="utf-8")
    out = tmp_path / "reranker"
    assert main(["rerank", "train", str(lists), "--model", str(micro_run), "--out", str(out), "--dev", str(lists),
                 "--lists-per-batch", "3", "--epochs", "1", "--no-progress"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["train_lists"] == 6 and summary["steps"] == 2 and "dev_wer" in summary
    reranker = Reranker.load(out / "discriminator")
    assert reranker is not None and reranker.weights == pytest.approx(summary["weights"])

    assert main(["rerank", str(lists), "--model", str(out), "--engine", "torch", "--out", str(tmp_path / "r.jsonl"),
                 "--no-progress"]) == 0
    run = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert run["scorer"] == "reranker" and run["lm_weight"] == 1.0
    row = json.loads((tmp_path / "r.jsonl").read_text().splitlines()[0])
    detector = Detector.load(out, engine="torch")
    texts = [h["text"] for h in row["hyps"]]
    expected = reranker.lm_scores(detector.score(texts, calibrated=False))
    assert [h["reranker_score"] for h in row["hyps"]] == pytest.approx(expected, abs=1e-5)

    from fastapi.testclient import TestClient

    from electra_detect.app.http.server import create_app

    with TestClient(create_app(detector)) as client:
        response = client.post("/v1/rerank", json={"lists": [[{"text": t, "score": -10.0} for t in texts]]})
    assert response.status_code == 200
    served = {h["text"]: h["reranker_score"] for h in response.json()["results"][0]["hypotheses"]}  # as the CLI
    assert [served[t] for t in texts] == pytest.approx(expected, abs=1e-5)


def test_reranker_file_errors(tmp_path: Path) -> None:
    (tmp_path / "reranker.json").write_text(json.dumps({"weights": {"sum": 1.0, "bogus": 2.0}}))
    with pytest.raises(RerankError, match="unknown features"):
        Reranker.load(tmp_path)
    (tmp_path / "reranker.json").write_text("{not json")
    with pytest.raises(RerankError, match="unreadable"):
        Reranker.load(tmp_path)
    assert Reranker.load(tmp_path / "nothing-here") is None


def test_an_interrupted_rerank_train_resumes_to_the_same_weights(micro_run: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from electra_detect.tasks.rerank.nbest import read_nbest
    from electra_detect.training.finetune import loop, rerank_train

    lists = tmp_path / "train.json"
    lists.write_text(json.dumps(LISTS), encoding="utf-8")
    utts = list(read_nbest(lists))
    config = rerank_train.RerankTrainConfig(epochs=1, lists_per_batch=2, checkpoint_every=1)
    whole = rerank_train.train_reranker(micro_run, tmp_path / "whole", utts, None, config, show_progress=False)

    real_step, calls = loop.fine_tune_step, []  # the one fine-tune loop takes every step

    def dies_on_the_third(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    monkeypatch.setattr(loop, "fine_tune_step", dies_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        rerank_train.train_reranker(micro_run, tmp_path / "cut", utts, None, config, show_progress=False)
    assert (tmp_path / "cut.partial" / "checkpoint.pt").exists() and not (tmp_path / "cut").exists()
    monkeypatch.setattr(loop, "fine_tune_step", real_step)
    resumed = rerank_train.train_reranker(micro_run, tmp_path / "cut", utts, None, config, show_progress=False)
    assert resumed["steps"] == whole["steps"] == 3
    assert resumed["weights"] == pytest.approx(whole["weights"], rel=1e-5)
    assert not (tmp_path / "cut.partial").exists()


def test_make_lists_reuse_fills_the_cache_from_committed_lists(tmp_path):
    """--reuse: an earlier list fills the decode cache when id and reference match; nothing else is written."""
    import importlib.util
    script = Path(__file__).parents[1] / "benchmarks" / "quality" / "asr" / "make_lists.py"
    spec = importlib.util.spec_from_file_location("make_lists", script)
    make_lists = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_lists)
    earlier = {"train-emma-00001": {"hyp_1": {"text": "she said so", "score": -1.0},
                                    "hyp_2": {"text": "she sad so", "score": -2.0}, "ref": "she said so"},
               "train-emma-00002": {"hyp_1": {"text": "", "score": 0.0}, "ref": "no words"}}
    lists = tmp_path / "train.json"
    lists.write_text(json.dumps(earlier))
    jobs = [{"id": "train-emma-00001", "sentence": "She said so.", "cache": str(tmp_path / "a.json")},
            {"id": "train-emma-00002", "sentence": "No words.", "cache": str(tmp_path / "b.json")},
            {"id": "train-emma-00003", "sentence": "Other text.", "cache": str(tmp_path / "c.json")},
            {"id": "train-emma-00001", "sentence": "A changed sentence.", "cache": str(tmp_path / "d.json")}]
    assert make_lists.reuse_decodes(jobs, [lists]) == 2
    assert json.loads((tmp_path / "a.json").read_text()) == [earlier["train-emma-00001"]["hyp_1"],
                                                            earlier["train-emma-00001"]["hyp_2"]]
    assert json.loads((tmp_path / "b.json").read_text()) == []  # an empty decode stays empty in the cache
    assert not (tmp_path / "c.json").exists() and not (tmp_path / "d.json").exists()


def test_refit_on_in_domain_lists_fits_the_weights_again(micro_run: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """--refit-on: the weights are fitted again on other lists (here ones whose references want the longer
    hypothesis), so they move from the trained weights and choose better on those lists; no references: an error."""
    from electra_detect.tasks.rerank.nbest import read_nbest
    from electra_detect.training.finetune import rerank_train

    lists, refit = tmp_path / "train.json", tmp_path / "dev.json"
    lists.write_text(json.dumps(LISTS), encoding="utf-8")
    other = {k: {**v, "ref": v["hyp_1"]["text"]} for k, v in LISTS.items()}
    refit.write_text(json.dumps(other), encoding="utf-8")
    out = tmp_path / "reranker"
    assert main(["rerank", "train", str(lists), "--model", str(micro_run), "--out", str(out), "--linear-only",
                 "--refit-on", str(refit), "--no-progress"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["refit_lists"] == 6 and summary["weights"] != summary["weights_trained"]
    assert Reranker.load(out / "discriminator").weights == pytest.approx(summary["weights"])

    tokenizer_dir = out / "discriminator"
    from transformers import AutoTokenizer

    encoded = rerank_train.encode_lists(AutoTokenizer.from_pretrained(str(tokenizer_dir)), list(read_nbest(refit)), 64)
    scorer = ListScorer(rerank_train.load_discriminator(tokenizer_dir), 1.0, np.ones(len(FEATURES)))
    features = rerank_train.frozen_features(scorer, encoded, 0)
    assert list_wer(encoded, features, summary["weights"]) < list_wer(encoded, features, summary["weights_trained"])

    refit.write_text(json.dumps({k: {h: v[h] for h in v if h != "ref"} for k, v in LISTS.items()}), encoding="utf-8")
    assert main(["rerank", "train", str(lists), "--model", str(micro_run), "--out", str(tmp_path / "x"),
                 "--linear-only", "--refit-on", str(refit), "--no-progress"]) != 0
    assert "no references" in capsys.readouterr().err
