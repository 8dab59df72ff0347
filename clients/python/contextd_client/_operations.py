"""What each operation of openapi.yaml sends and how its answer is read, once for both clients.

Each function here is named after the operation's `operationId` and returns a `Call`; the sync
and async clients only send it. A body is the method's keyword arguments as given (a key left
out is not sent, so the service's default applies), serialized as JSON without client-side
validation: the service is the one judge of a request, and answers a bad one with a 422.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import httpx
import pydantic_core
from pydantic import BaseModel

from contextd_client import models
from contextd_client import params as p
from contextd_client.errors import EvaluationEnded

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

Format = Literal["responses", "chat", "anthropic"]
Modality = Literal["text", "image", "audio"]


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    method: str
    path: str
    read: Callable[[httpx.Response], T]
    query: Mapping[str, str | int] | None = None
    body: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    is_idempotent: bool = False
    """Repeating it cannot apply it twice: retried even when an answer was lost."""
    is_retried: bool = True
    """Probes answer for the moment they are asked: never retried."""


def _model(model: type[M]) -> Callable[[httpx.Response], M]:
    def read(response: httpx.Response) -> M:
        return model.model_validate_json(response.content)

    return read


def _nothing(_response: httpx.Response) -> None:
    return None


def _text(response: httpx.Response) -> str:
    return response.text


def _json(body: Mapping[str, Any]) -> bytes:
    # pydantic_core writes models nested in a body (a `SourceSpec`, say) as their JSON too.
    return pydantic_core.to_json(body)


def _segment(value: str) -> str:
    return quote(value, safe="")


def _get(path: str, model: type[M], query: Mapping[str, str | int] | None = None) -> Call[M]:
    return Call("GET", path, _model(model), query=query, is_idempotent=True)


def _send(method: str, path: str, model: type[M], body: Mapping[str, Any]) -> Call[M]:
    return Call(method, path, _model(model), body=_json(body))


def healthz() -> Call[models.HealthResponse]:
    return Call("GET", "/healthz", _model(models.HealthResponse), is_retried=False)


def readyz() -> Call[models.HealthResponse]:
    return Call("GET", "/readyz", _model(models.HealthResponse), is_retried=False)


def metrics(token: str | None) -> Call[str]:
    headers = {"authorization": f"Bearer {token}"} if token is not None else {}
    return Call("GET", "/metrics", _text, headers=headers, is_idempotent=True)


def create_session(body: p.CreateSessionRequest) -> Call[models.SessionResponse]:
    return _send("POST", "/sessions", models.SessionResponse, body)


def get_session(session_id: str) -> Call[models.SessionDetailResponse]:
    return _get(f"/sessions/{_segment(session_id)}", models.SessionDetailResponse)


def append_items(session_id: str, body: p.AppendRequest) -> Call[models.AppendResponse]:
    # The key is made once per call, before any attempt: a retry repeats it, and the service
    # answers a repeated key with the original response, so a batch is applied once.
    keyed = {**body, "idempotency_key": body.get("idempotency_key") or f"ctxc-{uuid.uuid4()}"}
    path = f"/sessions/{_segment(session_id)}/items"
    return Call("POST", path, _model(models.AppendResponse), body=_json(keyed), is_idempotent=True)


def list_items(session_id: str, *, after_seq: int, limit: int) -> Call[models.ItemsPageResponse]:
    query = {"after_seq": after_seq, "limit": limit}
    return _get(f"/sessions/{_segment(session_id)}/items", models.ItemsPageResponse, query)


def report_usage(session_id: str, body: p.UsageRequest) -> Call[None]:
    path = f"/sessions/{_segment(session_id)}/usage"
    return Call("POST", path, _nothing, body=_json(body))


def retract(session_id: str, body: p.RetractionRequest) -> Call[models.RetractionResponse]:
    path = f"/sessions/{_segment(session_id)}/retractions"
    return _send("POST", path, models.RetractionResponse, body)


def reset(session_id: str) -> Call[models.ResetResponse]:
    path = f"/sessions/{_segment(session_id)}/reset"
    return Call("POST", path, _model(models.ResetResponse))


def recall(session_id: str, body: p.RecallRequest) -> Call[models.RecallResponse]:
    # It writes nothing: a recall whose answer was lost is asked again.
    path = f"/sessions/{_segment(session_id)}/recall"
    read = _model(models.RecallResponse)
    return Call("POST", path, read, body=_json(body), is_idempotent=True)


def evaluate(
    session_id: str, body: p.EvaluateRequest
) -> Call[models.EvaluateResponse | models.EvaluationJobResponse]:
    # It writes nothing but a job's row, which the same request names again: retried as a read.
    path = f"/sessions/{_segment(session_id)}/evaluate"

    def read(response: httpx.Response) -> models.EvaluateResponse | models.EvaluationJobResponse:
        if response.status_code == 202:  # run as a job: `result` comes with `get_evaluation`
            return models.EvaluationJobResponse.model_validate_json(response.content)
        return models.EvaluateResponse.model_validate_json(response.content)

    return Call("POST", path, read, body=_json(body), is_idempotent=True)


def get_evaluation(evaluation_id: str) -> Call[models.EvaluationJobResponse]:
    return _get(f"/evaluations/{_segment(evaluation_id)}", models.EvaluationJobResponse)


def cancel_evaluation(evaluation_id: str) -> Call[models.EvaluationJobResponse]:
    path = f"/evaluations/{_segment(evaluation_id)}"
    read = _model(models.EvaluationJobResponse)
    return Call("DELETE", path, read, is_idempotent=True)


def evaluation_result(job: models.EvaluationJobResponse) -> models.EvaluateResponse | None:
    """A job's evaluation once done; None while it runs; `EvaluationEnded` when it failed or
    was cancelled."""
    if job.status == "running":
        return None
    if job.status == "done" and job.result is not None:
        return job.result
    raise EvaluationEnded(job)


def normalize(body: p.NormalizeRequest) -> Call[models.NormalizeResponse]:
    return _send("POST", "/history/normalize", models.NormalizeResponse, body)


def get_history(
    session_id: str,
    *,
    output_format: Format | None,
    input_modalities: Sequence[Modality] | None,
) -> Call[models.HistoryResponse]:
    query: dict[str, str | int] = {}
    if output_format is not None:
        query["output_format"] = output_format
    if input_modalities is not None:
        query["input_modalities"] = ",".join(input_modalities)
    return _get(f"/sessions/{_segment(session_id)}/history", models.HistoryResponse, query)


def assemble(body: p.AssembleRequest) -> Call[models.AssembleResponse]:
    return _send("POST", "/assemble", models.AssembleResponse, body)


def get_assembly(assembly_id: str) -> Call[models.StoredAssemblyResponse]:
    return _get(f"/assemblies/{_segment(assembly_id)}", models.StoredAssemblyResponse)


def replay_assembly(assembly_id: str, body: p.ReplayRequest) -> Call[models.ReplayResponse]:
    path = f"/assemblies/{_segment(assembly_id)}/replay"
    return _send("POST", path, models.ReplayResponse, body)


def put_goal(session_id: str, body: p.GoalRequest) -> Call[models.GoalResponse]:
    return _send("PUT", f"/sessions/{_segment(session_id)}/goal", models.GoalResponse, body)


def put_world_state(session_id: str, body: p.WorldStateRequest) -> Call[models.WorldStateResponse]:
    path = f"/sessions/{_segment(session_id)}/world-state"
    return _send("PUT", path, models.WorldStateResponse, body)


def compact(body: p.CompactRequest) -> Call[models.CompactResponse]:
    return _send("POST", "/compact", models.CompactResponse, body)


def compaction_advice(session_id: str, *, unit: str | None) -> Call[models.AdviceResponse]:
    path = f"/sessions/{_segment(session_id)}/compaction-advice"
    return _get(path, models.AdviceResponse, None if unit is None else {"unit": unit})


def context_window(session_id: str) -> Call[models.ContextWindowResponse]:
    path = f"/sessions/{_segment(session_id)}/context-window"
    return _get(path, models.ContextWindowResponse)


def end_session(session_id: str, body: p.EndSessionRequest) -> Call[models.EndSessionResponse]:
    path = f"/sessions/{_segment(session_id)}/end"
    return _send("POST", path, models.EndSessionResponse, body)


def delegate(parent_id: str, body: p.DelegateRequest) -> Call[models.ChildSessionResponse]:
    path = f"/sessions/{_segment(parent_id)}/delegate"
    return _send("POST", path, models.ChildSessionResponse, body)


def fork(parent_id: str, body: p.ForkRequest) -> Call[models.ChildSessionResponse]:
    path = f"/sessions/{_segment(parent_id)}/fork"
    return _send("POST", path, models.ChildSessionResponse, body)


def merge(session_id: str, body: p.ConclusionRequest) -> Call[models.ConclusionResponse]:
    path = f"/sessions/{_segment(session_id)}/merge"
    return _send("POST", path, models.ConclusionResponse, body)


def put_manifest(name: str, body: p.ManifestRequest) -> Call[models.ManifestVersionResponse]:
    return _send("PUT", f"/manifests/{_segment(name)}", models.ManifestVersionResponse, body)


def get_manifest(name: str) -> Call[models.ManifestResponse]:
    return _get(f"/manifests/{_segment(name)}", models.ManifestResponse)
