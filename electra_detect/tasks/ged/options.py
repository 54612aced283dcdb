"""What a writer asks of the GED check, one object every front fills (CLI flags, ``/v1/ged`` and ``/v2/check``
fields, the demo's controls, the spaCy component's config) and the task applies (``tasks.ged.check``).

Rules and categories follow LanguageTool's request fields: ``disabledRules``, ``disabledCategories``,
``enabledRules``, ``enabledCategories``, ``enabledOnly`` (then only the enabled rules and categories run) and
``level`` (``picky`` flags more: the lower threshold stored in ``ged.json``). Ids are the rule table's
(``docs/ged_rules.md``), matched in any case; unknown ids are ignored, as LanguageTool ignores them. Light
imports only: a front checks a request before it loads a model.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from electra_detect.errors import GedOptionsError
from electra_detect.model_dir import LEVELS
from electra_detect.tasks.ged.rule_table import Rule


def _ids(values: Iterable[str]) -> frozenset[str]:
    """Ids as given one by one or comma-separated (LanguageTool's form fields), upper-cased, blanks dropped."""
    return frozenset(part.strip().upper() for value in values for part in str(value).split(",") if part.strip())


@dataclass(frozen=True)
class GedOptions:
    """``threshold``: flag words scoring at least this (None: the model's, at ``level``); ``disabled_rules`` ...
    ``enabled_only``: LanguageTool's rule and category switches; ``words``: this request's dictionary words (beside
    the personal dictionary file's); ``suggest``: give the suggestions (the type and message are the same without);
    ``with_rules``: lift the scores of words harper-py flags (``electra_detect.rules``); ``calibrated``: scores and
    threshold in the calibrated space when the model has a calibrator."""

    threshold: float | None = None
    level: str = "default"
    disabled_rules: frozenset[str] = frozenset()
    enabled_rules: frozenset[str] = frozenset()
    disabled_categories: frozenset[str] = frozenset()
    enabled_categories: frozenset[str] = frozenset()
    enabled_only: bool = False
    words: tuple[str, ...] = ()
    suggest: bool = False
    with_rules: bool = False
    calibrated: bool = True
    use_dictionary_file: bool = field(default=True)  # False: only ``words`` (a test, a server without a user)

    def __post_init__(self) -> None:
        for name in ("disabled_rules", "enabled_rules", "disabled_categories", "enabled_categories"):
            object.__setattr__(self, name, _ids(getattr(self, name)))
        object.__setattr__(self, "words", tuple(w.strip() for w in self.words if w and w.strip()))
        if self.level not in LEVELS:
            raise GedOptionsError(f"unknown level {self.level!r}; expected one of {', '.join(LEVELS)}")
        if self.threshold is not None and not 0.0 <= self.threshold <= 1.0:
            raise GedOptionsError(f"threshold must be between 0 and 1, got {self.threshold}")
        if self.enabled_only and not (self.enabled_rules or self.enabled_categories):
            raise GedOptionsError("enabledOnly needs enabledRules or enabledCategories: the rules to keep")
        if self.with_rules and self.level != "default":
            raise GedOptionsError("the rules' threshold is tuned for the default level only: drop picky or the rules")

    def allows(self, rule: Rule) -> bool:
        """Whether a flag under ``rule`` is kept: not disabled (by id or category) and, with ``enabled_only``,
        enabled by id or category."""
        if rule.id in self.disabled_rules or rule.category in self.disabled_categories:
            return False
        if self.enabled_only:
            return rule.id in self.enabled_rules or rule.category in self.enabled_categories
        return True
