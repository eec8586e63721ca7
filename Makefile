# harbor-verifier: image, demo, tests, benchmarks.
#
#   make image       build $(IMAGE) with $(ENGINE) (and copy it to the other engine)
#   make demo        build the image and grade examples/case-pass and examples/case-fail
#   make test        lint, then every test in tests/: the unit tests (slow ones included), the
#                    integration tests on podman and docker, the real Harbor trials (CI runs this)
#   make test-fast   the tests not marked slow, integration or harbor (no image is built;
#                    about four minutes on 2 cores); it lists its slowest tests at the end
#   make bench       figures: grading time and memory, batch throughput (CPU and LLM judges),
#                    the hardened pytest runner beside plain pytest, image size and time,
#                    how late a reward lands past its deadline
#   make lint        ruff check + ruff format --check + import-linter (the layers) + mypy
#   make cli-docs    rewrite docs/cli.md's reference from the CLI's declarations
#
# ENGINE defaults to podman when installed, else docker when installed, else podman.
# What a target needs on the machine (the engine, both engines for `make test`,
# python3-venv) is checked first by scripts/prerequisites.sh: as root with apt-get it
# sets up what is missing, otherwise it stops at once with the commands to run.
# Where BASE_IMAGE cannot be pulled (no registry), `make base-image` bootstraps it from
# Debian packages with mmdebstrap, under the same name, and the image is built on it.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# Expanded where it is used (not once): an engine installed by `make test` itself counts.
ifeq ($(origin ENGINE),undefined)
ENGINE = $(shell if command -v podman >/dev/null 2>&1; then echo podman; \
    elif command -v docker >/dev/null 2>&1; then echo docker; else echo podman; fi)
endif
IMAGE ?= localhost/harbor-verifier:latest
# The runtime base, and the build stage's (Debian: its python3 is the one bundled into
# /opt/verifier; the Dockerfile apt-gets what the build needs). Task environments built
# here (tests, the README walkthrough) start FROM it too.
BASE_IMAGE ?= debian:bookworm-slim
DEBIAN_SUITE ?= bookworm
DEBIAN_MIRROR ?= http://deb.debian.org/debian
DEBIAN_SECURITY_MIRROR ?= http://deb.debian.org/debian-security
# CA bundle handed to pip in the build stage (TLS-intercepting proxies); optional.
HOST_CA ?= /etc/ssl/certs/ca-certificates.crt
# Copy the image to the other engine's storage when it is installed and running
# (the integration tests use both); TRANSFER=0 turns that off.
TRANSFER ?= 1
# The engines `make test` sets up and requires (a test skipped for want of one of them
# fails); TEST_ENGINES=podman tests podman only.
TEST_ENGINES ?= podman docker
# Harbor's own venv for the Harbor trial tests (.ci/harbor-venv.sh: Python >= 3.12);
# HARBOR_TRIALS=0 leaves them out.
HARBOR_VENV ?= /opt/harbor-venv
HARBOR_TRIALS ?= 1
# The public source of the image, for its org.opencontainers.image.source label: the
# git remote `origin` as an https URL (git@host:path becomes https://host/path; a
# local path is no source) unless given.
SOURCE_URL ?= $(shell git remote get-url origin 2>/dev/null \
    | sed -n -e 's#^git@\([^:]*\):#https://\1/#' -e 's#\.git$$##' -e '\#^https://#p')

PYTHON ?= python3
VENV ?= .venv
TESTS ?= tests
PYTEST_ARGS ?=

OTHER_ENGINE = $(if $(filter podman,$(ENGINE)),docker,podman)
# Docker Hub short names: podman needs them fully qualified to pull.
BASE_REF := $(if $(findstring /,$(BASE_IMAGE)),$(BASE_IMAGE),docker.io/library/$(BASE_IMAGE))
# What docker calls the same image (it drops docker.io/library/).
BASE_DOCKER_REF := $(patsubst docker.io/library/%,%,$(BASE_REF))
VERSION := $(shell sed -n 's/^version *= *"\(.*\)"/\1/p' pyproject.toml | head -n 1)
REVISION := $(or $(shell git rev-parse --verify -q HEAD 2>/dev/null),unknown)
CREATED := $(or $(shell git log -1 --format=%cI 2>/dev/null),unknown)
PODMAN_ONLY = $(if $(filter podman,$(1)),$(2))

