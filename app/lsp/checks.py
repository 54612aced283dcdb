"""The language server's checks: one model's Service, the block cache and a document's texts checked in batches that
a newer change cancels.

Every check goes through ``Service.check`` (client ``lsp``), the one request path of every front; a block whose text,
options and dictionary were checked before is not checked again (``Checks.cache``), and a block the check refuses
costs only its own flags.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from electra_detect.app.lsp.settings import BoundedDictionary
from electra_detect.app.lsp.wire import reason

CLIENT = "lsp"  # the service's fairness unit for this front
CACHE_BLOCKS = 20_000  # blocks whose flags are kept (a few hundred bytes each): many long documents' worth
BATCH_TEXTS, BATCH_CHARS = 16, 8_000  # one Service.check: what a cancelled check has cached when it stops
# One writer's server: a document is checked whole up to --max-document-kb (the HTTP server's per-request caps guard a
# shared server; here a long paragraph must not be refused), within an hour a batch.
LIMIT_TOKENS, TIMEOUT_S = 1 << 24, 3600.0


class Cancelled(Exception):
    """A check made stale by a newer change of its document, after ``checked`` texts were checked (and cached)."""

    def __init__(self, checked: int = 0) -> None:
        super().__init__(f"cancelled after {checked} texts")
        self.checked = checked


def service_settings(detector: Any, dictionary: Path | None) -> Any:
    """The Service's settings for one writer's editor: no caps on a document's length, batching as ``serve``
    chooses it (on for CUDA)."""
    from electra_detect.app.settings import ServerSettings

    on_gpu = "cuda" in str(getattr(detector.engine, "provider", "")).lower()
    return ServerSettings(max_tokens=LIMIT_TOKENS, check_budget=LIMIT_TOKENS, client_tokens=LIMIT_TOKENS,
                          timeout_s=TIMEOUT_S, batching=on_gpu, dictionary=str(dictionary) if dictionary else None)


class Checks:
    """The model's Service and the block cache (used on the server's event loop only)."""

    def __init__(self, engine: dict[str, Any]) -> None:
        self.engine = engine  # Detector.load's engine, variant, device, threads
        self.service: Any = None
        self.model: str | None = None
        self.load_error: str | None = None
        self.cache: OrderedDict[tuple, list] = OrderedDict()

    async def load(self, model: str, dictionary: Path | None) -> str | None:
        """Start a Service over ``model`` unless it runs already (then only the dictionary is set); the engine line
        when a model was loaded. A model that fails to load raises, and the one loaded before keeps checking."""
        from electra_detect.app.service import Service
        from electra_detect.detector import Detector

        if self.service is not None and self.model == model:
            self.set_dictionary(dictionary)
            return None
        try:
            detector = await asyncio.to_thread(Detector.load, model, task="ged", assemble=False, **self.engine)
            service = Service(detector, service_settings(detector, dictionary))
            service.checker.dictionary = bounded_dictionary(dictionary)  # before start: nothing reads it unbounded
            await service.start()  # loads what checks need (spaCy, ERRANT, word lists) now, not in the first check
        except Exception as exc:
            if self.service is None:
                self.load_error = f"cannot load the model {model}: {reason(exc)}"
            else:
                self.set_dictionary(dictionary)
            raise
        old, self.service, self.model, self.load_error = self.service, service, model, None
        self.cache.clear()
        if old is not None:
            await old.stop()
        return detector.describe()

    def set_dictionary(self, path: Path | None) -> None:
        """The personal dictionary the settings name (None: the default file)."""
        self.service.checker.dictionary = bounded_dictionary(path)

    def dictionary_stamp(self) -> tuple[str, int, int] | None:
        """The personal dictionary file as it is now (a changed file makes every cached block stale)."""
        path = self.service.checker.dictionary.path
        try:
            stat = path.stat()
        except OSError:
            return None
        return str(path), stat.st_mtime_ns, stat.st_size

    async def check(self, texts: Sequence[str], options: Any, cancel: asyncio.Event) -> tuple[list[list], list[str],
                                                                                             int]:
        """Each text's flagged words (``FlaggedWord``; cached blocks are not checked again), the errors of the
        texts the check refused (those get no flags) and how many texts were checked (not from the cache); raises
        Cancelled when ``cancel`` is set."""
        if self.service is None:
            raise RuntimeError(self.load_error or "the model is not loaded")
        stamp = self.dictionary_stamp()
        found: list[list | None] = [None] * len(texts)
        todo: dict[str, list[int]] = {}
        for index, text in enumerate(texts):
            key = (text, options, stamp)
            if not text.strip():
                found[index] = []
            elif key in self.cache:
                self.cache.move_to_end(key)
                found[index] = self.cache[key]
            else:
                todo.setdefault(text, []).append(index)
        errors: list[str] = []
        done = 0
        for batch in batches(list(todo)):
            if cancel.is_set():
                raise Cancelled(done)
            try:
                checked = await self._check_batch(batch, options, cancel, errors)
            except Cancelled:
                raise Cancelled(done) from None
            for text, words in zip(batch, checked, strict=True):
                if words is None:
                    words = []
                else:
                    self.cache[(text, options, stamp)] = words
                for index in todo[text]:
                    found[index] = words
            done += len(batch)
        while len(self.cache) > CACHE_BLOCKS:
            self.cache.popitem(last=False)
        refused = getattr(self.service.checker.dictionary, "refused", None)
        if refused:
            errors.insert(0, f"{refused}; checking without it")
        return [f if f is not None else [] for f in found], errors, len(todo)

    async def _check_batch(self, batch: list[str], options: Any, cancel: asyncio.Event,
                           errors: list[str]) -> list[list | None]:
        """The batch checked at once; when that fails, text by text, so one bad block costs only its own flags."""
        from electra_detect.app.api_errors import ApiError

        try:
            return (await self.service.check(batch, options, CLIENT, cancel)).flagged
        except ApiError as exc:
            if exc.status == 499:  # the cancel signal
                raise Cancelled from None
            problem = exc.message or reason(exc)
        except Exception as exc:  # noqa: BLE001 - a block the check refuses is reported; the others are checked
            problem = reason(exc)
        if len(batch) == 1:
            errors.append(f"a paragraph could not be checked ({batch[0][:40]!r}...): {problem}")
            return [None]
        return [(await self._check_batch([text], options, cancel, errors))[0] for text in batch]


def bounded_dictionary(path: Path | None) -> BoundedDictionary:
    """The personal dictionary at ``path`` (None: the default file), read only within its bound."""
    return BoundedDictionary(path) if path else BoundedDictionary()


def batches(texts: list[str]) -> list[list[str]]:
    """Texts in batches of at most BATCH_TEXTS texts and about BATCH_CHARS characters."""
    out: list[list[str]] = []
    size = 0
    for text in texts:
        if not out or len(out[-1]) >= BATCH_TEXTS or size + len(text) > BATCH_CHARS:
            out.append([])
            size = 0
        out[-1].append(text)
        size += len(text)
    return out
