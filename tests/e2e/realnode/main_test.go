// Package realnode runs the field reports for real: a control plane with a real node
// (containerd, kubelet, kube-proxy; internal/realnode), real External Secrets
// v0.11.0 and cert-manager v1.11.5 pods built from their Go modules and installed by the
// real pulumi-kubernetes plugin from their real charts. Nothing is played: the webhooks are
// the controllers' own, behind their Services; the FailedMount is the kubelet's.
package realnode

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/realnode"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

func TestMain(m *testing.M) {
	if missing := realnode.Requirements(); missing != "" {
		if os.Getenv("CI") != "" {
			fmt.Fprintf(os.Stderr, "a real node needs %s; .ci/run installs them\n", missing)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "skipping the real-node tests: this machine lacks %s\n", missing)
		os.Exit(0)
	}
	// The controllers' images (cached in the tools cache: at once when warm). On a new
	// machine this is minutes of compiling, done here rather than in `make tools` so that it
	// overlaps the other test packages, which mostly wait on their clusters; before the
	// node starts, so the machine's node lock is not held meanwhile.
	logf := func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
	if err := charts.BuildImages(context.Background(), logf, charts.RealNodeCharts...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(testenv.MainRealNode(m, controlplane.Options{}))
}
