// Package e2e runs Pulumi stacks (Automation API inline programs, the built Pulumi CLI, the
// provider binary, a local file backend) against the local control plane.
package e2e

import (
	"context"
	"os"
	"testing"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, controlplane.Options{})) }

func prepare(t *testing.T) *stack.Env {
	t.Helper()
	env, err := stack.Prepare(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return env
}
