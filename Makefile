# amk — see README.md. `make test` is what CI runs.
GO        ?= go
# The commit and build date --version prints (package internal/version).
AMK_LDFLAGS ?= -X github.com/amk-dev/amk/internal/version.commit=$(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty) -X github.com/amk-dev/amk/internal/version.date=$(shell date -u +%Y-%m-%dT%H:%M:%SZ)
FUZZTIME  ?= 60s
SMOKETIME ?= 5s

.PHONY: all build test unit lint staticcheck fuzz fuzz-smoke bench demo deps nvcc kernels-smoke kernels-sweep order-noise clean gpu-bin web-view

all: build

build:
	$(GO) build -o bin/ ./cmd/...

## test: install what the tests need (redis-server, prometheus, chromium, the
## MCP Inspector), Debian's nvcc 12.4 (into .cache/), then lint, unit +
## integration tests, the kernel compile smoke and a short smoke run of every
## fuzz target. About 10 minutes warm on 2 cores (README, "How long things take").
test: deps nvcc lint unit kernels-smoke fuzz-smoke

# The kernel tests that need an nvcc run in kernels-smoke, where their output
# (which nvcc, which architecture, or why they skipped) is printed.
NVCC_TESTS = ^(TestKernelsCompileWithoutSpills|TestRingPlanOnTheHost)$$

unit:
	$(GO) test -count=1 -timeout 18m -skip '$(NVCC_TESTS)' ./...

## lint: gofmt, go vet, and go fix -diff (Go's modernisations, applied with `go fix ./...`).
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@$(GO) fix -diff ./... || { echo "go fix would change the code above: run go fix ./..."; exit 1; }

## staticcheck: the extra linter (fetched through the Go module proxy; not part of `test`).
staticcheck:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

deps:
	@scripts/ensure-deps.sh

## nvcc: Debian's CUDA 12.4 nvcc in this checkout's .cache/cuda-12.4 (11.8 in
## .cache/cuda-11.8 when 12.4 cannot be fetched; AMK_NO_NVCC=1 skips it).
nvcc:
	@scripts/ensure-nvcc.sh

## kernels-smoke: the default kernel variant and the largest streaming ring
## (its TMA path) compiled for sm_90a by that nvcc (a compile error or any
## register spill fails), and the ring's plan run on the host; each says which
## nvcc it used, or why it skipped. Its builds are cached in KERNEL_CACHE
## (keyed by the kernel sources, the nvcc, the architecture and every flag,
## with the build's resource-usage log), so a rerun on unchanged sources
## checks the same builds' logs without compiling them again; the test says
## "cache hit" for each.
KERNEL_CACHE ?= $(CURDIR)/.cache/kernels-smoke
kernels-smoke: nvcc
	AMK_KERNEL_CACHE='$(KERNEL_CACHE)' $(GO) test -count=1 -timeout 20m -v -run '$(NVCC_TESTS)' ./kernels/build ./kernels/gpu

## kernels-sweep: every extreme variant (the default, and each search knob at
## its smallest and at its largest choice: 6 builds, about 100 CPU-seconds
## each) compiled for sm_90a with no spill; docs/gpu.md.
kernels-sweep: nvcc
	AMK_KERNEL_VARIANTS=extreme $(GO) test -count=1 -timeout 60m -v -run '^TestKernelsCompileWithoutSpills$$' ./kernels/build

## order-noise: the whole summation-order study of the seeded models
## (docs/results/oracle-drift.md): toy-2L, small and llama-1b at positions 0, 5
## and AMK_ORDER_LATE_POS (default 20); about 150 CPU-seconds. `make test` runs
## its smoke (toy-2L and small at positions 0 and 5).
order-noise:
	AMK_ORDER_STUDY=1 $(GO) test -count=1 -timeout 60m -v -run '^TestGPUReductionOrderNoiseOfTheSeededModels$$' ./model

fuzz:
	@scripts/fuzz.sh $(FUZZTIME)

fuzz-smoke:
	@scripts/fuzz.sh $(SMOKETIME) -fuzzminimizetime=0

bench:
	$(GO) test -run='^$$' -bench=. -benchmem -timeout 30m ./...

## fleet-bench: the fleet scale benchmark alone (one scheduler, one Redis,
## 100 campaigns, 64 no-op workers; docs/results/fleet-scale.md); `bench`
## runs it too. FLEET_TRIALS=2000 is the quick size, 20000 the full one.
FLEET_TRIALS ?= [0-9]+
.PHONY: fleet-bench
fleet-bench:
	$(GO) test -run='^$$' -bench='^BenchmarkFleetScale$$/.*/.*/trials=$(FLEET_TRIALS)$$' -benchtime=1x -timeout 30m ./internal/scheduler/

## demo: the main job on the embedded default — an autoresearch campaign on
## the `small` model (4 layers, 2048 hidden, bf16) for the h200 target with
## the CPU evaluator (reference VM vs eager for correctness, cost-model
## latencies labelled predicted). No Redis needed. It builds bin/amkctl first,
## naming each package as it compiles (minutes on a fresh clone), then runs the
## campaign, a line per experiment. Re-running adds up to 40 experiments to the
## same campaign, reopening it when it ended on a plateau (--reopen). The
## speedup target is off (--speedup-target 0): a campaign that met it could not
## be reopened by the next `make demo` without changing its criteria.
demo:
	@echo "demo: building bin/amkctl (go build -v names each package it compiles; several minutes on a fresh clone, a second or two after)"
	$(GO) build -v -ldflags "$(AMK_LDFLAGS)" -o bin/amkctl ./cmd/amkctl
	bin/amkctl autoresearch small --gpu h200 --device cpu --iters 40 --speedup-target 0 --workspace workspace --reopen

## gpu-bin: the -tags cuda binaries a GPU visit carries in bin/ (fetches
## Debian's CUDA 11.8 headers first); docs/gpu.md has the recipe.
gpu-bin:
	@scripts/gpu/build-bin.sh

## web-view: regenerate docs/web-view.png, the README's picture of the web
## view, docs/web-view-knobs.png (its knob view), and
## docs/web-view-unserved.png and docs/web-view-dead-run.png (a
## campaign no worker serves, a run that died): the headless-Chromium tests
## of internal/web (Debian's chromium, as `make deps` installs it) write
## their screenshots.
web-view:
	$(GO) test -count=1 -run '^TestBrowserShows(ALiveCampaign|CampaignsInTrouble)$$' ./internal/web -web.screenshot=$(CURDIR)/docs/web-view.png -web.knobs-screenshot=$(CURDIR)/docs/web-view-knobs.png -web.health-screenshots=$(CURDIR)/docs

clean:
	rm -rf bin workspace
