"""Off-the-shelf grammar checkers ("peers") as span flaggers for the GED benchmark.

Each peer takes plain sentences and returns, per sentence, the ``(start, end)`` character offsets (Python ``str``
indices into the text that was passed in) of everything it flags. An edit that only inserts text is returned as an
empty span ``(pos, pos)`` where ``pos`` is the start of the following token (``len(text)`` at the end); the
benchmark maps it to that token. Spans are whitespace-trimmed, de-duplicated and sorted.

Peers (both offline, CPU only, pinned in the benchmark's environment):

* ``harper-py`` -- harper-py 0.2.0, Python bindings for Automattic's Harper 2.13.0, a rule-based English checker in
  Rust. API: ``harper.Linter()`` once, then ``Linter.lint(text, language=Language.PLAINTEXT)`` per text (no batch
  API; a ``Linter`` is not thread-safe). Spans come from ``Lint.span.start`` / ``Lint.span.end``, which are code
  point (``str``) indices, not bytes. A lint whose suggestions are all ``SuggestionKind.INSERT_AFTER`` ("add a comma
  after *However*") becomes the insertion point ``(span.end, span.end)``. Lints whose ``Lint.lint_kind`` is in
  ``exclude_kinds`` (default: ``Readability`` -- e.g. the whole-sentence *LongSentences* lint -- ``Style`` and
  ``Enhancement``) are dropped: they are not grammatical errors.
* ``quire-grammar`` -- quire-grammar 0.3.4 with quire-grammar-model 0.3.2: regex rules plus a GECToR-style token tagger
  (DistilBERT-base-*cased*, ONNX int8, run by onnxruntime on CPU; text is not lower-cased). API: the public
  ``quire_grammar.check(text, disable=...)``, one text per call (the library has no batch API; its model runs each
  text as one batch-1 sequence of <= 60 words). It merges the model's edits with the rule hits (a rule hit wins on
  overlap). Spans come from ``Correction.start`` / ``Correction.end`` (``str`` indices). A model
  ``$APPEND_x`` edit (``Correction.rule_id == "model:append"``, flagged by the library on the word *before* the
  insertion) becomes the insertion point ``(end, end)``; a model ``$DELETE`` span includes trailing spaces, which
  are trimmed. The ``style`` category (filter words, long sentences, ...) is disabled by default. ``threads``
  (default: onnxruntime's own, one intra-op thread per physical core) sets the tagger's thread count, process-wide.
  The weights are read from the installed quire-grammar-model package with ``tokenizers.Tokenizer.from_file`` and
  ``onnxruntime.InferenceSession``: nothing touches the network or the Hugging Face hub, so ``HF_HUB_OFFLINE=1``
  changes nothing. ``check()`` silently falls back to rules only when the model cannot load, so ``QuirePeer``
  checks that the model loaded and raises otherwise.

Whitespace-tokenized input. Benchmark sentences are tokenized ("He go to the store yesterday .", "it 's",
"do n't"), which both checkers read as errors of their own on nearly every sentence: Harper's *Spaces* ("unnecessary
space at the end of the sentence"), *CommaFixes*, *MergeWords* ("do n't") and a spelling lint on the clitic "'s";
quire's *space-before-punctuation* rule. So by default (``detokenize=True``) each peer sees a detokenized copy:
spaces are removed before closing punctuation (``, . ; : ! ? % ) ] }`` and runs of them) and before clitics
(``n't 's 're 've 'll 'm 'd``), after ``( [ { $ £ €``, and inside straight double quotes and curly quotes.
Only spaces are removed -- no other character is changed -- so every flagged span maps back onto the same characters
of the original text. ``"`` is paired left to right, and ``'``, ``-`` and PTB quotes are left alone. Text that is not
tokenized (e.g. "I can't go, sorry.") comes through unchanged, apart from runs of whitespace being collapsed to
one space. ``detokenize=False`` lints the text as given.

``available_peers()`` reports, for each peer, ``"ok"`` or why it cannot be loaded. ``python -m benchmarks.common.peers``
prints the spans found on a few sentences and each peer's throughput.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Protocol, runtime_checkable

Span = tuple[int, int]

__all__ = ["PEERS", "HarperPeer", "Peer", "QuirePeer", "Span", "available_peers", "detokenize", "load_peers"]


@runtime_checkable
class Peer(Protocol):
    """A grammar checker that flags character spans."""

    name: str

    def flag(self, texts: list[str]) -> list[list[tuple[int, int]]]:
        """For each text, the sorted ``(start, end)`` character offsets into that text of what is flagged."""
        ...


# --------------------------------------------------------------------------------------------- detokenization

_CLOSE_PUNCT = re.compile(r"^[.,;:!?%)\]}\u2026]+$")  # no space before
_CLITIC = re.compile(r"^(?:n['\u2019]t|['\u2019](?:s|re|ve|ll|m|d))$", re.IGNORECASE)  # no space before
_OPEN_PUNCT = frozenset({"(", "[", "{", "$", "\u00a3", "\u20ac"})  # no space after
_TOKEN = re.compile(r"\S+")


def detokenize(text: str) -> tuple[str, list[int]]:
    """Join the whitespace tokens of ``text`` with single spaces, dropping the space where the tokenizer split.

    Returns the new text and ``charmap``, of length ``len(new) + 1``: ``charmap[i]`` is the offset in ``text`` of
    character ``i`` of the new text (a joining space maps to the first whitespace character it replaces), and
    ``charmap[len(new)] == len(text)``. Non-space characters are never changed.
    """
    out: list[str] = []
    charmap: list[int] = []
    prev = ""
    quote_open = False
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        if out:
            glue = (
                bool(_CLOSE_PUNCT.match(tok))
                or bool(_CLITIC.match(tok))
                or (tok == '"' and quote_open)
                or tok == "\u201d"
                or prev in _OPEN_PUNCT
                or prev == "\u201c"
                or (prev == '"' and quote_open)  # prev opened a quote
            )
            if not glue:
                out.append(" ")
                charmap.append(charmap[-1] + 1)  # the whitespace right after the previous token
        if tok == '"':
            quote_open = not quote_open
        out.append(tok)
        charmap.extend(range(m.start(), m.end()))
        prev = tok
    charmap.append(len(text))
    return "".join(out), charmap


_detokenize = detokenize  # the peers' ``detokenize`` keyword shadows the function


def _identity(text: str) -> tuple[str, list[int]]:
    return text, list(range(len(text) + 1))


def _map_span(start: int, end: int, seen: str, charmap: list[int]) -> Span:
    """Trim whitespace off ``seen[start:end]`` and map it onto the original text; an empty span becomes the start
    of the next non-space character (the following token)."""
    start, end = max(0, min(start, len(seen))), max(0, min(end, len(seen)))
    while start < end and seen[start].isspace():
        start += 1
    while end > start and seen[end - 1].isspace():
        end -= 1
    if start == end:
        while start < len(seen) and seen[start].isspace():
            start += 1
        pos = charmap[start]
        return pos, pos
    return charmap[start], charmap[end - 1] + 1


def _package_version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


# ---------------------------------------------------------------------------------------------------- harper


class HarperPeer:
    """Harper (harper-py), rule-based, in-process Rust. See the module docstring."""

    name = "harper-py"

    def __init__(
        self,
        *,
        detokenize: bool = True,
        exclude_kinds: Iterable[str] = ("Readability", "Style", "Enhancement"),
        dialect: str = "AMERICAN",
    ) -> None:
        import harper

        self._harper = harper
        self._linter = harper.Linter(harper.Dialect[dialect])  # ~1 s: builds the dictionary; reused
        self._prepare: Callable[[str], tuple[str, list[int]]] = _detokenize if detokenize else _identity
        self.exclude_kinds = frozenset(exclude_kinds)
        self.version = f"harper-py {_package_version('harper-py')}"

    def flag(self, texts: list[str]) -> list[list[tuple[int, int]]]:
        from electra_detect.rules import harper_spans

        result: list[list[Span]] = []
        for text in texts:  # no batch API
            seen, charmap = self._prepare(text)
            spans = harper_spans(self._linter, self._harper, seen, self.exclude_kinds)
            result.append(sorted({_map_span(start, end, seen, charmap) for start, end in spans}))
        return result


# ----------------------------------------------------------------------------------------------------- quire


def _quire_model_problem() -> str | None:
    """Why quire-grammar's model would not load, or ``None``."""
    try:
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError as e:
        return f"quire-grammar model runtime missing: {e}"
    try:
        import quire_grammar_model
    except ImportError as e:
        return f"quire-grammar-model not installed: {e}"
    if not quire_grammar_model.available():
        return f"quire-grammar-model files missing under {quire_grammar_model.path()}"
    return None


