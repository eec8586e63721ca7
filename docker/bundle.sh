#!/bin/bash
# Builds the verifier's own Python under PREFIX (default /opt/verifier) from the Debian
# python3 of the build stage, so that the verifier runs on any Linux image of the same
# architecture: one with another glibc, another Python, or none.
#
#   PREFIX/python/python3.X            Debian's interpreter, its ELF interpreter and
#                                      rpath patched to PREFIX/python/lib (beside its
#                                      lib/, so that sys.prefix is PREFIX/python)
#   PREFIX/python/python3.X._pth       sys.path, fixed: the stdlib, lib-dynload,
#                                      site-packages (a ._pth file also means isolated
#                                      mode and no site: nothing of the image's Python,
#                                      no sitecustomize, no user site, no .pth files)
#   PREFIX/python/lib/                 the dynamic loader and every shared library the
#                                      interpreter and the kept extension modules load
#                                      (their ldd closure, glibc included)
#   PREFIX/python/lib/python3X.zip     the stdlib as byte code, without what grading
#                                      never needs (docker/pack.py)
#   PREFIX/python/lib/python3.X/       lib-dynload/ and site-packages/ (the verifier,
#                                      packages with extension modules, metadata)
#   PREFIX/python/lib/site-packages.zip  the other dependencies as byte code
#   PREFIX/ssl/ca-certificates.crt     the CA bundle for LLM judges' HTTPS
#   PREFIX/bin/verifier                the entry point (verifier.sh); the interpreter is
#                                      outside every PATH dir, so a command judge's
#                                      `python` is the image's, never this one
#
# Usage: bundle.sh interpreter          the interpreter, stdlib, libraries, CA bundle
#        bundle.sh install PIP_ARGS...  pip install --target site-packages (pip and the
#                                       build backend, BUILD_REQUIREMENTS, live in a
#                                       throwaway venv, PIP_VENV)
#        bundle.sh finish               byte code, the checks that nothing is missing
set -euo pipefail

PREFIX="${PREFIX:-/opt/verifier}"
python=$(readlink -f "$(command -v python3)")
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
stdlib="/usr/lib/python${version}"
home="$PREFIX/python"
libdir="$home/lib"
target_stdlib="$libdir/python${version}"
bundled="$home/python${version}"
site="$target_stdlib/site-packages"
pip_venv="${PIP_VENV:-/tmp/bundle-pip}"
build_requirements="${BUILD_REQUIREMENTS:-/tmp/build-requirements.txt}"

# Stdlib parts grading never imports: tests, GUI and IDE, installers, 2to3, the static
# libpython and build config, the interactive-only and obsolete extension modules, and
# the CJK codecs (GB2312, Big5, Shift-JIS, EUC-KR, ISO-2022: 1 MB; such an encoding is
# then an unknown encoding, LookupError).
STDLIB_DROPPED=(test idlelib tkinter turtledemo ensurepip lib2to3 distutils venv
    pydoc_data "config-${version}-"* site-packages dist-packages sitecustomize.py
    turtle.py __phello__)
DYNLOAD_DROPPED=('_test*' '_xx*' 'xxlimited*' '_ctypes_test*' '_curses*' 'readline*'
    '_dbm*' '_gdbm*' 'nis*' 'ossaudiodev*' '_tkinter*' '_crypt*' 'audioop*' '_codecs_*'
    '_multibytecodec*')
# Loaded with dlopen, not linked: glibc's unwinder for pthread_exit/cancel.
DLOPENED=(libgcc_s.so.1)

copy_library() {  # copy_library PATH: into libdir under its own name, dereferenced
    local name
    name=$(basename "$1")
    [ -e "$libdir/$name" ] || cp -L "$1" "$libdir/$name"
}

search_path() {  # search_path STDLIB [ZIP]: write the ._pth file (paths relative to it)
    printf '%s\n' "$@" "lib/python${version}/lib-dynload" "lib/python${version}/site-packages" \
        > "$bundled._pth"
}

