#!/bin/sh
# docker-entrypoint pattern for the harbor-verifier image.
#   (no arguments)            -> verifier grade   (config/case/out from VERIFIER_*)
#   -... | a verifier command -> verifier "$@"
#   anything else             -> exec'd as given  (sh -c "sleep infinity", bash, ...)
# exec replaces this shell, so signals reach the process itself.
set -e

if [ "$#" -eq 0 ]; then
    set -- verifier grade
else
    case "$1" in
        -*|grade|check|schema|batch|task|version)
            set -- verifier "$@"
            ;;
    esac
fi

exec "$@"
