"""`contextd evaluate`: the evaluation `POST /sessions/{id}/evaluate` gives, for trajectories
that never passed through the service: JSONL files of items in any of the three wire formats,
one item (a Chat or Anthropic message, a Responses item) per line.

It runs in this process on a store of its own (`app.storage.scratch`), nothing served and
nothing kept: each file is appended to a session of its own as a runtime would have appended
it (`app.usecases.append`), then replayed under the session's settings and each variant
(`app.usecases.evaluate`), with a progress bar over every call replayed. It prints one table,
each variant's figures summed over the files; `--json` writes every file's answer and the
totals, `--chart` a bar chart of each variant's cost and visible identifiers beside the
session's own settings (SVG or PNG, by the file's suffix; `matplotlib`, the `chart` extra).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from tqdm import tqdm

from app.clock import system_clock
from app.contract.evaluation import EvaluateRequest
from app.contract.sessions import AppendRequest
from app.domain.errors import ContextdError
from app.domain.evaluation import combined
from app.domain.ids import derive_id
from app.domain.items import Format
from app.domain.json_encoding import decode_json
from app.settings import Settings
from app.storage import session_rows
from app.storage.scratch import scratch_store
from app.usecases import append as appending
from app.usecases.evaluate import prepare, run

__all__ = ["evaluate_files", "render_table", "totals", "write_chart"]

TENANT = 1


def read_items(path: Path) -> list[dict[str, Any]]:
    """The items of a JSONL file, one per non-empty line."""
    items = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        item = decode_json(line)
        if not isinstance(item, dict):
            raise ValueError(f"{path}:{number}: not a JSON object")
        items.append(item)
    return items


def session_name(path: Path, number: int) -> str:
    """A session name made from the file's name (what a session id may hold)."""
    return f"{number}-{re.sub(r'[^A-Za-z0-9._:-]', '-', path.stem)}"[:120]


def evaluate_files(
    paths: Sequence[Path],
    *,
    fmt: Format,
    request: EvaluateRequest,
    context_window: int | None,
    settings: Settings,
    progress: bool = True,
) -> dict[str, Any]:
    """Every file appended and evaluated: `{"files": [{"file", "evaluation"}], "totals"}`."""
    with scratch_store(settings, tenant_id=TENANT) as (scratch, sessions), sessions() as db:
        prepared = []
        for number, path in enumerate(paths, 1):
            name = session_name(path, number)
            session_rows.create_session(
                db,
                tenant_id=TENANT,
                external_id=name,
                encoding=scratch.default_encoding,
                context_window=context_window or scratch.default_context_window,
                model=None,
                attributes={"metadata": {}, "hooks": {}},
                derive_id=lambda internal_id: derive_id("sess", TENANT, internal_id),
            )
            db.commit()
            items, batch = read_items(path), scratch.max_items_per_request
            for start in range(0, len(items), batch):
                body = AppendRequest(items=items[start : start + batch], format=fmt)
                appended = appending.append(
                    db,
                    tenant_id=TENANT,
                    session_id=name,
                    body=body,
                    settings=scratch,
                    now=system_clock(),
                )
                if appended.after_answer is not None:
                    appended.after_answer()
            prepared.append(
                (
                    path,
                    prepare(db, tenant_id=TENANT, session_id=name, body=request, settings=scratch),
                )
            )
        bar = tqdm(
            total=sum(p.calls_total for _, p in prepared),
            unit="call",
            desc="replaying",
            disable=not progress,
            file=sys.stderr,
        )
        files: list[dict[str, Any]] = []
        with bar:
            for path, one in prepared:
                done = 0

                def advance(calls: int) -> None:
                    nonlocal done
                    bar.update(calls - done)
                    done = calls

                files.append({"file": str(path), "evaluation": run(one, scratch, progress=advance)})
    return {"files": files, "totals": totals([f["evaluation"] for f in files])}


def totals(evaluations: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each variant's figures over every evaluation (`app.domain.evaluation.combined`)."""
    return [
        {
            "name": first["name"],
            **combined([evaluation["variants"][position] for evaluation in evaluations]),
        }
        for position, first in enumerate(evaluations[0]["variants"] if evaluations else ())
    ]


def render_table(rows: Sequence[dict[str, Any]]) -> str:
    """The totals as a table, cost also against the session's own settings (`current`)."""
    base = rows[0]["cost"] if rows else 0.0
    lines = [
        f"{'variant':<24} {'calls':>6} {'reuse':>7} {'fresh':>10} {'cost':>11} {'vs current':>10} "
        f"{'cmp/100':>7} {'peak':>8} {'visible':>8} {'recall':>7} {'missed':>7}"
    ]
    for row in rows:
        grounding = row["grounding"]
        lines.append(
            f"{row['name'][:24]:<24} {row['calls']:>6} {row['reuse']:>7.1%} "
            f"{row['fresh_tokens']:>10,} {row['cost']:>11,.0f} "
            f"{row['cost'] / base if base else 1.0:>10.2f} {row['compactions_per_100']:>7.1f} "
            f"{row['peak_tokens']:>8,} {grounding['visible_share']:>8.1%} "
            f"{grounding['recallable']:>7} {grounding['missed']:>7}"
        )
    return "\n".join(lines)


def write_chart(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """Each variant's cost (against the session's own settings) and the share of the
    identifiers its next actions used that it showed, as grouped bars."""
    import matplotlib  # the `chart` extra: only the chart needs it

    matplotlib.use("Agg")
    from matplotlib import pyplot

    names = [row["name"] for row in rows]
    base = rows[0]["cost"] or 1.0
    cost = [row["cost"] / base for row in rows]
    visible = [row["grounding"]["visible_share"] for row in rows]
    figure, axis = pyplot.subplots(figsize=(max(6.0, 1.3 * len(rows) + 2), 4.5))
    positions = range(len(rows))
    axis.bar([x - 0.2 for x in positions], cost, width=0.4, label="cost, vs current")
    axis.bar([x + 0.2 for x in positions], visible, width=0.4, label="identifiers visible")
    axis.set_xticks(list(positions), names, rotation=20, ha="right")
    axis.axhline(1.0, color="grey", linewidth=0.8)
    axis.set_ylim(0, max([*cost, *visible, 1.0]) * 1.15)
    axis.set_title("Cost and what the model saw, per variant")
    axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=2, frameon=False)
    figure.tight_layout()
    # The same figures draw the same bytes: no date, and SVG ids from a fixed salt.
    with matplotlib.rc_context({"svg.hashsalt": "contextd"}):
        figure.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else {})
    pyplot.close(figure)


def run_evaluate(
    paths: Sequence[Path],
    *,
    fmt: Format,
    variants: Sequence[str],
    context_window: int | None,
    json_path: Path | None,
    chart_path: Path | None,
    settings: Settings,
) -> int:
    """The command: 0 when every file was evaluated, 2 on bad input (said on stderr)."""
    try:
        request = EvaluateRequest.model_validate(
            {"variants": [json.loads(variant) for variant in variants]}
        )
        report = evaluate_files(
            paths, fmt=fmt, request=request, context_window=context_window, settings=settings
        )
    except (ContextdError, ValueError, ValidationError, OSError) as exc:
        print(f"contextd evaluate: {exc}", file=sys.stderr)
        return 2
    print(render_table(report["totals"]))
    if json_path is not None:
        json_path.write_text(json.dumps(report, indent=2) + "\n")
    if chart_path is not None:
        write_chart(report["totals"], chart_path)
    return 0