closure() {  # closure FILE...: the shared libraries they load, one path a line
    ldd "$@" 2>/dev/null | sed -n 's/^[^/]*\(\/[^ ]*\) (0x[0-9a-f]*)$/\1/p' | sort -u
}

interpreter() {
    mkdir -p "$target_stdlib" "$PREFIX/bin" "$PREFIX/ssl"
    cp "$python" "$bundled"
    tar -C "$stdlib" -cf - \
        $(printf -- '--exclude=./%s ' "${STDLIB_DROPPED[@]}") \
        $(printf -- '--exclude=./lib-dynload/%s ' "${DYNLOAD_DROPPED[@]}") \
        --exclude='__pycache__' . | tar -C "$target_stdlib" -xf -
    find "$target_stdlib" -xtype l -delete  # Debian's links into /etc
    mkdir -p "$site"

    local loader
    loader=$(patchelf --print-interpreter "$python")
    copy_library "$loader"
    for library in $(closure "$python" "$target_stdlib"/lib-dynload/*.so); do
        copy_library "$library"
    done
    for name in "${DLOPENED[@]}"; do
        copy_library "$(ldconfig -p | sed -n "s/^[[:space:]]*$name .*=> //p" | head -n 1)"
    done
    # Every object looks in libdir first and, with DT_RPATH rather than RUNPATH, so
    # do the libraries it loads and dlopen()s: nothing of the image's own libraries.
    patchelf --set-interpreter "$libdir/$(basename "$loader")" \
        --force-rpath --set-rpath "$libdir" "$bundled"
    for object in "$target_stdlib"/lib-dynload/*.so "$libdir"/*.so*; do
        case "$(basename "$object")" in
            ld-linux*|libc.so*|libm.so*) continue ;;  # glibc's own need nothing else
        esac
        patchelf --force-rpath --set-rpath "$libdir" "$object"
    done
    search_path "lib/python${version}"
    cp -L /etc/ssl/certs/ca-certificates.crt "$PREFIX/ssl/ca-certificates.crt"
    install -m 0755 "$(dirname "$0")/verifier.sh" "$PREFIX/bin/verifier"
    sed -i "s|@PYTHON@|$bundled|; s|@PREFIX@|$PREFIX|" "$PREFIX/bin/verifier"
}

install_packages() {
    if [ ! -x "$pip_venv/bin/pip" ]; then
        "$python" -m venv "$pip_venv"
        "$pip_venv/bin/pip" install --quiet -r "$build_requirements"
    fi
    "$pip_venv/bin/pip" install --quiet --no-compile --target "$site" "$@"
}

finish() {
    rm -rf "$site/bin" "$site"/*.dist-info/RECORD
    find "$home" -name __pycache__ -type d -prune -exec rm -rf {} +
    # Wheels' extension modules carry their symbols (PyYAML's: 2.7 of its 3 MB).
    find "$site" -name '*.so' -exec strip --strip-unneeded {} +
    local zipped="lib/python${version//./}.zip"
    "$bundled" -I "$(dirname "$0")/pack.py" "$target_stdlib" "$home/$zipped" \
        "$site" "$libdir/site-packages.zip" verifier
    search_path "$zipped"
    echo "lib/site-packages.zip" >> "$bundled._pth"
    # What stays a directory is compiled in place; hash-based byte code stays valid
    # whatever the files' mtimes become.
    "$bundled" -I -m compileall -q -j 0 --invalidation-mode unchecked-hash "$site" >/dev/null
    # Nothing may resolve outside PREFIX.
    local missing
    missing=$(ldd "$bundled" "$target_stdlib"/lib-dynload/*.so | grep 'not found' || true)
    if [ -n "$missing" ]; then
        echo "bundle.sh: unresolved libraries:" >&2
        echo "$missing" >&2
        exit 1
    fi
    "$PREFIX/bin/verifier" --version >/dev/null
}

case "${1:-}" in
    interpreter) interpreter ;;
    install) shift; install_packages "$@" ;;
    finish) finish ;;
    *) echo "usage: bundle.sh interpreter | install PIP_ARGS... | finish" >&2; exit 2 ;;
esac
