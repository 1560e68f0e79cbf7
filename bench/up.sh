#!/usr/bin/env bash
# `composegen up NAME --emulate` vs `docker compose up -d --wait` on the same rendered stack (the same
# compose file plus the same emulator override), in one run. Goal: composegen reaches "ready" in at most
# half compose's time (compose waits for Docker's healthcheck interval), and reports its own detection
# latency. Run by hand: bash bench/up.sh [NAME]
set -euo pipefail
cd "$(dirname "$0")/.."
NAME="${1:-4096-131k}"
PROJECT="composegen-$NAME"
OVERRIDE="$(mktemp)"
trap 'docker compose -p "$PROJECT" -f "out/$NAME/compose.yaml" -f "$OVERRIDE" down -t 5 >/dev/null 2>&1 || true; rm -f "$OVERRIDE"' EXIT

t0=$(date +%s.%N)
python3 -m composegen up "$NAME" --emulate --json > /tmp/composegen-bench-up.json 2>/dev/null
t1=$(date +%s.%N)
cp ".composegen/$NAME/emulate.override.yaml" "$OVERRIDE"
python3 -m composegen down "$NAME" --timeout 5 >/dev/null

t2=$(date +%s.%N)
docker compose -p "$PROJECT" -f "out/$NAME/compose.yaml" -f "$OVERRIDE" up -d --wait >/dev/null 2>&1
t3=$(date +%s.%N)

python3 - "$t0" "$t1" "$t2" "$t3" <<'PY'
import json, sys
t0, t1, t2, t3 = map(float, sys.argv[1:])
up = json.load(open("/tmp/composegen-bench-up.json"))
cg, dc = t1 - t0, t3 - t2
print(f"composegen up --emulate (whole command) {cg:6.2f} s   time_to_ready_s {up['time_to_ready_s']:.2f} s")
print(f"docker compose up -d --wait              {dc:6.2f} s")
print(f"ratio composegen/compose: {cg / dc:.2f} (goal <= 0.50)")
print(f"composegen detection latency (engine 'Application startup complete.' -> /health 200 seen): {up['detection_latency_s']} s")
PY
