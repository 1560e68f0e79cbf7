"""Every report named by `schema --report` has a valid generated JSON Schema, and docs/json.md names
exactly those reports (so the docs can point at the schemas instead of restating shapes)."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from composegen.cli import reports
from tests.support.cli import run_cli
from tests.support.helpers import REPO


@pytest.mark.parametrize("name", reports.names())
def test_each_report_schema_is_a_valid_json_schema(name):
    schema = reports.schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$id"] == f"composegen:report/{name}" and schema.get("properties")


def test_schema_report_through_the_cli():
    res = run_cli("schema", "--report", "status")
    assert res.returncode == 0 and json.loads(res.stdout)["$id"] == "composegen:report/status"
    bad = run_cli("schema", "--report", "stauts")
    assert (
        bad.returncode == 2
        and "did you mean 'status'" in bad.stderr
        and "Traceback" not in bad.stderr
    )


def test_docs_name_every_report_and_no_other():
    documented = set(
        re.findall(r"^\| `([a-z-]+)` \|", (REPO / "docs" / "json.md").read_text(), re.M)
    )
    assert documented == set(reports.names())
