"""Extraction: what a range of history shows, read mechanically, and the records built from it.

Touched files are paths named in call arguments or inputs (a token with a known file extension, or
an absolute, `./`, `../` or `~/`-relative path; written file contents and URLs do not count) and the
project frame where the last traceback of an output failed; paths an output merely lists (`ls`,
`grep`) are not touches. An error signature is the final exception line of a traceback, an `error:`
/ `fatal:` line or a `FAILED` line; a bare non-zero exit is a command outcome, not an error (grep
and diff exit 1 routinely). An error counts as resolved when a later run of the same call, within
the same range, succeeds; records say "not seen resolved". A shell command (the `command` of a shell
tool's call, or a local shell call) is identified by its first line, which is what a record shows of
it.

Lists are in source order and deduplicated. Merged into an earlier record they follow its entries,
and a capped list keeps the newest `MAX_*` of them; the state and next steps are the latest ones
seen.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from app.domain.compaction.model import (
    MAX_COMMANDS,
    MAX_DECISIONS,
    MAX_ERRORS,
    MAX_LESSONS,
    MAX_NEXT_STEPS,
    MAX_OPEN_QUESTIONS,
    MAX_REFERENCES,
    MAX_VERIFICATION,
    Handoff,
    Identifier,
    IdentifierKind,
    Notes,
    Summary,
)
from app.domain.compaction.product import is_compaction_product
from app.domain.grounding import FILE_EXTENSIONS
from app.domain.history import HistoryEntry
from app.domain.items import CALL_TYPES, OUTPUT_TYPES, Item, item_type, visible_text

# Single entries are clipped as well as lists capped, so that a record stays small.
_DISPLAY_CHARS = 160
_SENTENCE_CHARS = 240
_SIGNATURE_CHARS = 300
_STATE_CHARS = 600

_TOKEN = re.compile(r"[\w~./-]+")
_FILE_NAME = re.compile(rf"[\w-][\w.-]*\.(?:{FILE_EXTENSIONS})", re.IGNORECASE)
_URL = re.compile(r"\w+://\S+")
_PATH_KEYS = frozenset(
    {"path", "file_path", "filepath", "filename", "file_name", "file", "notebook_path"}
)
# What a tool writes into a file is content, not a list of files the agent touched.
_CONTENT_KEYS = frozenset(
    {"file_text", "content", "new_string", "old_string", "new_str", "old_str", "insert_text"}
)
_SHELL_TOOLS = frozenset({"bash", "shell", "sh", "execute_bash", "run_shell_command", "terminal"})
_FRAME = re.compile(r'^\s*File "([^"\n]+)", line \d+', re.MULTILINE)
_LIBRARY_PATH = re.compile(r"site-packages|dist-packages|/lib/python|^<")
_TRACEBACK = "Traceback (most recent call last):"
_EXCEPTION_LINE = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?::\s.*)?")
_ERROR_LINE = re.compile(r"^\s*((?:error|fatal)(?:\[[\w-]+\])?:\s*\S.*?)\s*$", re.IGNORECASE)
_FAILED_LINE = re.compile(r"^\s*(FAILED\b.*?)\s*$")
_EXIT_STATUS = re.compile(
    r"<returncode>(-?\d+)</returncode>|\bexit(?:ed with)? (?:code|status)[: ]+(-?\d+)",
    re.IGNORECASE,
)
_VERIFICATION_LINE = re.compile(
    r"^[\s=*-]*((?:Tests:\s*)?\d+ (?:passed|failed)\b.*?|Ran \d+ tests? in .*?|OK(?: \(.*\))?|"
    r"FAILED \(.*\))[\s=*-]*$",
    re.MULTILINE,
)
_CODE_BLOCK = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")
_DECISION_CUE = re.compile(
    r"\b(?:decided|decide to|instead|the (?:fix|root cause|cause|problem|issue|bug) (?:is|was)|"
    r"I(?:'ll| will) (?:use|fix|change|modify|implement|add|replace|update|remove|rewrite)|"
    r"my (?:plan|approach)|the (?:plan|approach) is)\b",
    re.IGNORECASE,
)
_NEXT_CUE = re.compile(
    r"\b(?:next|now I(?:'ll| will)|I(?:'ll| will)|let me|let's|going to|then I)\b", re.IGNORECASE
)


REQUEST_CHARS = 2_000
"""A user request longer than this is carried in records head and tail, half each, the middle
named by its fact seq (`shown_request`): an opening that holds a demonstration of thousands of
tokens would otherwise be carried whole by every record, and a record larger than the window is
compacted again on every call."""


def shown_request(seq: int | None, text: str) -> str:
    """The user request `text` (fact `seq`) as records carry it and the loss check looks for it:
    whole up to `REQUEST_CHARS` characters, else its head and tail around a marker that names
    the fact holding it whole."""
    if len(text) <= REQUEST_CHARS:
        return text
    half = REQUEST_CHARS // 2
    where = f"; the whole message is fact seq {seq}" if seq is not None else ""
    return f"{text[:half]}[… {len(text) - 2 * half} characters omitted{where} …]{text[-half:]}"


def request_needle(text: str) -> str:
    """What every form of the user request `text` shows, verbatim or as records carry it: the
    whole of a short one, the head of a long one (what the loss check looks for)."""
    return text if len(text) <= REQUEST_CHARS else text[: REQUEST_CHARS // 2]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_line(text: str) -> str:
    lines = text.strip().splitlines() or [""]
    line = _clip(lines[0].strip(), _DISPLAY_CHARS)
    return f"{line} …" if len(lines) > 1 and not line.endswith("…") else line


def _command_line(command: str) -> str:
    """A shell command's first line as far as `_first_line` shows it, without the clip mark."""
    line = (command.strip().splitlines() or [""])[0].strip()
    return line if len(line) <= _DISPLAY_CHARS else line[: _DISPLAY_CHARS - 1]


