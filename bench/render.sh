#!/usr/bin/env bash
# `composegen render --check` over all profiles vs `docker compose config -q` over the same rendered
# files, in one run: cold (COMPOSEGEN_NO_CACHE=1: the real check every time) and warm (answered by the
# render cache when nothing changed); also `composegen --version`. Goal: warm check <= 0.3x compose.
# Run by hand: bash bench/render.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-10}"
PY="${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}"
BIN="$("$PY" -c 'import sys, os; print(os.path.join(sys.prefix, "bin", "composegen"))')"
COMPOSE=(docker compose)
docker compose version >/dev/null 2>&1 || COMPOSE=(docker-compose)

time_it() {  # mean wall seconds of ROUNDS runs of "$@"
    "$PY" - "$ROUNDS" "$@" <<'PY'
import subprocess, sys, time
rounds, argv = int(sys.argv[1]), sys.argv[2:]
samples = []
for _ in range(rounds):
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    samples.append(time.perf_counter() - t)
samples.sort()
print(f"{sum(samples) / len(samples):.4f} {samples[len(samples) // 2]:.4f}")
PY
}

shopt -s nullglob
files=(out/*/compose.yaml out/*/*/compose.yaml)  # every rendered file, multi-node ones included
export COMPOSE_BIN="${COMPOSE[*]}"

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
read -r cold_mean cold_median < <(time_it env COMPOSEGEN_NO_CACHE=1 "$BIN" render --check)
"$BIN" render --check >/dev/null  # records the answer for these inputs
read -r cg_mean cg_median < <(time_it "$BIN" render --check)
read -r dc_mean dc_median < <(time_it bash -c 'shopt -s nullglob; for f in out/*/compose.yaml out/*/*/compose.yaml; do $COMPOSE_BIN -f "$f" config -q; done')
read -r v_mean v_median < <(time_it "$BIN" --version)
echo "rendered files: ${#files[@]}, rounds: $ROUNDS"
echo "composegen render --check cold mean ${cold_mean}s  median ${cold_median}s (COMPOSEGEN_NO_CACHE=1)"
echo "composegen render --check warm mean ${cg_mean}s  median ${cg_median}s"
echo "docker compose config -q (all) mean ${dc_mean}s  median ${dc_median}s"
"$PY" -c "import sys; c, w, d = map(float, sys.argv[1:]); print('ratio to compose (medians): cold %.2f, warm %.2f (goal <= 0.30)' % (c / d, w / d))" "$cold_median" "$cg_median" "$dc_median"
echo "composegen --version           mean ${v_mean}s  median ${v_median}s (goal < 0.100s)"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
