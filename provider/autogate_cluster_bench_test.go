package provider

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	presource "github.com/pulumi/pulumi/sdk/v3/go/common/resource"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// BenchmarkAutoGatePlanClusterWebhook200 is the cost of the cluster rule (issue 47) at 200
// objects: 200 Widgets in one namespace that a webhook configuration outside the stack
// intercepts, decided at once (200 concurrent autoGateDecide calls of one session, as an SDK
// sends them), against the same with no webhook intercepting them. Each iteration is a fresh
// provider (its own memo): one listing of the configurations and one dry run for the batch key.
// Reported: the 200 decisions' wall time, and the webhook's calls per 200.
//
//	go test -run '^$' -bench AutoGatePlanClusterWebhook200 -benchtime 10x ./provider
func BenchmarkAutoGatePlanClusterWebhook200(b *testing.B) {
	group := uniqueGroup(b)
	testenv.Apply(b, testenv.CRD(group, "Widget", "widgets"))
	waitServed(b, group)
	decideAll := func(b *testing.B) int {
		s := newServer(b)
		session := fmt.Sprint("bench-", time.Now().UnixNano())
		var mu sync.Mutex
		keys := map[string]bool{}
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				typ := "kubernetes:" + group + "/v1:Widget"
				call := map[string]any{"session": session, "clusters": []any{map[string]any{"id": "", "planner": true}},
					"entries": []any{map[string]any{"order": i, "type": typ, "name": fmt.Sprint("w", i)}},
					"registration": map[string]any{"id": fmt.Sprint("urn:pulumi:b::b::", typ, "::w", i), "type": typ, "name": fmt.Sprint("w", i), "order": i,
						"object": map[string]any{"apiVersion": group + "/v1", "kind": "Widget",
							"metadata": map[string]any{"name": fmt.Sprint("w", i), "namespace": "default"}, "spec": map[string]any{"size": 1}}}}
				resp, err := s.Invoke(p.InvokeRequest{Token: "readiness:index:autoGateDecide",
					Args: presource.FromResourcePropertyMap(presource.NewPropertyMapFromMap(call))})
				if err != nil || len(resp.Failures) > 0 {
					b.Error(err, resp.Failures)
					return
				}
				gates, _ := presource.ToResourcePropertyMap(resp.Return).Mappable()["gates"].([]any)
				mu.Lock()
				for _, g := range gates {
					keys[g.(map[string]any)["key"].(string)] = true
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
		return len(keys)
	}
	b.Run("no webhook intercepts", func(b *testing.B) {
		for b.Loop() {
			if n := decideAll(b); n != 0 {
				b.Fatalf("%d gates", n)
			}
		}
	})
	wh := testenv.NewWebhook(b)
	wh.Register(b, "bench-"+strings.Split(group, ".")[0], group)
	b.Run("cluster webhook down", func(b *testing.B) {
		for b.Loop() {
			if n := decideAll(b); n != 1 {
				b.Fatalf("%d gates, want 1", n)
			}
		}
	})
	wh.Start(b)
	b.Run("cluster webhook answers", func(b *testing.B) {
		before := wh.Calls.Load()
		for b.Loop() {
			if n := decideAll(b); n != 0 {
				b.Fatalf("%d gates, want none", n)
			}
		}
		b.ReportMetric(float64(wh.Calls.Load()-before)/float64(b.N), "webhook-calls/batch")
	})
}
