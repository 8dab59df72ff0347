"""`ContextdClient` and `AsyncContextdClient`: one method per operation of openapi.yaml, named
after its `operationId`, the same signatures in both.

Path parameters are positional; a request body is the method's keyword arguments, typed by the
TypedDicts of `contextd_client.params`; every answer is parsed into its model of
`contextd_client.models`. An error answer raises a `ContextdError` subclass. The two classes
differ only in how they wait: what a call sends lives in `_operations`, when it is retried in
`policy`.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from types import TracebackType
from typing import Self, TypeVar, Unpack

import httpx

try:
    from opentelemetry import propagate
except ImportError:  # a runtime that does not trace
    propagate = None  # type: ignore[assignment]

from contextd_client import _operations as ops
from contextd_client import models
from contextd_client import params as p
from contextd_client.errors import ContextdError, Unreachable, error_from
from contextd_client.policy import Retries, Timeouts

T = TypeVar("T")

USER_AGENT = f"contextd-client/{importlib.metadata.version('contextd-client')}"


def _call_headers(call: ops.Call[T]) -> dict[str, str]:
    """`call`'s headers with the caller's trace context (`traceparent`, `tracestate`), when
    OpenTelemetry is installed and a span is current: the service's spans join the trace."""
    headers = dict(call.headers)
    if propagate is not None:
        propagate.inject(headers)
    return headers


def _headers(api_key: str | None) -> dict[str, str]:
    headers = {"user-agent": USER_AGENT, "content-type": "application/json"}
    if api_key is not None:
        headers["authorization"] = f"Bearer {api_key}"
    return headers


def _wait_before_retry(
    call: ops.Call[T],
    failure: ContextdError | httpx.TransportError,
    *,
    retries: Retries,
    attempt: int,
    deadline: float,
) -> float:
    """Seconds to wait before trying `call` again; raises the failure when it is not retried."""
    wait = (
        retries.wait_before_retry(
            failure,
            attempt=attempt,
            remaining=deadline - time.monotonic(),
            is_idempotent=call.is_idempotent,
        )
        if call.is_retried
        else None
    )
    if wait is not None:
        return wait
    if isinstance(failure, httpx.TransportError):
        raise Unreachable(f"{call.method} {_where(failure)}: {failure!r}") from failure
    raise failure


def _where(failure: httpx.TransportError) -> str:
    """The URL a call that got no answer was sent to: the host and port say which service."""
    try:
        return str(failure.request.url)
    except RuntimeError:  # an error raised before a request was made
        return "(no request)"


