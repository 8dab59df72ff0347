"""Outbound calls: session lifecycle hooks and the optional LLM summarizer.

A hook's URL is the caller's, so a hook call is bounded on every axis the caller controls:

- one deadline for the whole call (`CTX_HOOK_TIMEOUT_SECONDS`): resolving the host, connecting,
  sending and reading the answer all end by it, however slowly the endpoint drips its bytes;
- only public unicast addresses are reached, and those in `CTX_HOOK_ALLOWED_NETWORKS`
  (`is_permitted`). The host is resolved once, the address is judged, and the connection goes to
  that address (the Host header and the TLS server name stay the URL's), so neither a name that
  resolves anew (DNS rebinding) nor a numeric spelling of an address (`http://2130706433/`)
  reaches a refused one. `check_destinations` refuses a literal refused address when a session
  is created: an early word; the check at the call is the guard;
- an answer is read as it arrives, up to `CTX_HOOK_MAX_ANSWER_BYTES`, and abandoned past it;
- at most `CTX_HOOK_MAX_CONCURRENT_PER_TENANT` calls of one tenant are in flight in a process;
  beyond that the hook is not called (`NOT_CALLED`), so one tenant's slow hooks cannot take
  every worker thread;
- every failed call says why (`HookResult.reason` and `detail`): a refused destination (the kind
  of address its host resolves to and the setting that allows it), the deadline, a failed
  connection, an HTTP status, an answer too large, encoded or not a JSON object. Telling these
  apart shows a caller what listens where only on the addresses hooks may reach at all; private
  networks are refused before any connection unless the operator allows them. A refusal names
  loopback and unspecified addresses, which are the same on every machine, and no other: the
  addresses a name resolves to inside the service's network stay in the log, so hooks cannot
  read its DNS.

A failed call, and one not made, follows the session's `FailurePolicy`. Callers hold no database
transaction while a hook runs (see `app.api.compaction`).

The summarizer's endpoint is the operator's (`CTX_SUMMARIZER_URL`); its timeout is per read.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from typing import Any, Literal

import anyio
import httpx
import orjson

from app.domain.errors import RuleBroken
from app.settings import Settings
from app.tenant_slots import TenantSlots

log = logging.getLogger("contextd")

FailurePolicy = Literal["fail_open", "fail_closed"]
"""What a hook's timeout or error means for the compaction it guards."""
HookOutcome = Literal["accepted", "vetoed", "failed_open", "failed_closed", "not_configured"]
FailureReason = Literal[
    "refused_destination",
    "deadline",
    "connection_failed",
    "status",
    "answer_too_large",
    "answer_encoded",
    "answer_not_json",
    "not_called",
]
"""Why a hook call failed, or was not made."""
NOT_CALLED = "not called: the tenant's hook calls in flight are at their limit"


@dataclass(frozen=True)
class HookResult:
    event: str
    outcome: HookOutcome
    notes: tuple[str, ...] = ()
    detail: str | None = None
    reason: FailureReason | None = None
    """Why the call failed or was not made (None when it answered)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "event": self.event,
            "outcome": self.outcome,
            "detail": self.detail,
            "reason": self.reason,
        }


PRIVATE_NETWORKS = tuple(
    ipaddress.ip_network(network)
    for network in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
)
"""RFC 1918, shared (RFC 6598) and unique local addresses: what a refusal calls private."""
NAMED_KINDS = frozenset({"loopback", "unspecified"})
"""Kinds of refused address a refusal names: the same on every machine, they tell a caller
nothing of the service's network."""


def judged(address: IPv4Address | IPv6Address) -> IPv4Address | IPv6Address:
    """The address as `is_permitted` judges it: an IPv4 address mapped into IPv6 as itself."""
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def is_permitted(
    address: IPv4Address | IPv6Address, *, allowed: Sequence[IPv4Network | IPv6Network]
) -> bool:
    """Whether a hook may connect to `address`: one in an `allowed` network, else a public
    unicast one; private (RFC 1918, ULA), shared (100.64/10), loopback, link-local (with the
    169.254.169.254 metadata address), unspecified, reserved and multicast ones are refused. An
    IPv4 address mapped into IPv6 is judged as itself."""
    address = judged(address)
    if any(address in network for network in allowed):
        return True
    return address.is_global and not address.is_multicast and not address.is_reserved


def refused_kind(address: IPv4Address | IPv6Address) -> str:
    """Which rule of `is_permitted` refuses `address` (a judged one), in a word."""
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if any(address in network for network in PRIVATE_NETWORKS):
        return "private"
    if address.is_reserved:
        return "reserved"
    return "special-purpose"  # documentation, benchmarking, protocol assignments


