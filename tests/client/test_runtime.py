"""The adapters' shared core against a real server: a framework's list is mirrored into the
log once (across retries, restarts and a second mirror of the same thread), what the service
does not know is kept and reported, the model gets the assembly (compacted first when advised),
usage is reported against the assembly the model was given, and the model's recall calls are
answered with text, whatever they ask."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from contextd_client import (
    AsyncContextdClient,
    Conflict,
    ContextdClient,
    Retries,
    Unavailable,
    ValidationFailed,
    models,
)
from contextd_client.runtime import (
    AsyncContextLink,
    ContextLink,
    Entry,
    LinkOptions,
    Mirror,
    PendingEntry,
    Usage,
    idempotency_key,
)
from tests.builders import assistant_msg, tool_call, tool_output, user_msg
from tests.client.conftest import API_KEY
from tests.client.relays import UnavailableFront
from tests.e2e.servers import Server


def _entries(turns: int) -> list[Entry]:
    entries = []
    for n in range(turns):
        entries += [
            Entry((user_msg(f"step {n}: list the files"),)),
            Entry((tool_call(f"c{n}", arguments='{"cmd": "ls"}'),)),
            Entry((tool_output(f"c{n}", f"a{n}.py\n" + "line of output\n" * 300),)),
            Entry((assistant_msg(f"step {n} done"),)),
        ]
    return entries


def _logged(client: ContextdClient, session_id: str) -> list[dict[str, Any]]:
    return [entry.item for entry in client.iter_items(session_id)]


def test_mirror_sends_what_follows_the_longest_appended_prefix() -> None:
    mirror = Mirror("s")
    first = [Entry((user_msg("a"),)), Entry((user_msg("b"),))]
    pending = mirror.pending(first)
    assert pending == [
        _pending(0, first[0], "s"),
        _pending(1, first[1], "s"),
    ]
    for each in pending:
        mirror.mark(each)
    assert mirror.pending(first) == []
    # Another component rewrote the second entry: from there on everything is new content.
    rewritten = [first[0], Entry((user_msg("b, shortened"),)), Entry((user_msg("c"),))]
    assert mirror.pending(rewritten) == [
        _pending(1, rewritten[1], "s"),
        _pending(2, rewritten[2], "s"),
    ]


def _pending(position: int, entry: Entry, session_id: str) -> PendingEntry:
    return PendingEntry(position, entry, idempotency_key(session_id, position, entry.digest))


def test_an_entry_digest_ignores_key_order_but_not_format_or_content() -> None:
    one = Entry(({"type": "message", "role": "user", "content": "hi"},))
    same = Entry(({"content": "hi", "role": "user", "type": "message"},))
    assert one.digest == same.digest
    assert one.digest != Entry(({"role": "user", "content": "hi"},), "chat").digest
    assert one.digest != Entry(({"type": "message", "role": "user", "content": "hi!"},)).digest


def test_a_list_is_appended_once_across_restarts(server: Server, session_id: str) -> None:
    options = LinkOptions(session={"model": "gpt-4o"})
    entries = _entries(2)
    with ContextdClient(server.base, api_key=API_KEY) as client:
        link = ContextLink(client, session_id, options=options)
        assert link.record(entries[:5]) == 5
        assert link.record(entries[:5]) == 0
        assert link.record(entries) == 3
        # A new process knows nothing of what was sent: the derived keys make re-sending free.
        restarted = ContextLink(client, session_id, options=options)
        assert restarted.record(entries) == 8
        assert _logged(client, session_id) == [e.items[0] for e in entries]
        assert client.get_session(session_id).model == "gpt-4o"


def test_items_the_service_does_not_know_are_kept_and_reported(
    server: Server, session_id: str
) -> None:
    odd = {"type": "framework:memo", "note": "kept, never shown"}
    with ContextdClient(server.base, api_key=API_KEY) as client:
        link = ContextLink(client, session_id)
        link.record([Entry((user_msg("hi"),)), Entry((odd,))])
        assert link.excluded == [
            models.ExcludedItem(seq=2, type="framework:memo", reason="unknown_type")
        ]
        assert _logged(client, session_id) == [user_msg("hi"), odd]
        assert link.context().messages == [user_msg("hi")]


def test_the_context_is_compacted_first_when_advised(server: Server, session_id: str) -> None:
    options = LinkOptions(
        output_format="chat",
        unit="planner",
        session={"model": "claude-sonnet-4", "context_window": 8_000},
    )
    with ContextdClient(server.base, api_key=API_KEY) as client:
        link = ContextLink(client, session_id, options=options)
        client.create_session(**options.create_body(session_id))
        client.put_goal(session_id, text="List every file.")
        link.record(_entries(6))
        advised = client.compaction_advice(session_id)
        assert advised.should_compact
        context = link.context()
        assert [c.strategy for c in link.compactions] == [advised.recommended_strategy]
        assert link.compactions[0].compaction_id is not None
        assert context == link.last_assembly
        assert not context.advice.should_compact
        assert client.get_history(session_id).compaction_id == link.compactions[0].compaction_id
        # The model's usage goes against the assembly it was given.
        link.report(Usage(input_tokens=2_400, cached_tokens=1_000, output_tokens=50))
        window = client.context_window(session_id)
        assert (window.tokenizer.samples, window.tokenizer.calibrated) == (1, True)


def test_a_configured_strategy_that_cannot_apply_falls_back_to_the_recommended_one(
    server: Server, session_id: str
) -> None:
    """Issue 43: told `clear_tool_results`, with every large output among the newest three, the
    link posted a no-op on every step while the pressure stayed."""
    options = LinkOptions(compact_strategy="clear_tool_results", session={"context_window": 12_000})
    entries = [Entry((user_msg("find why the export crashes"),))]
    for n in range(3):
        output = " ".join(f"row{n}x{k}" for k in range(1_130))
        entries += [
            Entry((tool_call(f"c{n}", arguments=f'{{"cmd": "dump {n}"}}'),)),
            Entry((tool_output(f"c{n}", output),)),
        ]
    with ContextdClient(server.base, api_key=API_KEY) as client:
        link = ContextLink(client, session_id, options=options)
        link.record(entries)
        recommended = client.compaction_advice(session_id).recommended_strategy
        assert recommended not in (None, "clear_tool_results")
        context = link.context()
        [compaction] = link.compactions
        assert (compaction.requested_strategy, compaction.strategy) == (
            "clear_tool_results",
            recommended,
        )
        assert compaction.applied
        assert not context.advice.should_compact


def test_compaction_can_be_left_to_the_caller(server: Server, session_id: str) -> None:
    options = LinkOptions(compact=False, session={"context_window": 8_000})
    with ContextdClient(server.base, api_key=API_KEY) as client:
        link = ContextLink(client, session_id, options=options)
        link.record(_entries(6))
        context = link.context()
        assert context.advice.should_compact
        assert link.compactions == []


def test_the_async_link_mirrors_and_assembles_alike(server: Server, session_id: str) -> None:
    async def scenario() -> tuple[int, int, models.AssembleResponse]:
        async with AsyncContextdClient(server.base, api_key=API_KEY) as client:
            link = AsyncContextLink(client, session_id, options=LinkOptions(output_format="chat"))
            sent = await link.record(_entries(1))
            again = await AsyncContextLink(client, session_id).record(_entries(1))
            context = await link.context()
            await link.report(Usage(input_tokens=10))
            return sent, again, context

    sent, again, context = asyncio.run(scenario())
    assert (sent, again) == (4, 4)
    with ContextdClient(server.base, api_key=API_KEY) as client:
        assert _logged(client, session_id) == [e.items[0] for e in _entries(1)]
        same = client.assemble(session_id=session_id, output_format="chat")
    assert context.messages == same.messages
    assert context.plan_hash == same.plan_hash


@pytest.mark.parametrize("position", [0, 7])
def test_idempotency_keys_are_derived_and_fit_the_service(position: int) -> None:
    digest = Entry((user_msg("hi"),)).digest
    key = idempotency_key("session", position, digest)
    assert key == idempotency_key("session", position, digest)
    assert key != idempotency_key("other", position, digest)
    assert len(key) <= 200


def test_a_recall_is_answered_with_the_services_text_in_whatever_form_the_arguments_come(
    server: Server, session_id: str
) -> None:
    with ContextdClient(server.base, api_key=API_KEY) as client:
        link = ContextLink(client, session_id)
        link.record(_entries(1))
        expected = client.recall(session_id, seq=3).tool_output

        answers = [link.recall('{"seq": 3}'), link.recall({"seq": 3}), link.recall(' {"seq":3}\n')]

        assert answers == [expected] * 3
        # A recall writes nothing: the model's call and its output are the framework's to log.
        assert client.get_session(session_id).last_seq == 4


def test_a_recall_the_service_refuses_is_answered_with_its_reason_not_raised(
    server: Server, session_id: str
) -> None:
    with ContextdClient(server.base, api_key=API_KEY) as client:
        link = ContextLink(client, session_id)
        link.record(_entries(1))
        with pytest.raises(ValidationFailed) as bad_pattern:
            client.recall(session_id, seq=3, pattern="(unclosed")
        with pytest.raises(ValidationFailed) as not_a_number:
            client.recall(session_id, seq="three")  # type: ignore[arg-type]  # the model's
        with pytest.raises(Conflict) as past_the_log:
            client.recall(session_id, seq=99)

        answers = [
            link.recall({"seq": 3, "pattern": "(unclosed"}),
            link.recall('{"seq": "three"}'),
            link.recall({"seq": 99}),
            link.recall("[3]"),
            link.recall("{seq: 3}"),
        ]

    # The pattern's message says it all; the generic one gets the detail naming the argument.
    assert answers == [
        bad_pattern.value.message,
        f"{not_a_number.value.message}; seq: {not_a_number.value.details[0]['msg']}",
        past_the_log.value.message,
        "the arguments must be a JSON object, not '[3]'",
        "the arguments are not valid JSON: Expecting property name enclosed in double quotes:"
        " line 1 column 2 (char 1)",
    ]


def test_a_recall_the_service_cannot_answer_raises(server: Server, session_id: str) -> None:
    with ContextdClient(server.base, api_key=API_KEY) as client:
        ContextLink(client, session_id).record(_entries(1))
    with (
        UnavailableFront(server.base, count=100, retry_after="0") as front,
        ContextdClient(front.base, api_key=API_KEY, retries=Retries(attempts=2)) as unavailable,
        pytest.raises(Unavailable),
    ):
        ContextLink(unavailable, session_id).recall({"seq": 3})


def test_the_async_link_answers_a_recall_alike(server: Server, session_id: str) -> None:
    async def scenario() -> list[str]:
        async with AsyncContextdClient(server.base, api_key=API_KEY) as client:
            link = AsyncContextLink(client, session_id)
            await link.record(_entries(1))
            return [await link.recall('{"seq": 3}'), await link.recall({"seq": 99})]

    answers = asyncio.run(scenario())
    with ContextdClient(server.base, api_key=API_KEY) as client:
        with pytest.raises(Conflict) as past_the_log:
            client.recall(session_id, seq=99)
        assert answers == [client.recall(session_id, seq=3).tool_output, past_the_log.value.message]
