"""The functional core stays pure: no I/O, no clock, no randomness, no framework imports."""

from __future__ import annotations

import ast
from pathlib import Path

DOMAIN = Path(__file__).resolve().parents[2] / "app" / "domain"
ALLOWED_ROOTS = {
    "__future__",
    "abc",
    "ahocorasick",
    "array",
    "bisect",
    "collections",
    "contextlib",
    "copy",
    "dataclasses",
    "difflib",
    "enum",
    "functools",
    "hashlib",
    "heapq",
    "itertools",
    "json",
    "json_merge_patch",
    "math",
    "operator",
    "orjson",
    "re",
    "re2",
    "string",
    "textwrap",
    "types",
    "typing",
    "typing_extensions",
    "unicodedata",
    "uuid",
    "app",
}


def _imported_modules(path: Path) -> list[str]:
    modules: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.append(node.module)
    return modules


def test_domain_imports_only_pure_modules() -> None:
    offenders = {
        f"{path.name}: {module}"
        for path in sorted(DOMAIN.rglob("*.py"))
        for module in _imported_modules(path)
        if module.split(".")[0] not in ALLOWED_ROOTS
        or (module.startswith("app") and not module.startswith("app.domain"))
    }
    assert offenders == set()


def test_domain_calls_no_clock_or_randomness() -> None:
    forbidden = {"uuid1", "uuid4", "now", "utcnow", "today", "time", "random", "urandom", "open"}
    offenders = {
        f"{path.name}:{node.lineno}"
        for path in sorted(DOMAIN.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Attribute) and node.func.attr in forbidden)
            or (isinstance(node.func, ast.Name) and node.func.id in forbidden)
        )
    }
    assert offenders == set()


API = DOMAIN.parent / "api"


def _is_handler_module(path: Path) -> bool:
    """A module that serves routes: it makes an `APIRouter`."""
    return "APIRouter(" in path.read_text()


def test_handler_modules_never_import_each_other() -> None:
    handlers = {f"app.api.{path.stem}" for path in API.glob("*.py") if _is_handler_module(path)}
    offenders = {
        f"{path.name}: {module}"
        for path in sorted(API.glob("*.py"))
        if _is_handler_module(path)
        for module in _imported_modules(path)
        if module in handlers
        or (module == "app.api" and path.stem != "__init__")  # `from app.api import x`
    }
    assert len(handlers) >= 7  # sessions, history, assembly, world, compaction, isolation, ops
    assert offenders == set()


CONTRACT = DOMAIN.parent / "contract"
CONTRACT_ALLOWED_ROOTS = {
    "__future__",
    "collections",
    "datetime",
    "pydantic",
    "pydantic_core",
    "typing",
    "typing_extensions",
}
CONTRACT_ALLOWED_APP = ("app.contract", "app.domain", "app.hooks", "app.tokens")


def test_contract_imports_nothing_above_it() -> None:
    """The wire models sit below the HTTP shell and the use cases, which both import them, so
    they import neither, nor storage: only the core, hooks and tokens."""
    offenders = {
        f"{path.name}: {module}"
        for path in sorted(CONTRACT.glob("*.py"))
        for module in _imported_modules(path)
        if (
            module.split(".")[0] not in CONTRACT_ALLOWED_ROOTS | {"app"}
            or (module.startswith("app") and not module.startswith(CONTRACT_ALLOWED_APP))
            or module == "app"
        )
    }
    assert len(list(CONTRACT.glob("*.py"))) >= 10  # common and one module per router
    assert offenders == set()


APP = DOMAIN.parent
ROOT = APP.parent
BELOW = {
    "domain": ("app.usecases", "app.api", "app.storage", "app.contract"),
    "storage": ("app.usecases", "app.api", "app.contract"),
    "contract": ("app.usecases", "app.api"),
    "usecases": ("app.api",),
}
"""Each layer and the layers above it, which it never imports: data flows down and back once."""


def test_no_layer_reaches_up() -> None:
    offenders = {
        f"{layer}/{path.relative_to(APP / layer)}: {module}"
        for layer, above in BELOW.items()
        for path in sorted((APP / layer).rglob("*.py"))
        for module in _imported_modules(path)
        if module.startswith(above)
    }
    assert offenders == set()


def _functions(path: Path) -> list[tuple[str, int]]:
    return [
        (node.name, (node.end_lineno or node.lineno) - node.lineno + 1)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def test_handlers_are_a_few_lines_each() -> None:
    """The HTTP shell maps a request to a use case and its answer back: nothing in it needs
    more than 60 lines."""
    long = {
        f"{path.name}:{name} ({lines} lines)"
        for path in sorted(API.glob("*.py"))
        for name, lines in _functions(path)
        if lines > 60
    }
    assert long == set()


def _is_generated(path: Path) -> bool:
    return "`make client-models`; do not edit" in path.read_text()[:300]


def test_every_hand_written_module_fits_in_a_head() -> None:
    modules = [*APP.rglob("*.py"), *(ROOT / "clients" / "python").rglob("*.py")]
    long = {
        f"{path.relative_to(ROOT)} ({lines} lines)"
        for path in modules
        if not _is_generated(path) and (lines := len(path.read_text().splitlines())) > 600
    }
    assert long == set()


def test_bench_imports_nothing_from_tests() -> None:
    offenders = {
        f"{path.name}: {module}"
        for path in sorted((ROOT / "bench").glob("*.py"))
        for module in _imported_modules(path)
        if module == "tests" or module.startswith("tests.")
    }
    assert offenders == set()


SHELL_WIRING = {"deps.py", "errors.py"}
"""The HTTP shell's two wiring modules, the only ones in `app/api` that name storage: `deps`
hands each request its database session and the deadline its statements run under, `errors`
maps the database's failures to HTTP answers. Both take only `app.storage.database`."""


def test_routes_go_through_use_cases() -> None:
    """A route maps a request to a use case and its answer back: no route module reads or
    writes storage or ends a transaction itself; the wiring modules take only the database's
    deadlines and failures."""
    reached = {
        f"{path.name}: {module}"
        for path in sorted(API.glob("*.py"))
        for module in _imported_modules(path)
        if module.startswith("app.storage")
        and not (path.name in SHELL_WIRING and module == "app.storage.database")
    }
    committed = {
        f"{path.name}:{node.lineno}"
        for path in sorted(API.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in {"commit", "rollback", "flush"}
    }
    assert (reached, committed) == (set(), set())


def test_storage_holds_rows_and_statements_only() -> None:
    """Storage never counts tokens, records metrics, calls hooks or reaches a use case: those
    are the layers above's, which hand it what to write."""
    offenders = {
        f"storage/{path.name}: {module}"
        for path in sorted((APP / "storage").glob("*.py"))
        for module in _imported_modules(path)
        if module.startswith(("app.metrics", "app.tokens", "app.hooks", "app.usecases"))
    }
    assert offenders == set()


def test_use_cases_read_as_named_steps() -> None:
    """A use case is a sequence of named steps: none needs more than 80 lines."""
    long = {
        f"{path.name}:{name} ({lines} lines)"
        for path in sorted((APP / "usecases").glob("*.py"))
        for name, lines in _functions(path)
        if lines > 80
    }
    assert long == set()
