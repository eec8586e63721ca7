#!/bin/bash
cat > /app/server.py <<'PY'
import socketserver
import sys


class Upper(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            self.wfile.write(line.upper())
            self.wfile.flush()


socketserver.ThreadingTCPServer.allow_reuse_address = True
with socketserver.ThreadingTCPServer(("127.0.0.1", int(sys.argv[1])), Upper) as server:
    server.serve_forever()
PY
