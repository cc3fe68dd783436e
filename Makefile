# lambdaidem — run `make` (or `make help`) for the list of targets.
#
# Everything the targets need that is not on the machine image installs
# into .tools/ (ignored by git); the local services keep their pid files
# and logs in .run/. Nothing here needs Docker except test-localstack.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

GO        ?= go
GOTEST    := $(GO) test -race -count=1
STACK     := localstack/stack.sh

# Lambda functions of template.yaml and their Go packages (CodeUri).
# localstack/check_template.py fails `make test` when these drift apart.
FUNCTIONS := OrdersFunction
OrdersFunction_PKG := examples/orders

# How a function is built for Lambda: provided.al2023 on arm64, static,
# without the RPC shim (lambda.norpc), reproducible paths, no symbols.
GO_LAMBDA_BUILD = GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w'

LOCALSTACK_ENDPOINT ?= http://127.0.0.1:4566

.PHONY: help
help: ## Show this help
	@echo "usage: make [target]"
	@echo
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{ printf "  %-16s %s\n", $$1, $$2 }'

.PHONY: test
test: ## Start the local stack, run every test (-race) against it, stop it; a minute of simulation, the mutant table, the simulator's coverage table; then check template.yaml
	$(STACK) run -- env LAMBDAIDEM_REQUIRE_SERVICES=1 $(GOTEST) ./...
	LAMBDAIDEM_DYNAMODB=0 $(STACK) run -- env LAMBDAIDEM_REQUIRE_SERVICES=1 $(GOTEST) -run '^TestStackWithoutDynamoDB$$' ./localstack/provision
	$(GO) test -count=1 ./lambdaidemtest/internal/sim -run '^TestSimulation$$' -v -sim.budget=$(SIM_TEST_BUDGET)
	$(STACK) run -- env LAMBDAIDEM_REQUIRE_SERVICES=1 $(MAKE) mutants
	$(MAKE) sim-coverage-check
	cfn-lint template.yaml
	cfn-lint examples/redis/template.yaml
	cfn-lint examples/chain/template.yaml
	cfn-lint docs/getting-started/template.yaml
	python3 localstack/check_template.py
	python3 localstack/moto_sqs_test.py

# The packages whose tests talk to SQS: a test file that asks testenv for
# an SQS client, reads the SQS endpoint or runs the local runner. The other
# packages never reach SQS, so the emulator cannot change their results.
SQS_TEST_RE   := testenv\.SQS[(]|SQSEndpointVar|AWS_ENDPOINT_URL_SQS|localrun\.
SQS_TEST_PKGS  = $(sort $(dir $(shell git ls-files '*_test.go' | xargs grep -lE '$(SQS_TEST_RE)')))

.PHONY: test-emulators
test-emulators: ## Run the tests that use SQS (-race) with SQS on fauxqs instead of moto (known differences: localstack/README.md)
	@if [[ -z "$(SQS_TEST_PKGS)" ]]; then echo "test-emulators: found no test that uses SQS" >&2; exit 1; fi
	LAMBDAIDEM_SQS=fauxqs $(STACK) run -- env LAMBDAIDEM_REQUIRE_SERVICES=1 $(GOTEST) $(patsubst %/,./%,$(SQS_TEST_PKGS))

# make test-load: the targets CI gates on, run again and again while a CPU
# hog (cmd/internal/loadhog) keeps the load average at LOAD or more, so that
# a test that only passes on a quiet machine fails here first.
LOAD         ?= 8
LOAD_RUNS    ?= 5
LOAD_TARGETS ?= test demo
# Not $(MAKE) in the recipe: make -n would run the hog for it.
LOAD_MAKE    := $(MAKE)

.PHONY: test-load
test-load: ## Run make test and make demo LOAD_RUNS times (5) in a row under a CPU hog that keeps the load average at LOAD (8) or more; stops at the first failure and keeps its log in .run/test-load (LOAD_TARGETS='test-emulators' runs others)
	$(GO) build -o .tools/bin/loadhog ./cmd/internal/loadhog
	.tools/bin/loadhog -load $(LOAD) -runs $(LOAD_RUNS) -logs .run/test-load $(foreach t,$(LOAD_TARGETS),-step '$(t)=$(LOAD_MAKE) $(t)')

FUZZTIME ?= 1m
.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 1m); FUZZ=regexp picks targets
	FUZZTIME=$(FUZZTIME) FUZZ='$(or $(FUZZ),.)' GO=$(GO) .ci/fuzz

.PHONY: test-unit
test-unit: ## Run the tests that need no local services (the others skip)
	env -u AWS_ENDPOINT_URL_DYNAMODB -u AWS_ENDPOINT_URL_SQS -u LAMBDAIDEM_REQUIRE_SERVICES $(GOTEST) ./...

