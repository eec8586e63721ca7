# harbor-verifier: grades an agent's case directory against eval.yaml and writes
# /logs/verifier/{reward.json,reward.txt,judges.json,reward-details.json}.
#
# The verifier is one self-contained layer, /opt/verifier (docker/bundle.sh): Debian's
# python3 with its own dynamic loader, shared libraries, trimmed stdlib, dependencies
# and CA bundle, so it runs on any Linux image of the same architecture. This image is
# that layer on a small Debian base (no Python of its own); a Harbor task's verifier
# image is the same layer on the task's own environment (`verifier task init
# --environment`, which COPYs /opt/verifier from this image).
#
# BUILD_IMAGE must be Debian (its python3 is the one bundled; apt-get installs python3,
# python3-venv, patchelf and binutils there when missing). BASE_IMAGE is any Linux base with the
# tools Harbor runs (bash, sh, mkdir, rm, chmod, find, tar, gzip, base64). Where no
# registry can be reached, `make image` bootstraps debian:bookworm-slim from Debian
# packages (see Makefile).
ARG BASE_IMAGE=debian:bookworm-slim
ARG BUILD_IMAGE=${BASE_IMAGE}

# ---------------------------------------------------------------------------
FROM ${BUILD_IMAGE} AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1

RUN set -eu; \
    if ! command -v patchelf strip >/dev/null || ! python3 -c 'import ensurepip' 2>/dev/null \
        || [ ! -r /etc/ssl/certs/ca-certificates.crt ]; then \
        apt-get update -qq; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            python3 python3-venv patchelf binutils ca-certificates >/dev/null; \
        rm -rf /var/lib/apt/lists/*; \
    fi

# The interpreter, stdlib and libraries: their own layer, cached while the Debian
# packages and the script are unchanged.
COPY docker/bundle.sh docker/verifier.sh docker/pack.py /src/docker/
RUN bash /src/docker/bundle.sh interpreter

WORKDIR /src

# Behind a TLS-intercepting proxy pip needs the host's CA bundle: the Makefile
# copies it to the optional build context file `.cache/build-ca.crt` (git-ignored; the
# glob keeps this COPY valid where it does not exist).
COPY pyproject.toml .cache/build-ca.cr[t] /src/

# The dependencies into the bundle's site-packages (pip and the build backend stay in
# a throwaway venv): cached while pyproject.toml is unchanged.
RUN set -eu; \
    if [ -f /src/build-ca.crt ]; then export PIP_CERT=/src/build-ca.crt; fi; \
    python3 -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb")); print("\n".join(p["project"]["dependencies"]))' \
        > /tmp/requirements.txt; \
    python3 -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb")); print("\n".join(p["build-system"]["requires"]))' \
        > /tmp/build-requirements.txt; \
    bash /src/docker/bundle.sh install -r /tmp/requirements.txt

COPY README.md /src/
COPY task-templates/ /src/task-templates/
COPY deploy/kubernetes/ /src/deploy/kubernetes/
COPY verifier/ /src/verifier/

# The package itself (no build isolation: the backend is in bundle.sh's pip venv),
# Harbor's entry script, then byte code for everything and the bundle's own checks.
COPY docker/test.sh /opt/verifier/test.sh
RUN set -eu; \
    bash /src/docker/bundle.sh install --no-deps --no-build-isolation /src; \
    bash /src/docker/bundle.sh finish; \
    rm -rf /src/build

# ---------------------------------------------------------------------------
FROM ${BASE_IMAGE}

ENV PATH=/opt/verifier/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/home/verifier \
    LANG=C.UTF-8 \
    VERIFIER_CONFIG=/tests/eval.yaml \
    VERIFIER_CASE=/case \
    VERIFIER_OUT=/logs/verifier

COPY --from=build /opt/verifier /opt/verifier
COPY entrypoint.sh /usr/local/bin/entrypoint.sh

# Any UID with GID 0 (OpenShift restricted-v2) can use the working dirs: they
# are owned by 1001:0 and group-writable like their owner. /tests is root's and
# read-only to everyone else: bash reads test.sh as it runs it, so code from the
# case running as the grader's UID must not be able to append to it.
RUN set -eu; \
    for tool in bash sh mkdir rm chmod find tar gzip base64; do command -v "$tool" >/dev/null; done; \
    mkdir -p /tests /case /logs/verifier /home/verifier; \
    cp /opt/verifier/test.sh /tests/test.sh; \
    chmod 0755 /usr/local/bin/entrypoint.sh /tests /tests/test.sh; \
    chown -R 0:0 /tests; \
    chown -R 1001:0 /case /logs /home/verifier; \
    chmod -R g=u /case /logs /home/verifier; \
    grep -q '^verifier:' /etc/passwd \
        || echo 'verifier:x:1001:0:harbor verifier:/home/verifier:/bin/bash' >> /etc/passwd; \
    verifier --help >/dev/null

# Metadata last: a new revision changes only the image config, not the layers.
# The OCI labels, plus those OpenShift's console shows (io.k8s.*, io.openshift.tags).
# `make image` adds org.opencontainers.image.source (the git remote, or SOURCE_URL) and
# org.opencontainers.image.base.digest (a base pulled from a registry).
ARG BASE_IMAGE
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
ARG DESCRIPTION="Grades an agent's case directory against eval.yaml and writes a Harbor reward to /logs/verifier"
LABEL org.opencontainers.image.title="harbor-verifier" \
      org.opencontainers.image.description="${DESCRIPTION}" \
      io.k8s.display-name="harbor-verifier" \
      io.k8s.description="${DESCRIPTION}" \
      io.openshift.tags="harbor,verifier,evaluation,reward,grading" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE_IMAGE}" \
      org.opencontainers.image.vendor="harbor-verifier"

USER 1001:0
WORKDIR /home/verifier

# No arguments: `verifier grade` with the VERIFIER_* defaults above.
ENTRYPOINT ["entrypoint.sh"]
CMD []
