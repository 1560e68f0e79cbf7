"""The base of every JSON report composegen prints or writes: one pydantic model per shape.

`to_json()` is the only way a report becomes JSON, and `composegen schema --report NAME` prints the
JSON Schema generated from the same model (docs/json.md lists the names). Models are strict about
their own keys (`extra="forbid"`), so a shape cannot grow a key the schema does not show.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# A JSON object no report model owns: a request body, a JSON Schema, a gate's free-form details.
JsonObject = dict[str, Any]


def described(description: str) -> Any:
    """A required field and what it means (the schema's description)."""
    return Field(description=description)


def nullable(description: str) -> Any:
    """A field that may be missing: null by default."""
    return Field(default=None, description=description)


class Report(BaseModel):
    # defer_build: a model's validator and serializer are built on its first use, so a command pays
    # only for the reports it makes (`up` makes one of the ~90; measured ~30 ms of its start-up).
    model_config = ConfigDict(
        extra="forbid", populate_by_name=True, ser_json_inf_nan="null", defer_build=True
    )

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        return cls.model_json_schema(by_alias=True, mode="serialization")
