// Package install proves the release and the install paths a user follows, on this machine only:
// a release build at a throwaway tag in a snapshot of the repository (one version everywhere), its
// plugin tarball served from 127.0.0.1, `pulumi plugin install --server`, and a Go, a TypeScript and
// a Python program, each in a fresh directory outside the repository with an empty PULUMI_HOME,
// whose engine downloads the plugin by itself and runs a gate against the local control plane.
//
// It runs by itself (`make test-install`), after `make sdk-nodejs` has filled the npm cache and
// `make py-deps` the Python wheels: every go, npm and pip command here runs offline (GOPROXY=off,
// npm_config_offline=true, pip --no-index), and every process
// has its HTTP proxy pointed at a closed port on 127.0.0.1, so nothing can reach past loopback.
package install

import (
	"fmt"
	"os"
	"testing"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(withOwnTmp(m)) }

// withOwnTmp gives the test and every process it starts a TMPDIR of their own, removed at the end:
// `pulumi plugin install` leaves its extraction folders (12-23 MB each) in TMPDIR.
func withOwnTmp(m *testing.M) int {
	dir, err := os.MkdirTemp("", "readiness-install-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := os.Setenv("TMPDIR", dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return testenv.Main(m, controlplane.Options{})
}
