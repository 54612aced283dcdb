"""The demo's start and stop: the model loaded and wrapped (``build_app``), the page served within its limits, and
everything it made removed at shutdown (SIGTERM too)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from electra_detect.app.demo.errors import DemoError
from electra_detect.app.demo.limits import DemoLimits, UploadBudget, size_bytes
from electra_detect.app.demo.model import load_detector
from electra_detect.app.demo.page import DemoApp
from electra_detect.app.demo.view import CSS

DEFAULT_PORT = 7860
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def build_app(model: str | Path, engine: str = "auto", device: str | None = None,
              variant: str | None = None, threshold: float | None = None,
              dictionary: str | Path | None = None) -> DemoApp:
    """Load the model once and wrap it for the page.

    ``threshold`` starts the slider; by default the model's tuned ``ged.json`` threshold, else 0.5
    (a calibrated weak model may score every word far below 0.5, so a tuned start matters).
    """
    if threshold is not None:
        from electra_detect.errors import DetectorError
        from electra_detect.model_dir import check_threshold as check_flag_threshold

        try:
            check_flag_threshold(threshold, "--threshold")  # the one range check of a flag threshold
        except DetectorError as exc:
            raise DemoError(str(exc)) from None
    detector, note = load_detector(model, engine=engine, device=device, variant=variant, task="ged")
    threshold = detector.threshold() if threshold is None else threshold
    from electra_detect.tasks.ged.dictionary import PersonalDictionary

    personal = PersonalDictionary(Path(dictionary)) if dictionary is not None else PersonalDictionary()
    return DemoApp(detector, note=note, threshold=round(threshold, 2), dictionary=personal)


def launch(app: DemoApp, host: str = "127.0.0.1", port: int = DEFAULT_PORT, block: bool = True,
           started: float | None = None, limits: DemoLimits | None = None) -> tuple[Any, str]:
    """Serve the page (no share link, no SSR, no analytics) within ``limits``; returns (blocks, local URL). With
    ``block=False`` the caller ends it with :func:`shutdown`."""
    limits = limits or DemoLimits()
    main = block and threading.current_thread() is threading.main_thread()  # where a signal handler can be set
    # SIGTERM (systemd, docker) ends the demo as Ctrl-C does, from before the server is up: a stop that comes while
    # it starts would otherwise kill the process where it stands and leave the temp directory behind
    previous_handler = signal.signal(signal.SIGTERM, _stop_on_sigterm) if main else None
    uploads = tempfile.mkdtemp(prefix="electra-detect-demo-")  # Gradio's files of this process, gone at shutdown
    page = None
    try:
        page, url = _serve(app, host, port, limits, uploads)
        message = f"electra-detect demo: {app.info.name}, engine {app.info.engine} ({app.info.provider}), " \
                  f"calibration {app.info.calibration}; serving at {url}"
        if started is not None:
            message += f" (ready {time.perf_counter() - started:.1f} s after start)"
        print(message, flush=True)
        if block:
            try:
                page.block_thread()
            except KeyboardInterrupt:
                pass
            finally:
                shutdown(page)
    except KeyboardInterrupt:  # stopped while starting: what was made is removed
        if page is not None:
            shutdown(page)
        shutil.rmtree(uploads, ignore_errors=True)
        raise
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous_handler)
    return page, url


def _serve(app: DemoApp, host: str, port: int, limits: DemoLimits, uploads: str) -> tuple[Any, str]:
    """Build the page with Gradio's files in ``uploads`` and start its server in a thread; (page, local URL)."""
    from starlette.middleware import Middleware

    previous = os.environ.get("GRADIO_TEMP_DIR")
    os.environ["GRADIO_TEMP_DIR"] = uploads  # read when the page and its server are made, and by gradio's first import
    try:
        import gradio as gr

        made = _gradio_dirs_made()
        page = app.build()
        page.electra_uploads = uploads
        page.electra_app = app
        page.electra_made = made
        page.queue(max_size=limits.queue_size, default_concurrency_limit=limits.concurrency)
        budget = Middleware(UploadBudget, folder=uploads, limit=size_bytes(limits.max_total_uploads),
                            per_upload=size_bytes(limits.max_file_size))
        _app, url, _share = page.launch(server_name=host, server_port=port, share=False, ssr_mode=False,
                                        prevent_thread_lock=True, quiet=True, show_error=False,
                                        footer_links=["settings"], theme=gr.themes.Default(), css=CSS,
                                        max_file_size=limits.max_file_size, auth=limits.auth or None,
                                        app_kwargs={"middleware": [budget]})
    except OSError as exc:
        shutil.rmtree(uploads, ignore_errors=True)
        if "empty port" in str(exc):
            raise DemoError(f"port {port} on {host} is in use; choose another with --port (0 = any free port)") from exc
        raise DemoError(f"cannot serve on {host}:{port}: {exc}") from exc
    finally:
        if previous is None:
            os.environ.pop("GRADIO_TEMP_DIR", None)
        else:
            os.environ["GRADIO_TEMP_DIR"] = previous
    return page, url


def _gradio_dirs_made() -> list[Path]:
    """The folders gradio's server makes at start in its import-time temp dir (``$TMPDIR/gradio/vibe_edit_history``:
    outside the demo's own when gradio was imported before it was chosen) that are not there yet: removed at
    shutdown when still empty, deepest first."""
    from gradio import routes

    base = Path(getattr(routes, "DEFAULT_TEMP_DIR", "") or tempfile.gettempdir())
    return [folder for folder in (base / "vibe_edit_history", base) if not folder.exists()]


def _stop_on_sigterm(_signum: int, _frame: Any) -> None:
    """SIGTERM ends the demo as Ctrl-C does: its files are removed on the way out (the default action would kill the
    process where it stands and leave its temp directory behind)."""
    raise KeyboardInterrupt


def shutdown(page: Any) -> None:
    """Stop the page's server and the demo's Service, and remove the files Gradio kept for it (uploads included)."""
    try:
        page.close()
    finally:
        uploads = getattr(page, "electra_uploads", None)
        if uploads:
            shutil.rmtree(uploads, ignore_errors=True)
        for folder in getattr(page, "electra_made", ()):
            with contextlib.suppress(OSError):  # not empty (another gradio process's files) or gone: left alone
                folder.rmdir()
        app = getattr(page, "electra_app", None)
        if app is not None:
            app.close()
