package stacktest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/internals"
)

// AfterGates is a stack transform for the test's fault: the registration of name (registered
// after the program's autoGate or gates, so it sees the gates autoGate added) waits until every readiness
// gate it depends on passed (the engine answers getResource for it once its step finished), then
// fault runs, and only then the engine goes on to create it. The fault lands at a point the test
// chooses: after the gate's proof, before the create.
func AfterGates(t *testing.T, ctx *pulumi.Context, name string, fault func()) pulumi.ResourceTransform {
	return func(c context.Context, args *pulumi.ResourceTransformArgs) *pulumi.ResourceTransformResult {
		if args.Name != name {
			return nil
		}
		var gates []string
		for _, d := range args.Opts.DependsOn {
			r, err := internals.UnsafeAwaitOutput(c, d.URN())
			if u, _ := r.Value.(pulumi.URN); err == nil && strings.HasPrefix(string(resource.URN(u).Type()), "readiness:") {
				gates = append(gates, string(u))
			}
		}
		if len(gates) == 0 {
			t.Errorf("%s depends on no readiness gate: the fault would not land after one", name)
			return nil
		}
		for _, u := range gates {
			for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
				var got map[string]any
				_, err := ctx.InvokePackageRaw("pulumi:pulumi:getResource", map[string]any{"urn": u}, &got, "")
				if err == nil {
					break
				}
				if !strings.Contains(err.Error(), "unknown resource") || time.Now().After(deadline) {
					t.Errorf("waiting for gate %s: %v", u, err)
					return nil
				}
			}
		}
		fault()
		return nil
	}
}
