# SPDX-License-Identifier: Apache-2.0
# Thin wrapper around CMake/CTest. `make demo` and `make test` install what is missing first.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release
CTEST = ctest --output-on-failure -j $(JOBS) --timeout 900

.PHONY: all build build-sanitize build-arm64 build-arm64-tests deps deps-build deps-demo deps-arm64 demo demo-build test test-release test-unit test-netns test-sanitize test-arm64 e2e bench chaos chaos-claims soak lab-churn compile-commands clean

all: build

deps:
	scripts/install-deps.sh

deps-build:
	scripts/install-deps.sh --build

deps-demo:
	scripts/install-deps.sh --demo

deps-arm64:
	scripts/install-deps.sh --arm64

# The release and arm64 trees compile through one compiler cache (cmake/IbcniCcache.cmake), which
# the image's build stages of image_test then find filled: they compile the same files with the same
# compilers. Empty: no cache.
COMPILER_CACHE ?= $(CURDIR)/build-ccache
# Every tree is built by Ninja, which starts a target's compiles as soon as its generated headers
# exist, where make's generator waits for every library the target links: both cores stay busy.
GENERATOR ?= Ninja

# The unit, conformance and hostile tiers are built and run in the sanitized tree (below), not here
# as well (tests/CMakeLists.txt): ON builds them in the release tree too.
RELEASE_UNIT_TIERS ?= OFF

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -G $(GENERATOR) $(CMAKE_FLAGS) -DIBCNI_CCACHE_DIR=$(COMPILER_CACHE) \
	  -DIBCNI_UNIT_TIERS=$(RELEASE_UNIT_TIERS)

build: deps-build $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# ADD, CHECK and DEL in a throwaway namespace with a veth standing in for a VF. Builds only what
# the demo runs (the two plugins, no tests) in a tree of its own, quickly: each library as one
# unit, unoptimized, against one precompiled header (IBCNI_QUICK_BUILD, cmake/IbcniUnity.cmake),
# by clang 16 (half GCC's CPU time for this build), with Ninja, which compiles every library at once
# where make builds them one after another. `make test` builds everything, with GCC.
DEMO_BUILD ?= build-demo
DEMO_CXX ?= clang++-16

$(DEMO_BUILD)/CMakeCache.txt:
	cmake -S . -B $(DEMO_BUILD) -G Ninja -DIBCNI_BUILD_TESTS=OFF -DIBCNI_QUICK_BUILD=ON -DCMAKE_CXX_COMPILER=$(DEMO_CXX)

# `make demo` installs only what the quick build and the demo need (install-deps.sh --demo), not the
# test toolchain.
demo-build: deps-demo $(DEMO_BUILD)/CMakeCache.txt
	cmake --build $(DEMO_BUILD) -j $(JOBS)

demo: deps-demo demo-build
	scripts/demo.sh $(DEMO_BUILD)

# Every test tier, each in the tree where it shows the most, once: the release build's tiers (binary,
# faults, e2e, runtime, static, deploy, etcd, kubernetes, chaos, kernel-lab: the binaries users run,
# the image, the VM), then the tiers where memory errors hide built with AddressSanitizer +
# UndefinedBehaviorSanitizer (below: unit, netns, binary, conformance, hostile, faults, etcd, fuzz
# smoke; the unit, conformance and hostile tiers run there only, RELEASE_UNIT_TIERS), then the
# arm64 build's ARCH unit tests under qemu-user and its kernel lab (build-arm64-tests, below). All
# three always run; the status is 1 if any failed, and the last lines name every failed test with
# its tree (a log's tail is often all there is to read). (Run beside the sanitized tests, the
# emulated arm64 VM got so little CPU that it ran past its limit.)
test: deps build build-sanitize build-arm64-tests
	@rc=0; failed=; \
	$(CTEST) --test-dir $(BUILD) || { rc=1; failed="$$failed $(BUILD)"; }; \
	$(CTEST) --test-dir $(SANITIZE_BUILD) $(SANITIZE_CTEST_ARGS) || { rc=1; failed="$$failed $(SANITIZE_BUILD)"; }; \
	$(CTEST) --test-dir $(ARM64_BUILD) $(ARM64_CTEST_ARGS) || { rc=1; failed="$$failed $(ARM64_BUILD)"; }; \
	for tree in $$failed; do \
	  echo "make test: failed in $$tree:"; \
	  sed 's/^[0-9]*:/  /' $$tree/Testing/Temporary/LastTestsFailed.log 2>/dev/null || echo "  (no test ran)"; \
	done; \
	exit $$rc

test-release: deps build
	$(CTEST) --test-dir $(BUILD)

