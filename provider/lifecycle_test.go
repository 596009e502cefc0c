package provider

import (
	"testing"

	"github.com/pulumi/pulumi-go-provider/integration"
	"github.com/pulumi/pulumi/sdk/v3/go/property"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// TestCrdReadyLifecycle drives check, preview, create, update (a timeout change, in place) and
// delete through the provider's gRPC surface against the real API server.
func TestCrdReadyLifecycle(t *testing.T) {
	group := uniqueGroup(t)
	testenv.Apply(t, testenv.CRD(group, "Widget", "widgets"))
	names := strs("widgets." + group)
	integration.LifeCycleTest{
		Resource: urn("CrdReady").Type(),
		Create: integration.Operation{
			Inputs: property.NewMap(map[string]property.Value{"names": names, "timeout": property.New("60s")}),
			Hook: func(_, out property.Map) {
				if got := outStrings(t, out, "kinds"); len(got) != 1 || got[0] != "Widget" {
					t.Errorf("kinds after create = %v", got)
				}
			},
		},
		Updates: []integration.Operation{{
			Inputs: property.NewMap(map[string]property.Value{"names": names, "timeout": property.New("5m")}),
			Hook: func(_, out property.Map) {
				if got := out.Get("timeout").AsString(); got != "5m" {
					t.Errorf("timeout after update = %q", got)
				}
				if got := outStrings(t, out, "kinds"); len(got) != 1 || got[0] != "Widget" {
					t.Errorf("kinds after an in-place update = %v", got)
				}
			},
		}},
	}.Run(t, newServer(t))
}
