"""Least privilege, proven on the whole test suite (issue 44; `datasource.permissions`).

The suite's first process makes a directory and names it in `LOC_AWS_OPERATION_LOG` (or
`make test` does, for its two runs, and gives the verdict after both with `main`); every
service the tests run (in process, or as a server process: `harness.processes` keeps the
variable) appends the DynamoDB operations it makes there, as IAM actions on its table's
resources. At the end of the session the operations made as the service are compared with the
committed stack's task role:

- each one must be allowed by the role's policy (else the service would be refused in AWS);
- when the whole suite ran, each action the policy allows must have been made (else the policy
  grants more than the service uses).

Operations made as the local table's setup are never made in AWS and need no grant; those made
as the operators' jobs are listed, for the deploy page's operator role.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from datasource import LOCAL_SETUP, SERVICE, STREAM, TABLE, Operation, operations_of
from tests.infra.committed import committed

LOG_VARIABLE = "LOC_AWS_OPERATION_LOG"
TESTS = Path(__file__).resolve().parent


def policy_grants(template: dict[str, Any]) -> set[tuple[str, str]]:
    """(action, resource) pairs the task role's policies allow, the resources read back from
    the template's references to the table (`TABLE`, `index/<name>`, `STREAM`)."""
    pairs: set[tuple[str, str]] = set()
    for policy in template["Resources"]["TaskRole"]["Properties"]["Policies"]:
        for statement in policy["PolicyDocument"]["Statement"]:
            assert statement["Effect"] == "Allow", statement
            actions = statement["Action"]
            resources = statement["Resource"]
            for action in [actions] if isinstance(actions, str) else actions:
                for resource in resources if isinstance(resources, list) else [resources]:
                    pairs.add((action, _resource_kind(resource)))
    return pairs


def _resource_kind(resource: Any) -> str:
    if resource == {"Fn::GetAtt": ["PaymentsTable", "Arn"]}:
        return TABLE
    if resource == {"Fn::GetAtt": ["PaymentsTable", "StreamArn"]}:
        return STREAM
    prefix = "${PaymentsTable.Arn}/"
    if isinstance(resource, dict) and str(resource.get("Fn::Sub", "")).startswith(prefix):
        return str(resource["Fn::Sub"]).removeprefix(prefix)
    return f"unrecognised resource {resource!r}"


def problems(
    recorded: set[Operation], grants: set[tuple[str, str]], *, whole_suite: bool
) -> list[str]:
    """What breaks least privilege: a service operation no grant allows; with the whole suite's
    record, a grant no operation used."""
    made = {(op.action, op.resource) for op in recorded if op.role == SERVICE}
    found = [f"not granted to the task role: {a} on {r}" for a, r in sorted(made - grants)]
    if whole_suite:
        found += [f"granted but never made: {a} on {r}" for a, r in sorted(grants - made)]
    return found


def start(config: pytest.Config) -> None:
    """In the suite's first process: the directory every process records into."""
    if hasattr(config, "workerinput") or LOG_VARIABLE in os.environ:
        return
    os.environ[LOG_VARIABLE] = tempfile.mkdtemp(prefix="loc-aws-operations-")


def _whole_suite(session: pytest.Session) -> bool:
    option = session.config.option
    arguments = [Path(argument).resolve() for argument in session.config.args]
    return (
        session.testsfailed == 0
        and not option.collectonly
        and not option.markexpr
        and not option.keyword
        and not option.deselect
        and not getattr(option, "lf", False)
        and all(argument == TESTS for argument in arguments)
    )


def finish(session: pytest.Session) -> list[str]:
    """The verdict, once (in the first process): the lines to print; fails the session on a
    problem."""
    if hasattr(session.config, "workerinput") or LOG_VARIABLE not in os.environ:
        return []
    lines, found = verdict(Path(os.environ[LOG_VARIABLE]), whole_suite=_whole_suite(session))
    if found:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    return lines


def verdict(directory: Path, *, whole_suite: bool) -> tuple[list[str], bool]:
    """The lines that report the operations recorded in `directory`, and whether least
    privilege is broken (see `problems`)."""
    recorded = operations_of(directory)
    found = problems(recorded, policy_grants(committed()), whole_suite=whole_suite)
    service = sorted({(op.action, op.resource) for op in recorded if op.role == SERVICE})
    jobs = sorted(
        (op.role, op.action, op.resource)
        for op in recorded
        if op.role not in (SERVICE, LOCAL_SETUP)
    )
    lines = [
        f"least privilege: {len(service)} operations made as the service, "
        + ("each granted" if not found else f"{len(found)} problems")
        + ("; every grant used" if whole_suite and not found else "")
        + ("" if whole_suite else " (not the whole suite: unused grants not checked)"),
        *(f"  {problem}" for problem in found),
        *(f"  made as {role}: {action} on {resource}" for role, action, resource in jobs),
    ]
    return lines, bool(found)


def main() -> None:
    """`python -m tests.least_privilege [--whole-suite] DIRECTORY`: the verdict over the
    operations recorded by several pytest runs into one directory (`make test` runs two); with
    `--whole-suite` (they ran every test and passed), a grant never used is a problem too.
    Exits 1 on a problem."""
    parser = argparse.ArgumentParser(prog="python -m tests.least_privilege")
    parser.add_argument("--whole-suite", action="store_true")
    parser.add_argument("directory", type=Path)
    arguments = parser.parse_args()
    lines, found = verdict(arguments.directory, whole_suite=arguments.whole_suite)
    print("\n".join(lines))
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
