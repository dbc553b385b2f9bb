"""A headless Chromium driven over the DevTools protocol (websocket-client), network off.

Used by tests/test_browser.py; Debian's ``chromium`` package (``.ci/run`` installs it).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")


def find_chromium() -> str | None:
    return next((p for p in map(shutil.which, CANDIDATES) if p), None)


class Browser:
    """One headless page; every request other than file/data/blob is recorded (and fails:
    the network is emulated offline and every host resolves to nothing)."""

    def __init__(self, exe: str, timeout: float = 60.0) -> None:
        import websocket

        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="saf-chromium-")
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--remote-debugging-port=0",
             "--remote-allow-origins=*", "--host-resolver-rules=MAP * ~NOTFOUND",
             "--proxy-server=127.0.0.1:9", f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not (port_file.is_file() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("Chromium did not start")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            targets = json.load(r)
        page = next(t for t in targets if t.get("type") == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=timeout,
                                              suppress_origin=True)
        self._id = 0
        self.requests: list[str] = []
        self.exceptions: list[str] = []
        for method in ("Page.enable", "Runtime.enable", "Network.enable"):
            self.send(method)
        self.send("Network.emulateNetworkConditions", offline=True, latency=0,
                  downloadThroughput=-1, uploadThroughput=-1)

    def _event(self, msg: dict) -> None:
        method, params = msg.get("method"), msg.get("params") or {}
        if method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails") or {}
            self.exceptions.append(str((details.get("exception") or {}).get("description")
                                       or details.get("text")))

    def send(self, method: str, **params: Any) -> dict:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result") or {}
            self._event(msg)

    def js(self, expression: str) -> Any:
        """The value of a JavaScript expression (awaited), as JSON."""
        res = self.send("Runtime.evaluate", expression=expression, awaitPromise=True,
                        returnByValue=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression[:80]}: {res['exceptionDetails']}")
        return (res.get("result") or {}).get("value")

    def open(self, path: Path, ready: str = "document.readyState === 'complete'") -> None:
        self.send("Page.navigate", url=path.resolve().as_uri())
        self.wait(ready)

    def wait(self, condition: str, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout or self.timeout)
        while not self._true(condition):
            if time.monotonic() > deadline:
                raise TimeoutError(f"not true after {timeout or self.timeout} s: {condition}")
            time.sleep(0.2)

    def _true(self, condition: str) -> bool:
        try:
            return bool(self.js(f"!!({condition})"))
        except RuntimeError:  # the page is still loading
            return False

    def network(self) -> list[str]:
        """Requests that were not for local content."""
        return [u for u in self.requests if not u.startswith(LOCAL_SCHEMES)]

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:  # noqa: BLE001 - closing anyway
            pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)
