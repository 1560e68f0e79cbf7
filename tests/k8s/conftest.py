"""Offline validators for rendered manifests: Kubernetes' own API schemas (kubernetes-validate's bundled
copy for K8S_VERSION, strict) and the LeaderWorkerSet CRD vendored in tests/data/k8s (README there)."""

from __future__ import annotations

import copy
import hashlib
from functools import lru_cache
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

K8S_VERSION = "1.34.0"
DATA = Path(__file__).resolve().parents[1] / "data" / "k8s"
CRD = DATA / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
CRD_SHA256 = "c5dcad8ed943e495490241f00b9a1b45d51203b6d484020db3636d5bf553568e"  # lws v0.10.0


def _closed(schema: dict) -> dict:
    """The CRD schema with unknown fields refused wherever it lists the fields (kubectl's strict validation)."""
    if isinstance(schema, dict):
        schema = {k: _closed(v) for k, v in schema.items()}
        if (
            schema.get("type") == "object"
            and "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
    elif isinstance(schema, list):
        return [_closed(v) for v in schema]
    return schema


@lru_cache(maxsize=1)
def lws_schema() -> dict:
    doc = yaml.safe_load(CRD.read_text(encoding="utf-8"))
    version = next(v for v in doc["spec"]["versions"] if v["name"] == "v1")
    return _closed(copy.deepcopy(version["schema"]["openAPIV3Schema"]))


def validate(doc: dict) -> None:
    """Raise when `doc` is not a valid object of its kind (LeaderWorkerSet: also its pod templates as Pods)."""
    if doc["kind"] == "LeaderWorkerSet":
        jsonschema.validate(doc, lws_schema(), cls=jsonschema.Draft7Validator)
        lwt = doc["spec"]["leaderWorkerTemplate"]
        for role in ("leaderTemplate", "workerTemplate"):
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"x-{role.lower()}"},
                **lwt[role],
            }
            pod["metadata"] = {**lwt[role]["metadata"], "name": f"x-{role.lower()}"}
            kubernetes_validate.validate(pod, K8S_VERSION, strict=True)
        return
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


@pytest.fixture(scope="session")
def crd_checked() -> Path:
    assert hashlib.sha256(CRD.read_bytes()).hexdigest() == CRD_SHA256, (
        "the vendored CRD is not lws v0.10.0's"
    )
    return CRD
