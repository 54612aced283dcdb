"""Options several verbs share, each defined once: labelled GED data (``--format``, ``--refs``, ``--combine``,
``--annotator``), the personal dictionary (``--dictionary``), the writer's GED controls (``--level``,
``--disable``, ...: ``ged`` and ``batch ged``; ``--settings``), an n-best list's ``--format`` and the output's
``--output-format`` (``ged``, ``score``) and the flag ``--threshold``. The model and engine options
(``--threads`` too) are in :mod:`electra_detect.cli.engine`. Other layers' verbs (``ged train``, ``calibrate``,
``pos-bias``, ``serve``, ``demo``, ``lsp``, ``rerank train``, ``batch``) add them the same way, so a flag reads
alike on every verb.

Only argparse at the top: the CLI imports every verb module at start-up.
"""

from __future__ import annotations

import argparse
from typing import Any

LABELLED_FORMATS = ("m2", "tsv", "parallel", "bea")
COMBINE_CHOICES = ("first", "any", "majority")
COMBINE_DEFAULT = "first"  # the one default: ged eval and ged train label alike
OUTPUT_FORMATS = ("text", "json", "github")  # electra_detect.cli.output's writers
DICTIONARY_HELP = ("personal dictionary, one word a line, never flagged nor suggested, read again when it changes "
                   "(default: $ELECTRA_DETECT_DICTIONARY, else $XDG_CONFIG_HOME/electra-detect/dictionary.txt when it "
                   "exists; docs/writers.md)")


# The flag threshold's one definition; its help says what the verb does with it. Options that mean something else
# keep their own names or say so in their help (export's parity gate, distill's teacher labels).
THRESHOLD_USES = {
    "flag": "flag words with score >= this (default: the model's tuned ged.json threshold at --level, else 0.5)",
    "highlight": "highlight words with score >= this (default: the model's tuned ged.json threshold, else 0.5)",
    "eval": "flag at this fixed threshold (default: tuned on --tune-on/--split, else the model's ged.json, else 0.5)",
    "report": "flag threshold (default: the model's ged.json, else 0.5)",
    "slider": "the slider's starting value (default: the model's ged.json threshold, else 0.5)",
}


def add_threshold_arg(p: Any, use: str = "flag") -> None:
    """``--threshold``: the flag threshold, a probability in [0, 1] (range-checked by ``model_dir.check_threshold``,
    through ``build_ged_options`` or ``cli.texts.check_unit_interval``)."""
    p.add_argument("--threshold", type=float, default=None, help=THRESHOLD_USES[use])


def add_labelled_data_args(p: Any, *, format_required: bool = False, annotator: bool = True,
                           format_help: str | None = None) -> None:
    """``--format`` (``args.fmt``; m2 unless ``format_required``), ``--refs`` and ``--combine`` (several corrections
    made one label), and ``--annotator`` (an M2 annotator's edits) where the verb reads M2."""
    p.add_argument("--format", choices=LABELLED_FORMATS, dest="fmt", required=format_required,
                   default=None if format_required else "m2",
                   help=format_help or "labelled data format: m2, token tsv, parallel (source text with --refs, "
                                       "aligned by ERRANT) or bea (BEA-2019 JSON essays, as FCE ships)"
                                       + ("" if format_required else "; default m2"))
    p.add_argument("--refs", nargs="+", default=[], help="correction file(s) for --format parallel")
    p.add_argument("--combine", choices=COMBINE_CHOICES, default=COMBINE_DEFAULT,
                   help=f"how several --refs make one label per token: {COMBINE_DEFAULT} (default); first, the first "
                        "reference's; any, wrong where any reference edits it; majority, where most do")
    if annotator:
        p.add_argument("--annotator", type=int, default=0, help="M2 annotator id whose edits are the labels")


def add_dictionary_arg(p: Any, help: str = DICTIONARY_HELP) -> None:
    """``--dictionary FILE``: the personal dictionary every front reads."""
    p.add_argument("--dictionary", metavar="FILE", help=help)


def check_dictionary_file(path: str | None) -> None:
    """A dictionary named by ``--dictionary`` must be a file (the default one may be missing: then it is empty)."""
    import os

    from electra_detect.errors import CliError

    if path is not None and not os.path.isfile(path):
        raise CliError(f"--dictionary {path}: no such file")


def personal_dictionary(path: str | None) -> Any:
    """The dictionary ``--dictionary`` names (it must exist), else the default one (which may not)."""
    from pathlib import Path

    from electra_detect.tasks.ged.dictionary import PersonalDictionary

    check_dictionary_file(path)
    return PersonalDictionary() if path is None else PersonalDictionary(Path(path))


