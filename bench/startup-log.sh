#!/usr/bin/env bash
# `composegen startup --log` on a ~200 MB log (the real 0.26.0 fp8 log: its startup once, then its serving
# part - access lines, a request-time traceback, metrics - repeated), and on /dev/zero.
# Goal (issue 14 class 6): 200 MB in <= 5 s wall and <= 100 MB peak RSS; /dev/zero ends on its own.
# Run by hand: bash bench/startup-log.sh [MB]
set -euo pipefail
cd "$(dirname "$0")/.."
MB="${1:-200}"
PY=.venv/bin/python
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
LOG="$WORK/big.log"
"$PY" - "$LOG" "$MB" <<'PY'
import sys
src = open("tests/data/real-0.26.0-h200/serve-fp8-hermes-apikey.log", "rb").read()
ready = src.index(b"Application startup complete.")
head, body = src[: src.index(b"\n", ready) + 1], src[src.index(b"\n", ready) + 1 : src.index(b"[shutdown]")]
body = body[: body.rindex(b"\n") + 1]
with open(sys.argv[1], "wb") as out:
    out.write(head)
    target, written = int(sys.argv[2]) << 20, len(head)
    while written < target:
        out.write(body)
        written += len(body)
PY
measure() {  # label, then the command: wall and CPU (user + system) seconds, peak RSS, from GNU time
    local label="$1"; shift
    /usr/bin/time -f "%e %U %S %M" -o "$WORK/time" "$@" >/dev/null 2>&1 || true
    read -r wall user sys rss < <(tail -n 1 "$WORK/time")
    printf '%-34s wall %6.2f s   cpu %6.2f s   peak RSS %6.1f MiB\n' "$label" "$wall" \
        "$(echo "$user + $sys" | bc -l)" "$(echo "$rss / 1024" | bc -l)"
}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs (wall time grows with load; CPU time does not)"
size=$(stat -c %s "$LOG")
measure "startup --log ($((size >> 20)) MiB log)" "$PY" -m composegen startup --log "$LOG" --json
measure "startup --log /dev/zero" timeout 60 "$PY" -m composegen startup --log /dev/zero --json
measure "python -c pass (interpreter floor)" "$PY" -c pass
