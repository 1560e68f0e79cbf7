#!/usr/bin/env bash
# `composegen render --check` over all profiles vs `docker compose config -q` over the same rendered
# files, in one run; also `composegen --version`. Goal: composegen takes at most half compose's time.
# Run by hand: bash bench/render.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-10}"
BIN="$(python3 -c 'import sys, os; print(os.path.join(sys.prefix, "bin", "composegen"))')"
COMPOSE=(docker compose)
docker compose version >/dev/null 2>&1 || COMPOSE=(docker-compose)

time_it() {  # mean wall seconds of ROUNDS runs of "$@"
    python3 - "$ROUNDS" "$@" <<'PY'
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

read -r cg_mean cg_median < <(time_it "$BIN" render --check)
read -r dc_mean dc_median < <(time_it bash -c 'shopt -s nullglob; for f in out/*/compose.yaml out/*/*/compose.yaml; do $COMPOSE_BIN -f "$f" config -q; done')
read -r v_mean v_median < <(time_it "$BIN" --version)
echo "rendered files: ${#files[@]}, rounds: $ROUNDS"
echo "composegen render --check      mean ${cg_mean}s  median ${cg_median}s"
echo "docker compose config -q (all) mean ${dc_mean}s  median ${dc_median}s"
python3 -c "import sys; print('ratio composegen/compose: %.2f (goal <= 0.50)' % (float(sys.argv[1]) / float(sys.argv[2])))" "$cg_mean" "$dc_mean"
echo "composegen --version           mean ${v_mean}s  median ${v_median}s (goal < 0.100s)"