def _set_quire_threads(quire_model: Any, threads: int) -> None:
    """Rebuild quire's cached ONNX session with ``intra_op_num_threads=threads``. The library creates it with
    onnxruntime's defaults (one thread per physical core) and offers no setting, so this replaces the process-wide
    cache of quire-grammar 0.3.4 (``quire_grammar.model._cache``, a ``_Model(session, tokenizer, id2tag)``)."""
    import onnxruntime
    import quire_grammar_model

    cached = quire_model._model()
    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(
        str(quire_grammar_model.path() / "tagger.onnx"), opts, providers=["CPUExecutionProvider"]
    )
    quire_model._cache = quire_model._Model(session, cached.tokenizer, cached.id2tag)


class QuirePeer:
    """quire-grammar rules + its bundled ONNX GECToR-style tagger. See the module docstring."""

    name = "quire-grammar"

    def __init__(
        self, *, detokenize: bool = True, disable: Iterable[str] = ("style",), threads: int | None = None
    ) -> None:
        import quire_grammar
        import quire_grammar.model as quire_model

        problem = _quire_model_problem()
        if problem is not None:
            raise ImportError(problem)
        if not quire_model.is_available():  # loads the ONNX session once per process (cached by the library)
            raise RuntimeError("quire-grammar's model failed to load (the library swallows the error)")
        if threads is not None:
            _set_quire_threads(quire_model, threads)
        self._check: Callable[..., list[Any]] = quire_grammar.check
        self._prepare: Callable[[str], tuple[str, list[int]]] = _detokenize if detokenize else _identity
        self.disable = tuple(disable)
        self.version = (
            f"quire-grammar {_package_version('quire-grammar')}, "
            f"quire-grammar-model {_package_version('quire-grammar-model')}"
        )

    def flag(self, texts: list[str]) -> list[list[tuple[int, int]]]:
        result: list[list[Span]] = []
        for text in texts:  # no batch API: check() runs the model on one text at a time
            seen, charmap = self._prepare(text)
            spans: set[Span] = set()
            for c in self._check(seen, disable=self.disable):
                start, end = c.start, c.end
                if c.rule_id == "model:append":
                    start = end  # $APPEND_x on a word: insert after it
                spans.add(_map_span(start, end, seen, charmap))
            result.append(sorted(spans))
        return result