def add_ged_option_args(p: argparse.ArgumentParser, project_settings: bool = False) -> None:
    """The writer's controls of the GED task (``tasks.ged.options.GedOptions``), as LanguageTool names them;
    ``project_settings``: also ``--settings`` / ``--no-settings``, and ``--level`` unset unless given, so that a
    project's ``.electra-detect.toml`` (:mod:`electra_detect.project_settings`) fills what the flags leave."""
    g = p.add_argument_group("rules, categories and dictionary (docs/writers.md, docs/ged_rules.md)")
    g.add_argument("--disable", action="append", default=[], metavar="RULE",
                   help="switch a rule off (LanguageTool's disabledRules); repeat or comma-separate; unknown ids are "
                        "ignored")
    g.add_argument("--enable", action="append", default=[], metavar="RULE",
                   help="a rule to keep with --enabled-only (enabledRules)")
    g.add_argument("--disable-category", action="append", default=[], metavar="CATEGORY",
                   help="switch a category off: GRAMMAR, TYPOS, PUNCTUATION, CASING, STYLE (disabledCategories)")
    g.add_argument("--enable-category", action="append", default=[], metavar="CATEGORY",
                   help="a category to keep with --enabled-only (enabledCategories)")
    g.add_argument("--enabled-only", action="store_true",
                   help="flag only under the rules and categories given by --enable and --enable-category")
    g.add_argument("--level", choices=("default", "picky"), default=None if project_settings else "default",
                   help="picky flags more: the lower threshold tuned for it (ged.json \"levels\"); default: the "
                        "project settings' level, else default" if project_settings else
                        "picky flags more: the lower threshold tuned for it (ged.json \"levels\")")
    add_dictionary_arg(g)
    g.add_argument("--word", action="append", default=[], metavar="WORD",
                   help="a word to take as right, beside the dictionary's; repeat for more")
    if project_settings:
        from electra_detect.project_settings import SETTINGS_NAME  # light: tomllib, pathlib

        s = g.add_mutually_exclusive_group()
        s.add_argument("--settings", metavar="FILE",
                       help=f"the project settings file (default: the nearest {SETTINGS_NAME} upward from the working "
                            "directory, not past a folder holding .git): level, disabled-rules, disabled-categories, "
                            "words, dictionary; a flag given overrides its setting, --word adds to its words "
                            "(docs/ci.md)")
        s.add_argument("--no-settings", action="store_true", help=f"read no {SETTINGS_NAME}")


def project_settings(args: argparse.Namespace) -> Any:
    """The project settings the flags choose (``--settings FILE``, else the file found from the working directory,
    none with ``--no-settings``), or None."""
    from electra_detect.project_settings import find_project_settings, read_project_settings

    if getattr(args, "no_settings", False):
        return None
    if getattr(args, "settings", None):
        return read_project_settings(args.settings)
    return find_project_settings(".")


def ged_options(args: argparse.Namespace, settings: Any = None, **fields) -> object:
    """The ``GedOptions`` the flags of :func:`add_ged_option_args` (and ``fields``) ask for, over the project's
    ``settings`` (``ProjectSettings``: what a flag leaves unset)."""
    from electra_detect.tasks.ged.options import build_ged_options

    given = {"level": args.level, "disabled_rules": args.disable, "disabled_categories": args.disable_category,
             "words": args.word}
    if settings is not None:
        given = settings.ged_fields(**given)
    return build_ged_options(threshold=getattr(args, "threshold", None), level=given["level"] or "default",
                             disabled_rules=given["disabled_rules"], enabled_rules=args.enable,
                             disabled_categories=given["disabled_categories"],
                             enabled_categories=args.enable_category, enabled_only=args.enabled_only,
                             words=given["words"], threshold_name="--threshold", **fields)


def add_output_format_arg(p: argparse.ArgumentParser, formats: tuple[str, ...] = OUTPUT_FORMATS) -> None:
    """``--output-format`` (``args.output_format``): text (the default, terminal or not), json (JSON lines), github
    (workflow annotations), as far as the verb writes them."""
    described = {"text": "text (default): for reading, coloured on a terminal unless NO_COLOR is set",
                 "json": "json: one JSON object a line", "github": "github: GitHub Actions annotations"}
    p.add_argument("--output-format", choices=formats, default="text", dest="output_format",
                   help="; ".join(described[f] for f in formats))


def add_nbest_format_arg(p: argparse.ArgumentParser, flag: str = "--format", dest: str = "fmt") -> None:
    """An n-best list's format (``rerank``, ``rerank train``): auto (by its content) unless given."""
    from electra_detect.tasks.rerank.nbest import FORMATS

    p.add_argument(flag, choices=FORMATS, default="auto", dest=dest,
                   help="n-best format: auto (default: by the content), or one of " + ", ".join(
                       f for f in FORMATS if f != "auto"))