class ContextdClient:
    """A blocking client. Close it (or use it as a context manager) to release connections."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        api_key: str | None = None,
        timeouts: Timeouts = Timeouts(),  # noqa: B008 - frozen
        retries: Retries = Retries(),  # noqa: B008 - frozen
    ) -> None:
        self.timeouts = timeouts
        self.retries = retries
        self._http = httpx.Client(
            base_url=base_url,
            headers=_headers(api_key),
            timeout=timeouts.for_attempt(timeouts.total),
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self, call: ops.Call[T]) -> T:
        deadline = time.monotonic() + self.timeouts.total
        attempt = 1
        while True:
            remaining = deadline - time.monotonic()
            failure: ContextdError | httpx.TransportError
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    params=call.query,
                    content=call.body,
                    headers=_call_headers(call),
                    timeout=self.timeouts.for_attempt(remaining),
                )
            except httpx.TransportError as exc:
                failure = exc
            else:
                if response.status_code < 400:
                    return call.read(response)
                failure = error_from(response)
            wait = _wait_before_retry(
                call, failure, retries=self.retries, attempt=attempt, deadline=deadline
            )
            time.sleep(wait)
            attempt += 1

    def healthz(self) -> models.HealthResponse:
        """The process is up (never retried)."""
        return self._run(ops.healthz())

    def readyz(self) -> models.HealthResponse:
        """The database is reachable and migrated; `Unavailable` otherwise (never retried)."""
        return self._run(ops.readyz())

    def metrics(self, *, token: str | None = None) -> str:
        """The Prometheus text; `token` when the service asks for its own metrics token."""
        return self._run(ops.metrics(token))

    def create_session(self, **body: Unpack[p.CreateSessionRequest]) -> models.SessionResponse:
        """A new session (or the existing one with identical attributes)."""
        return self._run(ops.create_session(body))

    def get_session(self, session_id: str, /) -> models.SessionDetailResponse:
        return self._run(ops.get_session(session_id))

    def append_items(
        self, session_id: str, /, **body: Unpack[p.AppendRequest]
    ) -> models.AppendResponse:
        """Append one atomic batch. Without an `idempotency_key` the client makes one, so that
        its retries apply the batch once."""
        return self._run(ops.append_items(session_id, body))

    def list_items(
        self, session_id: str, /, *, after_seq: int = 0, limit: int = 100
    ) -> models.ItemsPageResponse:
        """One page of the raw log: the items after `after_seq`, exactly as appended."""
        return self._run(ops.list_items(session_id, after_seq=after_seq, limit=limit))

    def iter_items(
        self, session_id: str, /, *, after_seq: int = 0, page_size: int = 100
    ) -> Iterator[models.LoggedItem]:
        """Every item of the raw log after `after_seq`, fetching page after page."""
        cursor: int | None = after_seq
        while cursor is not None:
            page = self.list_items(session_id, after_seq=cursor, limit=page_size)
            yield from page.items
            cursor = page.next_after_seq

    def report_usage(self, session_id: str, /, **body: Unpack[p.UsageRequest]) -> None:
        """The provider's token usage of one model call."""
        return self._run(ops.report_usage(session_id, body))

    def retract(
        self, session_id: str, /, **body: Unpack[p.RetractionRequest]
    ) -> models.RetractionResponse:
        """Hide item `seq` (with its call or outputs) from the active history; the log keeps it."""
        return self._run(ops.retract(session_id, body))

    def reset(self, session_id: str, /) -> models.ResetResponse:
        """Start the active history empty from here on; the goal and world state stay."""
        return self._run(ops.reset(session_id))

    def recall(self, session_id: str, /, **body: Unpack[p.RecallRequest]) -> models.RecallResponse:
        """Fact `seq` read back in a window of whole lines, or the lines matching `pattern` in
        one fact or a seq range; `tool_output` is the answer as the recall tool's output.
        Writes nothing (so it is retried like a read)."""
        return self._run(ops.recall(session_id, body))

    def evaluate(
        self, session_id: str, /, *, poll_seconds: float = 1.0, **body: Unpack[p.EvaluateRequest]
    ) -> models.EvaluateResponse:
        """The session's logged turns replayed under its own settings (`current`) and each of
        `variants`: what each would have cost and shown. Writes nothing. A long one runs as a
        job, followed every `poll_seconds` until it is done (`EvaluationEnded` if it failed
        or was cancelled)."""
        answer = self._run(ops.evaluate(session_id, body))
        while isinstance(answer, models.EvaluationJobResponse):
            if (result := ops.evaluation_result(answer)) is not None:
                return result
            time.sleep(poll_seconds)
            answer = self._run(ops.get_evaluation(answer.evaluation_id))
        return answer

    def get_evaluation(self, evaluation_id: str, /) -> models.EvaluationJobResponse:
        """Where an evaluation job stands."""
        return self._run(ops.get_evaluation(evaluation_id))

    def cancel_evaluation(self, evaluation_id: str, /) -> models.EvaluationJobResponse:
        """Cancels an evaluation job if it is running; where it stands either way."""
        return self._run(ops.cancel_evaluation(evaluation_id))

    def normalize(self, **body: Unpack[p.NormalizeRequest]) -> models.NormalizeResponse:
        return self._run(ops.normalize(body))

    def get_history(
        self,
        session_id: str,
        /,
        *,
        output_format: ops.Format | None = None,
        input_modalities: Sequence[ops.Modality] | None = None,
    ) -> models.HistoryResponse:
        """The active, model-visible history, normalized."""
        return self._run(
            ops.get_history(
                session_id, output_format=output_format, input_modalities=input_modalities
            )
        )

    def assemble(self, **body: Unpack[p.AssembleRequest]) -> models.AssembleResponse:
        return self._run(ops.assemble(body))

    def get_assembly(self, assembly_id: str, /) -> models.StoredAssemblyResponse:
        return self._run(ops.get_assembly(assembly_id))

    def replay_assembly(
        self, assembly_id: str, /, **body: Unpack[p.ReplayRequest]
    ) -> models.ReplayResponse:
        return self._run(ops.replay_assembly(assembly_id, body))

    def put_goal(self, session_id: str, /, **body: Unpack[p.GoalRequest]) -> models.GoalResponse:
        return self._run(ops.put_goal(session_id, body))

    def put_world_state(
        self, session_id: str, /, **body: Unpack[p.WorldStateRequest]
    ) -> models.WorldStateResponse:
        return self._run(ops.put_world_state(session_id, body))

    def compact(self, **body: Unpack[p.CompactRequest]) -> models.CompactResponse:
        return self._run(ops.compact(body))

    def compaction_advice(
        self, session_id: str, /, *, unit: str | None = None
    ) -> models.AdviceResponse:
        """The compaction advice for the session's next call in the lineage of `unit` (default:
        the session's own), priced by that lineage's prompt cache."""
        return self._run(ops.compaction_advice(session_id, unit=unit))

    def context_window(self, session_id: str, /) -> models.ContextWindowResponse:
        return self._run(ops.context_window(session_id))

    def end_session(
        self, session_id: str, /, **body: Unpack[p.EndSessionRequest]
    ) -> models.EndSessionResponse:
        return self._run(ops.end_session(session_id, body))

    def delegate(
        self, parent_id: str, /, **body: Unpack[p.DelegateRequest]
    ) -> models.ChildSessionResponse:
        return self._run(ops.delegate(parent_id, body))

    def fork(self, parent_id: str, /, **body: Unpack[p.ForkRequest]) -> models.ChildSessionResponse:
        return self._run(ops.fork(parent_id, body))

    def merge(
        self, session_id: str, /, **body: Unpack[p.ConclusionRequest]
    ) -> models.ConclusionResponse:
        return self._run(ops.merge(session_id, body))

    def put_manifest(
        self, name: str, /, **body: Unpack[p.ManifestRequest]
    ) -> models.ManifestVersionResponse:
        return self._run(ops.put_manifest(name, body))

    def get_manifest(self, name: str, /) -> models.ManifestResponse:
        return self._run(ops.get_manifest(name))


