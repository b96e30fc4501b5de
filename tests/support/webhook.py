"""An Alertmanager webhook receiver for the tests, and the fixture that points the launcher's
Alertmanager at one (tests/end_to_end/conftest.py)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Webhook:
    """An Alertmanager webhook receiver on 127.0.0.1: every notification's alerts, in order."""

    def __init__(self) -> None:
        self.alerts: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with received._lock:
                    received.alerts += body.get("alerts", [])
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def seen(self, alertname: str, instance: str, status: str) -> bool:
        with self._lock:
            return any(
                a["status"] == status
                and a["labels"].get("alertname") == alertname
                and a["labels"].get("instance") == instance
                for a in self.alerts
            )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
