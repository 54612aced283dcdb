"""The BLiMP benchmark's pieces: the Kneser-Ney 5-gram baseline and the end-to-end script on tiny data."""

from __future__ import annotations

import importlib.util
import json
import math
import random
from pathlib import Path

import pytest

from tests.conftest import synthetic_text


def _load(name: str):
    return importlib.import_module({"ngram": "benchmarks.common.ngram", "blimp": "benchmarks.quality.blimp"}[name])


def test_kneser_ney_is_a_distribution_and_prefers_seen_order() -> None:
    ngram = _load("ngram")
    lm = ngram.KneserNeyLM(5).fit(ngram.text_sentences(synthetic_text(50, seed=1).splitlines()))
    ids = list(range(1, len(lm.vocab)))  # every predictable word (not <s>)
    the, farmer = lm.vocab["the"], lm.vocab["farmer"]
    for history in [(), (0,), (the,), (0, the, farmer), (farmer, farmer, the, the)]:
        total = sum(math.exp(lm.word_logprob(history, w)) for w in ids) + math.exp(lm.word_logprob(history, None))
        assert total == pytest.approx(1.0, abs=1e-9)
    assert lm.sentence_logprob("The farmer saw a red house yesterday.") > \
        lm.sentence_logprob("Farmer the a saw house red yesterday.")
    assert math.isfinite(lm.sentence_logprob("Zebras quietly juggle."))  # unknown words get the uniform share
    with pytest.raises(ValueError):
        ngram.KneserNeyLM(3).fit([])


def _fake_blimp(directory: Path) -> None:
    """Two sets of minimal pairs from the test grammar: the bad sentence swaps two words."""
    rng = random.Random(0)
    sentences = [s.strip() for s in synthetic_text(40, seed=7).replace("\n", " ").split(".") if s.strip()]
    directory.mkdir()
    for uid in ("swap_set", "other_set"):
        with (directory / f"{uid}.jsonl").open("w", encoding="utf-8") as handle:
            for i in range(8):
                words = rng.choice(sentences).split()
                bad = words[:]
                bad[0], bad[2] = bad[2], bad[0]
                handle.write(json.dumps({"sentence_good": " ".join(words) + ".", "sentence_bad": " ".join(bad) + ".",
                                         "UID": uid, "pairID": str(i)}) + "\n")
    (directory.parent / "ref.jsonl").write_text(json.dumps({"UID": "swap_set", "ngram": 0.6, "gpt2": 0.9}) + "\n",
                                                encoding="utf-8")


def test_blimp_script_end_to_end(micro_run: Path, corpus_file: Path, tmp_path: Path,
                                 capsys: pytest.CaptureFixture) -> None:
    blimp = _load("blimp")
    _fake_blimp(tmp_path / "blimp")
    out = tmp_path / "results"
    assert blimp.main(["--model", str(micro_run), "--blimp-dir", str(tmp_path / "blimp"), "--reference",
                       str(tmp_path / "ref.jsonl"), "--corpus", str(corpus_file), "--pll-per-set", "3",
                       "--out-dir", str(out), "--tag", "_t"]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    result = json.loads((out / "blimp_t.json").read_text(encoding="utf-8"))
    assert (out / "blimp_t.md").exists() and (out / "blimp_t.png").stat().st_size > 1000
    assert result["pairs"] == 16 and set(result["per_set"]) == {"swap_set", "other_set"}
    # The 5-gram trained on the grammar's own text must see that swapped words are wrong.
    assert line["overall_ngram5_ours"] >= 0.9
    assert 0.0 <= line["overall_electra_sum"] <= 1.0
    assert result["per_set"]["swap_set"]["gpt2"] == 0.9 and "gpt2" not in result["per_set"]["other_set"]
    sub = result["subsample"]
    assert all(row["pairs"] == 3 for row in sub["per_set"].values())
    assert 0.0 <= sub["overall"]["generator_pll"] <= 1.0
    assert result["timing"]["generator_pll"]["sentences"] == 12
    assert "| **overall** |" in (out / "blimp_t.md").read_text(encoding="utf-8")
