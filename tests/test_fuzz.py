"""Every input path fuzzed (hypothesis): a reader returns its records or raises its own error type with one line.

``FUZZ_EXAMPLES`` examples per target here (bounded, for ``make test``); ``benchmarks/robustness/fuzz.py`` runs 10,000
each.
Each failure the fuzzers found is kept below as a regression example.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402

from benchmarks.robustness.fuzz_targets import check, context_for, targets  # noqa: E402

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "60"))
TARGETS = targets()


@pytest.fixture(scope="module")
def fuzz_context(request: pytest.FixtureRequest) -> Any:
    """What a target needs, built once: spaCy's sentence splitter, ERRANT, a Detector on the micro run."""
    built: dict[str, Any] = {}

    def need(what: str) -> dict[str, Any]:
        if what and what not in built:
            if what in ("nlp", "errant"):
                pytest.importorskip({"nlp": "spacy", "errant": "errant"}[what])
            model = request.getfixturevalue("micro_run") if what == "detector" else ""
            built.update(context_for(what, model))
        return built

    return need


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_fuzzed_input_is_read_or_rejected_in_one_line(name: str, tmp_path: Path, fuzz_context: Any) -> None:
    target = TARGETS[name]
    context = fuzz_context(target.needs)

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(target.strategy)
    def run(example: Any) -> None:
        check(target, example, tmp_path, context)

    run()


DEEP = b"[" * 5000 + b"]" * 5000  # json and yaml recurse once per level: a RecursionError, not a parse error
REGRESSIONS: list[tuple[str, Any, str]] = [  # (target, an example the fuzzers found, what must come of it)
    ("config", ("run.yaml", b"a: [b"), "rejected"),  # YAML's message spans lines
    ("config", ("run.toml", b"\xe8"), "rejected"),  # not UTF-8
    ("config", ("run.json", DEEP), "rejected"),
    ("config", ("run.yaml", DEEP), "rejected"),
    ("config", ("run.json", b'{"model": [[1]]}'), "rejected"),  # a section that is not a table
    ("config", ("run.json", b'{"model": null}'), "rejected"),
    ("config", ("run.json", b'{"train": {"lr": "fast"}}'), "rejected"),  # a setting of the wrong type
    ("config", ("run.json", b'{"train": {"max_steps": 1.5}}'), "rejected"),
    ("config", ("run.json", b'{"train": {"lr": 0.001, "max_steps": 10}}'), "accepted"),
    ("nbest-mlm-json", DEEP, "rejected"),
    ("nbest-jsonl", DEEP, "rejected"),
    ("nbest-auto", ("nbest.txt", b"{" + DEEP), "rejected"),
    ("bea-json", DEEP, "rejected"),
    ("bea-json", b'{"text": "\\ud800", "edits": []}', "rejected"),  # spaCy's UnicodeEncodeError before
    ("nbest-jsonl", b'{"id": 1, "hyps": [{"text": "a\\udfff"}]}', "rejected"),
    ("detector-score", ["fine", "a\ud800b"], "rejected"),  # a lone surrogate: the tokenizer's TypeError before
    ("detector-score", ["one line of a megabyte " * 45_000, ""], "accepted"),  # 1 MB: windows, not one sequence
    ("text-file", ("one line of a megabyte " * 43_000).encode(), "accepted"),  # 989,000 characters
    ("text-file", ("one line of a megabyte " * 45_000).encode(), "rejected"),  # over the 1,000,000 line limit
]


@pytest.mark.parametrize(("name", "example", "outcome"), REGRESSIONS)
def test_fuzz_regressions(name: str, example: Any, outcome: str, tmp_path: Path, fuzz_context: Any) -> None:
    target = TARGETS[name]
    assert check(target, example, tmp_path, fuzz_context(target.needs)) == outcome


def test_nbest_string_pattern_admits_only_what_the_reader_parses() -> None:
    """The server's schema pattern for the one-string n-best form (schemathesis generates from it): every string
    it admits parses into hypotheses with in-range scores; the server rejects the rest with that same regex."""
    import re

    from hypothesis import strategies as st

    pytest.importorskip("fastapi")
    from benchmarks.robustness.fuzz_targets import hypothesis_lines
    from electra_detect.app.http.schemas import NBEST_LINES
    from electra_detect.tasks.rerank.nbest import parse_hypothesis_lines

    @settings(max_examples=EXAMPLES * 5, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.from_regex(NBEST_LINES) | hypothesis_lines | st.text(max_size=40))
    def run(text: str) -> None:
        if re.search(NBEST_LINES, text):
            hyps = parse_hypothesis_lines(text)
            assert hyps and all(score is None or abs(score) < 1e9 for _, score in hyps)

    run()
