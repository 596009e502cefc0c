// Package e2e runs Pulumi stacks (Automation API inline programs, the built Pulumi CLI, the
// provider binary, a local file backend) against the local control plane.
package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

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

// newStack selects a stack of the inline program on the local control plane, destroyed (and
// removed) when the test ends.
func newStack(t *testing.T, env *stack.Env, project string, program pulumi.RunFunc) auto.Stack {
	t.Helper()
	s, err := env.Stack(context.Background(), project, "dev", string(testenv.CP.Kubeconfig), program)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = s.Destroy(context.Background(), optdestroy.Remove()) })
	return s
}

// up runs `pulumi up`, failing the test with the engine's output if it fails; it returns the
// result and that output (the rows `pulumi up` showed).
func up(t *testing.T, s auto.Stack) (auto.UpResult, string) {
	t.Helper()
	var out strings.Builder
	res, err := s.Up(context.Background(), optup.ProgressStreams(&out))
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out.String())
	}
	return res, out.String()
}

// sleepToSecond sleeps d, then to the next whole second: an event right after it can be
// compared with the API server's whole-second creationTimestamp with no second of slack.
func sleepToSecond(d time.Duration) {
	time.Sleep(d)
	now := time.Now()
	time.Sleep(now.Truncate(time.Second).Add(time.Second).Sub(now))
}

// createdBefore reports whether an object whose creationTimestamp (whole seconds) is created was
// created before at, an instant just after a whole second (sleepToSecond).
func createdBefore(created, at time.Time) bool {
	return created.Before(at.Truncate(time.Second))
}

// outputTime reads a stack output holding an RFC 3339 time (an object's creationTimestamp).
func outputTime(t *testing.T, res auto.UpResult, key string) time.Time {
	t.Helper()
	v, _ := res.Outputs[key].Value.(string)
	at, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		t.Fatalf("output %s: %v", key, err)
	}
	return at
}
