# Everything builds from Go modules at pinned versions; hack/kube-binaries.sh compiles the
# Kubernetes binaries once (about 20 minutes cold on 2 cores) and caches them.
SHELL := bash
GO    ?= go

.PHONY: all build tools kube-binaries test test-race test-controller test-e2e test-tools unit demo lint clean generate loadtest-quick loadtest loadtest-full bench-vs-upstream upstream-binary figures image manifests test-deployments bench-10k bench-mem bench-100k bench-100k-sharded bench-rss-floor bench-failover soak bench-fairness dist sbom lint-workflows

all: build

# Release identity stamped into the binary (reloader --version, the meta-info ConfigMap, the image).
# A tagged commit is released under its tag; otherwise the chart's appVersion, so that the image
# `make image` writes is the one the chart installs by default.
APP_VERSION := $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' deployments/chart/reloader/Chart.yaml)
VERSION  ?= $(shell git describe --tags --exact-match 2>/dev/null || echo $(APP_VERSION))
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -s -w -X github.com/reloader-operator/reloader/internal/version.Version=$(VERSION) \
	-X github.com/reloader-operator/reloader/internal/version.Commit=$(COMMIT)

# bin/reloader is built as the image builds it (deployments/image): static (CGO_ENABLED=0, no
# C library mapped beside it), without symbol tables, paths or build ID.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/reloader ./cmd/reloader
	cp bin/reloader bin/kubectl-reloader  # the same binary; by this name it is `kubectl reloader`
	cd tools && $(GO) build -o ../bin/ ./cmd/localcluster ./cmd/demo ./cmd/loadtest

# The tools module's commands (tools/cmd: loadtest, scalebench, failoverbench, demo,
# localcluster, rssfloor) into bin/. tools/ is a Go module of its own, so that no load-test,
# benchmark or demo package can enter the reloader binary.
tools:
	cd tools && $(GO) build -o ../bin/ ./cmd/...

kube-binaries:
	@bash hack/kube-binaries.sh >/dev/null

lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	cd deployments && $(GO) vet ./...
	cd tools && $(GO) vet ./...

# Unit, envtest integration and end-to-end tests against real control planes, then the tests
# of the tools module (the demo's, the load-test tool's, the benchmarks' and the shard
# hand-over bounds) and the install tests (image, chart, manifests) of the deployments module.
# lint and the fast packages first, so that a plain mistake fails in about two minutes; then
# the four packages or modules that start control planes, side by side (most of their time is
# waiting on the API server and on the subjects' own pacing, not CPU; each test waits on
# reloader's signals, not on a share of the machine). -Otarget keeps each one's output together.
# The cache transforms' packages run again under the race detector: the informer hands a
# transform objects the cache's readers share, and their tests fail only there (cgo: gcc).
test: kube-binaries lint
	RELOADER_KUBE_BIN_DIR="$$(bash hack/kube-binaries.sh)" $(GO) test -count=1 -timeout 20m \
		$$($(GO) list ./... | grep -v -x -e '.*/internal/controller' -e '.*/test/e2e')
	$(MAKE) --no-print-directory -j5 -Otarget test-race test-controller test-e2e test-tools test-deployments

# The cache transforms' packages under the race detector.
test-race:
	$(GO) test -race -count=1 ./internal/cachemem/intern/ ./internal/sourcecache/ ./internal/workload/ ./internal/writer/jobreplace/

# The controller package's envtests (a shared API server, a manager per test).
test-controller: kube-binaries
	RELOADER_KUBE_BIN_DIR="$$(bash hack/kube-binaries.sh)" $(GO) test -count=1 -timeout 20m ./internal/controller/

# The end-to-end tests: the built binary on local control planes of their own.
test-e2e: kube-binaries
	RELOADER_KUBE_BIN_DIR="$$(bash hack/kube-binaries.sh)" $(GO) test -count=1 -timeout 20m ./test/e2e/

# tools/ (load test, benchmarks, demo, local cluster) is a Go module of its own; its packages
# run control planes and reloaders of their own, so one at a time.
test-tools: kube-binaries
	cd tools && RELOADER_KUBE_BIN_DIR="$$(bash ../hack/kube-binaries.sh)" $(GO) test -count=1 -timeout 20m -p 1 ./...

# deployments/ is a Go module of its own, so Helm's and go-containerregistry's dependencies
# never enter the controller's go.mod.
test-deployments: kube-binaries
	cd deployments && RELOADER_KUBE_BIN_DIR="$$(bash ../hack/kube-binaries.sh)" $(GO) test -count=1 -timeout 20m ./...

