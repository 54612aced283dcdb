"""Rules beside the model: harper-py's spans lift the words they touch; the weight is tuned, not guessed."""

from __future__ import annotations

import numpy as np
import pytest

from electra_detect.rules import harper_flagger, lift, tune_rules, with_rules
from electra_detect.tasks.ged.alignment import flags_to_span_labels


def test_spans_mark_the_words_they_touch_and_insertions_the_next_word() -> None:
    words = [(0, 2), (3, 5), (6, 8), (9, 14)]  # "He go to store"
    assert flags_to_span_labels(words, [(3, 5)]).tolist() == [0, 1, 0, 0]
    assert flags_to_span_labels(words, [(9, 9)]).tolist() == [0, 0, 0, 1]  # a missing word before "store"
    assert flags_to_span_labels(words, [(1, 7)]).tolist() == [1, 1, 1, 0]


def test_lift_raises_flagged_words_and_caps_at_one() -> None:
    assert lift(np.array([0.1, 0.9]), np.array([1, 1]), 0.3).tolist() == pytest.approx([0.4, 1.0])


def test_tuning_uses_the_rules_only_when_they_help() -> None:
    rng = np.random.default_rng(0)
    labels = (rng.random(2000) < 0.15).astype(int)
    scores = np.clip(0.3 * labels + rng.random(2000) * 0.7, 0, 1)  # a weak model
    helpful = labels * (rng.random(2000) < 0.6)  # rules that find 60% of the errors and nothing else
    assert tune_rules(labels, scores, helpful).weight > 0
    noise = (rng.random(2000) < 0.5).astype(int)  # rules that flag at random
    assert tune_rules(labels, scores, noise).weight == 0


def test_harper_flags_raw_text() -> None:
    pytest.importorskip("harper")
    flag = harper_flagger()
    (spans,) = flag(["He go to the store yesterday."])
    assert (3, 5) in spans


def test_with_rules_lifts_the_flagged_words_of_scored_text() -> None:
    from electra_detect.scores import TextScores, WordScore

    text = TextScores("He go home", [], [WordScore("He", 0, 2, 0.1), WordScore("go", 3, 5, 0.2),
                                         WordScore("home", 6, 10, 0.1)], 0.0, 0.0)
    (lifted,) = with_rules([text], lambda texts: [[(3, 5)] for _ in texts], 0.5)
    assert [w.score for w in lifted.words] == pytest.approx([0.1, 0.7, 0.1])
    assert text.words[1].score == 0.2  # the input is left as it was


def test_ged_with_rules_needs_a_tuned_setting(tmp_path, micro_run) -> None:
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "electra_detect.cli", "ged", "--engine", "torch", "--model",
                             str(micro_run), "--with-rules", "He go home."], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 2 and "no tuned rules setting" in result.stderr
    assert len(result.stderr.strip().splitlines()[-1]) < 400