def _dedupe(values: Sequence[str], *, cap: int | None = None) -> tuple[str, ...]:
    """First occurrences in order; with a cap, the newest `cap` of them."""
    unique = tuple(dict.fromkeys(value for value in values if value))
    return unique if cap is None or len(unique) <= cap else unique[-cap:]


def error_signatures(text: str) -> tuple[str, ...]:
    """The error signatures an output shows, in order: see the module docstring."""
    found: list[str] = []
    if (start := text.rfind(_TRACEBACK)) >= 0:
        # The exception is the first line of the last traceback that is not indented.
        for line in text[start + len(_TRACEBACK) :].splitlines():
            if line.strip() and not line[0].isspace():
                if _EXCEPTION_LINE.fullmatch(line.strip()):
                    found.append(line.strip())
                break
    # Every error or FAILED line holds one of these words; most outputs hold none, and walking
    # their lines was most of the cost. (Their letters case-fold to ASCII letters only, so
    # `lower` finds whatever the case-insensitive pattern would.)
    lowered = text.lower()
    if "error" in lowered or "fatal" in lowered or "failed" in lowered:
        for line in text.splitlines():
            if match := _ERROR_LINE.match(line) or _FAILED_LINE.match(line):
                found.append(match.group(1))
    return _dedupe([_clip(signature, _SIGNATURE_CHARS) for signature in found])


def _paths_in(text: str) -> Iterator[str]:
    prose = _URL.sub(" ", text)
    for match in _TOKEN.finditer(prose):
        token = match.group().rstrip(".")
        if (
            "//" in token
            or not 3 <= len(token) <= 300
            or prose[match.end() : match.end() + 1] == "("
        ):
            continue  # a URL remnant, or a call such as `locks.lock(f)`
        name = token.rstrip("/").rsplit("/", 1)[-1]
        if (
            _FILE_NAME.fullmatch(name)
            or (token.startswith("/") and token.count("/") >= 2 and name)
            # Relative to here, up or home, a path however short (`../debug.log`, `./run`).
            or (token.startswith(("./", "../", "~/")) and name not in ("", ".", ".."))
            or (token.endswith("/") and token.count("/") >= 2)
        ):
            yield token


def _string_leaves(value: Any, key: str | None = None) -> Iterator[tuple[str | None, str]]:
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, dict):
        for child_key, child in value.items():
            yield from _string_leaves(child, str(child_key))
    elif isinstance(value, list):
        for child in value:
            yield from _string_leaves(child, key)