# OCI image for linux/amd64, linux/arm64 and linux/arm/v7, built without a Docker daemon: an
# OCI layout and one `docker load`-able tarball per architecture under dist/.
image:
	cd deployments && $(GO) run ./cmd/image --out ../dist --version $(VERSION) --commit $(COMMIT)

# The release's other files under dist/, as .github/workflows/release.yaml publishes them:
# reloader_<v>_<os>_<arch>.tar.gz and kubectl-reloader_<v>_<os>_<arch>.tar.gz (with
# kubectl_complete-reloader) for linux and darwin, amd64 and arm64; the chart package
# reloader-<v without "v">.tgz; for a vX.Y.Z VERSION the krew manifest reloader.yaml; and
# checksums.txt over them. DIST_ARGS=--github-repo=owner/name sets the krew download URLs.
dist:
	cd deployments && $(GO) run ./cmd/dist --out ../dist --version $(VERSION) --commit $(COMMIT) $(DIST_ARGS)

# CycloneDX SBOM of the shipped reloader binary (linux/amd64's, from its `make dist` archive):
# the Go modules and standard library linked in, as the binary's build info records them. The
# release attests it on the image and attaches it to the GitHub release.
sbom:
	@test -f dist/reloader_$(VERSION)_linux_amd64.tar.gz || { echo "sbom: run make dist VERSION=$(VERSION) first"; exit 1; }
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	tar -xzf dist/reloader_$(VERSION)_linux_amd64.tar.gz -C "$$tmp" reloader && \
	"$$(bash hack/tool.sh cyclonedx-gomod)" bin -json -std -noserial -notimestamp -version $(VERSION) \
		-output dist/reloader.cdx.json "$$tmp/reloader"

