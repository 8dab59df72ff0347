"""Every provider-ready output passes that provider's own SDK request types and the rules the
types cannot express (`tests.providers`), on PostgreSQL.

The matrix: each real trajectory is appended to one session in Responses form and read back in
every output format through `/assemble` (default budget; a large budget with a memory; after a
goal and world state are set) and `/history/normalize` (stateless and session mode). The
provider-ready list is `messages` of an assembly and `items` of a normalization; output in
`anthropic` carries system content in a top-level `system` field of text blocks beside it,
while `chat` and `responses` keep it in system/developer messages.

Then the cross-provider cases: a history in one provider's format, normalized into another's.
Reasoning only verifies at the provider that issued it, so it crosses no provider boundary: it
is excluded with reason `foreign_reasoning` instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, assert_never

import pytest
from fastapi.testclient import TestClient

from app.domain.items import FORMATS, Format
from tests.builders import assistant_msg, tool_call, tool_output, user_msg
from tests.conftest import TRAJECTORIES, load_trajectory
from tests.providers import anthropic_violations, chat_violations, responses_violations

Answer = tuple[int, dict[str, Any]]
"""An endpoint's status code and JSON body."""

LARGE_BUDGET = {"max_tokens": 1_000_000, "max_items": 10_000}
MEMORY_TEXT = "The maintainers prefer small commits with a test for every fix."
MEMORY = {"source": "memory", "items": [{"id": "m1", "content": MEMORY_TEXT, "layer": "memory"}]}
GOAL = "Make the failing test pass without changing its assertions."
RULES = {"text": "Run the whole test suite before declaring the task done."}
ENVIRONMENT = {"cwd": "/repo", "os": "linux"}

SHOWN_VIOLATIONS = 8


def provider_violations(fmt: Format, body: dict[str, Any], *, key: str) -> list[str]:
    """Why `fmt`'s provider would refuse the output in `body[key]` (with `body["system"]`)."""
    items, system = body.get(key), body.get("system")
    if not isinstance(items, list):
        return [f"{key}: not a list ({type(items).__name__})"]
    match fmt:
        case "anthropic":
            return anthropic_violations(system, items)
        case "chat":
            found = chat_violations(items)
        case "responses":
            found = responses_violations(items)
        case _:
            assert_never(fmt)
    if system is not None:
        found.insert(0, f"system: a top-level system field in {fmt} output ({system!r:.80})")
    return found


def _verdict(found: list[str]) -> str:
    shown = "\n  ".join(found[:SHOWN_VIOLATIONS])
    return f"{len(found)} violations, the first {min(len(found), SHOWN_VIOLATIONS)}:\n  {shown}"


def assert_provider_ready(answer: Answer, fmt: Format, *, key: str, status: int) -> None:
    code, body = answer
    assert code == status, body
    found = provider_violations(fmt, body, key=key)
    assert found == [], _verdict(found)


