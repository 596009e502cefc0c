// Package realnode runs the field reports for real: a control plane with a real node
// (containerd, kubelet, kube-proxy; internal/controlplane/realnode.go), real External Secrets
// v0.11.0 and cert-manager v1.11.5 pods built from their Go modules and installed by the
// real pulumi-kubernetes plugin from their real charts. Nothing is played: the webhooks are
// the controllers' own, behind their Services; the FailedMount is the kubelet's.
package realnode

import (
	"fmt"
	"os"
	"testing"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

func TestMain(m *testing.M) {
	if missing := controlplane.NodeRequirements(); missing != "" {
		if os.Getenv("CI") != "" {
			fmt.Fprintf(os.Stderr, "a real node needs %s; .ci/run installs them\n", missing)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "skipping the real-node tests: this machine lacks %s\n", missing)
		os.Exit(0)
	}
	os.Exit(testenv.Main(m, controlplane.Options{RealNode: true}))
}
