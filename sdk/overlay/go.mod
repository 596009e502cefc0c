// Hand-written SDK sources (see README.md here), copied into sdk/go/readiness by `make sdk`. This
// go.mod only keeps them out of the sdk module's ./... : here, beside no generated code, they do
// not compile; they are built and vetted as part of sdk/go/readiness.
module github.com/readiness-io/pulumi-readiness/sdk/overlay

go 1.25.11
