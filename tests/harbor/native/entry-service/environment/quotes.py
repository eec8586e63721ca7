"""The environment's quote service: GET /quote/N answers quote N's text."""

import http.server
import sys

QUOTES = {1: "simple is better than complex", 2: "errors should never pass silently"}


class Quotes(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        number = self.path.rsplit("/", 1)[-1]
        text = QUOTES.get(int(number)) if number.isdigit() else None
        self.send_response(200 if text else 404)
        self.end_headers()
        self.wfile.write((text or "no such quote").encode())

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), Quotes).serve_forever()
