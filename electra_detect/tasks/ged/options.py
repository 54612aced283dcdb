"""What a writer asks of the GED check, one object every front fills (CLI flags, ``/v1/ged`` and ``/v2/check``
fields, the demo's controls, the spaCy component's config) and the task applies (``tasks.ged.check``).

Rules and categories follow LanguageTool's request fields: ``disabledRules``, ``disabledCategories``,
``enabledRules``, ``enabledCategories``, ``enabledOnly`` (then only the enabled rules and categories run) and
``level`` (``picky`` flags more: the lower threshold stored in ``ged.json``). Ids are the rule table's
(``docs/ged_rules.md``), matched in any case; unknown ids are ignored, as LanguageTool ignores them. Light
imports only: a front checks a request before it loads a model.

Every front builds its options with :func:`build_ged_options`, the one place input becomes a ``GedOptions`` and the
one place a GED threshold's range is checked (a test walks the source for other ``GedOptions(`` calls).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from electra_detect.errors import DetectorError, GedOptionsError
from electra_detect.model_dir import LEVELS, check_threshold
from electra_detect.tasks.ged.rule_table import Rule


def _ids(values: Iterable[str] | str) -> frozenset[str]:
    """Ids as given one by one or comma-separated (LanguageTool's form fields), upper-cased, blanks dropped."""
    values = [values] if isinstance(values, str) else values
    return frozenset(part.strip().upper() for value in values for part in str(value).split(",") if part.strip())


@dataclass(frozen=True)
class GedOptions:
    """``threshold``: flag words scoring at least this (None: the model's, at ``level``); ``disabled_rules`` ...
    ``enabled_only``: LanguageTool's rule and category switches; ``words``: this request's dictionary words (beside
    the personal dictionary file's); ``suggest``: give the suggestions (the type and message are the same without);
    ``with_rules``: lift the scores of words harper-py flags (``electra_detect.rules``); ``ranked``: a tag model's
    one-word replacements re-ranked by scoring every candidate (first suggestions right more often, at about 13x the
    check's cost: ``docs/edit_tags.md``; an untyped or typed model always ranks); ``calibrated``: scores and
    threshold in the calibrated space when the model has a calibrator. Built by :func:`build_ged_options` (which
    checks the threshold); ``__post_init__`` normalises the ids and words and checks that the options agree."""

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
    ranked: bool = False
    calibrated: bool = True
    use_dictionary_file: bool = field(default=True)  # False: only ``words`` (a test, a server without a user)

    def __post_init__(self) -> None:
        for name in ("disabled_rules", "enabled_rules", "disabled_categories", "enabled_categories"):
            object.__setattr__(self, name, _ids(getattr(self, name)))
        object.__setattr__(self, "words", tuple(w.strip() for w in self.words if w and w.strip()))
        if self.level not in LEVELS:
            raise GedOptionsError(f"unknown level {self.level!r}; expected one of {', '.join(LEVELS)}")
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


def build_ged_options(*, threshold: object = None, level: object = "default",
                      disabled_rules: Iterable[str] | str = (), enabled_rules: Iterable[str] | str = (),
                      disabled_categories: Iterable[str] | str = (), enabled_categories: Iterable[str] | str = (),
                      enabled_only: bool = False, words: Iterable[str] = (), suggest: bool = False,
                      with_rules: bool = False, ranked: bool = False, calibrated: bool = True,
                      use_dictionary_file: bool = True,
                      threshold_name: str = "threshold") -> GedOptions:
    """The one constructor of :class:`GedOptions` from a front's input (CLI flags, a request's fields, the demo's
    controls, the spaCy component's config); raises ``GedOptionsError`` with a one-line message naming the fault.

    ``threshold``: None (the model's tuned one at ``level``) or a number in [0, 1] (an int, a float, or a string
    holding one, as a form or a number box gives it; a bool, NaN, an infinity or a huge integer is refused), named
    ``threshold_name`` in the message (``--threshold`` for the CLI); ``level``: ``default`` or ``picky``; the four
    id fields: ids one by one or comma-separated (LanguageTool's form), in any case; ``enabled_only`` needs an
    enabled rule or category; ``words``: the request's own dictionary words; ``suggest``, ``with_rules`` (default
    level only), ``ranked``, ``calibrated``, ``use_dictionary_file``: as :class:`GedOptions` says. Shape:
    ``build_ged_options(threshold=0.4, disabled_categories="STYLE,typos")`` -> ``GedOptions(threshold=0.4,
    disabled_categories=frozenset({"STYLE", "TYPOS"}), ...)``."""
    return GedOptions(threshold=_threshold(threshold, threshold_name), level=str(level),
                      disabled_rules=_ids(disabled_rules), enabled_rules=_ids(enabled_rules),
                      disabled_categories=_ids(disabled_categories), enabled_categories=_ids(enabled_categories),
                      enabled_only=bool(enabled_only), words=(words,) if isinstance(words, str) else tuple(words),
                      suggest=bool(suggest), with_rules=bool(with_rules), ranked=bool(ranked),
                      calibrated=bool(calibrated),
                      use_dictionary_file=bool(use_dictionary_file))


def _threshold(value: object, name: str) -> float | None:
    """A threshold as given (None, a number, or a string holding one) as a float in [0, 1], or GedOptionsError."""
    if value is None:
        return None
    wrong = GedOptionsError(f"{name} must be a number in [0, 1], got {value!r}")
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise wrong
    try:
        number = float(value)
    except (ValueError, OverflowError):  # "abc", an integer of 400 digits
        raise wrong from None
    try:
        return check_threshold(number, name)  # the range: the one check of a flag threshold (model_dir)
    except DetectorError as exc:
        raise GedOptionsError(str(exc)) from None
