"""``/v1/score``: token, word and sentence scores."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from electra_detect.app.http.errors import ERROR_RESPONSES
from electra_detect.app.http.routing import ServiceDep, client_of, disconnect_signal, reply
from electra_detect.app.http.schemas import ScoreRequest, check_texts
from electra_detect.scores import TextScores

router = APIRouter()


def _result(scores: TextScores, tokens: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"text": scores.text, "sentence_mean": scores.sentence_mean,
                           "sentence_sum": scores.sentence_sum,
                           "words": [{"word": w.word, "start": w.start, "end": w.end, "score": w.score}
                                     for w in scores.words]}
    if tokens:
        row["tokens"] = [{"token": t.token, "start": t.start, "end": t.end, "p_replaced": t.p_replaced}
                         for t in scores.tokens]
    return row


@router.post("/v1/score", summary="token, word and sentence scores", responses=ERROR_RESPONSES)
async def score(body: ScoreRequest, request: Request, service: ServiceDep) -> Response:
    check_texts(body.texts, service.settings)
    async with disconnect_signal(request) as cancel:
        results = await service.scored(body.texts, client_of(request), cancel)
    head = {k: service.info[k] for k in ("engine", "provider", "variant", "calibration")}
    return await reply(lambda: {**head, "results": [_result(r, body.tokens) for r in results]})