def _texts(content: Any) -> Iterator[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                yield part["text"]


def system_text(fmt: Format, body: dict[str, Any], *, key: str) -> str:
    """All system content the model is given: the `system` blocks in `anthropic`, the system
    and developer messages in `chat` and `responses`."""
    if fmt == "anthropic":
        return "\n".join(_texts(body.get("system")))
    return "\n".join(
        text
        for message in body[key]
        if isinstance(message, dict) and message.get("role") in ("system", "developer")
        for text in _texts(message.get("content"))
    )


def _post(client: TestClient, path: str, body: dict[str, Any]) -> Answer:
    response = client.post(path, json=body)
    return response.status_code, response.json()


def _append(client: TestClient, session_id: str, items: list[Any], *, fmt: Format) -> None:
    assert client.post("/sessions", json={"session_id": session_id}).status_code == 201
    appended = client.post(f"/sessions/{session_id}/items", json={"items": items, "format": fmt})
    assert appended.status_code == 201, appended.text


@pytest.fixture(scope="module", params=TRAJECTORIES, ids=[path.stem for path in TRAJECTORIES])
def answers(request: pytest.FixtureRequest, client: TestClient) -> dict[tuple[str, Format], Answer]:
    """Every answer of the matrix for one trajectory, keyed by (case, output format). One
    session serves them all: the goal and world state are set after the cases that run
    without them."""
    path: Path = request.param
    items = load_trajectory(path)
    session_id = f"provider-output-{path.stem}"
    _append(client, session_id, items, fmt="responses")
    found: dict[tuple[str, Format], Answer] = {}
    for fmt in FORMATS:
        session: dict[str, Any] = {"session_id": session_id, "output_format": fmt}
        found["assemble", fmt] = _post(client, "/assemble", session)
        found["assemble_with_memory", fmt] = _post(
            client, "/assemble", {**session, "budget": LARGE_BUDGET, "sources": [MEMORY]}
        )
        found["normalize_session", fmt] = _post(client, "/history/normalize", session)
        found["normalize_items", fmt] = _post(
            client,
            "/history/normalize",
            {"items": items, "format": "responses", "output_format": fmt},
        )
    goal = client.put(f"/sessions/{session_id}/goal", json={"text": GOAL})
    assert goal.status_code == 200, goal.text
    sections = {"rules": RULES, "environment": ENVIRONMENT}
    state = client.put(f"/sessions/{session_id}/world-state", json={"sections": sections})
    assert state.status_code == 200, state.text
    for fmt in FORMATS:
        found["assemble_with_goal", fmt] = _post(
            client, "/assemble", {"session_id": session_id, "output_format": fmt}
        )
    return found


@pytest.mark.parametrize("fmt", FORMATS)
def test_assembled_session_is_provider_ready(
    answers: dict[tuple[str, Format], Answer], fmt: Format
) -> None:
    assert_provider_ready(answers["assemble", fmt], fmt, key="messages", status=201)


@pytest.mark.parametrize("fmt", FORMATS)
def test_assembled_session_with_a_memory_under_a_large_budget_is_provider_ready(
    answers: dict[tuple[str, Format], Answer], fmt: Format
) -> None:
    answer = answers["assemble_with_memory", fmt]
    assert_provider_ready(answer, fmt, key="messages", status=201)
    shown = json.dumps([answer[1].get("system"), answer[1]["messages"]], ensure_ascii=False)
    assert MEMORY_TEXT in shown, "the selected memory is not in the provider-ready output"


@pytest.mark.parametrize("fmt", FORMATS)
def test_assembled_goal_and_world_state_are_provider_ready_system_content(
    answers: dict[tuple[str, Format], Answer], fmt: Format
) -> None:
    answer = answers["assemble_with_goal", fmt]
    assert_provider_ready(answer, fmt, key="messages", status=201)
    system = system_text(fmt, answer[1], key="messages")
    assert (GOAL in system, RULES["text"] in system) == (True, True), system


@pytest.mark.parametrize("fmt", FORMATS)
def test_normalized_items_are_provider_ready(
    answers: dict[tuple[str, Format], Answer], fmt: Format
) -> None:
    assert_provider_ready(answers["normalize_items", fmt], fmt, key="items", status=200)


@pytest.mark.parametrize("fmt", FORMATS)
def test_normalized_session_is_provider_ready(
    answers: dict[tuple[str, Format], Answer], fmt: Format
) -> None:
    assert_provider_ready(answers["normalize_session", fmt], fmt, key="items", status=200)


# --- across providers ---------------------------------------------------------------------

THINKING = {
    "type": "thinking",
    "thinking": "Both files are independent, so I read them in parallel.",
    "signature": "EqQBCkYIBxgCKkBN2wTr2mBSvZq0J1qDAnthropicSignature==",
}
FAILED_RESULT = {
    "type": "tool_result",
    "tool_use_id": "toolu_02",
    "content": "cat: b.py: No such file or directory",
    "is_error": True,
}
ANTHROPIC_HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "Show me a.py and b.py."},
    {
        "role": "assistant",
        "content": [
            THINKING,
            {"type": "tool_use", "id": "toolu_01", "name": "read", "input": {"path": "a.py"}},
            {"type": "tool_use", "id": "toolu_02", "name": "read", "input": {"path": "b.py"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "print('a')"},
            FAILED_RESULT,
            {"type": "text", "text": "Create b.py if it is missing."},
        ],
    },
]

OPENAI_BLOB = "gAAAAABoOpenAIEncryptedReasoningBlob0123456789=="
OPENAI_REASONING = {
    "type": "reasoning",
    "id": "rs_68a1",
    "summary": [{"type": "summary_text", "text": "List the files before reading any."}],
    "encrypted_content": OPENAI_BLOB,
}

IMAGE_URL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"


