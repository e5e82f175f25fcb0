#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The HTTP(S) server http_client_test talks to, on a free loopback port it prints on stdout.

  http_test_server.py [--cert CRT --key KEY [--client-ca CA]]

  any method /echo        200, JSON {"method", "path", "headers" (names lower-cased), "body",
                          "peerPort" (the client's port: one connection or several)}
  any method /status/N    status N, "status N" as text/plain
  any method /slow?ms=N   200 after N ms
  any method /whoami      200, the client certificate's subject CN ("" without one)
  any method /redirect    302 to /echo
With --client-ca, a client certificate signed by that CA is required.
"""
import argparse
import json
import ssl
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # keep the test's output clean
        pass

    def reply(self, status, body, ctype):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Test-Server", "ibcni")
        self.end_headers()
        self.wfile.write(data)

    def handle_any(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length).decode() if length else ""
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/echo":
            # ?ms=N: answered N ms late, so that requests sent together are in flight together
            time.sleep(int(urllib.parse.parse_qs(url.query).get("ms", ["0"])[0]) / 1000.0)
            headers = {k.lower(): v for k, v in self.headers.items()}
            self.reply(200, json.dumps({"method": self.command, "path": self.path,
                                        "headers": headers, "body": body,
                                        "peerPort": self.client_address[1]}), "application/json")
        elif url.path.startswith("/status/"):
            code = int(url.path[len("/status/"):])
            self.reply(code, "status %d" % code, "text/plain")
        elif url.path == "/slow":
            ms = int(urllib.parse.parse_qs(url.query).get("ms", ["1000"])[0])
            time.sleep(ms / 1000.0)
            self.reply(200, "slept", "text/plain")
        elif url.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/echo")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif url.path == "/whoami":
            cn = ""
            cert = self.connection.getpeercert() if hasattr(self.connection, "getpeercert") else None
            for rdn in (cert or {}).get("subject", ()):
                for key, value in rdn:
                    if key == "commonName":
                        cn = value
            self.reply(200, cn, "text/plain")
        else:
            self.reply(404, "no such path", "text/plain")

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = handle_any


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):  # a refused TLS client is expected
        pass


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--client-ca")
    a = p.parse_args()
    server = Server(("127.0.0.1", 0), Handler)
    if a.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.cert, a.key)
        if a.client_ca:
            ctx.load_verify_locations(a.client_ca)
            ctx.verify_mode = ssl.CERT_REQUIRED
        # The handshake happens in the handler's thread, so a failing client blocks nobody.
        server.socket = ctx.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
