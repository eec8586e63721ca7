#!/usr/bin/env bash
# What `make demo`, `make test` and `make venv` need on the machine, made usable:
#
#   scripts/prerequisites.sh ITEM...
#
#   podman       podman, able to run a container
#   docker       docker with its daemon running
#   python-venv  python3 able to create a virtual environment (Debian's python3-venv)
#   kubectl      only checked: the Kubernetes manifest tests need it (not in Debian 12)
#   go           a Go toolchain (Debian's golang-go): the tests of `runner: go`
#
# Usable items are left alone, so a second run does nothing. As root, with apt-get,
# what is missing is set up the way CI needs it: the Debian packages are installed,
# podman's /etc/containers/containers.conf is written only when none exists and
# podman cannot run a container without it, and dockerd is started in the background.
# Otherwise (not root, no apt-get) it prints the exact commands and exits 1 at once.
set -euo pipefail

CONTAINERS_CONF=/etc/containers/containers.conf
DOCKERD_LOG=/var/log/dockerd.log
# podman on machines of this kind: runc (crun refuses the hybrid cgroup layout),
# cgroupfs, file events, and rlimits it may only lower (see shared/ENVIRONMENT.md).
CONF_TEXT='[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1000:1000"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"'
DOCKERD=(dockerd --exec-opt native.cgroupdriver=cgroupfs --host unix:///var/run/docker.sock
         --bridge=none --iptables=false)
PODMAN_PACKAGES=(podman runc uidmap slirp4netns fuse-overlayfs catatonit ca-certificates)
GO_PACKAGES=(golang-go)
DOCKER_PACKAGES=(docker.io ca-certificates)

say() { printf 'prerequisites: %s\n' "$*"; }

podman_error=""
podman_works() {
    command -v podman >/dev/null 2>&1 || { podman_error="not installed"; return 1; }
    # A container of the host's own root (an overlay over it: nothing is written
    # there), so no image is needed to tell whether podman can run one.
    podman_error=$(timeout 60 podman run --rm --network none --rootfs /:O /bin/true 2>&1) \
        && return 0
    podman_error=$(printf '%s' "$podman_error" | tail -n 1)
    return 1
}

docker_error=""
docker_denied=0  # the daemon runs, but this user may not use it
docker_works() {
    command -v docker >/dev/null 2>&1 || { docker_error="not installed"; return 1; }
    docker_error=$(timeout 20 docker info 2>&1 >/dev/null) && return 0
    [[ "$docker_error" != *"permission denied"* ]] || docker_denied=1
    docker_error="its daemon is not reachable: $(printf '%s' "$docker_error" | tail -n 1)"
    return 1
}

# Debian's python3 has the venv module but not ensurepip, without which it cannot
# make one: python3-venv brings it.
venv_works() { python3 -c 'import ensurepip, venv' >/dev/null 2>&1; }

