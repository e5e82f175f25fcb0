# SPDX-License-Identifier: Apache-2.0
# Thin wrapper around CMake/CTest. `make demo` and `make test` install what is missing first.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

.PHONY: all build deps deps-build demo test test-unit test-netns e2e bench clean

all: build

deps:
	scripts/install-deps.sh

deps-build:
	scripts/install-deps.sh --build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: deps-build $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# ADD, CHECK and DEL in a throwaway namespace with a veth standing in for a VF.
demo: deps build
	scripts/demo.sh $(BUILD)

# Every test tier: unit, netns, binary, static, e2e (libcni) and kernel-lab (VM).
test: deps build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) --timeout 900

test-unit: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -L unit

test-netns: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -L 'netns|binary'

e2e: build
	e2e/run.sh

# ibcni-ipam against Debian's host-local, side by side (the README's benchmark table).
bench: deps build
	$(BUILD)/bench/ipam_bench $(BUILD)/ibcni-ipam /usr/lib/cni/host-local

clean:
	rm -rf $(BUILD)