# The tree that has the unit tiers: the sanitized one unless RELEASE_UNIT_TIERS=ON.
ifeq ($(RELEASE_UNIT_TIERS),ON)
UNIT_TREE = $(BUILD)
UNIT_TREE_TARGET = build
else
UNIT_TREE = $(SANITIZE_BUILD)
UNIT_TREE_TARGET = build-sanitize
endif

test-unit: $(UNIT_TREE_TARGET)
	ctest --test-dir $(UNIT_TREE) --output-on-failure -j $(JOBS) -L unit

test-netns: $(UNIT_TREE_TARGET)
	ctest --test-dir $(UNIT_TREE) --output-on-failure -j $(JOBS) -L 'netns|binary'

e2e: build
	e2e/run.sh

# Everything built with AddressSanitizer + UndefinedBehaviorSanitizer (IBCNI_SANITIZE) in its own
# build tree, by clang 16 (GCC works too, SANITIZE_CXX=g++, but takes four times as long and builds
# no fuzz targets). A sanitizer report fails the test (the built programs exit 66, see
# cmake/sanitizer_defaults.cpp.in). The tree builds and test-sanitize runs the tiers where memory
# errors of ibcni's own code can hide (tests/CMakeLists.txt says which and why), fuzz (tests/fuzz)
# included, but the 100-node storms:
# ClusterSim.HundredNodes* (2000 exec'd ADDs and DELs each, 124 s apiece sanitized, a quarter of
# the sanitized tests' time) and GuidClusterSim.HundredNodes* (2000 sriov ADDs and DELs with a
# cluster GUID pool each, in process). The sanitized tree's cluster ADDs are the ClusterSimFaults
# storms, the GUID pool's cluster tests (guid_pools_cluster_test) and fault steps
# (GuidPoolVfFaultSteps); the release tree runs the 100-node storms and the chaos schedules. Nor
# DraKillTest (ibcni-dra killed at each of its steps: a hundred driver starts; not built there): the
# sanitized tree runs the same claim code in process (dra_test: every step's failure and undo) and
# the sanitized ibcni-dra under the kubelet's own code (kubelet_dra_test). Nor the random kills and
# storms of tests/faults (kill_test, storm_test: not built there, tests/faults/CMakeLists.txt).
SANITIZE_BUILD ?= build-sanitize
SANITIZE_CXX ?= clang++-16
SANITIZE_CTEST_ARGS ?= -E '^((ClusterSim|GuidClusterSim)\.HundredNodes|DraKillTest\.)'

$(SANITIZE_BUILD)/CMakeCache.txt:
	cmake -S . -B $(SANITIZE_BUILD) -G $(GENERATOR) -DCMAKE_BUILD_TYPE=Release -DIBCNI_SANITIZE=ON \
	  -DCMAKE_CXX_COMPILER=$(SANITIZE_CXX)

build-sanitize: deps $(SANITIZE_BUILD)/CMakeCache.txt
	cmake --build $(SANITIZE_BUILD) -j $(JOBS)

test-sanitize: build-sanitize
	$(CTEST) --test-dir $(SANITIZE_BUILD) $(SANITIZE_CTEST_ARGS)

# linux/arm64 (Grace nodes: GH200, GB200, GB300), cross-built with Debian's aarch64 GCC and the arm64
# libraries through multiarch (cmake/toolchains/aarch64-linux-gnu.cmake). build-arm64 builds the two
# plugins in the release configuration, as the image ships them; build-arm64-tests the rest of the
# tree's arm64 part: the unit tests marked ARCH (cmake/IbcniTest.cmake: those whose code can behave
# differently on aarch64), which CTest runs under qemu-user (label unit-arm64), and the
# programs the arm64 kernel lab runs in its VM (label kernel-lab: tests/kernel-lab/run-arm64.sh).
ARM64_BUILD ?= build-arm64
ARM64_CTEST_ARGS ?= -L 'unit-arm64|kernel-lab'

$(ARM64_BUILD)/CMakeCache.txt:
	cmake -S . -B $(ARM64_BUILD) -G $(GENERATOR) -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake -DIBCNI_CCACHE_DIR=$(COMPILER_CACHE)

build-arm64: deps-arm64 $(ARM64_BUILD)/CMakeCache.txt
	cmake --build $(ARM64_BUILD) -j $(JOBS) --target ibcni ibcni-ipam

build-arm64-tests: deps $(ARM64_BUILD)/CMakeCache.txt
	cmake --build $(ARM64_BUILD) -j $(JOBS)

test-arm64: build-arm64-tests
	$(CTEST) --test-dir $(ARM64_BUILD) $(ARM64_CTEST_ARGS)