@dataclass(frozen=True)
class _Call:
    display: str
    """What the agent ran, on one line: the shell command, else the tool name and arguments."""
    key: str
    """Identity of the call, to tell a re-run of the same call."""
    paths: tuple[str, ...]
    command: str | None
    """The first line of the shell command it runs (see `_command_line`); None for other tools."""


def _describe_call(item: Item) -> _Call:
    kind = item_type(item)
    raw = item.get("input", "") if kind == "custom_tool_call" else item.get("arguments", "")
    return _described(kind, str(item.get("name", "")), str(raw), visible_text(item))


@functools.lru_cache(maxsize=4096)
def _described(kind: str, name: str, raw: str, text: str) -> _Call:
    """`_describe_call` of a call by what it reads, kept: a session's calls are described again
    by every compaction (and several times within one), and each costs a walk of its
    arguments' text."""
    match kind:
        case "local_shell_call":
            return _Call(
                _first_line(text),
                f"local_shell\n{text}",
                tuple(_paths_in(text)),
                _command_line(text) or None,
            )
        case "custom_tool_call":
            leaves: list[tuple[str | None, str]] = [(None, raw)]
            command: str | None = None
        case _:
            try:
                arguments = json.loads(raw)
                leaves = list(_string_leaves(arguments))
            except (ValueError, RecursionError):
                # Not JSON, or nested too deep to walk: the arguments are one opaque string.
                arguments = raw
                leaves = list(_string_leaves(raw))
            value = arguments.get("command") if isinstance(arguments, dict) else None
            value = value or (arguments.get("cmd") if isinstance(arguments, dict) else None)
            command = " ".join(map(str, value)) if isinstance(value, list) else value
    paths: list[str] = []
    for key, leaf in leaves:
        if key in _PATH_KEYS and 0 < len(leaf) <= 300 and "\n" not in leaf:
            paths.append(leaf)
        elif key not in _CONTENT_KEYS:
            paths.extend(_paths_in(leaf))
    shell = command if isinstance(command, str) and name.lower() in _SHELL_TOOLS else None
    display = _first_line(shell if shell is not None else f"{name} {raw}".strip())
    # Only substrings of what the model sees can be checked for (and found) later.
    return _Call(
        display,
        f"{name}\n{raw}",
        _dedupe([path for path in paths if path in text]),
        (_command_line(shell) or None) if shell is not None else None,
    )


@dataclass(frozen=True)
class _Step:
    """One tool call and its output."""

    call: _Call
    call_seq: int | None
    output_seq: int | None
    errors: tuple[str, ...]
    verification: tuple[str, ...]
    exit_status: int | None
    settled: bool
    """The output is the recorded one (not cleared, not synthesized): it can resolve an error."""
    reason: str | None
    """The agent's last words before the call."""

    @property
    def failed(self) -> bool:
        return bool(self.errors) or self.exit_status not in (None, 0)

    @property
    def outcome(self) -> str:
        parts = [f"exit {self.exit_status}"] if self.exit_status is not None else []
        if self.errors:
            parts.append(self.errors[-1])
        if not self.settled:
            parts.append("output not in view")
        return f"{self.call.display} → {' · '.join(parts) or 'ok'}"


@dataclass(frozen=True)
class _Scan:
    """What a range of history shows, in order; products are skipped."""

    user_requests: tuple[tuple[int | None, str], ...]
    agent_texts: tuple[str, ...]
    steps: tuple[_Step, ...]
    paths: dict[str, tuple[int | None, ...]]
    """Touched path → seqs of the items naming it, oldest first, in order of first touch."""

    def unresolved(self) -> list[tuple[_Step, str]]:
        """(step, signature) of every error no later run of the same call resolved."""
        return [
            (step, signature)
            for index, step in enumerate(self.steps)
            if step.errors
            and not any(
                later.call.key == step.call.key and later.settled and not later.failed
                for later in self.steps[index + 1 :]
            )
            for signature in step.errors
        ]


