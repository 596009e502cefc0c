package realnode

import (
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/readiness-io/pulumi-readiness/internal/reportstack"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// releaseReport is a field report whose objects follow a Helm release that does not wait for
// its webhook (reports 001 and 002): without a gate the stack fails with the webhook's error;
// a hand-placed HelmReleaseReady on the release, and autoGate's one line in the gate-free
// program, make it pass.
type releaseReport struct {
	name string // the stacks' name prefix
	// The release (its name and namespace, for the hand-placed gate), how the program makes it
	// and what follows it.
	release, namespace string
	install            func(*pulumi.Context) (*stack.HelmRelease, error)
	objects            func(*pulumi.Context, ...pulumi.Resource) error
	// failure is the error the gate-free run must meet.
	failure string
	// checkGated checks a gated run's stack (mode "gate" or "autogate") after its up.
	checkGated func(t *testing.T, mode string, s auto.Stack)
	// destroy brings a run's stack down (stacktest.Destroy when nil).
	destroy func(t *testing.T, s auto.Stack)
}

// program is the report's program in mode "none", "gate" or "autogate".
func (r releaseReport) program(mode string) pulumi.RunFunc {
	return func(ctx *pulumi.Context) error {
		if mode == "autogate" {
			if err := readiness.AutoGate(ctx, &readiness.AutoGateOptions{Timeout: "4m"}); err != nil {
				return err
			}
		}
		release, err := r.install(ctx)
		if err != nil {
			return err
		}
		var before pulumi.Resource = release
		if mode == "gate" {
			if before, err = readiness.NewHelmReleaseReady(ctx, r.release+"-ready", &readiness.HelmReleaseReadyArgs{
				Name: pulumi.String(r.release), Namespace: pulumi.String(r.namespace),
				Timeout: pulumi.String("4m"), Triggers: pulumi.Array{release.Revision()},
			}, reportstack.After(release)); err != nil {
				return err
			}
		}
		return r.objects(ctx, before)
	}
}

// run brings the three programs up in turn, each on a cluster given back between them.
func (r releaseReport) run(t *testing.T, env *stack.Env) {
	destroy := func(s auto.Stack) {
		if r.destroy != nil {
			r.destroy(t, s)
			return
		}
		stacktest.Destroy(t, s)
		testenv.PodsGone(t, r.namespace) // as a rebuilt cluster starts
	}
	s := stacktest.NewStack(t, env, r.name, r.program("none"))
	began := time.Now()
	_, err := stacktest.UpErr(s)
	t.Logf("without a gate: up returned after %s", time.Since(began).Round(time.Millisecond))
	stacktest.RequireFailure(t, err, r.failure)
	t.Logf("the real webhook's error: %s", firstLine(err.Error(), "failed calling webhook"))
	destroy(s)

	for _, mode := range []string{"gate", "autogate"} {
		g := stacktest.NewStack(t, env, r.name+mode, r.program(mode))
		began := time.Now()
		stacktest.Up(t, g)
		t.Logf("%s: up in %s", mode, time.Since(began).Round(time.Millisecond))
		r.checkGated(t, mode, g)
		if mode == "autogate" {
			if gates := stacktest.GatesOf(t, g); len(gates) == 0 {
				t.Fatal("autoGate placed no gate")
			} else {
				t.Logf("autoGate's gates: %v", gates)
			}
		}
		destroy(g)
	}
}
