"""The emulator's base image: any image with python3 (the emulator is stdlib only). `up --emulate`
builds FROM `composegen/base:py3` (or COMPOSEGEN_BASE_IMAGE); `composegen provision` makes that tag
from, in order, a public python base pulled by digest, else a debootstrap build of Debian with
python3.

    COMPOSEGEN_BASE_IMAGE    an existing image to build FROM instead of composegen/base:py3
    COMPOSEGEN_PUBLIC_BASE   the pinned public base, `REPO[:TAG]@sha256:…` (default python:3.12-slim@…),
                             e.g. the same image on a registry mirror"""

from __future__ import annotations

import os
from dataclasses import dataclass

from composegen.errors import BadInput
from composegen.stack import driver
from composegen.stack.driver import ImageFacts

BASE_TAG = "composegen/base:py3"
# python:3.12-slim's multi-platform index, pinned: a tag moves, a digest names the same bytes
# forever.
PUBLIC_BASE = (
    "python:3.12-slim@sha256:78387bc3881b8273120a12ebe6c1ab22b018ccc2c9adf565ae1ac9b536e184ea"
)
ORIGIN_LABEL = "io.composegen.base"  # set on the debootstrap build: "debootstrap <suite>"


def override() -> str | None:
    return os.environ.get("COMPOSEGEN_BASE_IMAGE") or None


def public_base() -> str:
    ref = os.environ.get("COMPOSEGEN_PUBLIC_BASE") or PUBLIC_BASE
    name, _, digest = ref.partition("@")
    if not name or not digest.startswith("sha256:") or len(digest) != 71:
        raise BadInput(f"COMPOSEGEN_PUBLIC_BASE: expected REPO[:TAG]@sha256:<64 hex>, got {ref!r}")
    return ref


def wanted() -> str:
    """The image `up --emulate` builds the emulator FROM."""
    return override() or BASE_TAG


def origin(facts: ImageFacts) -> str:
    """Where an image came from, as far as the engine can tell."""
    # pulled by the pinned digest: that is how this engine got it, whatever its labels say
    public = public_base()
    for digest in facts.repo_digests:
        if _same_image(digest, public):
            return f"pulled {public}"
    labels = dict(facts.labels)
    if labels.get(ORIGIN_LABEL):
        return f"{labels[ORIGIN_LABEL]} build"
    if facts.repo_digests:
        return f"pulled {facts.repo_digests[0]}"
    return "built or loaded locally, no registry digest"


def _same_image(repo_digest: str, ref: str) -> bool:
    """`python@sha256:X` (a RepoDigest) is `python:3.12-slim@sha256:X`, also spelt
    `docker.io/library/python`."""

    def norm(text: str) -> str:
        name, _, digest = text.partition("@")
        last = name.rsplit("/", 1)[-1]
        if ":" in last:  # a tag; a ':' before the last '/' is a registry's port
            name = name[: len(name) - len(last)] + last.split(":", 1)[0]
        return f"{name.removeprefix('docker.io/').removeprefix('library/')}@{digest}"

    return norm(repo_digest) == norm(ref)


@dataclass(frozen=True)
class BaseState:
    ref: str  # what `up --emulate` builds FROM
    present: bool
    origin: str  # where it came from (present), or what provision will make it from (missing)


def state() -> BaseState:
    """The base image on the default engine (DOCKER_HOST), and where it came from or will come
    from."""
    ref = wanted()
    facts = driver.image_facts(ref)
    if facts is not None:
        return BaseState(ref, True, origin(facts))
    if override():
        return BaseState(ref, False, "COMPOSEGEN_BASE_IMAGE names an image this engine lacks")
    public = public_base()
    if driver.image_present(public):
        return BaseState(ref, False, f"provision tags {public} (present in the engine)")
    return BaseState(
        ref, False, f"provision pulls {public}, else builds Debian with python3 (debootstrap, root)"
    )