def describe_refusal(host: str, addresses: Sequence[IPv4Address | IPv6Address]) -> str:
    """Why a hook may not reach `host`, which resolves only to the refused `addresses`: the kind
    of each (named only when of a `NAMED_KINDS`) and the setting that would allow one."""
    by_kind: dict[str, list[IPv4Address | IPv6Address]] = {}
    for address in dict.fromkeys(judged(address) for address in addresses):
        by_kind.setdefault(refused_kind(address), []).append(address)
    described = []
    for kind, of_kind in by_kind.items():
        article = "an" if kind[0] in "aeiou" else "a"
        if kind not in NAMED_KINDS:
            described.append(
                f"{article} {kind} address" if len(of_kind) == 1 else f"{kind} addresses"
            )
        elif len(of_kind) == 1:
            described.append(f"{of_kind[0]}, {article} {kind} address")
        else:
            named = ", ".join(str(address) for address in of_kind[:-1])
            described.append(f"{named} and {of_kind[-1]}, {kind} addresses")
    allowing = ""
    if "loopback" in by_kind:  # the one kind an operator allows for a hook on the same machine
        allowing = f' (["{ipaddress.ip_network(by_kind["loopback"][0])}"] allows it)'
    return (
        f"refused destination: {host} resolves to {', and '.join(described)}; hooks reach public"
        f" addresses and the networks in CTX_HOOK_ALLOWED_NETWORKS only{allowing}"
    )


def check_destinations(
    urls: Mapping[str, str | None], *, allowed: Sequence[IPv4Network | IPv6Network]
) -> None:
    """`InvalidInput` (422) for a hook URL whose host is an address no hook may reach. A name is
    judged when a call resolves it."""
    details = []
    for name, url in urls.items():
        if url is None:
            continue
        try:
            address = ipaddress.ip_address(httpx.URL(url).host)
        except ValueError:
            continue  # a name
        if not is_permitted(address, allowed=allowed):
            message = f"{address} is not a public address (see CTX_HOOK_ALLOWED_NETWORKS)"
            details.append({"loc": ["body", "hooks", name], "msg": message})
    if details:
        raise RuleBroken(
            "hook_address_refused",
            "a hook URL names an address hooks may not reach",
            details=details,
        )


class HookCallFailed(Exception):
    """Why a hook call failed: `reason` and a `detail` for the caller, `cause` for the log."""

    def __init__(self, reason: FailureReason, detail: str, *, cause: str | None = None) -> None:
        super().__init__(cause or detail)
        self.reason: FailureReason = reason
        self.detail = detail