.PHONY: help venv prerequisites harbor-venv base-image image demo test test-fast bench \
	bench-grade bench-batch bench-llm-batch bench-pass-rate bench-image bench-deadline lint \
	cli-docs clean

help:
	@sed -n 's/^#   //p' $(MAKEFILE_LIST)

# --- Python environment -------------------------------------------------------
# Made afresh when pyproject.toml changes: a package dropped from it (or replaced by one
# that installs the same modules under another name) must not linger.
$(VENV)/.installed: pyproject.toml
	@bash scripts/prerequisites.sh python-venv
	$(PYTHON) -m venv --clear $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]' ruff import-linter mypy types-PyYAML
	touch $@

venv: $(VENV)/.installed

# --- the machine --------------------------------------------------------------------
# The engine this make command uses, unless a target says otherwise (make test: both).
NEEDED = $(ENGINE)

prerequisites:
	@bash scripts/prerequisites.sh $(NEEDED)

harbor-venv:
	@HARBOR_VENV=$(HARBOR_VENV) bash .ci/harbor-venv.sh

# --- images -------------------------------------------------------------------
# Where BASE_REF cannot be pulled: a stand-in bootstrapped from Debian packages
# (variant apt: what debian:bookworm-slim holds, apt included, docs left out), imported
# under BASE_REF itself, so that Dockerfiles naming it (this one, task environments)
# build unchanged. Its label BOOTSTRAP_LABEL tells `make image` it has no registry digest.
MMDEBSTRAP = mmdebstrap --variant=apt --quiet \
	--aptopt='Acquire::Check-Valid-Until "false"' \
	--aptopt='APT::Install-Recommends "false"' \
	--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/info/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-include=/usr/share/doc/*/copyright'
MMDEBSTRAP_MIRRORS = \
	"deb $(DEBIAN_MIRROR) $(DEBIAN_SUITE) main" \
	"deb $(DEBIAN_MIRROR) $(DEBIAN_SUITE)-updates main" \
	"deb $(DEBIAN_SECURITY_MIRROR) $(DEBIAN_SUITE)-security main"
BOOTSTRAP_LABEL = io.github.harbor-verifier.bootstrapped
IMPORT_CHANGES = --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	--change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' \
	--change 'LABEL $(BOOTSTRAP_LABEL)="mmdebstrap $(DEBIAN_SUITE)"'

base-image:
	@if $(ENGINE) image inspect $(BASE_REF) >/dev/null 2>&1; then \
	    echo "base-image: $(BASE_REF) exists in $(ENGINE)"; exit 0; \
	fi; \
	if ! command -v mmdebstrap >/dev/null; then \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	        echo "base-image: installing mmdebstrap (apt-get)"; \
	        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null; \
	    else \
	        echo "base-image: mmdebstrap is not installed (as root: apt-get install mmdebstrap)" >&2; exit 1; \
	    fi; \
	fi; \
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	echo "base-image: mmdebstrap $(DEBIAN_SUITE) as $(BASE_REF) ..."; \
	start=$$SECONDS; \
	$(MMDEBSTRAP) $(DEBIAN_SUITE) "$$tmp/base.tar" $(MMDEBSTRAP_MIRRORS) </dev/null >"$$tmp/base.log" 2>&1 \
	    || { cat "$$tmp/base.log" >&2; exit 1; }; \
	echo "base-image: bootstrapped in $$((SECONDS - start)) s"; \
	$(ENGINE) import $(call PODMAN_ONLY,$(ENGINE),--quiet) $(IMPORT_CHANGES) "$$tmp/base.tar" \
	    $(if $(filter docker,$(ENGINE)),$(BASE_DOCKER_REF),$(BASE_REF)) >/dev/null; \
	echo "base-image: imported $(BASE_REF) into $(ENGINE)"

# The labels that change per commit are also given with --label: podman 4.3's layer
# cache ignores new build-arg values in LABEL and would keep stale ones.
# BASE_REF when present or pullable, else bootstrapped (base-image). The image and its
# base are then copied to the other engine (podman save | docker load) unless it
# already holds the same image ids. org.opencontainers.image.base.digest is the base's
# registry digest; a bootstrapped base has none (it was never pushed).
image: | prerequisites
	@if ! $(ENGINE) image inspect $(BASE_REF) >/dev/null 2>&1 \
	    && ! $(ENGINE) pull $(BASE_REF) >/dev/null 2>&1; then \
	    echo "image: $(BASE_REF) cannot be pulled: bootstrapping it from Debian packages"; \
	    $(MAKE) --no-print-directory base-image ENGINE=$(ENGINE); \
	fi; \
	base_digest=""; \
	if [ -z "$$($(ENGINE) image inspect --format '{{index .Config.Labels "$(BOOTSTRAP_LABEL)"}}' $(BASE_REF) 2>/dev/null | grep -v '<no value>')" ]; then \
	    base_digest=$$($(ENGINE) image inspect --format '{{range .RepoDigests}}{{.}} {{end}}' $(BASE_REF)); \
	    base_digest=$$(printf '%s\n' $$base_digest | sed -n 's/^[^@]*@//p' | head -n 1); \
	fi; \
	echo "image: base $(BASE_REF)$${base_digest:+ @$$base_digest}"; \
	mkdir -p .cache; \
	if [ -r "$(HOST_CA)" ]; then cmp -s "$(HOST_CA)" .cache/build-ca.crt || cp "$(HOST_CA)" .cache/build-ca.crt; \
	else rm -f .cache/build-ca.crt; fi; \
	start=$$SECONDS; \
	$(ENGINE) build --network host --build-arg BASE_IMAGE=$(BASE_REF) \
	    $(call PODMAN_ONLY,$(ENGINE),--pull=never) \
	    --build-arg "VERSION=$(VERSION)" --build-arg "REVISION=$(REVISION)" --build-arg "CREATED=$(CREATED)" \
	    $(foreach l,version=$(VERSION) revision=$(REVISION) created=$(CREATED),--label "org.opencontainers.image.$(l)") \
	    --label "org.opencontainers.image.base.name=$(BASE_REF)" \
	    $${base_digest:+--label "org.opencontainers.image.base.digest=$$base_digest"} \
	    $(if $(SOURCE_URL),--label "org.opencontainers.image.source=$(SOURCE_URL)") \
	    -t $(IMAGE) -f Dockerfile . >.cache/image-build.log 2>&1 \
	    || { cat .cache/image-build.log >&2; echo "image: $(ENGINE) build failed" >&2; exit 1; }; \
	id=$$($(ENGINE) image inspect --format '{{.Id}}' $(IMAGE)); id=$${id#sha256:}; \
	echo "image: $(IMAGE) $${id:0:12} built by $(ENGINE) in $$((SECONDS - start)) s (log: .cache/image-build.log)"; \
	if [ "$(TRANSFER)" = 1 ] && command -v $(OTHER_ENGINE) >/dev/null 2>&1 \
	    && $(OTHER_ENGINE) info >/dev/null 2>&1; then \
	    for ref in $(IMAGE) $(BASE_REF); do \
	        src=$$($(ENGINE) image inspect --format '{{.Id}}' $$ref); src=$${src#sha256:}; \
	        dst=$$($(OTHER_ENGINE) image inspect --format '{{.Id}}' $$ref 2>/dev/null || true); \
	        if [ "$${dst#sha256:}" = "$$src" ]; then \
	            echo "image: $(OTHER_ENGINE) already has $$ref $${src:0:12}"; continue; \
	        fi; \
	        start=$$SECONDS; \
	        $(ENGINE) save $(call PODMAN_ONLY,$(ENGINE),--format docker-archive) $$ref \
	            | $(OTHER_ENGINE) load -q >/dev/null; \
	        echo "image: copied $$ref to $(OTHER_ENGINE) in $$((SECONDS - start)) s"; \
	    done; \
	fi

# --- demo ---------------------------------------------------------------------
DEMO_OUT := .cache/demo

# The README's commands: podman mounts the out dir with :U (it becomes the container
# user's), docker runs the verifier as the caller's UID in group 0. An out dir that :U
# gave to a rootless podman's mapped UID is removed inside its user namespace.
demo: image
	@for case in case-pass case-fail; do \
	    out="$(DEMO_OUT)/$$case"; \
	    rm -rf "$$out" 2>/dev/null || podman unshare rm -rf "$$out"; mkdir -p "$$out"; \
	    mounts=(-v "$(CURDIR)/examples/$$case:/case:ro" \
	            -v "$(CURDIR)/examples/eval.yaml:/tests/eval.yaml:ro"); \
	    if [ "$(ENGINE)" = podman ]; then \
	        command=(podman run --rm --network none "$${mounts[@]}" -v "$(CURDIR)/$$out:/logs/verifier:U"); \
	    else \
	        command=($(ENGINE) run --rm --network none --user "$$(id -u):0" "$${mounts[@]}" \
	                 -v "$(CURDIR)/$$out:/logs/verifier"); \
	    fi; \
	    echo "== $$case: $${command[*]} $(IMAGE)"; \
	    "$${command[@]}" $(IMAGE); \
	    echo "$$out/reward.json: $$(cat "$$out/reward.json")"; \
	    echo; \
	done

# --- tests, benchmarks, lint ---------------------------------------------------
# The image is built first (the Harbor trial tests use it as it is; the integration
# tests' own `make image` is then a no-op).
# Both engines, required: a test skipped for want of one of them fails
# (VERIFIER_REQUIRE_ENGINES, unless given).
comma := ,
space := $(subst ,, )
VERIFIER_REQUIRE_ENGINES ?= $(subst $(space),$(comma),$(strip $(TEST_ENGINES)))
TEST_ENV = ENGINE=$(ENGINE) VERIFIER_IMAGE=$(IMAGE) HARBOR_VENV=$(HARBOR_VENV) \
	VERIFIER_REQUIRE_ENGINES=$(VERIFIER_REQUIRE_ENGINES) SOURCE_URL=$(SOURCE_URL)

# The Harbor trials run beside the other lanes, in a pytest of their own
# (scripts/test_beside.sh: most of a trial is waiting on containers); HARBOR_BESIDE=0,
# or TESTS narrowed to some of the tests, runs everything in one pytest.
HARBOR_BESIDE ?= 1
TEST_DURATIONS ?= --durations=25
test: NEEDED = $(TEST_ENGINES) python-venv kubectl go
test: prerequisites lint venv $(if $(filter 0,$(HARBOR_TRIALS)),,harbor-venv) image
ifeq ($(HARBOR_TRIALS)$(HARBOR_BESIDE)$(TESTS),11tests)
	$(TEST_ENV) scripts/test_beside.sh $(VENV)/bin/pytest $(TEST_DURATIONS) $(PYTEST_ARGS)
else
	$(TEST_ENV) $(VENV)/bin/pytest $(TESTS) $(if $(filter 0,$(HARBOR_TRIALS)),-m "not harbor") \
	    $(TEST_DURATIONS) $(PYTEST_ARGS)
endif

# A unit test that takes a second or more carries @pytest.mark.slow (pyproject's markers):
# the durations printed at the end show one that should.
test-fast: venv
	$(VENV)/bin/pytest $(TESTS) -m "not integration and not harbor and not slow" \
	    --durations=10 $(PYTEST_ARGS)

bench: bench-grade bench-batch bench-llm-batch bench-pass-rate bench-image bench-deadline

bench-grade: venv
	$(VENV)/bin/python bench/grade.py

bench-batch: venv
	$(VENV)/bin/python bench/batch.py

bench-llm-batch: venv
	$(VENV)/bin/python bench/llm_batch.py

bench-pass-rate: venv
	$(VENV)/bin/python bench/pass_rate.py

bench-image: venv image
	$(VENV)/bin/python bench/image.py --image $(IMAGE) $(BENCH_IMAGE_ARGS)

bench-deadline: venv image
	$(VENV)/bin/python bench/deadline.py --image $(IMAGE) $(BENCH_DEADLINE_ARGS)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

cli-docs: venv
	$(VENV)/bin/python scripts/cli_reference.py --write

clean:
	rm -rf .cache/demo .cache/image-build.log .cache/build-ca.crt
