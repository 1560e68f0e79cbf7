"""How long after `promote` / `rollback` starts does a client get the new model? (issue 37) Run by hand:

    .venv/bin/python bench/bench_switch.py [-n SWITCHES] [--poll SECONDS] [--root DIR]

On the real engine with the EMULATED vLLM: a copy of examples/team-edge in a temporary directory (its
names and ports made unique), both stacks `standby: {level: 1}` with the recording's 4.6 MB model
(EMU_WEIGHTS_GIB 0.0043: a wake is the recorded one, no copy), the edge up, a client key, 8192-131k
started asleep (`up --standby`) and 4096-131k serving the alias beside it, a sealed campaign decision
as the promote's proof. Then SWITCHES switches, promote and rollback alternately, each while a client
polls the alias through TLS every --poll seconds (0.02: finer than the issue's 0.2, to see the move).

Per switch: command start → the first answer from the new model (the client's view: when its request
was sent, an upper bound of the move), the command's own `moved_at` (--json: the alias published,
from the process's start) and each step's seconds. With --root DIR --pair A,B an existing project is used
as it is (ds4-flash serving A or B, the other asleep; the files `key` and `ca.crt` beside DIR).

Results: docs/records/standby.md ("How fast the alias moves").
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "team-edge"
CLI = [sys.executable, "-m", "composegen"]
EMU = '  env:\n    EMU_WEIGHTS_GIB: "0.0043"\n    EMU_DECODE_TOK_S: "200"\n'

sys.path.insert(0, str(REPO))


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Bench:
    root: Path
    alias: str
    old: str  # serving at the start
    new: str  # asleep at the start
    url: str
    key: str
    ca: str

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run([*CLI, "--root", str(self.root), *args], cwd=REPO,
                              capture_output=True, text=True, timeout=600)  # fmt: skip
        if check and proc.returncode != 0:
            sys.exit(f"composegen {' '.join(args)}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
        return proc


def setup(tmp: Path) -> Bench:
    """The copy of examples/team-edge, renamed so as not to clash on a shared engine."""
    tag = f"bsw{os.getpid()}"
    old, new = f"{tag}b", f"{tag}a"  # 4096-131k serves, 8192-131k sleeps
    root = tmp / "root"
    (root / "profiles").mkdir(parents=True)
    for src in (EXAMPLE / "profiles").glob("*.y*ml"):
        text = src.read_text(encoding="utf-8")
        text = text.replace("extends: 8192-131k", f"extends: {new}")
        text = text.replace("ds4-flash-r33-b", f"{tag}-b")  # container names
        for port in ("39070", "39071"):
            text = text.replace(f"host: {port}}}", f"host: {_port()}}}")
        name = {"8192-131k.yaml": f"{new}.yaml", "4096-131k.yaml": f"{old}.yaml"}.get(
            src.name, src.name
        )
        if name != src.name:
            text += "standby: {level: 1}\n" + ("emulate:\n" + EMU if name == f"{new}.yaml" else "")
        (root / "profiles" / name).write_text(text, encoding="utf-8")
    edge = (EXAMPLE / "edge.yaml").read_text(encoding="utf-8")
    listen = _port()
    edge = (edge.replace("name: edge", f"name: {tag}e").replace("39443", str(listen))
            .replace("39490", str(_port())).replace("8192-131k", new).replace("4096-131k", old))  # fmt: skip
    (root / "edge.yaml").write_text(edge, encoding="utf-8")
    bench = Bench(root, "ds4-flash", old, new, f"https://127.0.0.1:{listen}", "", "")
    bench.cli("render")
    bench.cli("edge", "up")
    bench.key = bench.cli("edge", "keys", "add", "bench").stdout.strip()
    (tmp / "ca.crt").write_text(bench.cli("edge", "ca").stdout, encoding="utf-8")
    bench.ca = str(tmp / "ca.crt")
    bench.cli("up", new, "--emulate", "--standby")  # asleep first: the pair fits only so
    bench.cli("up", old, "--emulate")
    return bench


def teardown(bench: Bench) -> None:
    for name in (bench.old, bench.new):
        bench.cli("down", name, check=False)
    bench.cli("edge", "down", check=False)


class Poller(threading.Thread):
    """Chat requests to the alias through TLS every `every` seconds: (sent, status, model or stage)."""

    def __init__(self, bench: Bench, every: float) -> None:
        super().__init__(daemon=True)
        self.bench, self.every = bench, every
        self.seen: list[tuple[float, int, str]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        ctx = ssl.create_default_context(cafile=self.bench.ca)
        body = json.dumps({"model": self.bench.alias, "max_tokens": 2, "temperature": 0,
                           "messages": [{"role": "user", "content": "hi"}]}).encode()  # fmt: skip
        headers = {"Authorization": f"Bearer {self.bench.key}", "Content-Type": "application/json"}
        while not self.stop.is_set():
            sent = time.time()
            req = urllib.request.Request(self.bench.url + "/v1/chat/completions", body, headers)
            try:
                with urllib.request.urlopen(req, timeout=30, context=ctx) as resp:
                    self.seen.append((sent, resp.status, json.loads(resp.read())["model"]))
            except urllib.error.HTTPError as exc:
                stage = (json.loads(exc.read() or b"{}").get("error") or {}).get("stage", "")
                self.seen.append((sent, exc.code, stage))
            except OSError as exc:
                self.seen.append((sent, 0, repr(exc)))
            time.sleep(self.every)


def served(bench: Bench, profile: str) -> str:
    text = (bench.root / "profiles" / f"{profile}.yaml").read_text(encoding="utf-8")
    names = [ln.split(":", 1)[1].strip() for ln in text.splitlines() if "served_name:" in ln]
    return names[0] if names else profile


def one_switch(bench: Bench, argv: list[str], target: str, every: float) -> dict:
    poller = Poller(bench, every)
    poller.start()
    time.sleep(0.3)
    started = time.time()
    proc = bench.cli(*argv, "--emulate", "--json")
    ended = time.time()
    time.sleep(0.3)
    poller.stop.set()
    poller.join(30)
    report = json.loads(proc.stdout)
    model = served(bench, target)
    first_new = next(
        (t for t, st, what in poller.seen if t >= started and st == 200 and what == model), None
    )
    errors = [s for s in poller.seen if s[1] not in (200, 503)]
    return {
        "by": report["by"], "path": report["path"], "moved_at": report.get("moved_at"),
        "client_first_new_s": round(first_new - started, 3) if first_new else None,
        "command_s": round(ended - started, 3), "errors": len(errors),
        "before": {s["step"]: s["seconds"] for s in report.get("before", [])},
        "steps": {s["step"].split(" ")[0]: s["seconds"] for s in report["steps"]},
        "seconds": report["seconds"],
    }  # fmt: skip


def summary(rows: list[dict]) -> str:
    def span(values: list[float]) -> str:
        return f"{min(values):.3f} / {statistics.median(values):.3f} / {max(values):.3f}"

    lines = ["figure (seconds; min / median / max over the switches)"]
    moved = [r["moved_at"] for r in rows if r["moved_at"] is not None]
    if moved:  # a release before `moved_at` has only the client's figure
        lines.append(f"  command start → alias moved (--json moved_at): {span(moved)}")
    firsts = [r["client_first_new_s"] for r in rows if r["client_first_new_s"] is not None]
    if firsts:
        lines.append(f"  command start → first answer of the new model (client): {span(firsts)}")
    for part in ("before", "steps"):
        for name in rows[-1][part]:
            lines.append(f"  {part[:-1] if part == 'steps' else 'before'} {name}: "
                         f"{span([r[part].get(name, 0.0) for r in rows])}")  # fmt: skip
    lines.append(
        f"  errors or dropped connections seen by the client: {sum(r['errors'] for r in rows)}"
    )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=10, help="switches (promote, rollback, …)")
    ap.add_argument("--poll", type=float, default=0.02, help="the client's pause between requests")
    ap.add_argument("--root", help="an existing project (see above) instead of a fresh copy")
    ap.add_argument("--pair", help="with --root: the two standby profiles, A,B")
    ap.add_argument("--json", action="store_true", help="the rows and the load as JSON")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-switch-") as tmp:
        if args.root:
            root = Path(args.root)
            edge = (root / "edge.yaml").read_text(encoding="utf-8")
            port = edge.split("port:", 1)[1].split("}", 1)[0].strip()
            bench = Bench(root, "ds4-flash", "", "", f"https://127.0.0.1:{port}",
                          (root.parent / "key").read_text().strip(), str(root.parent / "ca.crt"))  # fmt: skip
            aliases = json.loads(bench.cli("edge", "status", "--json").stdout)["aliases"]
            bench.old = next(a["profile"] for a in aliases if a["alias"] == bench.alias)
            bench.new = next(p for p in args.pair.split(",") if p != bench.old)
        else:
            bench = setup(Path(tmp))
        try:
            from composegen.project import Project
            from tests.support.edge import sealed_decision  # the decision `campaign decide` seals

            campaign = f"bench-{os.getpid()}"
            sealed_decision(Project(bench.root), campaign, bench.new)
            rows = []
            for i in range(args.n):
                argv = (["promote", bench.new, "--alias", bench.alias, "--campaign", campaign]
                        if i % 2 == 0 else ["rollback", bench.alias])  # fmt: skip
                target = bench.new if i % 2 == 0 else bench.old
                rows.append(one_switch(bench, argv, target, args.poll))
                print(json.dumps(rows[-1]), file=sys.stderr)
        finally:
            if not args.root:
                teardown(bench)
    load = os.getloadavg()
    if args.json:
        print(json.dumps({"rows": rows, "loadavg": load}, indent=2))
    else:
        print(summary(rows))
        print(
            f"  load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} cores)"
        )


if __name__ == "__main__":
    main()
