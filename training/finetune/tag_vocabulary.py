"""The edit-tag vocabulary: the tags a model learns (each with its ERRANT type) and the inflection table it reads.

:func:`build_vocabulary` keeps the tags seen often enough in the tagged training data (edit_tag_data.py), each with
the majority ERRANT type of its edits; :func:`write_tag_files` writes it (``edit_tags.json``) with the inflection
table (lemminflect's forms, ``inflections.json``) that checking reads instead of lemminflect.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from electra_detect.edit_tags import CASE, DELETE, FORM, FORMS, KEEP, SPELL
from electra_detect.training.finetune.edit_tag_data import TaggedSentence


def tag_types(sentences: Iterable[TaggedSentence]) -> tuple[dict[str, Counter], dict[str, Counter]]:
    """Each tag's ERRANT types over its training edits, and ``$DELETE``'s by the word deleted (of the edits that
    delete: a deletion's type is the deleted word's class, ``U:DET`` for *the*, ``U:PREP`` for *of*)."""
    out: dict[str, Counter] = defaultdict(Counter)
    deleted: dict[str, Counter] = defaultdict(Counter)
    for sentence in sentences:
        for edit in sentence.edits:
            span = range(edit.start, edit.end) if edit.end > edit.start else \
                [edit.start if edit.start < len(sentence.tokens) else len(sentence.tokens) - 1]
            for i in span:
                tag = sentence.tags[i]
                if not tag or tag == KEEP:
                    continue
                if tag == DELETE:  # only real deletions type it: a merge's second word is a replacement's part
                    if edit.type.startswith("U:"):
                        out[tag][edit.type] += 1
                        deleted[sentence.tokens[i].lower()][edit.type] += 1
                    continue
                out[tag][edit.type] += 1
    return out, deleted


MIN_WORD_TYPE = 3  # a deleted word seen fewer times takes $DELETE's own type


def build_vocabulary(sentences: Sequence[TaggedSentence], max_tags: int = 3000, min_count: int = 3
                     ) -> tuple[list[str], dict[str, str], dict[str, int], dict[str, str]]:
    """(tags in channel order, tag -> majority ERRANT type, counts, deleted word -> its deletions' majority type):
    ``$KEEP``, ``$DELETE``, ``$SPELL`` and the g-transformations first, then the commonest other tags seen at least
    ``min_count`` times, ``max_tags`` in all."""
    counts = Counter(t for s in sentences for t in s.tags if t)
    types, deleted = tag_types(sentences)
    fixed = [KEEP, DELETE, SPELL] + sorted(t for t in counts if t.startswith((CASE, FORM)))
    rest = [t for t, n in counts.most_common() if n >= min_count and t not in fixed]
    tags = fixed + rest[:max(0, max_tags - len(fixed))]
    majority = {t: types[t].most_common(1)[0][0] for t in tags if types.get(t)}
    majority.setdefault(SPELL, "R:SPELL")
    majority.setdefault(DELETE, "U:OTHER")
    words = {w: c.most_common(1)[0][0] for w, c in deleted.items() if sum(c.values()) >= MIN_WORD_TYPE}
    return tags, majority, dict(counts), words


def inflection_table(words: Iterable[str]) -> dict[str, Any]:
    """lemminflect's lemmas of ``words`` and every form of those lemmas that a ``$FORM_`` tag may name."""
    import lemminflect

    lemmas: dict[str, list[str]] = {}
    forms: dict[str, dict[str, str]] = {}
    for word in sorted({w.lower() for w in words if w.isalpha()}):
        found = []
        for upos, names in lemminflect.getAllLemmas(word).items():
            if upos not in ("VERB", "AUX", "NOUN", "ADJ"):
                continue
            for lemma in names:
                if lemma not in found:
                    found.append(lemma)
                table = forms.setdefault(lemma, {})
                for tag, options in lemminflect.getAllInflections(lemma, upos=upos).items():
                    if tag in FORMS and options and tag not in table:
                        table[tag] = options[0]  # be's VBD/VBP: chosen by the word at check time
        if found:
            lemmas[word] = found
    return {"lemmas": lemmas, "forms": forms}


def read_vocabulary(model_dir: str | Path) -> tuple[list[str], dict[str, str], dict[str, int], dict[str, str]]:
    """A tag model's vocabulary as :func:`build_vocabulary` gives it (its ``edit_tags.json``)."""
    from electra_detect.edit_tags import TAGS_FILE
    from electra_detect.errors import GedDataError

    try:
        data = json.loads((Path(model_dir) / TAGS_FILE).read_text(encoding="utf-8"))
        return list(data["tags"]), dict(data["types"]), dict(data["counts"]), dict(data.get("deleted_types", {}))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise GedDataError(f"{model_dir} has no readable tag vocabulary ({TAGS_FILE}): {exc}") from None


def write_tag_files(model_dir: str | Path, tags: Sequence[str], types: dict[str, str], counts: dict[str, int],
                    deleted: dict[str, str], words: Iterable[str], source: str) -> None:
    """The vocabulary (``edit_tags.json``: tags, each one's ERRANT type and training count, a deleted word's type,
    where they came from) and the inflection table (``inflections.json``) a tag model's checks read."""
    from electra_detect.edit_tags import INFLECTIONS_FILE, TAGS_FILE
    from electra_detect.fileio import atomic_write_json

    atomic_write_json(Path(model_dir) / TAGS_FILE, {"tags": list(tags), "types": types, "deleted_types": deleted,
                                                    "counts": {t: counts.get(t, 0) for t in tags}, "source": source})
    atomic_write_json(Path(model_dir) / INFLECTIONS_FILE, inflection_table(words))