def scan_entries(entries: Sequence[HistoryEntry]) -> _Scan:
    users: list[tuple[int | None, str]] = []
    agent: list[str] = []
    steps: list[_Step] = []
    paths: dict[str, tuple[int | None, ...]] = {}
    waiting: dict[str, tuple[_Call, int | None, str | None]] = {}
    for entry in entries:
        item = entry.item
        kind = item_type(item)
        if kind == "message":
            role = item.get("role")
            if role == "user" and not is_compaction_product(item):
                users.append((entry.seq, visible_text(item)))
            elif role == "assistant":
                agent.append(visible_text(item))
        elif kind in CALL_TYPES:
            call = _describe_call(item)
            for path in call.paths:
                paths[path] = (*paths.get(path, ()), entry.seq)
            waiting[str(item.get("call_id"))] = (call, entry.seq, agent[-1] if agent else None)
        elif kind in OUTPUT_TYPES and (pending := waiting.pop(str(item.get("call_id")), None)):
            call, call_seq, reason = pending
            text = visible_text(item)
            # Where the last traceback failed in the project; other frames were only passed by.
            frames = _FRAME.findall(text[text.rfind(_TRACEBACK) :]) if _TRACEBACK in text else []
            if own := [frame for frame in frames if not _LIBRARY_PATH.search(frame)]:
                paths[own[-1]] = (*paths.get(own[-1], ()), entry.seq)
            # Harnesses report the status at the very start or end; "exit code" in the middle
            # of an output is usually the program talking about something else.
            status = next(
                (int(a or b) for a, b in _EXIT_STATUS.findall(text[:200] + text[-200:])), None
            )
            steps.append(
                _Step(
                    call=call,
                    call_seq=call_seq,
                    output_seq=entry.seq,
                    errors=error_signatures(text),
                    verification=tuple(line.strip() for line in _VERIFICATION_LINE.findall(text)),
                    exit_status=status,
                    settled=entry.verbatim and entry.seq is not None,
                    reason=reason,
                )
            )
    return _Scan(tuple(users), tuple(agent), tuple(steps), paths)


def identifiers(entries: Sequence[HistoryEntry]) -> tuple[Identifier, ...]:
    """The touched file paths, the shell commands run (each by its first line, which is what a
    record shows of it) and every error signature of `entries`, in that order, each kind in
    source order and deduplicated."""
    scan = scan_entries(entries)
    found: dict[tuple[IdentifierKind, str], list[int | None]] = {}
    for path, seqs in scan.paths.items():
        found[("path", path)] = list(seqs)
    for step in scan.steps:
        if step.call.command is not None:
            found.setdefault(("command", step.call.command), []).append(step.call_seq)
    for step in scan.steps:
        for signature in step.errors:
            found.setdefault(("error", signature), []).append(step.output_seq)
    return tuple(
        Identifier(kind, text, tuple(dict.fromkeys(s for s in seqs if s is not None)))
        for (kind, text), seqs in found.items()
    )


def _sentences(text: str) -> list[str]:
    prose = _CODE_BLOCK.sub(" ", text)
    return [
        _clip(sentence.strip().removeprefix("THOUGHT:").strip(), _SENTENCE_CHARS)
        for sentence in _SENTENCE_BREAK.split(prose)
        if sentence.strip().removeprefix("THOUGHT:").strip()
    ]


def _next_steps(scan: _Scan) -> tuple[str, ...]:
    last = scan.agent_texts[-1] if scan.agent_texts else ""
    return _dedupe([s for s in _sentences(last) if _NEXT_CUE.search(s)], cap=MAX_NEXT_STEPS)


def _decisions(scan: _Scan) -> list[str]:
    return [s for text in scan.agent_texts for s in _sentences(text) if _DECISION_CUE.search(s)]


def _verification(scan: _Scan) -> list[str]:
    return [
        f"{step.call.display} → {'; '.join(step.verification)}"
        for step in scan.steps
        if step.verification
    ]


def seq_range(entries: Sequence[HistoryEntry]) -> tuple[int, int] | None:
    seqs = [entry.seq for entry in entries if entry.seq is not None]
    return (min(seqs), max(seqs)) if seqs else None


def merged(previous: Sequence[str], current: Sequence[str], *, cap: int | None) -> tuple[str, ...]:
    return _dedupe([*previous, *current], cap=cap)


