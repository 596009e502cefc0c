# pulumi-readiness: `make demo` runs the main job, `make test` runs the tests.
SHELL        := /bin/bash
VERSION      ?= 0.1.0
SDK_VERSION  := 0.1.0
PROVIDER     := pulumi-resource-readiness
LDFLAGS      := -X github.com/readiness-io/pulumi-readiness/provider.Version=$(VERSION)
TOOLS_BIN     = $(shell go run ./internal/controlplane/cmd/localcluster tools)
export PULUMI_HOME ?= $(CURDIR)/.cache/pulumi-home
export PULUMI_SKIP_UPDATE_CHECK := true

.PHONY: build tools schema sdk sdk-nodejs check-generated test test-all test-go test-nodejs demo bench lint dist examples clean fuzz bench-smoke

build:
	go build -ldflags "$(LDFLAGS)" -o bin/$(PROVIDER) ./provider/cmd/$(PROVIDER)

# The pinned tools (etcd, kube-apiserver, ..., kwok, the Pulumi CLI, sdkgen), built once into a cache.
tools:
	@go run ./internal/controlplane/cmd/localcluster tools

# schema.json comes from the built provider, never by hand.
schema: build
	@tb="$(TOOLS_BIN)"; "$$tb/pulumi" package get-schema ./bin/$(PROVIDER) | jq 'del(.version)' > schema.json

# SDKs are generated from schema.json by Pulumi's own code generators (see tools/pulumi/sdkgen).
sdk: schema
	@tb="$(TOOLS_BIN)"; rm -rf sdk/go/readiness sdk/nodejs/*.ts sdk/nodejs/types sdk/nodejs/config sdk/nodejs/package.json sdk/nodejs/tsconfig.json sdk/nodejs/README.md; \
	  "$$tb/sdkgen" -schema schema.json -out sdk -version $(SDK_VERSION)
	cd sdk && go build ./...

sdk-nodejs:
	cd sdk/nodejs && npm install --no-audit --no-fund --loglevel=error && npx tsc && cp package.json README.md bin/ 2>/dev/null || cp package.json sdk/nodejs/bin/
	cd sdk/nodejs/bin && rm -f *.tgz && npm pack --silent >/dev/null

# Fails when schema.json or sdk/ differ from what the provider generates.
check-generated: sdk
	@if [ -n "$$(git status --porcelain -- schema.json sdk)" ]; then \
	  echo "schema.json or sdk/ is out of date: run 'make sdk' and commit the result"; \
	  git status --porcelain -- schema.json sdk; git --no-pager diff --stat -- schema.json sdk; exit 1; fi

lint:
	@test -z "$$(gofmt -l provider internal tests demo bench examples tools/pulumi/sdkgen)" || (gofmt -l provider internal tests demo bench examples tools/pulumi/sdkgen; echo "gofmt needed"; exit 1)
	go vet ./...

test-go: build tools
	go test -count=1 -timeout 40m ./...

test-nodejs: build tools sdk-nodejs
	cd tests/nodejs && rm -rf node_modules/@readiness-io && npm install --no-audit --no-fund --loglevel=error && npm test

# The README's test command. Compiling the examples (pulumi-kubernetes' big SDK) runs beside the Go
# tests, which spend much of their time waiting on the cluster; the rest runs in order (two
# builds of the same packages at once would each compile them on a cold machine).
test:
	@$(MAKE) --no-print-directory -j2 --output-sync=line test-all

test-all: check-generated lint test-go test-nodejs examples fuzz bench-smoke
ifneq ($(filter test-all,$(MAKECMDGOALS)),)
lint: | check-generated
tools: | build
test-go examples sdk-nodejs: | check-generated lint
test-nodejs: | test-go
fuzz: | test-nodejs examples
bench-smoke: | fuzz
endif

# The README's main command: a demo stack against a local control plane it starts itself.
demo: build tools
	go run ./demo

bench: build tools
	go run ./bench -out BENCHMARKS.md

# A few trials of every benchmark, so `make test` keeps the bench working (figures not kept).
bench-smoke: build tools
	go run ./bench -trials 4 -batch 2 -webhook-trials 2 -scale 50 -stack-gates 5 -ready-trials 3 -stack-scale 4 -out $${TMPDIR:-/tmp}/readiness-bench-smoke.md > /dev/null

# Compiles every Go example and type-checks every TypeScript one (they cannot run offline).
examples: sdk-nodejs
	cd examples && go build ./...
	cd examples && rm -rf node_modules/@readiness-io && npm install --no-audit --no-fund --loglevel=error && npm run check

# Plugin tarballs the Pulumi way: pulumi-resource-readiness-v<version>-<os>-<arch>.tar.gz.
PLATFORMS := linux-amd64 linux-arm64 darwin-amd64 darwin-arm64
dist:
	@mkdir -p dist
	@for p in $(PLATFORMS); do \
	  os=$${p%-*}; arch=$${p#*-}; d=dist/$$p; mkdir -p $$d; \
	  echo "building $$os/$$arch"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $$d/$(PROVIDER) ./provider/cmd/$(PROVIDER) || exit 1; \
	  cp README.md $$d/; \
	  tar -C $$d -czf dist/$(PROVIDER)-v$(VERSION)-$$p.tar.gz $(PROVIDER) README.md || exit 1; \
	  rm -rf $$d; \
	done; ls -l dist

clean:
	rm -rf bin dist sdk/nodejs/bin sdk/nodejs/node_modules

# Short fuzz runs of every free-form input parser (JSONPath, CEL); longer runs: FUZZTIME=5m.
FUZZTIME ?= 10s
fuzz:
	go test -run '^$$' -fuzz FuzzJSONPath -fuzztime $(FUZZTIME) ./provider/pkg/expr
	go test -run '^$$' -fuzz FuzzCEL -fuzztime $(FUZZTIME) ./provider/pkg/expr
