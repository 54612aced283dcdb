"""What the HTTP routes share, between FastAPI and the :class:`~electra_detect.app.service.Service`: the app's one
Service as a route dependency, a request's client (as the Guard named it) and its disconnect as a cancel signal,
and answers serialised off the event loop."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import Response

from electra_detect.app.batcher import ANONYMOUS
from electra_detect.app.http.guard import CLIENT_SCOPE_KEY
from electra_detect.app.service import Service


def client_of(request: Request) -> str:
    """The request's client, as the Guard named it (an API key's name, else an address)."""
    return request.scope.get(CLIENT_SCOPE_KEY, ANONYMOUS)


@asynccontextmanager
async def disconnect_signal(request: Request) -> AsyncIterator[asyncio.Event]:
    """An event set when the request's client goes away while the block runs (the body was read already: the
    channel only reports that): the cancel signal a route hands to ``Service.check``."""
    event = asyncio.Event()

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass
        event.set()

    watcher = asyncio.ensure_future(watch())
    try:
        yield event
    finally:
        watcher.cancel()


async def reply(build: Callable[[], dict[str, Any]]) -> Response:
    """A large answer is built and serialised off the event loop (other requests keep flowing)."""
    body = await asyncio.to_thread(
        lambda: json.dumps(build(), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode())
    return Response(body, media_type="application/json")


def service(request: Request) -> Service:
    """The route dependency: the app's one Service."""
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(service)]
