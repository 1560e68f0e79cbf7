#!/usr/bin/env bash
# Time the /dev/shm holder scan against `lsof +D` on the same directory, in one run:
# 10,000 entries, 300 holder processes (290 `sleep`s holding open fds, 10 pythons mapping files
# with the fd closed, as NCCL and glibc semaphores do). Prints both times, the ratio, and how many
# held files each tool found. Usage: bench/shm.sh [ENTRIES] [PROCESSES]
set -euo pipefail

ENTRIES=${1:-10000}
PROCS=${2:-300}
MAPPERS=10
# The real interpreter, not a version-manager shim (pyenv's bash shim alone costs ~60 ms a call).
PY=${PYTHON:-$(python3 -c "import sys; print(sys.executable)")}
REPO=$(cd "$(dirname "$0")/.." && pwd)
DIR=$(mktemp -d /dev/shm/composegen-bench-XXXXXX)
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf -- "$DIR"
}
trap cleanup EXIT

command -v lsof >/dev/null || { echo "lsof missing: apt-get install -y lsof" >&2; exit 2; }

"$PY" - "$DIR" "$ENTRIES" <<'EOF'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    with open(os.path.join(d, f"psm_{i:08x}"), "wb") as f:
        f.write(b"x")
EOF

# fd holders: each sleep keeps one file open on fd 3
for ((i = 0; i < PROCS - MAPPERS; i++)); do
  sleep 600 3<"$DIR/$(printf 'psm_%08x' $((i * 7)))" &
  PIDS+=($!)
done

# map-only holders: 20 files each, mapped through libc, fd closed afterwards
for ((m = 0; m < MAPPERS; m++)); do
  "$PY" - "$DIR" "$m" <<'EOF' &
import ctypes, mmap, os, sys, time
d, m = sys.argv[1], int(sys.argv[2])
libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
for k in range(20):
    fd = os.open(os.path.join(d, f"psm_{5000 + m * 20 + k:08x}"), os.O_RDWR)
    libc.mmap(None, 1, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    os.close(fd)
time.sleep(600)
EOF
  PIDS+=($!)
done
sleep 2  # let every holder open/map its files

now() { date +%s.%N; }

t0=$(now)
(cd "$REPO" && "$PY" -m composegen.shm --json "$DIR") >"$DIR.json"
t1=$(now)
lsof -n +D "$DIR" >"$DIR.lsof" 2>/dev/null || true  # exits 1 when something is unreadable
t2=$(now)

ours=$(echo "$t1 - $t0" | bc -l)
theirs=$(echo "$t2 - $t1" | bc -l)
inner=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["scan_seconds"])' "$DIR.json")
held_ours=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["totals"]["in-use"]["count"])' "$DIR.json")
held_lsof=$(awk 'NR > 1 {print $NF}' "$DIR.lsof" | sort -u | wc -l)
rm -f -- "$DIR.json" "$DIR.lsof"

printf 'entries=%s processes=%s\n' "$ENTRIES" "$PROCS"
printf 'composegen.shm (whole command): %.3f s  (scan itself: %s s)  held files found: %s\n' \
  "$ours" "$inner" "$held_ours"
printf 'lsof +D:                        %.3f s  held files found: %s\n' "$theirs" "$held_lsof"
printf 'ratio lsof / composegen.shm:    %.1fx\n' "$(echo "$theirs / $ours" | bc -l)"
