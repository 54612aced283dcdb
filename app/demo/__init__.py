"""Gradio demo: each word coloured by the discriminator's replaced probability.

Everything the page shows comes from one ``Detector`` (the same scoring path as the CLI, GED,
reranking and the server); the demo only turns its ``TextScores`` into widgets. The handlers are
plain methods of :class:`DemoApp` so they can be tested without a browser, and they never raise
on user input: an empty, huge or malformed input becomes a message in the page's status line.

Offline by construction: Gradio's default theme ships its fonts, analytics are switched off before
Gradio is imported, server-side rendering (which needs Node) is off, and nothing is fetched from a
hub. The server binds 127.0.0.1 unless told otherwise; bound beyond it, ``DemoLimits`` caps uploads (Gradio's
upload route takes files whatever the page shows), bounds the queue and can ask for a password, and the files
Gradio keeps live in a folder of this process, removed at shutdown.

The verb is ``demo`` in ``app/cli.py``; here: the handlers and page (``page``), what the page shows (``view``),
the input checks (``inputs``), the model's loading (``model``), the server's limits (``limits``) and its start and
stop (``launch``).
"""

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # before gradio is imported anywhere
