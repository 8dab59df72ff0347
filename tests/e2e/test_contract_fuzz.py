"""The contract campaign: schemathesis' command line, as a new user would run it, against a real
server process on PostgreSQL, with every check in every phase (examples, coverage, fuzzing and
stateful sequences that follow the contract's links).

`schemathesis.toml` and `tests/api/contract_checks.py` say what is checked: no 5xx, documented
statuses, headers and bodies, schema-violating data refused, valid data accepted unless it breaks
a rule its operation lists, authentication enforced, created resources found and deleted ones
gone. `make test` runs a bounded campaign with a fixed seed; `make fuzz` a large one with a new
seed each time.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.e2e.servers import running

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("CTX_FUZZ_EXAMPLES", "8"))
SEED = os.environ.get("CTX_FUZZ_SEED", "20261204")
"""A fixed seed keeps `make test` repeatable; `make fuzz` sets it empty to draw a new one."""
KEY = "key-contract"


def test_the_service_honours_its_contract(postgres_url: str) -> None:
    with running(postgres_url, CTX_API_KEYS=f'["contract:{KEY}"]') as server:
        command = [
            *(sys.executable, "-m", "schemathesis.cli", "run", "openapi.yaml"),
            *("--url", server.base, "--checks", "all"),
            # Replaced by `valid_data_accepted_or_stated_rule` (see contract_checks).
            *("--exclude-checks", "positive_data_acceptance"),
            *("-H", f"Authorization: Bearer {KEY}", "--max-examples", str(EXAMPLES)),
            *("--workers", "1", "--no-color"),
            *(("--seed", SEED) if SEED else ()),
        ]
        done = subprocess.run(
            command,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            check=False,
        )
    # A failing case may carry a body of megabytes: each line of the report is cut short.
    report = "\n".join(line[:400] for line in (done.stdout + done.stderr).splitlines())
    assert done.returncode == 0, report
    generated = re.search(r"(\d+) generated, (\d+) passed", report)
    assert generated is not None, report
    assert generated.group(1) == generated.group(2), report
    links = re.search(r"API Links:\s+(\d+) covered", report)
    assert links is not None, report
    assert int(links.group(1)) > 0, report
    print(report)
