// Package run runs an example's program as an Automation API inline program against the local
// control plane, with the real pulumi-kubernetes plugin and the readiness provider: what
// `pulumi up` in the example's folder does on a user's cluster, minus the Go language host.
package run

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/readiness-io/pulumi-readiness/internal/k8splugin"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// Stack prepares a stack of program (project: the example's Pulumi.yaml name) with config
// (keys without a namespace are the project's), destroyed and removed when the test ends.
//
// The examples' Go SDK of pulumi-kubernetes (v4.33.0, the only one the module proxy serves)
// asks for plugin 4.33.0; the project pins 4.32.0 (internal/k8splugin/VERSION). The pinned
// binary goes on PATH as an ambient plugin, which the engine uses whatever version a resource
// asks for, so the examples' code stays as users run it.
func Stack(t *testing.T, project string, config map[string]string, program pulumi.RunFunc) auto.Stack {
	t.Helper()
	ctx := context.Background()
	env, err := stack.Prepare(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(k8splugin.PluginDir(k8splugin.ProjectHome()), "pulumi-resource-kubernetes")
	if err := os.Symlink(bin, filepath.Join(env.BinDir, "pulumi-resource-kubernetes")); err != nil {
		t.Fatal(err)
	}
	s, err := env.Stack(ctx, project, "dev", string(testenv.CP.Kubeconfig), program)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range config {
		if err := s.SetConfig(ctx, k, auto.ConfigValue{Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = s.Destroy(context.Background(), optdestroy.Remove()) })
	return s
}

// Up runs `pulumi up` and fails the test with the engine's output if it fails.
func Up(t *testing.T, s auto.Stack) auto.UpResult {
	t.Helper()
	var out strings.Builder
	res, err := s.Up(context.Background(), optup.ProgressStreams(&out))
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out.String())
	}
	return res
}

// Destroy runs `pulumi destroy` and fails the test if it fails.
func Destroy(t *testing.T, s auto.Stack) {
	t.Helper()
	var out strings.Builder
	if _, err := s.Destroy(context.Background(), optdestroy.ProgressStreams(&out)); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out.String())
	}
}
