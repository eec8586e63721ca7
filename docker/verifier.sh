#!/bin/sh
# harbor-verifier's entry point: its own Python (@PREFIX@/python), isolated. -I: no
# PYTHON* variables, no user site, no working dir on sys.path; the interpreter's ._pth
# file fixes sys.path to the bundle's own stdlib and site-packages. -B: never writes
# byte code (it is compiled at build time; the bundle may be read-only).
# LLM judges' HTTPS uses the bundle's CA bundle unless SSL_CERT_FILE or SSL_CERT_DIR
# names another (an image's own store, a proxy's CA). Commands that judges run get
# none of this: their environment is an allow-list, their PATH the image's.
if [ -z "${SSL_CERT_FILE:-}" ] && [ -z "${SSL_CERT_DIR:-}" ]; then
    SSL_CERT_FILE=@PREFIX@/ssl/ca-certificates.crt
    export SSL_CERT_FILE
fi
exec @PYTHON@ -I -B -m verifier "$@"
