// Package autogate runs the autoGate stacks (readiness.AutoGate in an ordinary program) on the
// real pulumi-kubernetes plugin against a local control plane of its own; internal/stacktest
// holds the helpers it shares with the other end-to-end packages.
package autogate

import (
	"os"
	"testing"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, controlplane.Options{})) }
