#!/usr/bin/env bash
# The main job on the emulated backend: render the stacks, bring the 4,096-token candidate up with the
# emulated vLLM (a test double: no GPU here), show its status, startup report and gates, then take it down.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
NAME="${1:-4096-131k}"
# A ~20 s emulated load (8 weight shards, torch.compile, CUDA graph capture) so a person sees every stage of
# `up`: the demo runs on a copy of profiles/ whose demo-NAME profile only slows the emulator down.
DEMO_ROOT="$(mktemp -d /tmp/composegen-demo.XXXXXX)"
cp -r profiles "$DEMO_ROOT/"
printf 'extends: %s\nemulate:\n  env: {EMU_LOAD_SECONDS: %s, EMU_WEIGHT_SHARDS: 8}\n' \
    "$NAME" "${DEMO_LOAD_SECONDS:-20}" >"$DEMO_ROOT/profiles/demo-$NAME.yaml"
export COMPOSEGEN_ROOT="$DEMO_ROOT"
NAME="demo-$NAME"
trap '.venv/bin/composegen down "$NAME" >/dev/null 2>&1 || true; rm -rf "$DEMO_ROOT"' EXIT
set -x
.venv/bin/composegen render
.venv/bin/composegen up "$NAME" --emulate --down-on-failure
.venv/bin/composegen status "$NAME"
.venv/bin/composegen startup "$NAME"
.venv/bin/composegen gate "$NAME" --tools 20
.venv/bin/composegen down "$NAME"
{ set +x; } 2>/dev/null
echo "next: .venv/bin/composegen --help (start here), the README's campaign, examples/team-edge/README.md (a team box)"