# ibcni-ipam against Debian's host-local, side by side (docs/benchmarks.md); ibcni against
# Debian's host-device + host-local (ADD+DEL exec'd and through libcni, 100 concurrent pods, peak
# RSS, where the time of an ADD goes: bench/cni_bench.cpp, target: ADD+DEL 5x faster); ibcni-ipam's
# cluster mode against a 3-member etcd beside node-local (bench/cluster_ipam_bench.cpp, targets:
# steady-state ADD within 1.2x of node-local; the storm over 1000 nodes within 1.5x of node-local's
# wall, per-ADD p99 under 50 ms); sriov mode's ADD with a cluster GUID pool against one
# with a requested GUID: the exec'd ADD+DEL on a veth stand-in plus the pool's own work measured in
# process over fakes (bench/guid_pool_bench.cpp, target: within 1.05x and no backend call); a
# scrape of ibcni agent's /metrics with 200 attachments and their RDMA ports
# (bench/agent_scrape_bench.cpp, target: under 50 ms); then the verbs check's cost on this host
# (target: median under 20 ms) and against rxe0 in the kernel-lab VM (emulated: target relative to
# ibv_devinfo). Every part runs; the status is 1 if any failed.
# The VM runner is tests/kernel-lab's (IBCNI_KERNEL_LAB_RUN in the CMake cache) unless
# KERNEL_LAB_RUN is given; run from the repository root (the VM shares only it).
KERNEL_LAB_RUN ?=
bench: deps build
	@rc=0; \
	echo "== ibcni-ipam against host-local =="; \
	$(BUILD)/bench/ipam_bench $(BUILD)/ibcni-ipam /usr/lib/cni/host-local $(BUILD)/bench/bare_exec || rc=1; \
	echo; echo "== ibcni against host-device + host-local =="; \
	$(BUILD)/bench/cni_bench --ibcni $(BUILD)/ibcni --ref /usr/lib/cni || rc=1; \
	echo; echo "== ibcni-ipam cluster mode (etcd, 3 members) against node-local =="; \
	$(BUILD)/bench/cluster_ipam_bench $(BUILD)/ibcni-ipam --storm 1000 || rc=1; \
	echo; echo "== ibcni sriov mode: ADD with a cluster GUID pool (etcd) against a requested GUID =="; \
	$(BUILD)/bench/guid_pool_bench || rc=1; \
	echo; echo "== ibcni agent: a scrape of /metrics with 200 attachments =="; \
	$(BUILD)/bench/agent_scrape_bench || rc=1; \
	echo; echo "== ibcni-dra: Prepare over its socket (kube-apiserver) against the floor and ibcni's ADD =="; \
	if [ ! -x $(BUILD)/bench/dra_bench ]; then \
	  echo "SKIP dra_bench is not built (ibcni-dra needs gRPC and protobuf: scripts/install-deps.sh)"; \
	elif ! scripts/build-upstream.sh --dir kubernetes >/dev/null 2>&1 || ! scripts/build-upstream.sh --dir etcd >/dev/null 2>&1; then \
	  echo "SKIP the upstream components are not built (scripts/build-upstream.sh)"; \
	else \
	  $(BUILD)/bench/dra_bench; s=$$?; [ $$s = 0 ] || [ $$s = 77 ] || rc=1; \
	fi; \
	echo; echo "== verbs check on this host =="; \
	$(BUILD)/bench/verbs_bench || rc=1; \
	lab="$(KERNEL_LAB_RUN)"; \
	[ -n "$$lab" ] || lab=$$(sed -n 's/^IBCNI_KERNEL_LAB_RUN:[A-Z]*=//p' $(BUILD)/CMakeCache.txt); \
	[ -n "$$lab" ] || lab=../shared/kernel-lab/run.sh; \
	echo; echo "== verbs check against rxe0 in the kernel-lab VM ($$lab) =="; \
	if [ -x "$$lab" ]; then \
	  KERNEL_LAB_CACHE=$(abspath $(BUILD))/bench/lab-cache $$lab --nics 1 --timeout 900 -- \
	    bench/verbs_bench_vm.sh $(BUILD)/bench/verbs_bench || rc=1; \
	else \
	  echo "FAIL kernel-lab runner $$lab not found (set KERNEL_LAB_RUN)"; rc=1; \
	fi; \
	exit $$rc

# e2e_lab's churn_50 in the x86_64 kernel lab: 50 ADD/DEL cycles in a seeded random order over the
# VM's four PCI NICs (E2E_LAB_SEED, printed), nothing leaked at the end. Load rather than a path of
# its own, and the lab's longest scenario (about 50 s of an idle machine, 135-270 s of a busy one),
# so it runs here rather than in `make test`.
lab-churn: deps build
	@lab="$(KERNEL_LAB_RUN)"; \
	[ -n "$$lab" ] || lab=$$(sed -n 's/^IBCNI_KERNEL_LAB_RUN:[A-Z]*=//p' $(BUILD)/CMakeCache.txt); \
	[ -n "$$lab" ] || lab=../shared/kernel-lab/run.sh; \
	tests/kernel-lab/kernel_lab.sh --boot "$$lab" $(BUILD) e2e_lab:churn_50

