# pulumi-readiness: `make demo` runs the main job, `make test` runs the tests.
SHELL        := /bin/bash
# One version everywhere: at a release tag (v0.2.0) it is the tag without its "v", stamped into the
# plugin (--version, the schema it serves), schema.json, the Go SDK and the Node.js package. Untagged
# builds get DEV_VERSION, the version the committed schema.json and sdk/ carry (check-generated
# always compares against it, so it holds on every commit; bump it after a release).
DEV_VERSION  := 0.1.0-dev
TAG_VERSION  := $(patsubst v%,%,$(shell git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null))
VERSION      ?= $(or $(TAG_VERSION),$(DEV_VERSION))
SDK_VERSION  ?= $(VERSION)
PROVIDER     := pulumi-resource-readiness
LDFLAGS      := -X github.com/readiness-io/pulumi-readiness/provider.Version=$(VERSION)
TOOLS_BIN     = $(shell go run ./internal/localcluster tools)
export PULUMI_HOME ?= $(CURDIR)/.cache/pulumi-home
# The pulumi-kubernetes plugin the demo, the stack tests and the examples run with: pinned in one
# file (internal/k8splugin reads the same), installed into PULUMI_HOME by `make k8s-plugin`.
K8S_PLUGIN_VERSION := $(shell cat internal/k8splugin/VERSION)
export PULUMI_SKIP_UPDATE_CHECK := true
# Every go command here builds as `make dist` releases (static, -trimpath), so the provider's build,
# its tests, the release build of the install test (in a snapshot folder: with -trimpath a
# package's folder is not part of its cache key), the tools and the controllers' images share one
# build cache: on a cold machine a package compiles once, not once per set of flags.
# -dwarf=false: no debug information in any compiled package (8 % of a compile's CPU, measured on
# client-go and the Automation API with empty caches: 223 -> 205 CPU-seconds, the faster one run
# first; less for the linker to write). Every binary here is linked without it anyway (`make dist`
# and the tools: -s -w); panics still print their stacks.
# -vet=off (go test only): `make lint` runs the whole `go vet` first, and the examples and the SDK
# module run theirs, so go test's own subset of it was the same analysis twice (and its facts for
# every dependency: 6681 vet runs and 220 CPU-seconds on a cold machine, both passes together).
export CGO_ENABLED := 0
GO_BUILD_FLAGS := -trimpath -gcflags=all=-dwarf=false -vet=off
export GOFLAGS := $(GO_BUILD_FLAGS) $(filter-out $(GO_BUILD_FLAGS),$(GOFLAGS))

.PHONY: bench-faults build tools k8s-plugin schema sdk sdk-nodejs py-deps sdk-python python-env check-generated test test-all test-go test-nodejs test-python test-install demo demo-realnode bench bench-realnode soak soak-run soak-load lint lint-workflows docs dist examples clean fuzz fuzz-inputs bench-smoke version release-notes release-sdk-tag

build:
	go build -ldflags "$(LDFLAGS)" -o bin/$(PROVIDER) ./provider/cmd/$(PROVIDER)

# The pinned tools (etcd, kube-apiserver, ..., kwok, the Pulumi CLI, sdkgen), built once into a cache.
tools:
	@go run ./internal/localcluster tools

version:
	@echo $(VERSION)

# pulumi-kubernetes v$(K8S_PLUGIN_VERSION) into PULUMI_HOME: from ../shared/plugins when it is there
# (checked against its SHA256SUMS), else `pulumi plugin install resource kubernetes v$(K8S_PLUGIN_VERSION)`.
k8s-plugin: tools
	@go run ./internal/k8splugin/cmd/k8splugin >/dev/null

# schema.json comes from the built provider, never by hand.
schema: build
	@tb="$(TOOLS_BIN)"; "$$tb/pulumi" package get-schema ./bin/$(PROVIDER) | jq --arg v "$(SDK_VERSION)" '.version = $$v' > schema.json

