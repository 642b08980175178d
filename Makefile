# The two commands: `make run` and `make test`. Both install what is missing first, so they work on a fresh
# Debian machine with the Swift toolchain as well as on one where everything is already there.
.PHONY: deps build run test bench clean

PORT ?= 8080

deps:
	@scripts/install-deps.sh

build: deps
	swift build -c release --product desk-gateway

# Runs on $(PORT); without DATABASE_URL the gateway starts (or reuses) its private PostgreSQL under .data/.
run: build
	PORT=$(PORT) ./.build/release/desk-gateway

test:
	@scripts/install-deps.sh --test
	@scripts/test.sh

bench: build
	@bench/run.sh

clean:
	rm -rf .build .data