can_install() { [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; }

apt_install() {
    local missing=()
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
            || missing+=("$package")
    done
    ((${#missing[@]})) || return 0
    say "apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # A policy-rc.d keeps the packages' init scripts from starting daemons (dockerd
    # is started below, with its options); one already there is kept.
    local own_policy=0
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        own_policy=1
    fi
    local status=0
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || status=$?
    if ((own_policy)); then rm -f /usr/sbin/policy-rc.d; fi
    return "$status"
}

set_up_podman() {
    apt_install "${PODMAN_PACKAGES[@]}"
    podman_works && return 0
    if [[ -e "$CONTAINERS_CONF" ]]; then
        echo "prerequisites: podman cannot run a container ($podman_error); $CONTAINERS_CONF" \
            "exists and is left as it is. On machines of this kind it needs:" >&2
        printf '%s\n' "$CONF_TEXT" | sed 's/^/    /' >&2
        return 1
    fi
    say "writing $CONTAINERS_CONF (podman could not run a container: $podman_error)"
    mkdir -p "$(dirname "$CONTAINERS_CONF")"
    printf '%s\n' "$CONF_TEXT" >"$CONTAINERS_CONF"
    podman_works || { echo "prerequisites: podman still cannot run a container: $podman_error" >&2; return 1; }
}

start_dockerd() {
    # A dockerd killed earlier leaves its pid files behind, and a new one refuses
    # to start over them.
    for pidfile in /var/run/docker.pid /var/run/docker/containerd/containerd.pid; do
        [[ -f "$pidfile" ]] || continue
        local pid comm
        pid=$(cat "$pidfile" 2>/dev/null || true)
        comm=$(cat "/proc/${pid:-0}/comm" 2>/dev/null || true)
        if [[ "$comm" != dockerd && "$comm" != containerd ]]; then
            say "removing stale $pidfile (pid ${pid:-?} is not running)"
            rm -f "$pidfile"
        fi
    done
    say "starting dockerd in the background (log: $DOCKERD_LOG)"
    nohup "${DOCKERD[@]}" >>"$DOCKERD_LOG" 2>&1 </dev/null &
    local dockerd_pid=$!
    for _ in $(seq 1 60); do
        docker_works && return 0
        kill -0 "$dockerd_pid" 2>/dev/null || break
        sleep 1
    done
    echo "prerequisites: dockerd did not come up ($docker_error); last lines of $DOCKERD_LOG:" >&2
    tail -n 20 "$DOCKERD_LOG" >&2 || true
    return 1
}

set_up_docker() {
    command -v dockerd >/dev/null 2>&1 || apt_install "${DOCKER_PACKAGES[@]}"
    docker_works || start_dockerd
}

# --- what is missing ----------------------------------------------------------
needed=()     # items to set up
problems=()   # what is wrong with each, for the message
for item in "$@"; do
    case "$item" in
        podman)
            podman_works || { needed+=(podman); problems+=("podman: $podman_error"); } ;;
        docker)
            docker_works || { needed+=(docker); problems+=("docker: $docker_error"); } ;;
        python-venv)
            venv_works || { needed+=(python-venv); problems+=("python3 cannot create a virtual environment"); } ;;
        kubectl)
            command -v kubectl >/dev/null 2>&1 || say "kubectl is not installed: the Kubernetes" \
                "manifest tests will be skipped (CI=true: fail); install kubectl >= 1.27" ;;
        go)
            command -v go >/dev/null 2>&1 || { needed+=(go); problems+=("go: not installed"); } ;;
        *)
            echo "prerequisites: unknown item '$item' (podman, docker, python-venv, kubectl, go)" >&2
            exit 2 ;;
    esac
done
((${#needed[@]})) || exit 0

# --- set it up, or say how ------------------------------------------------------
if can_install; then
    for item in "${needed[@]}"; do
        case "$item" in
            podman) set_up_podman ;;
            docker) set_up_docker ;;
            python-venv) apt_install python3-venv ;;
            go) apt_install "${GO_PACKAGES[@]}" ;;
        esac
    done
    say "set up: ${needed[*]}"
    exit 0
fi

packages=()
for item in "${needed[@]}"; do
    case "$item" in
        podman) command -v podman >/dev/null 2>&1 || packages+=("${PODMAN_PACKAGES[@]}") ;;
        docker) command -v dockerd >/dev/null 2>&1 || packages+=("${DOCKER_PACKAGES[@]}") ;;
        python-venv) packages+=(python3-venv) ;;
        go) packages+=("${GO_PACKAGES[@]}") ;;
    esac
done
{
    echo "prerequisites: missing here:"
    printf '  %s\n' "${problems[@]}"
    if [[ "$(id -u)" == 0 ]]; then
        echo "There is no apt-get here to set them up; install what this does on Debian 12:"
    else
        echo "Only root can set them up. Run the same make command as root (sudo), or, as root:"
    fi
    echo "  bash $0 ${needed[*]}"
    echo "which runs:"
    if ((${#packages[@]})); then
        echo "  apt-get update && apt-get install -y --no-install-recommends" \
            "$(printf '%s\n' "${packages[@]}" | sort -u | paste -sd ' ')"
    fi
    if [[ " ${needed[*]} " == *" podman "* ]]; then
        echo "  # only if $CONTAINERS_CONF does not exist and podman still cannot run a container:"
        printf "mkdir -p %s && cat >%s <<'EOF'\n%s\nEOF\n" \
            "$(dirname "$CONTAINERS_CONF")" "$CONTAINERS_CONF" "$CONF_TEXT"
    fi
    if [[ " ${needed[*]} " == *" docker "* ]] && ((!docker_denied)); then
        echo "  nohup ${DOCKERD[*]} >>$DOCKERD_LOG 2>&1 &"
    fi
    user=$(id -un 2>/dev/null || echo USER)
    if [[ "$(id -u)" != 0 && " ${needed[*]} " == *" docker "* ]]; then
        echo "Then, for docker as $user: as root, usermod -aG docker $user (and log in again)."
    fi
    if [[ "$(id -u)" != 0 && " ${needed[*]} " == *" podman "* ]]; then
        echo "Or rootless podman as $user: /etc/subuid and /etc/subgid entries for $user, and" \
            "the settings above in ~/.config/containers/containers.conf."
    fi
} >&2
exit 1