class AsyncContextdClient:
    """The asyncio client. Close it (`aclose`, or `async with`) to release connections."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        api_key: str | None = None,
        timeouts: Timeouts = Timeouts(),  # noqa: B008 - frozen
        retries: Retries = Retries(),  # noqa: B008 - frozen
    ) -> None:
        self.timeouts = timeouts
        self.retries = retries
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers=_headers(api_key),
            timeout=timeouts.for_attempt(timeouts.total),
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _run(self, call: ops.Call[T]) -> T:
        deadline = time.monotonic() + self.timeouts.total
        attempt = 1
        while True:
            remaining = deadline - time.monotonic()
            failure: ContextdError | httpx.TransportError
            try:
                response = await self._http.request(
                    call.method,
                    call.path,
                    params=call.query,
                    content=call.body,
                    headers=_call_headers(call),
                    timeout=self.timeouts.for_attempt(remaining),
                )
            except httpx.TransportError as exc:
                failure = exc
            else:
                if response.status_code < 400:
                    return call.read(response)
                failure = error_from(response)
            wait = _wait_before_retry(
                call, failure, retries=self.retries, attempt=attempt, deadline=deadline
            )
            await asyncio.sleep(wait)
            attempt += 1

    async def healthz(self) -> models.HealthResponse:
        """The process is up (never retried)."""
        return await self._run(ops.healthz())

    async def readyz(self) -> models.HealthResponse:
        """The database is reachable and migrated; `Unavailable` otherwise (never retried)."""
        return await self._run(ops.readyz())

    async def metrics(self, *, token: str | None = None) -> str:
        """The Prometheus text; `token` when the service asks for its own metrics token."""
        return await self._run(ops.metrics(token))

    async def create_session(
        self, **body: Unpack[p.CreateSessionRequest]
    ) -> models.SessionResponse:
        """A new session (or the existing one with identical attributes)."""
        return await self._run(ops.create_session(body))

    async def get_session(self, session_id: str, /) -> models.SessionDetailResponse:
        return await self._run(ops.get_session(session_id))

    async def append_items(
        self, session_id: str, /, **body: Unpack[p.AppendRequest]
    ) -> models.AppendResponse:
        """Append one atomic batch. Without an `idempotency_key` the client makes one, so that
        its retries apply the batch once."""
        return await self._run(ops.append_items(session_id, body))

    async def list_items(
        self, session_id: str, /, *, after_seq: int = 0, limit: int = 100
    ) -> models.ItemsPageResponse:
        """One page of the raw log: the items after `after_seq`, exactly as appended."""
        return await self._run(ops.list_items(session_id, after_seq=after_seq, limit=limit))

    async def iter_items(
        self, session_id: str, /, *, after_seq: int = 0, page_size: int = 100
    ) -> AsyncIterator[models.LoggedItem]:
        """Every item of the raw log after `after_seq`, fetching page after page."""
        cursor: int | None = after_seq
        while cursor is not None:
            page = await self.list_items(session_id, after_seq=cursor, limit=page_size)
            for item in page.items:
                yield item
            cursor = page.next_after_seq

    async def report_usage(self, session_id: str, /, **body: Unpack[p.UsageRequest]) -> None:
        """The provider's token usage of one model call."""
        return await self._run(ops.report_usage(session_id, body))

    async def retract(
        self, session_id: str, /, **body: Unpack[p.RetractionRequest]
    ) -> models.RetractionResponse:
        """Hide item `seq` (with its call or outputs) from the active history; the log keeps it."""
        return await self._run(ops.retract(session_id, body))

    async def reset(self, session_id: str, /) -> models.ResetResponse:
        """Start the active history empty from here on; the goal and world state stay."""
        return await self._run(ops.reset(session_id))

    async def recall(
        self, session_id: str, /, **body: Unpack[p.RecallRequest]
    ) -> models.RecallResponse:
        """Fact `seq` read back in a window of whole lines, or the lines matching `pattern` in
        one fact or a seq range; `tool_output` is the answer as the recall tool's output.
        Writes nothing (so it is retried like a read)."""
        return await self._run(ops.recall(session_id, body))

    async def evaluate(
        self, session_id: str, /, *, poll_seconds: float = 1.0, **body: Unpack[p.EvaluateRequest]
    ) -> models.EvaluateResponse:
        """The session's logged turns replayed under its own settings (`current`) and each of
        `variants`: what each would have cost and shown. Writes nothing. A long one runs as a
        job, followed every `poll_seconds` until it is done (`EvaluationEnded` if it failed
        or was cancelled)."""
        answer = await self._run(ops.evaluate(session_id, body))
        while isinstance(answer, models.EvaluationJobResponse):
            if (result := ops.evaluation_result(answer)) is not None:
                return result
            await asyncio.sleep(poll_seconds)
            answer = await self._run(ops.get_evaluation(answer.evaluation_id))
        return answer

    async def get_evaluation(self, evaluation_id: str, /) -> models.EvaluationJobResponse:
        """Where an evaluation job stands."""
        return await self._run(ops.get_evaluation(evaluation_id))

    async def cancel_evaluation(self, evaluation_id: str, /) -> models.EvaluationJobResponse:
        """Cancels an evaluation job if it is running; where it stands either way."""
        return await self._run(ops.cancel_evaluation(evaluation_id))

    async def normalize(self, **body: Unpack[p.NormalizeRequest]) -> models.NormalizeResponse:
        return await self._run(ops.normalize(body))

    async def get_history(
        self,
        session_id: str,
        /,
        *,
        output_format: ops.Format | None = None,
        input_modalities: Sequence[ops.Modality] | None = None,
    ) -> models.HistoryResponse:
        """The active, model-visible history, normalized."""
        return await self._run(
            ops.get_history(
                session_id, output_format=output_format, input_modalities=input_modalities
            )
        )

    async def assemble(self, **body: Unpack[p.AssembleRequest]) -> models.AssembleResponse:
        return await self._run(ops.assemble(body))

    async def get_assembly(self, assembly_id: str, /) -> models.StoredAssemblyResponse:
        return await self._run(ops.get_assembly(assembly_id))

    async def replay_assembly(
        self, assembly_id: str, /, **body: Unpack[p.ReplayRequest]
    ) -> models.ReplayResponse:
        return await self._run(ops.replay_assembly(assembly_id, body))

    async def put_goal(
        self, session_id: str, /, **body: Unpack[p.GoalRequest]
    ) -> models.GoalResponse:
        return await self._run(ops.put_goal(session_id, body))

    async def put_world_state(
        self, session_id: str, /, **body: Unpack[p.WorldStateRequest]
    ) -> models.WorldStateResponse:
        return await self._run(ops.put_world_state(session_id, body))

    async def compact(self, **body: Unpack[p.CompactRequest]) -> models.CompactResponse:
        return await self._run(ops.compact(body))

    async def compaction_advice(
        self, session_id: str, /, *, unit: str | None = None
    ) -> models.AdviceResponse:
        """The compaction advice for the session's next call in the lineage of `unit` (default:
        the session's own), priced by that lineage's prompt cache."""
        return await self._run(ops.compaction_advice(session_id, unit=unit))

    async def context_window(self, session_id: str, /) -> models.ContextWindowResponse:
        return await self._run(ops.context_window(session_id))

    async def end_session(
        self, session_id: str, /, **body: Unpack[p.EndSessionRequest]
    ) -> models.EndSessionResponse:
        return await self._run(ops.end_session(session_id, body))

    async def delegate(
        self, parent_id: str, /, **body: Unpack[p.DelegateRequest]
    ) -> models.ChildSessionResponse:
        return await self._run(ops.delegate(parent_id, body))

    async def fork(
        self, parent_id: str, /, **body: Unpack[p.ForkRequest]
    ) -> models.ChildSessionResponse:
        return await self._run(ops.fork(parent_id, body))

    async def merge(
        self, session_id: str, /, **body: Unpack[p.ConclusionRequest]
    ) -> models.ConclusionResponse:
        return await self._run(ops.merge(session_id, body))

    async def put_manifest(
        self, name: str, /, **body: Unpack[p.ManifestRequest]
    ) -> models.ManifestVersionResponse:
        return await self._run(ops.put_manifest(name, body))

    async def get_manifest(self, name: str, /) -> models.ManifestResponse:
        return await self._run(ops.get_manifest(name))