# -------------------------------------------------------------------------------------------------- registry

PEERS: dict[str, Callable[[], Peer]] = {HarperPeer.name: HarperPeer, QuirePeer.name: QuirePeer}


def load_peers(names: Iterable[str] | None = None) -> tuple[dict[str, Peer], dict[str, str]]:
    """Construct the named peers (all by default): ``(loaded peers, name -> "ok" or why it failed)``."""
    loaded: dict[str, Peer] = {}
    status: dict[str, str] = {}
    for name in names if names is not None else PEERS:
        try:
            loaded[name] = PEERS[name]()
            status[name] = "ok"
        except Exception as e:  # ImportError, a missing model file, a broken wheel ...
            status[name] = f"{type(e).__name__}: {e}"
    return loaded, status


def available_peers() -> dict[str, str]:
    """Name -> ``"ok"`` or the reason the peer cannot be loaded. Loads each peer (about a second each)."""
    return load_peers()[1]


# ------------------------------------------------------------------------------------------------------ demo

_DEMO = [
    "He go to the store yesterday .",
    "I has a apple .",
    "The cat sleeps on the mat .",
    "Their going too the park tomorow .",
]


def _main() -> None:
    peers, status = load_peers()
    for name, st in status.items():
        print(f"{name}: {st}" + (f" ({getattr(peers[name], 'version', '')})" if name in peers else ""))
    for name, peer in peers.items():
        print(f"\n== {name}")
        for text, spans in zip(_DEMO, peer.flag(_DEMO), strict=True):
            shown = ", ".join(f"{s}-{e}:{text[s:e]!r}" if e > s else f"{s}:insert-before" for s, e in spans)
            print(f"  {text!r}: {shown or '-'}")
    batch = _DEMO * 200
    for name, peer in peers.items():
        peer.flag(_DEMO)  # warm-up
        t0 = time.perf_counter()
        peer.flag(batch)
        dt = time.perf_counter() - t0
        print(f"{name}: {len(batch)} sentences in {dt:.2f} s = {len(batch) / dt:.0f} sentences/s")


if __name__ == "__main__":
    _main()
