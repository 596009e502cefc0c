package provider

import (
	"fmt"
	"strings"
	"testing"

	p "github.com/pulumi/pulumi-go-provider"
	presource "github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"sigs.k8s.io/yaml"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// BenchmarkAutoGatePlanClusterWebhook200 is the cost of the cluster rule (issue 47) at 200
// objects: one autoGatePlanBatch of 200 Widgets in one namespace that a webhook configuration
// outside the stack intercepts, against the same batch with no webhook intercepting them. Each
// iteration is a fresh provider (its own memo): one listing of the configurations and one dry
// run for the batch key. Reported: the batch's wall time, and the webhook's calls per batch.
//
//	go test -run '^$' -bench AutoGatePlanClusterWebhook200 -benchtime 10x ./provider
func BenchmarkAutoGatePlanClusterWebhook200(b *testing.B) {
	group := uniqueGroup(b)
	testenv.Apply(b, testenv.CRD(group, "Widget", "widgets"))
	waitServed(b, group)
	var items []string
	for i := range 200 {
		items = append(items, fmt.Sprintf(`{resource: {type: "kubernetes:%[1]s/v1:Widget", name: w%[2]d, object: {apiVersion: %[1]s/v1, kind: Widget, metadata: {name: w%[2]d, namespace: default}, spec: {size: 1}}}}`, group, i))
	}
	args := "{plans: [" + strings.Join(items, ", ") + "]}"
	batch := func(b *testing.B) int {
		s := newServer(b)
		var m map[string]any
		if err := yaml.Unmarshal([]byte(args), &m); err != nil {
			b.Fatal(err)
		}
		resp, err := s.Invoke(p.InvokeRequest{Token: "readiness:index:autoGatePlanBatch",
			Args: presource.FromResourcePropertyMap(presource.NewPropertyMapFromMap(m))})
		if err != nil || len(resp.Failures) > 0 {
			b.Fatal(err, resp.Failures)
		}
		gates, _ := presource.ToResourcePropertyMap(resp.Return).Mappable()["gates"].([]any)
		return len(gates)
	}
	b.Run("no webhook intercepts", func(b *testing.B) {
		for b.Loop() {
			if n := batch(b); n != 0 {
				b.Fatalf("%d gates", n)
			}
		}
	})
	wh := testenv.NewWebhook(b)
	wh.Register(b, "bench-"+strings.Split(group, ".")[0], group)
	b.Run("cluster webhook down", func(b *testing.B) {
		for b.Loop() {
			if n := batch(b); n != 1 {
				b.Fatalf("%d gates, want 1", n)
			}
		}
	})
	wh.Start(b)
	b.Run("cluster webhook answers", func(b *testing.B) {
		before := wh.Calls.Load()
		for b.Loop() {
			if n := batch(b); n != 0 {
				b.Fatalf("%d gates, want none", n)
			}
		}
		b.ReportMetric(float64(wh.Calls.Load()-before)/float64(b.N), "webhook-calls/batch")
	})
}
