"""Build context and content-hash tag for the emulator image (stdlib only; no engine calls here). It
reads the emulator's files and never imports them: the product does not import its test double.

Context layout (what the Dockerfile expects):
  Dockerfile                          composegen/emulator/Dockerfile
  vllm                                the launcher (mode 0755), installed as /usr/local/bin/vllm
  serve-flags.json                    the vLLM 0.33 flag catalog
  composegen/__init__.py              a one-line stub, so the image does not depend on the host package
  composegen/emulator/*.py            the emulator sources
  composegen/sizing/*.py              the GPU ledger and model sizes the emulator shares with the host
"""

from __future__ import annotations

import os
from pathlib import Path

from composegen.buildcontext import ContextFile, context_digest, write_context

IMAGE_REPO = "composegen/vllm-emulator"
_PACKAGE = Path(__file__).resolve().parent.parent
_HERE = _PACKAGE / "emulator"
_SHIPPED = ("emulator", "sizing")  # the rooms the container runs (stdlib only)
_CATALOG = _PACKAGE / "vllm" / "data" / "vllm-0.33.0-serve-flags.json"
_PACKAGE_STUB = (
    b'"""composegen (emulator image stub): only its emulator and sizing rooms are here."""\n'
)


def context_files() -> list[ContextFile]:
    # EMU_FLAG_CATALOG: another catalog, as the emulator itself reads it (emulator/argv.py)
    catalog = Path(os.environ.get("EMU_FLAG_CATALOG") or _CATALOG)
    files = [
        ContextFile("Dockerfile", (_HERE / "Dockerfile").read_bytes(), 0o644),
        ContextFile("vllm", (_HERE / "vllm").read_bytes(), 0o755),
        ContextFile("serve-flags.json", catalog.read_bytes(), 0o644),
        ContextFile("composegen/__init__.py", _PACKAGE_STUB, 0o644),
    ]
    for room in _SHIPPED:
        for source in sorted((_PACKAGE / room).glob("*.py")):
            files.append(
                ContextFile(f"composegen/{room}/{source.name}", source.read_bytes(), 0o644)
            )
    return sorted(files, key=lambda f: f.path)


def image_tag() -> str:
    return f"{IMAGE_REPO}:{context_digest(context_files())[:16]}"


def build_context(dest: Path) -> Path:
    return write_context(dest, context_files())
