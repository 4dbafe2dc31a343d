#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A pass-through HTTP proxy in front of slurmrestd for scripts/chaos.sh.

It forwards every request (one upstream connection per request, many at once) and loses the
reply to some job submits on demand: while the file CONTROL_DIR/drop-submits holds a number N > 0,
the next submit (POST .../job/submit) is forwarded to slurmrestd, its reply read and thrown away,
N decremented, a line appended to CONTROL_DIR/dropped, and the client's connection closed without
a reply: the job exists in Slurm, its submitter never learns its id (as testing/slurm_proxy.h's
kLoseSubmitReply, for a separate process). When slurmrestd refuses the connection, the client's
connection is reset (RST), so the bridge meets a connection failure as it would without the proxy
(test audit N6), not an HTTP status the proxy made up. Writes its port to CONTROL_DIR/port once it
listens.

Usage: slurm_proxy.py UPSTREAM_URL CONTROL_DIR
"""
import http.client
import http.server
import os
import socket
import struct
import sys
import threading
import urllib.parse

UPSTREAM = urllib.parse.urlparse(sys.argv[1])
CONTROL = sys.argv[2]
LOCK = threading.Lock()
HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection"}


def take_drop():
    """True (and one fewer to drop) when the next submit's reply is to be lost."""
    path = os.path.join(CONTROL, "drop-submits")
    with LOCK:
        try:
            with open(path) as f:
                n = int(f.read().strip() or 0)
        except (OSError, ValueError):
            return False
        if n <= 0:
            return False
        with open(path + ".tmp", "w") as f:
            f.write(str(n - 1))
        os.replace(path + ".tmp", path)
        return True


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: only drops are worth a line
        pass

    def forward(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        drop = self.command == "POST" and "/job/submit" in self.path and take_drop()
        conn = http.client.HTTPConnection(UPSTREAM.hostname, UPSTREAM.port, timeout=120)
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            reply = conn.getresponse()
            data = reply.read()
        except ConnectionRefusedError:
            # Reset the client's connection: SO_LINGER 0 makes close() send an RST.
            self.close_connection = True
            try:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.connection.close()
            except OSError:
                pass
            return
        except (OSError, http.client.HTTPException):
            # Lost on the way: the client sees its connection lost, as it would without the proxy.
            self.close_connection = True
            return
        finally:
            conn.close()
        if drop:
            with LOCK, open(os.path.join(CONTROL, "dropped"), "a") as f:
                f.write(f"{reply.status} {data[:200]!r}\n")
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        self.send_response(reply.status, reply.reason)
        for k, v in reply.getheaders():
            if k.lower() not in HOP:
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = forward


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


def main():
    server = Server(("127.0.0.1", 0), Handler)
    port_file = os.path.join(CONTROL, "port")
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
