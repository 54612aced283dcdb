"""``/v1/rerank``: n-best lists reranked with the sentence score (or a `rerank train` model's learned one)."""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from electra_detect.app.api_errors import ApiError
from electra_detect.app.http.errors import ERROR_RESPONSES
from electra_detect.app.http.routing import ServiceDep, client_of, disconnect_signal, reply
from electra_detect.app.http.schemas import RerankRequest, check_texts, rerank_lists

router = APIRouter()


@router.post("/v1/rerank", summary="rerank n-best lists with the sentence score", responses=ERROR_RESPONSES)
async def rerank(body: RerankRequest, request: Request, service: ServiceDep) -> Response:
    from electra_detect.errors import RerankError
    from electra_detect.tasks.rerank.fusion import rank_hypotheses, word_confidence

    parsed = rerank_lists(body)
    texts = [text for hyps in parsed for text, _ in hyps]
    check_texts(texts, service.settings, "hypotheses")
    unique = list(dict.fromkeys(texts))
    chosen = service.hypothesis  # the task's choice: a learned reranker's score, else the sentence score
    async with disconnect_signal(request) as cancel:
        scored = await service.scored(unique, client_of(request), cancel, calibrated=chosen.calibrated)
    results = dict(zip(unique, scored, strict=True))
    lm = dict(zip(results, chosen.of(list(results.values())), strict=True))
    try:
        rows = [rank_hypotheses(hyps, [lm[text] for text, _ in hyps], float(body.lm_weight),
                                float(body.length_weight), chosen.name) for hyps in parsed]
    except RerankError as exc:
        raise ApiError(422, "invalid_request", str(exc)) from None
    if not all(math.isfinite(h["total"]) for row in rows for h in row):  # bounded inputs keep it finite
        raise ApiError(422, "invalid_request", "the weights and scores give a total that is not finite")

    def result(ranked: list[dict[str, Any]]) -> dict[str, Any]:
        top = {"confidence": word_confidence(results[ranked[0]["text"]])} if body.confidence else {}
        return {"hypotheses": ranked, **top}

    return await reply(lambda: {"lm_weight": float(body.lm_weight), "length_weight": float(body.length_weight),
                                "results": [result(r) for r in rows]})