# SDKs are generated from schema.json by Pulumi's own code generators (see tools/pulumi/sdkgen).
sdk: schema
	@tb="$(TOOLS_BIN)"; rm -rf sdk/go/readiness sdk/nodejs/*.ts sdk/nodejs/types sdk/nodejs/config sdk/nodejs/package.json sdk/nodejs/tsconfig.json sdk/nodejs/README.md sdk/python; \
	  "$$tb/sdkgen" -schema schema.json -out sdk -overlay sdk/overlay -version $(SDK_VERSION)
	@# npm install writes the package's version into its lock file: keep the committed lock in step.
	@jq --indent 4 --arg v "$(SDK_VERSION)" '.version = $$v | .packages[""].version = $$v' sdk/nodejs/package-lock.json > sdk/nodejs/package-lock.json.tmp && \
	  mv sdk/nodejs/package-lock.json.tmp sdk/nodejs/package-lock.json
	cd sdk && go build ./...
	@$(MAKE) --no-print-directory docs

# The Pulumi Registry docs (docs/): their resource and configuration tables and their examples are
# generated from schema.json and examples/ (internal/docgen); `make sdk` runs this.
docs:
	go run ./internal/docgen -schema schema.json -docs docs

# The Node.js package, packed: sdk/nodejs/bin/readiness-io-pulumi-readiness-<version>.tgz (what a
# release publishes), copied to readiness-io-pulumi-readiness.tgz beside it for tests and examples.
sdk-nodejs:
	cd sdk/nodejs && npm install --no-audit --no-fund --loglevel=error && npx tsc && cp package.json README.md bin/ 2>/dev/null || cp package.json sdk/nodejs/bin/
	cd sdk/nodejs/bin && rm -f *.tgz && npm pack --silent >/dev/null && cp readiness-io-pulumi-readiness-*.tgz readiness-io-pulumi-readiness.tgz

# The Python tools and test packages, in a virtual environment (.cache/python) filled once from
# PyPI: tests/python/requirements.txt, and the same packages as wheels in its wheels/ folder (what
# the install test's fresh environment installs offline). Redone only when requirements.txt changes.
PYTHON ?= python3
PY_ENV ?= $(CURDIR)/.cache/python
py-deps:
	@if ! cmp -s tests/python/requirements.txt $(PY_ENV)/requirements.txt; then \
	  echo "filling $(PY_ENV) from PyPI (tests/python/requirements.txt)"; \
	  rm -rf $(PY_ENV) && $(PYTHON) -m venv $(PY_ENV) && \
	  $(PY_ENV)/bin/pip install --quiet --disable-pip-version-check -r tests/python/requirements.txt && \
	  $(PY_ENV)/bin/pip download --quiet --disable-pip-version-check --dest $(PY_ENV)/wheels -r tests/python/requirements.txt && \
	  cp tests/python/requirements.txt $(PY_ENV)/requirements.txt; fi

# The Python package, built offline with that environment's setuptools:
# sdk/python/dist/pulumi_readiness-<version>-py3-none-any.whl (what a release publishes).
sdk-python: py-deps
	rm -rf sdk/python/dist sdk/python/build
	cd sdk/python && $(PY_ENV)/bin/pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation --wheel-dir dist . && rm -rf build *.egg-info

# The Python stack tests' environment: the packages above and the SDK's wheel, built now.
python-env: sdk-python
	@$(PY_ENV)/bin/pip install --quiet --disable-pip-version-check --no-deps --force-reinstall sdk/python/dist/pulumi_readiness-*.whl

# Fails when schema.json, sdk/ or docs/ differ from what the provider generates (at DEV_VERSION).
check-generated: SDK_VERSION = $(DEV_VERSION)
check-generated: sdk
	@if [ -n "$$(git status --porcelain -- schema.json sdk docs)" ]; then \
	  echo "schema.json, sdk/ or docs/ is out of date: run 'make sdk' and commit the result"; \
	  git status --porcelain -- schema.json sdk docs; git --no-pager diff --stat -- schema.json sdk docs; exit 1; fi

# The GitHub workflows, checked by actionlint (built from the Go module proxy, cached after).
ACTIONLINT := github.com/rhysd/actionlint/cmd/actionlint@v1.7.12
lint-workflows:
	go run $(ACTIONLINT)

lint:
	@test -z "$$(gofmt -l provider internal tests demo bench examples tools/pulumi/sdkgen)" || (gofmt -l provider internal tests demo bench examples tools/pulumi/sdkgen; echo "gofmt needed"; exit 1)
	go vet ./...
	go vet -tags cluster ./provider/pkg/kube

# -tags cluster: provider/pkg/kube's tests against the API server (the rest of provider/pkg needs none).
# -p 4: the long packages (provider, tests/e2e and its packages fieldreports, autogate and
# realnode, each with its own control plane) spend much of their time waiting on the cluster, so
# four run at once on two cores. go test starts them in the order given: the real node's first
# (on a cold machine it builds the controllers' images, its longest part), then the provider's
# (the longest warm), so that the fifth waits for a short one, not the critical path for a long one.
GO_TEST_FIRST := ./tests/e2e/realnode ./provider
test-go: build tools k8s-plugin
	first=$$(go list $(GO_TEST_FIRST)); \
	  go test -tags cluster -count=1 -p 4 -timeout 40m $$first $$(go list ./... | grep -v '/tests/install$$' | grep -vxF "$$first")
	@# The SDK is its own module (go list ./... above leaves it out): its overlay's unit tests.
	cd sdk && go vet ./... && go test -count=1 ./...

# The release and a user's install paths end to end on this machine (tests/install): a release
# build at a throwaway tag in a snapshot of the tree, its tarball served on 127.0.0.1, `pulumi
# plugin install`, and a Go and a TypeScript program that get the plugin by themselves. It runs
# offline, so it comes after sdk-nodejs has filled the npm cache.
test-install: tools sdk-nodejs py-deps
	go test -count=1 -timeout 20m ./tests/install

test-nodejs: build tools k8s-plugin sdk-nodejs
	@# No lock file (it is not committed): a local one would pin the old SDK tarball by its integrity.
	cd tests/nodejs && rm -rf node_modules/@readiness-io package-lock.json && npm install --no-audit --no-fund --loglevel=error && npm test

# The Python stacks (tests/python, pytest): Automation API inline programs with pulumi-kubernetes'
# Python package on the local control plane, and auto_gate's unit tests.
test-python: build tools k8s-plugin python-env
	@# Each file in a process of its own (as node --test runs TypeScript's): a Pulumi program's runtime
	@# state (the SDK's callback server, its thread pool) lives in the process.
	cd tests/python && rc=0; for f in test_*.py; do $(PY_ENV)/bin/python -m pytest -q -p no:cacheprovider --timeout 1800 $$f || rc=1; done; exit $$rc

# The README's test command (what CI runs, through .ci/run): every suite of test-all, in the two
# lanes of .ci/test-lanes, which says why they are laid out so. $(MAKE) on the line: `make -n test`
# runs the script, which prints the commands of every step without running them.
test:
	@MAKE="$(MAKE)" .ci/test-lanes

# Every suite `make test` runs (.ci/test-lanes checks that its lanes run these, no more, no less).
# `make test-all` runs them one after the other; not with -j: `make sdk` (check-generated) rewrites
# sdk/, which the others build and pack, and only the script keeps them apart.
test-all: check-generated lint lint-workflows test-go test-nodejs test-python test-install examples fuzz-inputs bench-smoke

# The README's main command: a demo stack against a local control plane it starts itself.
demo: build tools k8s-plugin
	go run ./demo

# The same three runs on a real node (containerd, kubelet, kube-proxy; where a machine can run
# one, see docs/development.md): cert-manager and External Secrets as real pods from their
# Go modules, ingress-nginx's webhook as a stand-in pod; nothing played.
demo-realnode: build tools k8s-plugin
	go run ./demo -realnode

bench: build tools
	go run ./bench -out BENCHMARKS.md

# Field report 001's stack on a real node (real External Secrets pods), brought up and destroyed
# $(SOAK_ROUNDS) times with autoGate, beside the field-report package on its own cluster for load,
# run again and again until the soak ends (tests/e2e/realnode/soak_test.go says what it checks).
# Not in `make test`: about 20 minutes.
SOAK_ROUNDS ?= 20
SOAK_DONE   := $${TMPDIR:-/tmp}/readiness-soak.done
soak: build tools k8s-plugin
	@rm -f $(SOAK_DONE)
	@$(MAKE) --no-print-directory -j2 --output-sync=line soak-run soak-load
soak-run:
	@log=$${TMPDIR:-/tmp}/readiness-soak.log; READINESS_SOAK=$(SOAK_ROUNDS) go test -count=1 -timeout 90m -run TestSoakRealFieldReport001 -v ./tests/e2e/realnode > $$log 2>&1; rc=$$?; \
	  touch $(SOAK_DONE); grep -E 'round [0-9]+|soak:|FAIL|^ok|^ +[+-] *[0-9]+ms' $$log; echo "full log: $$log"; exit $$rc
# Each load run in a process group of its own, so the soak's end stops it, cluster and all.
soak-load:
	@n=0; while [ ! -e $(SOAK_DONE) ]; do n=$$((n+1)); echo "load run $$n"; \
	  setsid go test -count=1 -timeout 60m ./tests/e2e/fieldreports > /dev/null 2>&1 & pid=$$!; \
	  while kill -0 $$pid 2>/dev/null && [ ! -e $(SOAK_DONE) ]; do sleep 5; done; \
	  kill -- -$$pid 2>/dev/null; wait $$pid; done; echo "load: $$n runs of tests/e2e/fieldreports beside the soak"

# Field reports 000, 001 and 002 on a real node, four ways (autoGate, hand gates, the reports' serial
# script, sleep 30) against the floor (internal/floor), $(FIGURES_ROUNDS) rounds each, into BENCHMARKS.md's
# real-node section (tests/e2e/realnode/figures_test.go; `make bench` keeps that section as it is).
FIGURES_ROUNDS ?= 5
bench-realnode: build tools k8s-plugin
	READINESS_FIGURES=$(FIGURES_ROUNDS) READINESS_FIGURES_OUT=$${TMPDIR:-/tmp}/readiness-realnode-figures.md \
	  go test -count=1 -timeout 90m -run TestFiguresRealFieldReports -v ./tests/e2e/realnode
	go run ./bench -realnode-section $${TMPDIR:-/tmp}/readiness-realnode-figures.md -out BENCHMARKS.md

# Faults during a rebuild on a real node (issue 50): FAULTS_ROUNDS rounds per fault (the clean rounds, their
# baseline, in the first FAULTS_CLEAN), into BENCHMARKS.md.
FAULTS_ROUNDS ?= 10
FAULTS_CLEAN ?= 5
bench-faults: build tools k8s-plugin
	READINESS_FAULTS=$(FAULTS_ROUNDS) READINESS_FAULTS_CLEAN=$(FAULTS_CLEAN) READINESS_FAULTS_OUT=$${TMPDIR:-/tmp}/readiness-faults.md \
	  go test -count=1 -timeout 150m -run TestFaultsRealFieldReports -v ./tests/e2e/realnode
	go run ./bench -faults-section $${TMPDIR:-/tmp}/readiness-faults.md -out BENCHMARKS.md

# A few trials of every benchmark, so `make test` keeps the bench working (figures not kept).
bench-smoke: build tools
	go run ./bench -trials 4 -batch 2 -webhook-trials 2 -scale 50 -stack-gates 5 -ready-trials 3 -stack-scale 4 -autogate-objects 3 -out $${TMPDIR:-/tmp}/readiness-bench-smoke.md > /dev/null

# Runs every Go example (examples/*/go/main_test.go: the example's Program as an inline program
# on a local control plane with the real plugin; one package at a time, each starts its own
# control plane; the test binary is the example's compile check) and type-checks every
# TypeScript one. The TypeScript ones run in test-nodejs (tests/nodejs/src/examples.test.ts).
# go vet first: it compiles the examples' dependencies (pulumi-kubernetes' Go SDK, minutes on a
# new machine) on every core, which `go test -p 1` would compile one package at a time. That SDK
# is compiled without optimizations (-N -l): its 69 generated packages (helm/v3 imports every API
# group) are the examples' whole compile, a third less CPU so (measured on core/v1: 35 -> 24
# CPU-s), and what the examples prove (the programs' resources, on a real stack) is the same.
EXAMPLES_GCFLAGS := -gcflags=github.com/pulumi/pulumi-kubernetes/sdk/v4/...=-N -l -dwarf=false
examples: sdk-nodejs tools k8s-plugin
	cd examples && go vet '$(EXAMPLES_GCFLAGS)' ./... && go test '$(EXAMPLES_GCFLAGS)' -count=1 -p 1 -timeout 20m ./...
	cd examples && rm -rf node_modules/@readiness-io package-lock.json && npm install --no-audit --no-fund --loglevel=error && npm run check

