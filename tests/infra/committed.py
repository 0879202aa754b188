"""The committed stack (`infra/stack.template.json`), and cfn-lint on a template's text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cfnlint.api import ManualArgs, lint  # type: ignore[import-untyped]

from infra.stack import TEMPLATE_PATH

COMMITTED = Path(__file__).resolve().parents[2] / TEMPLATE_PATH
# The regions of SPEC §2: test in us-west-2, prod in us-east-2.
REGIONS = ["us-west-2", "us-east-2"]


def committed() -> dict[str, Any]:
    template: dict[str, Any] = json.loads(COMMITTED.read_text())
    return template


def resources() -> dict[str, Any]:
    found: dict[str, Any] = committed()["Resources"]
    return found


def lint_problems(text: str) -> list[str]:
    # "I" adds cfn-lint's informational checks to its errors and warnings.
    matches = lint(text, config=ManualArgs(regions=REGIONS, include_checks=["I"]))
    return [str(match) for match in matches]