def _contains(value: Any, wanted: Any) -> bool:
    """Whether `wanted` is `value` or nested anywhere in it."""
    if value == wanted:
        return True
    if isinstance(value, dict):
        return any(_contains(nested, wanted) for nested in value.values())
    if isinstance(value, list):
        return any(_contains(nested, wanted) for nested in value)
    return False


def _normalize(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    status, result = _post(client, "/history/normalize", body)
    assert status == 200, result
    return result


def _blocks_of_type(messages: list[Any], kinds: set[str]) -> list[Any]:
    return [
        block
        for message in messages
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") in kinds
    ]


def test_appended_anthropic_history_keeps_its_original_form_and_round_trips(
    client: TestClient, session_id: str
) -> None:
    _append(client, session_id, ANTHROPIC_HISTORY, fmt="anthropic")
    logged = client.get(f"/sessions/{session_id}/items").json()["items"]
    originals = [entry.get("original") or {} for entry in logged]
    assert [original.get("format") for original in originals] == ["anthropic"] * len(logged)
    assert (_contains(originals, THINKING), _contains(originals, FAILED_RESULT)) == (True, True)
    result = _normalize(client, {"session_id": session_id, "output_format": "anthropic"})
    found = provider_violations("anthropic", result, key="items")
    assert found == [], _verdict(found)
    assert result["items"] == ANTHROPIC_HISTORY
    assert [e["reason"] for e in result["report"]["excluded"]] == []


@pytest.mark.parametrize("mode", ["items", "session"])
@pytest.mark.parametrize("fmt", ["chat", "responses"])
def test_anthropic_thinking_is_excluded_as_foreign_reasoning_in_openai_formats(
    client: TestClient, session_id: str, fmt: Format, mode: str
) -> None:
    body: dict[str, Any] = {"output_format": fmt}
    if mode == "session":
        _append(client, session_id, ANTHROPIC_HISTORY, fmt="anthropic")
        body["session_id"] = session_id
    else:
        body |= {"items": ANTHROPIC_HISTORY, "format": "anthropic"}
    result = _normalize(client, body)
    found = provider_violations(fmt, result, key="items")
    assert found == [], _verdict(found)
    assert [e["reason"] for e in result["report"]["excluded"]] == ["foreign_reasoning"]
    shown = json.dumps(result["items"])
    assert (THINKING["signature"] in shown, THINKING["thinking"] in shown) == (False, False)


@pytest.mark.parametrize("fmt", ["chat", "anthropic"])
def test_openai_reasoning_is_excluded_as_foreign_reasoning_elsewhere(
    client: TestClient, fmt: Format
) -> None:
    items = [
        user_msg("What is in the repository?"),
        OPENAI_REASONING,
        tool_call("call_ls", "shell", '{"command":["ls"]}'),
        tool_output("call_ls", "README.md\nsrc"),
        assistant_msg("A README and a src directory."),
    ]
    result = _normalize(client, {"items": items, "format": "responses", "output_format": fmt})
    found = provider_violations(fmt, result, key="items")
    assert found == [], _verdict(found)
    assert [e["reason"] for e in result["report"]["excluded"]] == ["foreign_reasoning"]
    assert _blocks_of_type(result["items"], {"thinking", "redacted_thinking"}) == []
    assert OPENAI_BLOB not in json.dumps([result.get("system"), result["items"]])


@pytest.mark.parametrize(
    "reasoning",
    [OPENAI_REASONING, {k: v for k, v in OPENAI_REASONING.items() if k != "id"}],
    ids=["with_id", "codex_stateless"],
)
def test_openai_reasoning_goes_back_to_responses_as_it_came(
    client: TestClient, reasoning: dict[str, Any]
) -> None:
    items = [
        user_msg("What is in the repository?"),
        reasoning,
        tool_call("call_ls", "shell", '{"command":["ls"]}'),
        tool_output("call_ls", "README.md\nsrc"),
    ]
    result = _normalize(client, {"items": items, "format": "responses"})
    found = provider_violations("responses", result, key="items")
    assert found == [], _verdict(found)
    assert (result["items"], result["report"]["excluded"]) == (items, [])


def test_image_tool_output_becomes_a_placeholder_then_a_user_image_in_chat(
    client: TestClient,
) -> None:
    image = {"type": "input_image", "image_url": IMAGE_URL, "detail": "auto"}
    items = [
        user_msg("What does the login page look like?"),
        tool_call("call_shot", "screenshot"),
        {"type": "function_call_output", "call_id": "call_shot", "output": [image]},
        assistant_msg("A login form with two fields."),
    ]
    result = _normalize(client, {"items": items, "format": "responses", "output_format": "chat"})
    found = provider_violations("chat", result, key="items")
    assert found == [], _verdict(found)
    messages = result["items"]
    answers = [
        index
        for index, message in enumerate(messages)
        if message.get("role") == "tool" and message.get("tool_call_id") == "call_shot"
    ]
    assert len(answers) == 1, messages
    placeholder = "\n".join(_texts(messages[answers[0]]["content"]))
    assert "image" in placeholder.lower(), placeholder
    carrier = messages[answers[0] + 1] if answers[0] + 1 < len(messages) else {}
    assert carrier.get("role") == "user", messages
    urls = [b["image_url"]["url"] for b in _blocks_of_type([carrier], {"image_url"})]
    assert urls == [IMAGE_URL]


def test_empty_tool_output_becomes_placeholder_text_in_chat(client: TestClient) -> None:
    items = [
        user_msg("Rename the file."),
        tool_call("call_mv", "shell", '{"command":["mv","a","b"]}'),
        tool_output("call_mv", ""),
        assistant_msg("Renamed."),
    ]
    result = _normalize(client, {"items": items, "format": "responses", "output_format": "chat"})
    found = provider_violations("chat", result, key="items")
    assert found == [], _verdict(found)
    [answer] = [m for m in result["items"] if m.get("tool_call_id") == "call_mv"]
    assert "".join(_texts(answer["content"])).strip() != ""


WRONG_SHAPES: list[dict[str, Any]] = [
    {"type": "message", "role": "user", "content": 5},
    {"type": "message", "role": "user", "content": {"a": 1}},
    {"type": "message", "role": "assistant", "content": [7, "bare"]},
    tool_call("c1", "sh", '{"cmd":"ls"}'),
    {"type": "function_call_output", "call_id": "c1", "output": {"unexpected": "object"}},
]


@pytest.mark.parametrize("fmt", FORMATS)
def test_content_of_the_wrong_shape_is_kept_out_of_every_format_and_reported(
    client: TestClient, session_id: str, fmt: Format
) -> None:
    items = [user_msg("list the files"), *WRONG_SHAPES, assistant_msg("done")]
    assert client.post("/sessions", json={"session_id": session_id}).status_code == 201
    appended = client.post(f"/sessions/{session_id}/items", json={"items": items})
    assert appended.status_code == 201, appended.text
    # Each says what is wrong with it (issue 43: it said "malformed" and nothing else).
    malformed = [
        {"seq": seq, "type": kind, "reason": "malformed", "detail": detail}
        for seq, kind, detail in (
            (2, "message", "message content is a number, not text or a list of parts"),
            (3, "message", "message content is an object, not text or a list of parts"),
            (4, "message", "message content part 0 is a number, not an object"),
            (
                6,
                "function_call_output",
                "function_call_output output is an object, not text or a list of parts",
            ),
        )
    ]
    assert appended.json()["excluded"] == malformed
    # The log keeps them exactly as sent.
    logged = client.get(f"/sessions/{session_id}/items").json()["items"]
    assert [entry["item"] for entry in logged] == items

    status, body = _post(client, "/assemble", {"session_id": session_id, "output_format": fmt})
    assert status == 201, body
    assert provider_violations(fmt, body, key="messages") == []
    assert not any(_contains(body["messages"], shape) for shape in (5, {"a": 1}, [7, "bare"]))
    assert not _contains(body["messages"], {"unexpected": "object"})
    # `elided` lists what there is to read back: only seq 4 has any text ("bare").
    assert body["elided"] == [
        {
            "first_seq": 4,
            "last_seq": 4,
            "form": "excluded",
            "tokens_full": 1,
            "tokens_shown": 0,
            "reason": "normalization: malformed (message content part 0 is a number, not an "
            "object)",
        }
    ]

    status, normalized = _post(
        client, "/history/normalize", {"items": items, "format": "responses", "output_format": fmt}
    )
    assert status == 200, normalized
    assert provider_violations(fmt, normalized, key="items") == []
    assert [(e["index"], e["reason"]) for e in normalized["report"]["excluded"]] == [
        (1, "malformed"),
        (2, "malformed"),
        (3, "malformed"),
        (5, "malformed"),
    ]