.PHONY: test-localstack
test-localstack: ## Run the integration suite against LocalStack on 127.0.0.1:4566 (see localstack/README.md)
	@export AWS_ENDPOINT_URL_DYNAMODB=$(LOCALSTACK_ENDPOINT) AWS_ENDPOINT_URL_SQS=$(LOCALSTACK_ENDPOINT) \
		AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test; \
	deadline=$$(( $$(date +%s) + 120 )); \
	until curl -fsS $(LOCALSTACK_ENDPOINT)/_localstack/init/ready 2>/dev/null | grep -q '"completed": *true'; do \
		if (( $$(date +%s) >= deadline )); then \
			echo "LocalStack's init hooks have not completed at $(LOCALSTACK_ENDPOINT) after 120s." >&2; \
			echo "Start it with: LOCALSTACK_AUTH_TOKEN=... docker compose -f localstack/docker-compose.yml up -d" >&2; \
			exit 1; \
		fi; \
		sleep 1; \
	done; \
	$(GO) run ./localstack/provision create -resources localstack/resources.json -wait 60s; \
	LAMBDAIDEM_REQUIRE_SERVICES=1 LAMBDAIDEM_REDIS=0 LAMBDAIDEM_SQS_EMULATOR=localstack $(GOTEST) ./...

.PHONY: check-template
check-template: ## Lint template.yaml and check it against localstack/resources.json
	cfn-lint template.yaml
	python3 localstack/check_template.py

.PHONY: lint
lint: ## gofmt, go vet, and go.mod/go.sum tidy
	@files=$$(find . -name '*.go' -not -path './.tools/*' -not -path './.aws-sam/*' | xargs gofmt -l); \
	if [[ -n $$files ]]; then echo "gofmt needed:"; echo "$$files"; exit 1; fi
	$(GO) vet ./...
	bash -n $(STACK) .ci/run localstack/init/ready.d/10-resources.sh
	node --check localstack/fauxqs_sqs.mjs
	$(GO) mod tidy
	git diff --exit-code -- go.mod go.sum

# The deterministic simulation (docs/simulation.md). make test explores
# fresh seeds for SIM_TEST_BUDGET; make sim for SIM_BUDGET, or replays SEED.
SIM_TEST_BUDGET ?= 60s
SIM_BUDGET      ?= 10m
SEED            ?= 0
KNOWN           ?=
SIM_CONFIG      ?=
MUTANT_BUDGET   ?= 60s
MUTANT          ?=

.PHONY: sim
sim: ## Deterministic simulation for SIM_BUDGET (10m); SEED=n replays one seed with its trace; SIM_CONFIG=fifo,ordered,force,... forces options (docs/simulation.md)
	$(GO) test -count=1 -timeout 0 ./lambdaidemtest/internal/sim -run '^TestSimulation$$' -v -sim.budget=$(SIM_BUDGET) -sim.seed=$(SEED) -sim.known=$(KNOWN) -sim.config=$(SIM_CONFIG)

.PHONY: mutants
mutants: ## Re-introduce each bug of the mutant table (build tag lambdaidem_mutants); each must be found within MUTANT_BUDGET of CPU time (60s), and on the real stores that carry it when the stack is up; prints the mutant and promise tables (MUTANT=name SEED=n: one mutant from one seed)
	$(GO) test -count=1 -timeout 0 -tags lambdaidem_mutants ./lambdaidemtest/internal/sim -run '^TestMutants(OnStores)?$$' -v -sim.budget=$(MUTANT_BUDGET) -sim.known=$(KNOWN) -sim.seed=$(SEED) -sim.mutant=$(MUTANT)

.PHONY: sim-coverage
sim-coverage: ## Measure what of the library the simulator runs (a fixed set of scenarios) and write the table of every block it does not run, with its reason, into docs/simulation.md
	$(GO) run ./lambdaidemtest/internal/sim/simcover

.PHONY: sim-coverage-check
sim-coverage-check: ## Fail if docs/simulation.md's coverage table is not what the simulator covers now, or a block it does not run has no reason
	$(GO) run ./lambdaidemtest/internal/sim/simcover -check

.PHONY: mutants-update
mutants-update: ## make mutants, then write its tables into BENCHMARKS.md and docs/promises.md
	$(GO) test -count=1 -timeout 0 -tags lambdaidem_mutants ./lambdaidemtest/internal/sim -run '^TestMutants$$' -v -sim.budget=$(MUTANT_BUDGET) -sim.update

BENCH_N   ?= 1000
BENCH_E2E ?= 2000
# In-process benchmarks run BENCH_COUNT times; benchstat prints the median
# of each with its spread (one run on a shared 2-vCPU VM varies by ±20%).
BENCH_COUNT ?= 6
BENCHSTAT := golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da

.PHONY: bench
bench: ## Benchmarks: in-process overhead; DynamoDB Local latency (first, duplicate, batch, FIFO group) and requests per message next to the bare floor and Powertools (TypeScript); the same for the Redis store when the stack has redis; cold start and memory; end to end through the local runner
	@mkdir -p .tools
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) ./... | tee .tools/bench-inprocess.txt
	$(GO) run $(BENCHSTAT) .tools/bench-inprocess.txt
	$(GO) build -o .tools/bin/lambdaidem-bench ./cmd/lambdaidem-bench
	$(STACK) run -- .tools/bin/lambdaidem-bench -n $(BENCH_N) -e2e $(BENCH_E2E)