def summarize_builtin(
    entries: Sequence[HistoryEntry], *, goal: str | None, previous: Summary | None
) -> Summary:
    """The deterministic structured summary of `entries`, merged into `previous`.

    The goal is `goal` verbatim (the previous one only when no goal is given); user requests are
    the user's messages verbatim, the goal itself left out; state and next steps come from the
    agent's last message. Products among `entries` are skipped: merge them through `previous`.
    """
    scan = scan_entries(entries)
    span = seq_range([e for e in entries if not is_compaction_product(e.item)])
    before = previous or Summary(None, (), (), (), (), (), (), None, (), None, None)
    last_agent = _CODE_BLOCK.sub(" ", scan.agent_texts[-1]).strip() if scan.agent_texts else ""
    return Summary(
        goal=goal if goal is not None else before.goal,
        user_requests=merged(
            before.user_requests,
            [shown_request(seq, text) for seq, text in scan.user_requests if text != goal],
            cap=None,
        ),
        decisions=merged(before.decisions, _decisions(scan), cap=MAX_DECISIONS),
        files=merged(before.files, list(scan.paths), cap=None),
        commands=merged(before.commands, [step.outcome for step in scan.steps], cap=MAX_COMMANDS),
        errors=merged(before.errors, [sig for _, sig in scan.unresolved()], cap=MAX_ERRORS),
        verification=merged(before.verification, _verification(scan), cap=MAX_VERIFICATION),
        state=_clip(last_agent, _STATE_CHARS) if last_agent else before.state,
        next_steps=_next_steps(scan) or before.next_steps,
        from_seq=before.from_seq if before.from_seq is not None else (span[0] if span else None),
        to_seq=span[1] if span else before.to_seq,
        narrative=before.narrative,
    )


def take_notes(scan: _Scan, *, goal: str | None, previous: Notes | None) -> Notes:
    before = previous or Notes()
    questions = [
        sentence
        for text in scan.agent_texts[-3:]
        for sentence in _sentences(text)
        if sentence.endswith("?")
    ]
    facts = [
        *(
            f"The user said: {shown_request(seq, text)}"
            for seq, text in scan.user_requests
            if text != goal
        ),
        *(f"File touched: {path}" for path in scan.paths),
        *(f"Verification: {line}" for line in _verification(scan)[-MAX_VERIFICATION:]),
        *(f"Error not seen resolved: {sig}" for _, sig in scan.unresolved()[-MAX_ERRORS:]),
    ]
    return Notes(
        facts=merged(before.facts, facts, cap=None),
        commands=merged(before.commands, [step.outcome for step in scan.steps], cap=MAX_COMMANDS),
        decisions=merged(before.decisions, _decisions(scan), cap=MAX_DECISIONS),
        open_questions=merged(before.open_questions, questions, cap=MAX_OPEN_QUESTIONS),
        next_steps=_next_steps(scan) or before.next_steps,
    )


def hand_off(scan: _Scan, *, previous: Handoff | None) -> Handoff:
    touched = sorted((seqs[-1], path) for path, seqs in scan.paths.items() if seqs[-1] is not None)
    references = [f"fact seq {seq}: last item naming {path}" for seq, path in touched]
    unresolved = scan.unresolved()
    if unresolved:
        step, signature = unresolved[-1]
        references.append(f"fact seq {step.output_seq}: output with the error {signature}")
    if checks := [step for step in scan.steps if step.verification]:
        references.append(f"fact seq {checks[-1].output_seq}: latest verification output")
    lessons: dict[tuple[str, str], str] = {}
    for index, step in enumerate(scan.steps):
        if not step.errors or index + 1 == len(scan.steps):
            continue  # a lesson needs an error and a next attempt
        signature = step.errors[-1]
        later = scan.steps[index + 1 :]
        fixed = next(
            (s for s in later if s.call.key == step.call.key and s.settled and not s.failed), None
        )
        recurred = sum(signature in s.errors for s in later)
        if fixed is not None:
            outcome = f"a later run of the same call succeeded (fact seq {fixed.output_seq})"
        elif recurred:
            outcome = f"the same error came back {recurred} more time(s)"
        else:
            outcome = "the next attempt took another path"
        said = _clip(" ".join(_sentences(step.reason or "")), _SENTENCE_CHARS)
        reason = f" (the agent's reason: {said})" if said else ""
        lessons.setdefault(
            (step.call.key, signature),
            f"Tried {step.call.display}{reason}; it failed with: {signature}; {outcome}.",
        )
    before = previous or Handoff()
    return Handoff(
        references=merged(before.references, references, cap=MAX_REFERENCES),
        lessons=merged(before.lessons, list(lessons.values()), cap=MAX_LESSONS),
    )
