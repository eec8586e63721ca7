#!/bin/bash
# Creates Harbor's own virtual environment for the Harbor trial tests
# (tests/harbor/), idempotently: Harbor needs Python >= 3.12, the project's python3
# may be older. podman-compose comes with it (Debian's 1.0.3 is too old for Harbor);
# tests put the venv's bin/ on PATH so Harbor finds it. harbor-rewardkit (and openpyxl,
# for its xlsx criterion) go in too: tests/unit/test_rewardkit_parity.py runs rewardkit's
# own criteria beside the builtins of the same names.
#   HARBOR_VENV     where (default /opt/harbor-venv)
#   HARBOR_VERSION  the harbor release the notes in docs/harbor.md were checked on
set -euo pipefail

venv="${HARBOR_VENV:-/opt/harbor-venv}"
version="${HARBOR_VERSION:-0.26.0}"
compose_spec="podman-compose>=1.1"
rewardkit_specs=("harbor-rewardkit==0.2.3" "openpyxl>=3.1,<4")

if [ -x "$venv/bin/harbor" ] && [ -x "$venv/bin/podman-compose" ] \
    && [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("harbor"))' 2>/dev/null)" = "$version" ]; then
    if ! "$venv/bin/python" -c 'import importlib.metadata as m; assert m.version("harbor-rewardkit") == "0.2.3"; import openpyxl' 2>/dev/null; then
        echo "harbor-venv: adding ${rewardkit_specs[*]} to $venv"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${rewardkit_specs[@]}"
    fi
    echo "harbor-venv: $venv has harbor $version"
    exit 0
fi

parent=$(dirname "$venv")
if ! mkdir -p "$parent" 2>/dev/null || [ ! -w "$parent" ]; then
    echo "harbor-venv: $parent is not writable here: as root, run \`bash $0\`," \
        "or use a venv of your own: make test HARBOR_VENV=\$HOME/.cache/harbor-venv" >&2
    exit 1
fi

python=""
pyenv_versions="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")/versions"
# Python 3.12 first (what Harbor is checked with here), then newer ones.
for candidate in "${HARBOR_PYTHON:-}" python3.12 "$pyenv_versions"/3.12.*/bin/python3.12 \
    python3.13 "$pyenv_versions"/3.13.*/bin/python3.13 python3; do
    [ -n "$candidate" ] || continue
    path=$(command -v "$candidate" 2>/dev/null) || continue
    if "$path" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
        python="$path"
        break
    fi
done
if [ -z "$python" ]; then
    echo "harbor-venv: no Python >= 3.12 found (set HARBOR_PYTHON); without Harbor:" \
        "make test HARBOR_TRIALS=0" >&2
    exit 1
fi

echo "harbor-venv: creating $venv with $python ($("$python" --version 2>&1)), harbor==$version"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "harbor==$version" "$compose_spec" "${rewardkit_specs[@]}"
"$venv/bin/harbor" --version
