// Package e2e runs each gate in a Pulumi stack (Automation API inline programs, the built
// Pulumi CLI, the provider binary, the real pulumi-kubernetes plugin, a local file backend)
// against the local control plane. The field-report stacks (fieldreports) and the autoGate
// stacks (autogate) are packages of their own, so that `go test` runs them beside these, each
// with its own control plane; internal/stacktest holds what they share.
package e2e

import (
	"os"
	"testing"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, controlplane.Options{})) }