# Long randomized runs of the cluster pool's fault-schedule checker (tests/chaos/README.md): SCHEDULES
# schedules of STEPS steps per backend (etcd, kubernetes or both) against the tree's ibcni-ipam (its
# dynamically linked build, ibcni-ipam-preloadable: the checker's kills and clocks are LD_PRELOADed),
# each over 4-12 simulated nodes; the invariants after every step; a violation is reported with
# its seed and a shrunk schedule under $(BUILD)/chaos-out/<backend>/ (replay it with --replay).
# Needs root, etcd, libfaketime, kube-apiserver (scripts/build-upstream.sh) and Node.js (the fault
# proxy). CHAOS_JOBS workers (each with an etcd, and a kube-apiserver with its proxy, of its own): with 2 on 2 cores, about 1 s (etcd) and 1.9 s (kubernetes) per schedule, so the defaults
# take about 35 and 65 minutes. Not part of `make test` (which runs ~60 s per backend: ctest -L chaos).
# PLUGIN and CHAOS_ARGS test another (dynamically linked) ibcni-ipam, e.g.
#   make chaos PLUGIN=/path/to/old/ibcni-ipam CHAOS_ARGS="--compat baseline --profile lapse"
SEED ?=
STEPS ?= 30
SCHEDULES ?= 2000
BACKEND ?= both
PLUGIN ?= $(BUILD)/tests/chaos/ibcni-ipam-preloadable
CHAOS_JOBS ?= 2
CHAOS_ARGS ?=
chaos: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target ibcni-ipam-preloadable ibcni_chaos
	@rc=0; \
	for b in $(if $(filter both,$(BACKEND)),etcd kubernetes,$(BACKEND)); do \
	  echo "== chaos: $$b backend, $(SCHEDULES) schedules of $(STEPS) steps =="; \
	  $(BUILD)/tests/chaos/ibcni_chaos --plugin $(PLUGIN) --backend $$b --schedules $(SCHEDULES) \
	    --steps $(STEPS) --jobs $(CHAOS_JOBS) $(if $(SEED),--seed $(SEED)) --out $(BUILD)/chaos-out/$$b \
	    $(CHAOS_ARGS) || rc=1; \
	done; \
	exit $$rc

# Long randomized runs of the claim checker (tests/chaos/claims/README.md): ibcni-dra's claim
# preparation in process, CLAIM_SCHEDULES schedules of CLAIM_STEPS steps (kubelet calls killed or
# failed at each change, reboots, CNI pods on the same GUID pool, agent passes). No root, no cluster:
# about 0.2 s a schedule, so the default takes about 7 minutes.
CLAIM_SCHEDULES ?= 2000
CLAIM_STEPS ?= 60
chaos-claims: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target ibcni_claim_chaos
	$(BUILD)/tests/chaos/claims/ibcni_claim_chaos --schedules $(CLAIM_SCHEDULES) --steps $(CLAIM_STEPS) \
	  $(if $(SEED),--seed $(SEED))

# Every test that starts servers or waits on time (CTest label `timing`: etcd, kube-apiserver,
# HTTP servers, Prometheus, containerd, kills after delays, timeouts) SOAK_REPEAT times in a row
# beside stress-ng keeping every core busy, in the release and the sanitized trees
# (tests/scripts/soak.sh): a test that passes only on an idle machine fails here. Not part of
# `make test`: 20 runs take hours of a 2-core machine. SOAK_FILTER narrows it (a ctest -R regex).
SOAK_REPEAT ?= 20
# Each tree's timing tests as `make test` runs them (the sanitized tree without what
# SANITIZE_CTEST_ARGS leaves out).
soak: deps build build-sanitize
	@rc=0; tests/scripts/soak.sh $(BUILD) $(SOAK_REPEAT) || rc=1; \
	tests/scripts/soak.sh $(SANITIZE_BUILD) $(SOAK_REPEAT) $(SANITIZE_CTEST_ARGS) || rc=1; exit $$rc

# A compilation database of the real sources (no unity units) at the repository's root, for editors
# and clang-tidy: scripts/compile-commands.sh configures build-compdb (nothing is compiled).
compile-commands: deps
	scripts/compile-commands.sh

clean:
	rm -rf $(BUILD) $(SANITIZE_BUILD) $(DEMO_BUILD) $(ARM64_BUILD) build-compdb $(COMPILER_CACHE)
