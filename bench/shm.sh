#!/usr/bin/env bash
# Time `composegen shm --json` against `lsof +D` on the same directory, in one run: 10,000 entries,
# 300 holder processes (290 `sleep`s holding open fds, 10 pythons with 16 threads each mapping files
# with the fd closed, as NCCL and glibc semaphores do; the threads make composegen compare fd tables). After a warm-up run each, both tools run ROUNDS times, alternating.
# Prints the best and the median of each: the best is the cost with no other process in the way (as
# Python's timeit argues); ours uses two cores, so a busy second core shows in its median, not lsof's.
# Prints both, the ratio, and how many held files each found. Usage: bench/shm.sh [ENTRIES] [PROCESSES]
set -euo pipefail

ENTRIES=${1:-10000}
PROCS=${2:-300}
ROUNDS=${ROUNDS:-7}
MAPPERS=10
# The real interpreter and console script, not a version-manager shim (pyenv's shim costs ~60 ms a call).
PY=${PYTHON:-$(python3 -c "import sys; print(sys.executable)")}
REPO=$(cd "$(dirname "$0")/.." && pwd)
CG=$(dirname "$PY")/composegen
[ -x "$CG" ] || { echo "no composegen console script next to $PY: pip install -e $REPO" >&2; exit 2; }
# An installed wheel carries compiled bytecode; a checkout run with PYTHONDONTWRITEBYTECODE (set on
# this machine) would otherwise recompile every module on every run.
"$PY" -m compileall -q "$REPO/composegen"
DIR=$(mktemp -d /dev/shm/composegen-bench-XXXXXX)
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf -- "$DIR" "$DIR.json" "$DIR.lsof" "$DIR.ours" "$DIR.theirs"
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
import ctypes, mmap, os, sys, threading, time
d, m = sys.argv[1], int(sys.argv[2])
for _ in range(16):
    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
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

# One warm-up run of each (page cache, dentries, the interpreter's files), not counted.
"$CG" shm --json --path "$DIR" >/dev/null
lsof -n +D "$DIR" >/dev/null 2>&1 || true
ours=() theirs=()
for ((r = 0; r < ROUNDS; r++)); do
  t0=$EPOCHREALTIME
  "$CG" shm --json --path "$DIR" >"$DIR.json"
  t1=$EPOCHREALTIME
  lsof -n +D "$DIR" >"$DIR.lsof" 2>/dev/null || true  # exits 1 when something is unreadable
  t2=$EPOCHREALTIME
  ours+=("$(echo "$t1 - $t0" | bc -l)") theirs+=("$(echo "$t2 - $t1" | bc -l)")
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
best() { printf '%s\n' "$@" | sort -g | head -1; }
ours_med=$(median "${ours[@]}") theirs_med=$(median "${theirs[@]}")
ours_best=$(best "${ours[@]}") theirs_best=$(best "${theirs[@]}")
[ -z "${VERBOSE:-}" ] || echo "rounds: ours ${ours[*]} | lsof ${theirs[*]}"

inner=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["scan_seconds"])' "$DIR.json")
"$PY" -c 'import json,sys; r = json.load(open(sys.argv[1]))
print("\n".join(sorted(r["path"] + "/" + e["name"] for e in r["entries"] if e["class"] == "in-use")))' "$DIR.json" \
  >"$DIR.ours"
awk 'NR > 1 {print $NF}' "$DIR.lsof" | sort -u >"$DIR.theirs"
held_ours=$(wc -l <"$DIR.ours") held_lsof=$(wc -l <"$DIR.theirs")
same=$(cmp -s "$DIR.ours" "$DIR.theirs" && echo yes || echo NO)

printf 'entries=%s processes=%s rounds=%s\n' "$ENTRIES" "$PROCS" "$ROUNDS"
printf 'composegen shm --json: best %.3f s  median %.3f s  (scan itself: %s s)  held files: %s\n' \
  "$ours_best" "$ours_med" "$inner" "$held_ours"
printf 'lsof -n +D:            best %.3f s  median %.3f s  held files: %s\n' "$theirs_best" "$theirs_med" "$held_lsof"
printf 'same held files: %s\n' "$same"
printf 'ratio lsof / composegen: best %.1fx  median %.1fx\n' \
  "$(echo "$theirs_best / $ours_best" | bc -l)" "$(echo "$theirs_med / $ours_med" | bc -l)"
