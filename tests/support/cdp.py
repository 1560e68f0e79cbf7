"""Open a page in Debian's headless chromium over the DevTools protocol on a pipe (stdlib only: no
websocket library, no port), and report what a person would see and what the page did.

    with Chromium.launch(tmp_path) as browser:
        seen = browser.open(path)   # PageVisit: console errors, requests, plots, a PNG screenshot

--remote-debugging-pipe: chromium reads commands from fd 3 and writes replies to fd 4, each message a
JSON object ended by NUL.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-extensions",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
]

PLOTS_JS = """JSON.stringify({
  plots: [...document.querySelectorAll('figure.plot')].map(f => {
    const svg = f.querySelector('svg'); const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    return {name: f.dataset.plot, width: box.width, height: box.height,
            shapes: svg ? svg.querySelectorAll('path, use, rect').length : 0};
  }),
  missing: [...document.querySelectorAll('[data-missing-plot]')].map(e => e.dataset.missingPlot),
  height: document.documentElement.scrollHeight,
})"""


def chromium() -> str | None:
    return shutil.which("chromium")


@dataclass
class PageVisit:
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    plots: list[dict] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    screenshot: bytes = b""


class Chromium:
    def __init__(self, proc: subprocess.Popen, to_browser: int, from_browser: int):
        self.proc, self.to_browser, self.from_browser = proc, to_browser, from_browser
        self.next_id, self.buffer, self.events = 0, b"", []

    @classmethod
    def launch(cls, tmp: Path) -> Chromium:
        binary = chromium()
        assert binary, (
            "chromium is not installed: scripts/provision-tests.sh installs it (provision.d/40-chromium.sh)"
        )
        cmd_read, cmd_write = os.pipe()
        out_read, out_write = os.pipe()

        # in the child: its fd 3 reads our commands, its fd 4 carries the replies
        def plumb() -> None:
            # off 3 and 4 first: a pipe may sit there
            reads, writes = os.dup(cmd_read), os.dup(out_write)
            os.dup2(reads, 3)  # dup2 makes the copies inheritable (os.pipe's own fds close on exec)
            os.dup2(writes, 4)

        argv = [binary, *FLAGS, f"--user-data-dir={tmp / 'chromium-profile'}", "about:blank"]
        # its own complaints (dbus...), for a failing test
        with open(tmp / "chromium.log", "wb") as log:
            proc = subprocess.Popen(argv, preexec_fn=plumb, close_fds=False, stdout=log, stderr=log)
        os.close(cmd_read)
        os.close(out_write)
        return cls(proc, cmd_write, out_read)

    def send(
        self,
        method: str,
        params: dict | None = None,
        session: str | None = None,
        timeout: float = 30,
    ) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read(timeout)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def _read(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.from_browser], [], [], left)[0]:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise EOFError("chromium closed the DevTools pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def wait_event(self, method: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._read(max(0.01, deadline - time.monotonic())))
        return next(e for e in self.events if e.get("method") == method)

    def open(self, path: Path, width: int = 1200, height: int = 900) -> PageVisit:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        self.events.clear()
        self.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
        self.wait_event("Page.loadEventFired")
        layout = json.loads(
            self.send("Runtime.evaluate", {"expression": PLOTS_JS}, session=session)["result"][
                "value"
            ]
        )
        shot = self.send("Page.captureScreenshot", {"format": "png"}, session=session)
        visit = PageVisit(
            plots=layout["plots"],
            missing=layout["missing"],
            screenshot=base64.b64decode(shot["data"]),
        )
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in (
                "error",
                "assert",
                "warning",
            ):
                visit.console_errors.append(
                    " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
                )
            elif method == "Runtime.exceptionThrown":
                visit.console_errors.append(params["exceptionDetails"].get("text", "exception"))
            elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
                visit.console_errors.append(params["entry"]["text"])
            elif method == "Network.requestWillBeSent":
                visit.requests.append(params["request"]["url"])
        self.send("Target.closeTarget", {"targetId": target})
        return visit

    def close(self) -> None:
        with contextlib.suppress(OSError, EOFError, TimeoutError):  # it may be gone already
            self.send("Browser.close", timeout=5)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        os.close(self.to_browser)
        os.close(self.from_browser)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
