"""Every rendered manifest passes the Kubernetes API schemas (1.34, strict) and the LWS v0.10.0 CRD schema,
offline; and the validators do refuse what a cluster would refuse."""

from __future__ import annotations

import copy

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.k8s.conftest import K8S_VERSION, validate
from tests.support.helpers import REPO

SHIPPED = sorted((REPO / "out").glob("*/k8s/*.yaml"))


def _objects():
    for path in [*SHIPPED, *sorted((REPO / "tests/data/golden").glob("tiny.k8s.*.yaml"))]:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        if doc["kind"] != "Kustomization":
            yield pytest.param(doc, id=f"{path.parent.parent.name}/{path.name}")


def test_every_shipped_profile_has_k8s_output():
    profiles = sorted(p.stem for p in (REPO / "profiles").glob("*.yaml"))
    have = sorted({p.parent.parent.name for p in SHIPPED})
    assert have == profiles
    assert {p.name for p in (REPO / "out/dspark-2x/k8s").iterdir()} == {
        "kustomization.yaml",
        "leaderworkerset.yaml",
        "service.yaml",
        "cache-pvc.yaml",  # the compile caches' claim, by their key
    }


@pytest.mark.parametrize("doc", list(_objects()))
def test_manifest_passes_its_schema(doc, crd_checked):
    validate(doc)


def test_kustomizations_name_files_of_their_directory():
    found = sorted((REPO / "out").glob("*/k8s/kustomization.yaml"))
    assert found, "no out/*/k8s/kustomization.yaml: the loop below would prove nothing"
    for path in found:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert (
            doc["apiVersion"] == "kustomize.config.k8s.io/v1beta1"
            and doc["kind"] == "Kustomization"
        )
        assert sorted(doc["resources"]) == sorted(
            p.name for p in path.parent.iterdir() if p != path
        )


def _lws():
    return yaml.safe_load(
        (REPO / "out/dspark-2x/k8s/leaderworkerset.yaml").read_text(encoding="utf-8")
    )


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["spec"]["leaderWorkerTemplate"].__setitem__("size", "two"),
        lambda d: d["spec"]["leaderWorkerTemplate"].__setitem__("restartPolicy", "Sometimes"),
        lambda d: d["spec"].__setitem__("leaderWorkerTemplat", {}),
        lambda d: d["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][
            0
        ].__setitem__("imagePullPolcy", "Always"),
    ],
    ids=["size-not-int", "bad-restart-policy", "unknown-field", "unknown-container-field"],
)
def test_the_lws_validation_refuses_a_broken_leaderworkerset(mutate, crd_checked):
    doc = _lws()
    mutate(doc)
    with pytest.raises((jsonschema.ValidationError, kubernetes_validate.ValidationError)):
        validate(doc)


def test_the_builtin_validation_refuses_a_broken_deployment():
    doc = yaml.safe_load((REPO / "out/4096-131k/k8s/deployment.yaml").read_text(encoding="utf-8"))
    bad = copy.deepcopy(doc)
    bad["spec"]["template"]["spec"]["containers"][0]["resources"]["limit"] = {"nvidia.com/gpu": 2}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)
    bad = copy.deepcopy(doc)
    bad["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "10s"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)