CHAOS_FLAGS ?=

.PHONY: chaos
chaos: ## Fault injection through the real bootstrap: 10,000 messages per mode (plain, tx; about 9 minutes on a quiet machine), two pollers, crashes, store faults, duplicates, poison; fails on a lost message or an unexplained duplicate (CHAOS_FLAGS='-seed N' replays, '-messages 3000' for a shorter run, '-store redis' on the Redis store, '-mode optimistic' for WithOptimisticCommit, '-batched' for WithBatchedWrites, '-mode chain' for the two-stage chain example: crashes after its send and its email, email API faults, at most one email per order at most once and with a keyed API)
	$(GO) build -o .tools/bin/lambdaidem-chaos ./cmd/lambdaidem-chaos
	$(GO) build -tags lambda.norpc -trimpath -o .tools/bin/lambdaidem-chaos-fn ./cmd/lambdaidem-chaos/fn
	$(STACK) run -- .tools/bin/lambdaidem-chaos -bootstrap .tools/bin/lambdaidem-chaos-fn $(CHAOS_FLAGS)

.PHONY: build
build: $(addprefix build-,$(FUNCTIONS)) ## Build every function of template.yaml for Lambda (arm64) into .aws-sam/build, as sam build lays it out
	@# The built template sam deploy reads: CodeUri points at the build dirs.
	sed $(foreach f,$(FUNCTIONS),-e 's#^\( *CodeUri: *\)$($(f)_PKG)/\{0,1\} *$$#\1$(f)#') template.yaml > .aws-sam/build/template.yaml
	@ls -l $(foreach f,$(FUNCTIONS),.aws-sam/build/$(f)/bootstrap)

# build-<LogicalId>: what `sam build` (BuildMethod: makefile) runs, with
# ARTIFACTS_DIR set; `make build` runs it with the default below.
.PHONY: build-OrdersFunction
build-OrdersFunction:
	$(GO_LAMBDA_BUILD) -o $(or $(ARTIFACTS_DIR),.aws-sam/build/OrdersFunction)/bootstrap ./$(OrdersFunction_PKG)

# build-RedisFunction: what `sam build -t examples/redis/template.yaml`
# runs for the Redis store's example (not part of template.yaml).
.PHONY: build-RedisFunction
build-RedisFunction:
	$(GO_LAMBDA_BUILD) -o $(or $(ARTIFACTS_DIR),.aws-sam/build/RedisFunction)/bootstrap ./examples/redis

# build-OrdersStage, build-NotifyStage: what `sam build -t
# examples/chain/template.yaml` runs: one binary, two functions.
.PHONY: build-OrdersStage build-NotifyStage
build-OrdersStage build-NotifyStage:
	$(GO_LAMBDA_BUILD) -o $(or $(ARTIFACTS_DIR),.aws-sam/build/$(@:build-%=%))/bootstrap ./examples/chain

# The demo driver, the function it runs and the stack's provisioner build
# with one configuration (static, -trimpath), as localrun.Build builds the
# function: on an empty Go build cache the AWS SDK then compiles once.
DEMO_BUILD = CGO_ENABLED=0 $(GO) build -trimpath

.PHONY: demo
demo: ## Run the orders example under the local Lambda runner: duplicates, a slow redelivery, poison, retries, a crash; fails on a lost message or a duplicate effect
	@echo "demo: building the demo driver (go build; the longest step with an empty Go build cache)"
	$(DEMO_BUILD) -o .tools/bin/lambdaidem-demo ./cmd/lambdaidem-demo
	LAMBDAIDEM_REDIS=0 $(STACK) run -- .tools/bin/lambdaidem-demo

.PHONY: demo-readme
demo-readme: ## Run the demo and write its summary into README.md's sample (make test checks the two agree)
	$(DEMO_BUILD) -o .tools/bin/lambdaidem-demo ./cmd/lambdaidem-demo
	LAMBDAIDEM_REDIS=0 $(STACK) run -- .tools/bin/lambdaidem-demo -update-readme

.PHONY: stack-up
stack-up: ## Start the local stack in the background and print its endpoints (eval "$(localstack/stack.sh env)")
	$(STACK) start
	@$(STACK) env

.PHONY: stack-up-redis
stack-up-redis: ## Start the local stack for the Redis store in the background: SQS and redis, no DynamoDB (needs no Java)
	LAMBDAIDEM_DYNAMODB=0 $(STACK) start
	@$(STACK) env

.PHONY: stack-down
stack-down: ## Stop the local stack started by stack-up
	$(STACK) stop

.PHONY: stack-install
stack-install: ## Install the local stack's pinned tools into .tools/
	$(STACK) install

.PHONY: clean
clean: ## Stop the local stack; remove build output and run state (keeps .tools/)
	$(STACK) stop
	rm -rf .aws-sam .run

.PHONY: distclean
distclean: clean ## clean, and remove the installed tools in .tools/
	rm -rf .tools