# actionlint, at the version hack/tool.sh pins, over the GitHub workflows (a test runs it too).
lint-workflows:
	"$$(bash hack/tool.sh actionlint)" -color=false .github/workflows/*.yaml

# Regenerates deployments/reloader.yaml and the Kustomize base from the Helm chart.
manifests:
	cd deployments && $(GO) run ./cmd/manifests

# Pure-logic tests only; no control plane.
unit:
	$(GO) test -count=1 ./internal/source/ ./internal/hash/ ./internal/reload/ ./internal/coalesce/ ./internal/workload/ ./internal/whatchanged/

# Start a local cluster, run reloader, change a ConfigMap, watch the Deployment roll, explain
# it, and see the flap breaker stop two writers' fight. Quiet: the demo's steps only (the build
# says nothing unless it fails); DEMO_ARGS=--verbose shows all of reloader's log.
demo: kube-binaries
	@$(MAKE) -s --no-print-directory build
	@RELOADER_KUBE_BIN_DIR="$$(bash hack/kube-binaries.sh)" ./bin/demo --reloader bin/reloader $(DEMO_ARGS)

# A/B load tests (docs/benchmarks.md). LOADTEST_OLD and LOADTEST_NEW (or OLD and NEW) are any
# reloader-compatible binaries, both this build by default (OLD=$$(bash hack/upstream-binary.sh)
# for upstream's release, see upstream-binary); LOADTEST_OLD_ARGS and LOADTEST_NEW_ARGS are their extra flags;
# LOADTEST_SCENARIOS, LOADTEST_SCALE (1: the design's size) and LOADTEST_DURATION (empty: each
# scenario's design duration) shape the run; LOADTEST_ARGS passes anything else (gates, say).
OLD ?= bin/reloader
NEW ?= bin/reloader
LOADTEST_OLD ?= $(OLD)
LOADTEST_NEW ?= $(NEW)
LOADTEST_OLD_ARGS ?=
LOADTEST_NEW_ARGS ?=
LOADTEST_RESULTS ?= loadtest-results
LOADTEST_ARGS ?=
LOADTEST_QUICK_SET := S1,S4,S6,S7
LOADTEST_RUN = RELOADER_KUBE_BIN_DIR="$$(bash hack/kube-binaries.sh)" ./bin/loadtest run \
	--old=$(LOADTEST_OLD) --new=$(LOADTEST_NEW) --old-args="$(LOADTEST_OLD_ARGS)" --new-args="$(LOADTEST_NEW_ARGS)" \
	--results-dir=$(LOADTEST_RESULTS)

# The quick set (pull requests): S1, S4, S6 and S7 at a tenth of the design, 10 s of load each.
loadtest-quick: build kube-binaries
	$(LOADTEST_RUN) --scenario=$(or $(LOADTEST_SCENARIOS),$(LOADTEST_QUICK_SET)) --scale=$(or $(LOADTEST_SCALE),0.1) \
		--duration=$(or $(LOADTEST_DURATION),10s) $(LOADTEST_ARGS)

# Every scenario at the design's size and durations (nightly; about an hour on 2 cores).
loadtest-full: build kube-binaries
	$(LOADTEST_RUN) --scenario=$(or $(LOADTEST_SCENARIOS),all) --scale=$(or $(LOADTEST_SCALE),1) \
		$(if $(LOADTEST_DURATION),--duration=$(LOADTEST_DURATION)) $(LOADTEST_ARGS)

# Any scenarios at any size: LOADTEST_SCENARIOS (default all), LOADTEST_SCALE, LOADTEST_DURATION.
loadtest: loadtest-full

# Issue 35's four scenarios (the load test's vs-upstream preset: U1 Burst, U2 FanOut, U3 Memory,
# U4 ChurnRestart) against upstream v1.4.21 and upstream v2, both built from source (UPSTREAM_GIT
# or UPSTREAM_SRC as for upstream-binary), this build on the other side of each run; results in
# VS_UPSTREAM_RESULTS-v1.4.21 and -v2, then the side-by-side table (what `make figures` renders
# into docs/benchmarks.md from docs/results/vs-upstream-*). Both runs go ahead and the table is
# printed whatever their gates say (against v1.4.21, which rolls fewer times in U2, the API
# gates fail by design); the target fails after them when a run's gates failed. About 25
# minutes on 2 cores.
VS_UPSTREAM_RESULTS ?= loadtest-results/vs-upstream
bench-vs-upstream: build kube-binaries
	cd tools && $(GO) build -o ../bin/ ./cmd/loadtest
	v1="$$(bash hack/upstream-binary.sh)" && v2="$$(UPSTREAM_VERSION=v2 bash hack/upstream-binary.sh)" && rc=0 && \
	{ $(MAKE) --no-print-directory loadtest-full LOADTEST_OLD="$$v1" LOADTEST_RESULTS=$(VS_UPSTREAM_RESULTS)-v1.4.21 \
		LOADTEST_SCENARIOS=$(or $(LOADTEST_SCENARIOS),vs-upstream) LOADTEST_SCALE=$(or $(LOADTEST_SCALE),1) || rc=1; } && \
	{ $(MAKE) --no-print-directory loadtest-full LOADTEST_OLD="$$v2" LOADTEST_RESULTS=$(VS_UPSTREAM_RESULTS)-v2 \
		LOADTEST_SCENARIOS=$(or $(LOADTEST_SCENARIOS),vs-upstream) LOADTEST_SCALE=$(or $(LOADTEST_SCALE),1) || rc=1; } && \
	./bin/loadtest figures --vs-upstream --results-dir=$(VS_UPSTREAM_RESULTS)-v1.4.21 --results-dir=$(VS_UPSTREAM_RESULTS)-v2 && \
	exit $$rc

# Re-render the figures tables of README.md and docs/*.md from the results committed under
# docs/results/ (blocks between <!-- figures:begin DIR... --> and <!-- figures:end -->);
# tools/internal/loadtest's TestFiguresRenderedFromResults fails when a block differs from
# what this renders.
figures:
	cd tools && $(GO) build -o ../bin/ ./cmd/loadtest
	./bin/loadtest figures --update README.md docs/*.md

# Upstream Stakater Reloader v1.4.21 built from its source (UPSTREAM_GIT: a clone or mirror of it;
# UPSTREAM_SRC: its source tree; else a clone from GitHub), cached in
# ~/.cache/reloader/upstream-v1.4.21/reloader; prints the path. The load tests' old side.
# UPSTREAM_VERSION=v2: upstream's controller-runtime rewrite instead (its v2 branch at a pinned commit).
upstream-binary:
	@bash hack/upstream-binary.sh

# Fairness between namespaces: one namespace's ConfigMap used by 2,000 Deployments changes, then
# another's used by one; the second reload's latency over 20 tries, --reload-rate unset and 50
# (a few minutes on 2 cores). Compare builds with RELOADER=path/to/other/reloader. Not in `make test`.
RELOADER ?= bin/reloader
bench-fairness: build tools kube-binaries
	RELOADER_KUBE_BIN_DIR="$$(bash hack/kube-binaries.sh)" ./bin/scalebench --fairness --reloader=$(RELOADER) $(BENCH_ARGS)

# reloader at 10,000 ConfigMaps, 2,000 Secrets of 10 KiB and 5,000 Deployments on a local
# control plane: memory, first-sight cost, reloads per second, requests per reload, latency,
# fan-out to 1,000 Deployments, with pacing off and on (~10 min on 2 cores). Not in `make test`.
bench-10k: build tools kube-binaries
	RELOADER_KUBE_BIN_DIR="$$(bash hack/kube-binaries.sh)" ./bin/scalebench --reloader=bin/reloader \
		--paced-args=--reload-rate=100 --paced-rate=100 $(BENCH_ARGS)

# Shard hand-over between replicas (--shards) on a local control plane: a replica stopped
# (SIGTERM), one joining, one killed (SIGKILL), each with the ConfigMaps of the moved namespaces
# changed at once; prints when the moved shards were held by their new owners and how long the
# changes took to reload, at 3 replicas x 12 shards x 12 namespaces and 5 x 64 x 200, lease 15s
# (a few minutes on 2 cores). Compare builds with RELOADER=path/to/other/reloader. Not in `make test`.
bench-failover: build tools kube-binaries
	RELOADER_KUBE_BIN_DIR="$$(bash hack/kube-binaries.sh)" ./bin/failoverbench --reloader=$(RELOADER) $(BENCH_ARGS)
# The memory scenario of issue 26: 5,000 ConfigMaps and 1,000 Secrets of 10 KiB, 2,000
# Deployments; 200 changes at 20/s from 5 s after ready, while the first records are written,
# then 200 more after the last of them; RSS after sync broken down (anonymous heap, runtime,
# the binary's mapped file), latency p50/p95/p99, fan-out to 1,000 (~3 min). Not in `make test`.
bench-mem: build tools kube-binaries
	RELOADER_KUBE_BIN_DIR="$$(bash hack/kube-binaries.sh)" ./bin/scalebench --reloader=$(RELOADER) \
		--configmaps=5000 --secrets=1000 --deployments=2000 --changes=200 --change-rate=20 --changes-after-ready=5s $(BENCH_ARGS)

# 100,000 objects: 64,000 ConfigMaps and 16,000 Secrets of 2 KiB, 20,000 Deployments in 40
# namespaces, created 64 at once; one replica: ready time, RSS after sync and at the peak of 500
# changes, LIST after sync, missed reloads, fan-out to 1,000 (half an hour or more on 2 cores).
# Not in `make test`.
bench-100k: build tools kube-binaries
	RELOADER_KUBE_BIN_DIR="$$(bash hack/kube-binaries.sh)" ./bin/scalebench --reloader=$(RELOADER) \
		--configmaps=64000 --secrets=16000 --deployments=20000 --namespaces=40 --size-kib=2 --workers=64 \
		--changes=500 --change-rate=50 $(BENCH_ARGS)

# The same 100,000 objects with four replicas sharing 16 shards: each one's shards, cache share
# and memory.
bench-100k-sharded:
	$(MAKE) bench-100k BENCH_ARGS="--replicas=4 --shards=16 $(BENCH_ARGS)"

# The floor under any controller on these libraries: RSS of a bare controller-runtime manager
# with one synced ConfigMap informer, on an empty local control plane (a minute).
bench-rss-floor: tools kube-binaries
	RELOADER_KUBE_BIN_DIR="$$(bash hack/kube-binaries.sh)" ./bin/scalebench --rss-floor=bin/rssfloor

# SOAK (30m) of 20 ConfigMap/Secret updates per second over 50 workloads, memory printed each minute.
SOAK ?= 30m
soak: build tools kube-binaries
	RELOADER_KUBE_BIN_DIR="$$(bash hack/kube-binaries.sh)" ./bin/scalebench --reloader=bin/reloader \
		--soak=$(SOAK) $(SOAK_ARGS)

clean:
	rm -rf bin

# Regenerates the deepcopy functions of internal/extapi and api/, and the ReloaderConfig CRD
# (into deployments/chart/reloader/files/crds/, which templates/crds.yaml renders); the output is
# committed, and a test fails when it is stale.
CONTROLLER_GEN := sigs.k8s.io/controller-tools/cmd/controller-gen@v0.20.0
generate:
	go run $(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./internal/extapi/...
	go run $(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt crd paths=./api/... output:crd:dir=deployments/chart/reloader/files/crds
