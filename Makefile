# The two commands: `make run` and `make test`. Both install what is missing first, so they work on a fresh
# Debian machine with the Swift toolchain as well as on one where everything is already there.
.PHONY: docs deps build run test bench bench-emulator contention soak image image-test image-source fuzz sanitize clean

PORT ?= 8080
# The commit baked into the binaries (desk_gateway_build_info, /readyz, --version); "-dirty" when the tree has changes.
export DESK_GATEWAY_REVISION ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)

deps:
	@scripts/install-deps.sh

build: deps
	swift build -c release --product desk-gateway

# docs/configuration.md and deploy/desk-gateway.env.example, generated from the settings table (a test checks them).
docs:
	swift build --product desk-gateway
	.build/debug/desk-gateway settings > docs/configuration.md
	.build/debug/desk-gateway settings --env > deploy/desk-gateway.env.example

# Runs on $(PORT); without DATABASE_URL the gateway starts (or reuses) its private PostgreSQL under .data/.
run: build
	PORT=$(PORT) ./.build/release/desk-gateway

# IMAGE_TEST=0 leaves out the container images and the Compose file (podman), the last steps.
IMAGE_TEST ?= 1
test:
	@scripts/install-deps.sh --test
	@if [ "$(IMAGE_TEST)" != 0 ]; then scripts/install-deps.sh --image; fi
	@IMAGE_TEST=$(IMAGE_TEST) scripts/test.sh

# libFuzzer over the JSON parser, the ticket body validator, the cursor decoder and the report parameters
# (FUZZ_SECONDS each; make test runs them for 60 s).
FUZZ_SECONDS ?= 300
fuzz: deps
	@scripts/fuzz.sh $(FUZZ_SECONDS)

# The whole suite under AddressSanitizer (not part of make test: about 14 minutes from nothing, 4 once built). It
# fails on a sanitizer's report or a test process that did not finish; time and memory bounds the slowdown breaks
# are listed (make test holds them).
# `scripts/sanitize.sh thread` runs ThreadSanitizer too (see the script for why it is not the default).
sanitize: deps
	@scripts/sanitize.sh

bench: build
	@bench/run.sh

# The ratings' contention scenario for CONTENTION_SECONDS (180): 0 deadlocks, every answer once on Desk's agent.
contention: deps
	@bench/contention.sh

# A reporting zone built on 1,000,000 ratings while a CSAT writer takes the zone lock every 20 ms: the build's length
# and the writer's waits (bench/zone-build.sh; not in make test). ZONE_BUILD_VACUUM=1 vacuums the raw tables meanwhile.
bench-zones: build
	@bench/zone-build.sh

# SOAK_MINUTES of mixed traffic from many new customers against the release build (bench/soak.py; not in make test).
SOAK_MINUTES ?= 10
soak: build
	swift build -c release --product desk-emulator
	@python3 bench/soak.py $(SOAK_MINUTES)

# The Desk emulator's cost per request as its world grows to EMULATOR_TICKETS tickets (state file, release build).
EMULATOR_TICKETS ?= 100000
bench-emulator: deps
	swift build -c release --product desk-emulator
	@python3 bench/emulator_growth.py $(EMULATOR_TICKETS)

# The container image, built with podman from deploy/Dockerfile (no daemon, no registry: scripts/image.sh).
image: deps
	@scripts/install-deps.sh --image
	@scripts/image.sh

# The image run with podman against a private PostgreSQL: readiness, a journey, a report, non-root, read-only root,
# SIGTERM (scripts/image_test.py); then deploy/compose.yaml with podman-compose (scripts/compose_test.py), and the
# systemd unit under systemd in a container made from the image (scripts/systemd_test.py), and deploy/k8s with podman
# kube play (scripts/kube_test.py). make test ends with them.
image-test: image
	@scripts/image-test.sh

# The Dockerfile's default target (what `docker build` and `docker compose up --build` make), built from source in a
# stand-in for the Swift image and run through the same checks (scripts/image-source.sh). make test ends with it.
image-source: image
	@scripts/image-source.sh

clean:
	rm -rf .build .build-fuzz .build-address .build-thread .data .image
