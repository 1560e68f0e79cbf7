"""A resolved profile: the merged, validated profile with its checked flags, its hash and its
argv."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from composegen.profiles import caches
from composegen.profiles.mounts import HF_CACHE_TARGET
from composegen.profiles.reports import ShowReport
from composegen.profiles.schema import SECRET_RE, Node, Profile
from composegen.profiles.yamlio import Marked
from composegen.vllm.catalog import Catalog

# Flags composegen renders from typed profile fields; writing them in `vllm:` would say it twice.
MANAGED_FLAGS = {
    "revision": "model.revision",
    "served-model-name": "model.served_name",
    "port": "service.port.container",
    "host": "service.port (vLLM listens on all interfaces inside the container)",
    "model": "model.id",
    "api-key": "service.environment (VLLM_API_KEY: ${VLLM_API_KEY}; a key never goes into a committed file)",
    "hf-token": "service.environment (HF_TOKEN: ${HF_TOKEN})",
    "nnodes": "nodes.members",
    "node-rank": "nodes.members[].rank",
    "master-addr": "nodes.master_addr",
    "master-port": "nodes.master_port",
    "headless": "nodes (workers run headless)",
    "enable-sleep-mode": "standby (composegen drives sleep mode and keeps its dev routes inside)",
}
# set by composegen from `standby`: it opens vLLM's dev routes
DEV_MODE_ENV = "VLLM_SERVER_DEV_MODE"


_REF_NAME = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")


def _masked(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, "***")
        return value
    if isinstance(value, dict):
        return {_masked(k, secrets): _masked(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v, secrets) for v in value]
    return value


def members_of(r: Resolved) -> list:
    return list(r.profile.nodes.members) if r.profile.nodes else []


@dataclass
class Resolved:
    name: str
    path: str  # as shown to users, e.g. profiles/4096-131k.yaml
    chain: list[str]  # the profile and its ancestors, nearest first
    profile: Profile
    flags: dict[str, Any]  # canonical flag name -> checked value, profile order
    catalog: Catalog
    warnings: list[str] = field(default_factory=list)
    # informational: validate shows them, --strict passes
    notes: list[str] = field(default_factory=list)
    marks: Marked | None = None
    prefix: str = "composegen"  # of its compose projects: composegen.yaml's scope.name

    @property
    def hash(self) -> str:
        """Hash of the resolved profile: what the stack is, not how the YAML was written. Sections
        the engine never sees (qualify criteria, emulator settings, diff identity paths) are left
        out, so editing them neither rewrites out/ nor marks a running stack as drifted."""
        # exclude_defaults: a new optional schema field must not change every existing hash.
        outside: dict = {
            k: True
            for k in ("extends", "description", "qualify", "emulate", "identity", "kubernetes")
        }
        outside["service"] = {"memory_guard": True}  # composegen's own watch, never the engine's
        doc = {
            "profile": self.profile.model_dump(mode="json", exclude=outside, exclude_defaults=True),
            "flags": self.flags,
        }
        blob = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def secret_values(self, environ: Mapping[str, str] | None = None) -> list[str]:
        """Values of this machine's environment that the profile's secret references would bring in
        (HF_TOKEN: ${HF_TOKEN} → $HF_TOKEN's value), longest first: text shown to people masks
        them."""
        environ = os.environ if environ is None else environ
        envs = [self.profile.service.environment, *(m.environment for m in members_of(self))]
        names = {key for env in envs for key in env if SECRET_RE.search(key)}
        names |= {
            m[1]
            for env in envs
            for v in env.values()
            if isinstance(v, str)
            for m in _REF_NAME.finditer(v)
        }
        names = {n for n in names if SECRET_RE.search(n)}
        # masking "1" would shred text
        values = {environ[n] for n in names if len(environ.get(n, "")) >= 4}
        return sorted(values, key=len, reverse=True)

    def mask(self, value: Any) -> Any:
        """`value` (text, or a JSON value: every string in it) with each secret value replaced by
        ***."""
        secrets = self.secret_values()
        return _masked(value, secrets) if secrets else value

    def environment(self) -> dict[str, str]:
        """service.environment as the container gets it (standby adds vLLM's dev mode)."""
        env = {k: str(v) for k, v in self.profile.service.environment.items()}
        return {**env, DEV_MODE_ENV: "1"} if self.profile.standby is not None else env

    def flag(self, name: str, default: Any = None) -> Any:
        return self.flags.get(name, default)

    def argv(self, node: Node | None = None) -> list[str]:
        """The container command after `vllm serve`: the model first, then flags, sorted by name.
        For a node of a multi-node profile, vLLM's own multi-node flags; it runs on the host
        network."""
        model, svc = self.profile.model, self.profile.service
        items = [model.path or model.id]
        managed = {
            "revision": model.revision,
            "served-model-name": [model.served_name],
            "host": "0.0.0.0",
            "port": svc.port.container,
        }
        if self.profile.standby is not None:
            managed["enable-sleep-mode"] = True
        nodes = self.profile.nodes
        if node is not None and nodes is not None:
            managed.update(
                {
                    "host": svc.port.bind,
                    "port": svc.port.host,
                    "nnodes": len(nodes.members),
                    "node-rank": node.rank,
                    "master-addr": nodes.master_addr,
                    "master-port": nodes.master_port,
                    "headless": node.rank != 0,
                }
            )
        for name, value in sorted({**managed, **self.flags}.items()):
            items.extend(self.catalog.argv(name, value))
        return items

    def engine_flags(self) -> dict[str, JsonValue]:
        """The flags as the engine's `non-default args` line shows them (JSON-valued ones
        parsed)."""
        return {
            name: json.loads(value) if self.catalog.get(name).kind == "json" else value
            for name, value in self.flags.items()
            if value is not None
        }

    def show_report(self) -> ShowReport:
        """`show NAME --json` (its secrets still to be masked: the CLI masks the JSON it prints)."""
        return ShowReport(
            name=self.name,
            path=self.path,
            extends=self.chain[1:],
            hash=self.hash,
            profile=self.profile.model_dump(mode="json"),
            flags=self.flags,
            argv=["vllm", "serve", *self.argv()],
            warnings=self.warnings,
            caches=caches.shown(self, HF_CACHE_TARGET if self._hf_mounted else None),
        )

    @property
    def _hf_mounted(self) -> bool:
        return any(v.target == HF_CACHE_TARGET for v in self.profile.service.volumes)
