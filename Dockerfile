# harbor-verifier: grades an agent's case directory against eval.yaml and writes
# /logs/verifier/{reward.json,reward.txt,judges.json}.
#
# BASE_IMAGE is the runtime base (a Python >= 3.11 on Debian); BUILD_IMAGE is the
# base of the build stage and defaults to the same image. Both must have their
# python3 at the same path and version: the virtual environment built in the
# build stage is copied unchanged to the final stage. Where no registry can be
# reached, `make image` bootstraps both bases from Debian packages (see Makefile).
ARG BASE_IMAGE=python:3.12-slim
ARG BUILD_IMAGE=${BASE_IMAGE}

# ---------------------------------------------------------------------------
FROM ${BUILD_IMAGE} AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src

# Behind a TLS-intercepting proxy pip needs the host's CA bundle: the Makefile
# copies it to the optional build context file `.cache/build-ca.crt` (git-ignored; the
# glob keeps this COPY valid where it does not exist).
COPY pyproject.toml .cache/build-ca.cr[t] /src/

# Dependencies and the build backend first: their own layer, cached while
# pyproject.toml is unchanged.
RUN set -eu; \
    if [ -f /src/build-ca.crt ]; then export PIP_CERT=/src/build-ca.crt; fi; \
    python3 -m venv /opt/verifier; \
    python3 -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb")); print("\n".join(p["project"]["dependencies"] + p["build-system"]["requires"]))' \
        > /tmp/requirements.txt; \
    /opt/verifier/bin/python -m pip install --quiet -r /tmp/requirements.txt

COPY README.md /src/
COPY task-templates/ /src/task-templates/
COPY verifier/ /src/verifier/

# The package itself (no build isolation: the backend is already there); then drop
# the installers and compile byte code once, with hash-based .pyc files that stay
# valid whatever the files' mtimes are.
RUN set -eu; \
    /opt/verifier/bin/python -m pip install --quiet --no-deps --no-build-isolation /src; \
    /opt/verifier/bin/python -m pip uninstall --quiet --yes setuptools wheel pip 2>/dev/null || true; \
    rm -rf /opt/verifier/bin/activate* /opt/verifier/bin/Activate.ps1 /src/build; \
    find /opt/verifier -name __pycache__ -type d -prune -exec rm -rf {} +; \
    /opt/verifier/bin/python -m compileall -q -j 0 --invalidation-mode unchecked-hash /opt/verifier/lib; \
    /opt/verifier/bin/verifier --help >/dev/null

# ---------------------------------------------------------------------------
FROM ${BASE_IMAGE}

ENV PATH=/opt/verifier/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/home/verifier \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VERIFIER_CONFIG=/tests/eval.yaml \
    VERIFIER_CASE=/case \
    VERIFIER_OUT=/logs/verifier

COPY --from=build /opt/verifier /opt/verifier
COPY entrypoint.sh /usr/local/bin/entrypoint.sh
COPY docker/test.sh /tests/test.sh

# Any UID with GID 0 (OpenShift restricted-v2) can use the working dirs: they
# are owned by 1001:0 and group-writable like their owner. /tests is root's and
# read-only to everyone else: bash reads test.sh as it runs it, so code from the
# case running as the grader's UID must not be able to append to it.
RUN set -eu; \
    for tool in bash sh mkdir rm chmod find tar gzip base64; do command -v "$tool" >/dev/null; done; \
    mkdir -p /tests /case /logs/verifier /home/verifier; \
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
