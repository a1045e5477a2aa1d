# amk — see README.md. `make test` is what CI runs.
GO        ?= go
FUZZTIME  ?= 60s
SMOKETIME ?= 5s

.PHONY: all build test unit lint staticcheck fuzz fuzz-smoke bench demo deps clean gpu-bin web-view

all: build

build:
	$(GO) build -o bin/ ./cmd/...

## test: install what the tests need (redis-server, prometheus), then lint,
## unit + integration tests, and a short smoke run of every fuzz target.
test: deps lint unit fuzz-smoke

unit:
	$(GO) test -count=1 -timeout 18m ./...

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
## latencies labelled predicted). No Redis needed. Re-running resumes it.
demo:
	$(GO) run ./cmd/amkctl autoresearch small --gpu h200 --device cpu --iters 40 --workspace workspace

## gpu-bin: the -tags cuda binaries a GPU visit carries in bin/ (fetches
## Debian's CUDA 11.8 headers first); docs/gpu.md has the recipe.
gpu-bin:
	@scripts/gpu/build-bin.sh

## web-view: regenerate docs/web-view.png, the README's picture of the web
## view: the headless-Chromium test of internal/web (Debian's chromium, as
## `make deps` installs it) writes its screenshot of a live campaign page.
web-view:
	$(GO) test -count=1 -run '^TestBrowserShowsALiveCampaign$$' ./internal/web -web.screenshot=$(CURDIR)/docs/web-view.png

clean:
	rm -rf bin workspace
