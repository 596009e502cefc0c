// Package fieldreports runs field reports 000, 001 and 002 as stacks of what users run (the real
// pulumi-kubernetes plugin installing real charts' objects), failing without their gate and
// passing with it, and pins what pulumi-kubernetes waits for by itself; against a local control
// plane of its own. internal/stacktest holds the helpers it shares with the other end-to-end
// packages.
package fieldreports

import (
	"os"
	"testing"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, controlplane.Options{})) }
