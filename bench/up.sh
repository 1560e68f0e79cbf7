#!/usr/bin/env bash
# `composegen up NAME --emulate`: its own overhead (the whole command minus the engine's own
# time_to_ready_s), median of ROUNDS up/down cycles after one warm-up; then once `docker compose up -d
# --wait` on the same files for comparison. Prints the machine's load, since the figures depend on it.
# Goal: overhead <= 0.5 s on a quiet machine. Run by hand: bash bench/up.sh [NAME] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
NAME="${1:-4096-131k}"
ROUNDS="${2:-5}"
PY="${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}"
BIN="$(dirname "$PY")/composegen"
[ -x "$BIN" ] || BIN="$PY -m composegen"
PROJECT="composegen-$NAME"
OVERRIDE="$(mktemp)"
RESULT="$(mktemp)"
trap 'docker compose -p "$PROJECT" -f "out/$NAME/compose.yaml" -f "$OVERRIDE" down -t 5 >/dev/null 2>&1 || true; rm -f "$OVERRIDE" "$RESULT"' EXIT

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
samples=()
for i in $(seq 0 "$ROUNDS"); do  # round 0 is the warm-up (builds the emulator image, fills the caches)
    t0=$(date +%s.%N)
    $BIN up "$NAME" --emulate --json >"$RESULT" 2>/dev/null
    t1=$(date +%s.%N)
    ready=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["time_to_ready_s"])' "$RESULT")
    [ "$i" = 0 ] && cp ".composegen/$NAME/emulate.override.yaml" "$OVERRIDE"
    $BIN down "$NAME" --timeout 5 >/dev/null
    [ "$i" = 0 ] && continue
    samples+=("$("$PY" -c 'import sys; a, b, r = map(float, sys.argv[1:]); print(f"{b - a:.3f} {r:.3f}")' "$t0" "$t1" "$ready")")
done

t2=$(date +%s.%N)
docker compose -p "$PROJECT" -f "out/$NAME/compose.yaml" -f "$OVERRIDE" up -d --wait >/dev/null 2>&1
t3=$(date +%s.%N)

"$PY" - "$t2" "$t3" "${samples[@]}" <<'PY'
import statistics, sys
t2, t3 = map(float, sys.argv[1:3])
runs = [tuple(map(float, s.split())) for s in sys.argv[3:]]
overheads = sorted(whole - ready for whole, ready in runs)
print(f"composegen up --emulate, {len(runs)} runs: whole {statistics.median(w for w, _ in runs):.2f} s median, "
      f"time_to_ready_s {statistics.median(r for _, r in runs):.2f} s median")
print(f"overhead (whole - time_to_ready_s): median {statistics.median(overheads):.3f} s, "
      f"best {overheads[0]:.3f} s, worst {overheads[-1]:.3f} s (goal <= 0.5 s)")
print(f"docker compose up -d --wait (same files, once): {t3 - t2:.2f} s")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
