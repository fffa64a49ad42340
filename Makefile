# The two commands of README.md: `make audit` and `make test`. Both install missing Debian packages and
# configure first; `make audit` builds only the executable, `make test` everything (tests, benchmarks).
BUILD ?= build
JOBS  ?= $(shell nproc)
CMAKE_ARGS ?=

.PHONY: all setup configure build build-cli audit test bench clean

all: build

setup:
	@scripts/setup-debian.sh

configure: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

build-cli: configure
	cmake --build $(BUILD) -j $(JOBS) --target detaudit

audit: build-cli
	$(BUILD)/detaudit probe --suite quick

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

bench: build
	@for b in $(BUILD)/bench/*; do [ -x "$$b" ] && echo "== $$b" && "$$b"; done

clean:
	rm -rf $(BUILD)
