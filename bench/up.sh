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

# Bytecode as an installed package has it (pip compiles on install): with PYTHONDONTWRITEBYTECODE set, an
# uncompiled checkout would otherwise compile composegen from source in every run and count that.
"$PY" -m compileall -q composegen >/dev/null

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
samples=()
for i in $(seq 0 "$ROUNDS"); do  # round 0 is the warm-up (builds the emulator image, fills the caches)
    # wall and CPU time (user + system, its `docker compose` child included) of the one command
    timed=$("$PY" -c '
import os, subprocess, sys, time
t = time.perf_counter()
child = subprocess.Popen(sys.argv[2:], stdout=open(sys.argv[1], "w"), stderr=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
wall = time.perf_counter() - t
sys.exit(f"up exited {os.waitstatus_to_exitcode(status)}") if status else print(wall, usage.ru_utime + usage.ru_stime)
' "$RESULT" $BIN up "$NAME" --emulate --json)
    ready=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["time_to_ready_s"])' "$RESULT")
    [ "$i" = 0 ] && cp ".composegen/$NAME/emulate.override.yaml" "$OVERRIDE"
    $BIN down "$NAME" --timeout 5 >/dev/null
    [ "$i" = 0 ] && continue
    samples+=("$timed $ready")
done

# Less load-sensitive parts, each median of ROUNDS in a fresh interpreter, wall and CPU time (CPU time
# hardly grows with the load; a quiet machine's wall time is close to it): the imports `up` makes before
# it preflights (what cli/main.py loads for `up`, then what the command loads), and preflight alone
# (stack/prepare.py on the stopped stack, as `up --emulate` runs it).
isolated=$("$PY" - "$NAME" "$ROUNDS" <<'PY'
import statistics, subprocess, sys
name, rounds = sys.argv[1], int(sys.argv[2])
imports = """
import time; t, c = time.perf_counter(), time.process_time()
from composegen.cli import fastpath; from composegen.cli.main import load_commands; load_commands(["up"])
from composegen.cli.console import console_progress; from composegen.cli.wait_command import with_stages
from composegen.stack import driver; driver.preload()
print(time.perf_counter() - t, time.process_time() - c)
"""
preflight = """
import sys, time
from composegen.profiles import resolve; from composegen.project import find_project
from composegen.stack import driver, placement, prepare; from composegen.stack.progress import ProgressSink
driver.preload(); project = find_project(None); r = resolve.load(project, sys.argv[1])
t, c = time.perf_counter(), time.process_time()
prepare.prepare(placement.deployment(project, r), prepare.UpOptions(emulate=True), ProgressSink())
print(time.perf_counter() - t, time.process_time() - c)
"""
def medians(code, *args):
    runs = [subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True).stdout
            for _ in range(rounds)]
    return [statistics.median(float(r.split()[i]) for r in runs) for i in (0, 1)]
(iw, ic), (pw, pc) = medians(imports), medians(preflight, name)
print(f"in isolation, medians: up's imports {iw:.3f} s wall ({ic:.3f} s CPU), preflight {pw:.3f} s wall ({pc:.3f} s CPU)")
PY
)

t2=$(date +%s.%N)
docker compose -p "$PROJECT" -f "out/$NAME/compose.yaml" -f "$OVERRIDE" up -d --wait >/dev/null 2>&1
t3=$(date +%s.%N)

"$PY" - "$t2" "$t3" "${samples[@]}" <<'PY'
import statistics, sys
t2, t3 = map(float, sys.argv[1:3])
runs = [tuple(map(float, s.split())) for s in sys.argv[3:]]  # (whole, CPU, time_to_ready_s)
overheads = sorted(whole - ready for whole, _, ready in runs)
print(f"composegen up --emulate, {len(runs)} runs: whole {statistics.median(w for w, _, _ in runs):.2f} s median, "
      f"time_to_ready_s {statistics.median(r for _, _, r in runs):.2f} s median, "
      f"CPU {statistics.median(c for _, c, _ in runs):.3f} s median (with its docker compose child; hardly grows with the load)")
print(f"overhead (whole - time_to_ready_s): median {statistics.median(overheads):.3f} s, "
      f"best {overheads[0]:.3f} s, worst {overheads[-1]:.3f} s (goal <= 0.5 s)")
print(f"docker compose up -d --wait (same files, once): {t3 - t2:.2f} s")
PY
echo "$isolated"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