class HookCaller:
    """The service's hook calls, under the limits of its settings, and each tenant's calls in
    flight."""

    def __init__(self, settings: Settings) -> None:
        self._deadline = settings.hook_timeout_seconds
        self._max_answer_bytes = settings.hook_max_answer_bytes
        self._max_in_flight = settings.hook_max_concurrent_per_tenant
        self._allowed = tuple(settings.hook_allowed_networks)
        self._in_flight = TenantSlots()

    async def call(
        self,
        url: str | None,
        *,
        tenant_id: int,
        event: str,
        payload: dict[str, Any],
        fail_closed: bool,
    ) -> HookResult:
        """POST `payload` to a hook. A 2xx answer may veto (`{"veto": true}`) or pin notes
        (`{"notes": [...]}`); a 409 answer is a veto too. A failure, or a call not made for
        the tenant's limit, follows the policy."""
        if not url:
            return HookResult(event, "not_configured")
        failed: HookOutcome = "failed_closed" if fail_closed else "failed_open"
        with self._in_flight.taken(tenant_id, limit=self._max_in_flight) as taken:
            if not taken:
                log.warning("%s hook of tenant %d not called: limit reached", event, tenant_id)
                return HookResult(event, failed, detail=NOT_CALLED, reason="not_called")
            try:
                answer = await self._answer(url, body={"event": event, **payload})
            except HookCallFailed as exc:
                log.warning("%s hook of tenant %d failed: %s", event, tenant_id, exc)
                return HookResult(event, failed, detail=exc.detail, reason=exc.reason)
        if answer is None:
            return HookResult(event, "vetoed", detail="hook answered 409")
        if answer.get("veto") is True:
            return HookResult(event, "vetoed", detail=str(answer.get("reason") or "vetoed by hook"))
        notes = answer.get("notes")
        pinned = tuple(str(note) for note in notes) if isinstance(notes, list) else ()
        return HookResult(event, "accepted", notes=pinned)

    async def _answer(self, url: str, *, body: dict[str, Any]) -> dict[str, Any] | None:
        """The hook's 2xx answer (a JSON object; `{}` when empty), None for a 409;
        `HookCallFailed` for anything else (an answer that is not a JSON object included: a
        proxy's error page must not pass for consent), or for no whole answer by the deadline."""
        with anyio.move_on_after(self._deadline):
            try:
                return await self._post(httpx.URL(url), body=body)
            except (httpx.HTTPError, httpx.InvalidURL, OSError) as exc:
                raise HookCallFailed(
                    "connection_failed",
                    f"the call did not go through ({type(exc).__name__})",
                    cause=f"{type(exc).__name__}: {exc}",
                ) from exc
        raise HookCallFailed(
            "deadline", f"no whole answer within the {self._deadline:g} s deadline"
        )

    async def _permitted_address(self, url: httpx.URL) -> str:
        """The first address the URL's host resolves to that a hook may reach."""
        host = url.raw_host.decode("ascii")
        port = url.port or (443 if url.scheme == "https" else 80)
        resolved = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = [ipaddress.ip_address(sockaddr[0]) for *_, sockaddr in resolved]
        for address in addresses:
            if is_permitted(address, allowed=self._allowed):
                return str(address)
        listed = ", ".join(sorted({str(address) for address in addresses}))
        raise HookCallFailed(
            "refused_destination",
            describe_refusal(host, addresses),
            cause=f"refused destination: {host} is {listed}",
        )

    async def _post(self, url: httpx.URL, *, body: dict[str, Any]) -> dict[str, Any] | None:
        address = await self._permitted_address(url)
        # To the address judged, not to the name (which could resolve anew elsewhere); the name
        # is kept for the Host header and for TLS (SNI and the certificate check). No httpx
        # timeout: the deadline around the whole call bounds every step. No proxy from the
        # environment, no redirect followed: the call goes to that address or nowhere.
        async with (
            httpx.AsyncClient(timeout=None, trust_env=False) as client,
            client.stream(
                "POST",
                url.copy_with(host=address),
                json=body,
                headers={
                    "Host": url.netloc.decode("ascii"),
                    # Counted as it arrives: a compressed answer would be counted before inflating.
                    "Accept-Encoding": "identity",
                },
                extensions={"sni_hostname": url.raw_host.decode("ascii")},
            ) as response,
        ):
            if response.status_code == 409:
                return None
            if not response.is_success:
                raise HookCallFailed("status", f"the hook answered HTTP {response.status_code}")
            encoding = response.headers.get("content-encoding", "identity")
            if encoding.lower() != "identity":
                raise HookCallFailed(
                    "answer_encoded",
                    f"the hook answered in content-encoding {encoding!r}; only identity is read",
                )
            received = bytearray()
            async for chunk in response.aiter_raw():
                received += chunk
                if len(received) > self._max_answer_bytes:
                    raise HookCallFailed(
                        "answer_too_large",
                        f"the answer exceeded {self._max_answer_bytes} bytes, the limit",
                    )
        if not received.strip():
            return {}  # an empty answer (a 204, say) accepts
        try:
            answer = orjson.loads(received)
        except orjson.JSONDecodeError:
            answer = None
        if not isinstance(answer, dict):
            raise HookCallFailed(
                "answer_not_json",
                "the hook's answer is not a JSON object; an empty answer or one such as"
                ' {"veto": false} is',
            )
        return answer


class SummarizerUnavailable(Exception):
    """The LLM summarizer is not configured or did not answer usably."""


def summarize_with_llm(prompt: str, *, settings: Settings) -> str:
    """Ask an OpenAI-compatible chat completions endpoint for the narrative summary."""
    if not settings.summarizer_url:
        raise SummarizerUnavailable("no summarizer endpoint is configured (CTX_SUMMARIZER_URL)")
    headers = (
        {"Authorization": f"Bearer {settings.summarizer_api_key}"}
        if settings.summarizer_api_key
        else {}
    )
    try:
        response = httpx.post(
            f"{settings.summarizer_url.rstrip('/')}/chat/completions",
            json={
                "model": settings.summarizer_model,
                "temperature": 0,
                "messages": [{"role": "user", "content": prompt}],
            },
            headers=headers,
            timeout=settings.summarizer_timeout_seconds,
        )
        response.raise_for_status()
        text = response.json()["choices"][0]["message"]["content"]
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise SummarizerUnavailable(f"summarizer failed: {type(exc).__name__}") from exc
    if not isinstance(text, str) or not text.strip():
        raise SummarizerUnavailable("summarizer returned no text")
    return text