# Plugin tarballs the Pulumi way, pulumi-resource-readiness-v<version>-<os>-<arch>.tar.gz (the names
# Pulumi downloads from a pluginDownloadURL), and their SHA256SUMS, in $(DIST).
# `make dist PLATFORMS=host` builds only this machine's platform (what the tests use).
PLATFORMS ?= linux-amd64 linux-arm64 darwin-amd64 darwin-arm64
DIST      ?= dist
HOST_PLATFORM = $(shell echo "$$(go env GOOS)-$$(go env GOARCH)")
dist:
	@mkdir -p $(DIST) && rm -f $(DIST)/$(PROVIDER)-v*.tar.gz $(DIST)/SHA256SUMS
	@stage=$$(mktemp -d); trap 'rm -rf "$$stage"' EXIT; \
	for p in $(if $(filter host,$(PLATFORMS)),$(HOST_PLATFORM),$(PLATFORMS)); do \
	  os=$${p%-*}; arch=$${p#*-}; d=$$stage/$$p; mkdir -p $$d; \
	  echo "building $(PROVIDER) $(VERSION) for $$os/$$arch"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $$d/$(PROVIDER) ./provider/cmd/$(PROVIDER) || exit 1; \
	  cp README.md $$d/; \
	  tar -C $$d -czf $(DIST)/$(PROVIDER)-v$(VERSION)-$$p.tar.gz $(PROVIDER) README.md || exit 1; \
	done
	@cd $(DIST) && if command -v sha256sum >/dev/null; then sha256sum $(PROVIDER)-v*.tar.gz; else shasum -a 256 $(PROVIDER)-v*.tar.gz; fi > SHA256SUMS && cat SHA256SUMS

# Release steps (.github/workflows/release.yml runs them at a tag v<version>; tests/install runs
# them in a snapshot): the CHANGELOG section of this version, for the release notes ...
release-notes:
	@awk -v v="$(VERSION)" 'index($$0, "## [") == 1 { if (found) exit; if (index($$0, "## [" v "]") == 1) { found = 1; next } } \
	  found { print } END { if (!found) { print "CHANGELOG.md has no section ## [" v "]" > "/dev/stderr"; exit 1 } }' CHANGELOG.md

# ... and, after `make sdk` at the tag, the commit of the SDKs at that version (on no branch),
# tagged sdk/v<version>: the Go module version users `go get`. The workflow pushes the tag.
release-sdk-tag:
	@test "$(VERSION)" != "$(DEV_VERSION)" || { echo "release-sdk-tag runs at a release tag v<version>"; exit 1; }
	git add schema.json sdk
	git commit -q -m "SDKs at version $(VERSION)"
	git tag sdk/v$(VERSION)

clean:
	rm -rf bin dist sdk/nodejs/bin sdk/nodejs/node_modules

# Short fuzz runs of every free-form input parser (JSONPath, CEL: fuzz-inputs, in make test) and
# of every gate's Check (no panic, no secret input value in a message); longer runs: FUZZTIME=5m.
# make test runs FuzzCheck's seed corpus only (as a test of ./provider): fuzzing it instruments
# and compiles every package of the provider again, 300 CPU-seconds on a cold machine.
# The run is a count, not a time: a time limit that ends while a worker is busy with a slow input
# fails with "context deadline exceeded" on a loaded machine (seen in CI).
FUZZTIME ?= 10000x
fuzz-inputs:
	go test -run '^$$' -fuzz FuzzJSONPath -fuzztime $(FUZZTIME) ./provider/pkg/expr
	go test -run '^$$' -fuzz FuzzCEL -fuzztime $(FUZZTIME) ./provider/pkg/expr
fuzz: fuzz-inputs
	go test -run '^$$' -fuzz FuzzCheck -fuzztime $(FUZZTIME) ./provider
