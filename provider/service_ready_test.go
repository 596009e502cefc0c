package provider

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// TestServiceReadyCountsServingEndpoints (item 2): with publishNotReadyAddresses the real
// EndpointSlice controller lists a not-ready pod as ready=true, serving=false. ServiceReady
// must not count it (it did); a pod that is Ready is counted.
func TestServiceReadyCountsServingEndpoints(t *testing.T) {
	ns := testenv.Namespace(t, "pnra")
	testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: vault, namespace: %s}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector: {app: vault}
  ports: [{name: https, port: 8200}]`, ns))
	// Running with an IP, not Ready (its readiness probe fails): the kubelet's status, written
	// by the test on a pod no node runs.
	vault0 := testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: vault-0, namespace: %s, labels: {app: vault}}
spec:
  %s
  containers: [{name: vault, image: registry.local/vault:1, ports: [{name: https, containerPort: 8200}]}]`, ns, nowhere))[0]
	writeStatus(t, vault0, map[string]any{"phase": "Running", "podIP": "10.244.0.200", "podIPs": []any{map[string]any{"ip": "10.244.0.200"}},
		"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}}})
	pollUntil(t, "the EndpointSlice lists vault-0 as ready=true, serving=false", func() bool {
		l, err := testenv.CP.Client.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=vault"})
		if err != nil {
			return false
		}
		for _, sl := range l.Items {
			for _, e := range sl.Endpoints {
				c := e.Conditions
				if c.Ready != nil && *c.Ready && c.Serving != nil && !*c.Serving {
					return true
				}
			}
		}
		return false
	})
	s := newServer(t)
	mustFailWith(t, createAsync(t, s, "ServiceReady", props("name", "vault", "namespace", ns, "timeout", "3s")), "0/1 ready endpoints")
	// WebhookReady counts the webhook Service's endpoints the same way.
	svc := property.New(property.NewMap(map[string]property.Value{"namespace": property.New(ns), "name": property.New("vault"), "port": property.New(8200.0)}))
	mustFailWith(t, createAsync(t, s, "WebhookReady", props("service", svc, "timeout", "3s")), "0/1 ready endpoints")

	ch := createAsync(t, s, "ServiceReady", props("name", "vault", "namespace", ns, "timeout", "90s"))
	testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: vault-1, namespace: %s, labels: {app: vault}}
spec:
  nodeSelector: {type: kwok}
  containers: [{name: vault, image: registry.local/vault:1, ports: [{name: https, containerPort: 8200}]}]`, ns))
	r := mustPass(t, ch)
	if got := r.resp.Properties.Get("readyEndpoints").AsNumber(); got != 1 {
		t.Errorf("readyEndpoints = %v, want 1 (vault-0 is not serving)", got)
	}
	// Past the endpoints (vault-1 counted), ready endpoints are not an answer: with no webhook
	// configuration pointing at the Service, nothing can show a webhook serves, so it waits.
	mustFailWith(t, createAsync(t, s, "WebhookReady", props("service", svc, "timeout", "3s")),
		fmt.Sprintf("no webhook configuration points at Service %s/vault:8200 yet", ns))
}

func TestServiceReadyWaitsForReadyEndpoints(t *testing.T) {
	ns := testenv.Namespace(t, "svc")
	s := newServer(t)
	ch := createAsync(t, s, "ServiceReady", props("name", "web", "namespace", ns, "port", "https", "timeout", "90s"))
	testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: web, namespace: %s}
spec:
  selector: {app: web}
  ports: [{name: https, port: 443, targetPort: https}]`, ns))
	mustNotReturn(t, ch, time.Second) // a Service with no pods behind it
	testenv.Apply(t, deployment(ns, "web", "registry.local/web:1", 1))
	r := await(t, ch, 90*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := r.resp.Properties.Get("readyEndpoints").AsNumber(); got != 1 {
		t.Errorf("readyEndpoints = %v", got)
	}
}
