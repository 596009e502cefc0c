package provider

import (
	"strings"
	"testing"

	p "github.com/pulumi/pulumi-go-provider"
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

// TestImportIsRefusedWithAnExplanation: `pulumi import` reads with an ID and nothing else. Every
// gate refuses, without calling the cluster, and says what to do instead.
func TestImportIsRefusedWithAnExplanation(t *testing.T) {
	s := newUnconfiguredServer(t) // no cluster at all: the answer must not depend on one
	for _, typ := range []string{"CrdReady", "ResourceReady", "RolloutReady", "ServiceReady", "ExternalSecretReady",
		"NodesReady", "SecretReady", "CertificateReady", "WebhookReady", "HttpReady", "HelmReleaseReady", "ChartReady"} {
		_, err := s.Read(p.ReadRequest{ID: "cert-manager/web", Urn: urn(typ)})
		if err == nil || !strings.Contains(err.Error(), "cannot be imported") || !strings.Contains(err.Error(), "Declare the gate") {
			t.Errorf("%s: import: want a refusal that says what to do, got %v", typ, err)
		}
	}
}
