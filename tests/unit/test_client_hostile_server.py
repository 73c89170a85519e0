"""`proctor remote export --all` writes files under names the server gives: a server that names
one "../..." must not get a file written outside the folder."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from click.testing import CliRunner

from proctor_client.cli import remote

DONE = {
    "id": 1,
    "task": "export",
    "state": "done",
    "done": 1,
    "total": 1,
    "log": "",
    "files": {"scores.csv": "/blobs/x/scores.csv", "../escaped.csv": "/blobs/x/escaped.csv"},
}


class Hostile(BaseHTTPRequestHandler):
    def _json(self, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):  # start the export
        self._json({"job": 1})

    def do_GET(self):
        if self.path.startswith("/api/v1/jobs/1"):
            self._json(DONE)
        else:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"x\n")

    def log_message(self, *args) -> None:
        pass


def test_export_all_refuses_a_file_name_that_leaves_the_folder(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        out = tmp_path / "out"
        r = CliRunner().invoke(
            remote,
            ["--url", f"http://127.0.0.1:{server.server_port}", "--token", "t", "export", "1", "--all", str(out)],
        )
    finally:
        server.shutdown()
    assert r.exit_code == 1 and "not a plain file name" in r.output, r.output
    assert not (tmp_path / "escaped.csv").exists()
