"""Kubernetes target: the same resolved profile as manifests (docs/kubernetes.md).

manifests.py builds the objects (Deployment, or a LeaderWorkerSet for `nodes:`; Service), notes.py
the notes on every compose setting Kubernetes cannot say; output.py writes them and a kustomization
under out/NAME/k8s/; weights_init.py is the init container's completeness check; expansion.py is
Kubernetes' own `$(VAR)` rule. No docker library is imported here: rendering stays fast and
engine-free."""

# What other rooms may import (tests/test_architecture.py checks every entry).
__all__ = [
    "expansion",
    "manifests",
    "output",
]
