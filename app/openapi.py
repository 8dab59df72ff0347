"""Print the OpenAPI document of the app as YAML (`make openapi` writes openapi.yaml)."""

from __future__ import annotations

from typing import Any

import yaml

from app.main import create_app
from app.settings import Settings


def render_openapi() -> str:
    document: dict[str, Any] = create_app(Settings(database_url="sqlite://")).openapi()
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)


if __name__ == "__main__":
    print(render_openapi(), end="")
