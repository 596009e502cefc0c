package status

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func slices(t *testing.T, docs string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, d := range strings.Split(docs, "\n---\n") {
		out = append(out, fromYAML(t, d))
	}
	return out
}

func TestReadyEndpointsPerPodAndServicePort(t *testing.T) {
	// ingress-nginx's admission Service {name: https-webhook, port: 443, targetPort: webhook}:
	// the EndpointSlice port carries the Service port's name and the container port's number.
	const nginx = `
addressType: IPv4
ports: [{name: https-webhook, port: 8443, protocol: TCP}]
endpoints:
- addresses: [10.244.0.7]
  conditions: {ready: true}
  targetRef: {kind: Pod, namespace: ingress-nginx, name: controller-abc}`
	// A dual-stack pod: one IPv4 and one IPv6 slice, the same pod in both.
	const dualStack = `
addressType: IPv4
ports: [{name: https, port: 9443}]
endpoints:
- addresses: [10.244.0.8]
  conditions: {ready: true}
  targetRef: {kind: Pod, namespace: ns, name: web-0}
---
addressType: IPv6
ports: [{name: https, port: 9443}]
endpoints:
- addresses: ["fd00::8"]
  conditions: {ready: true}
  targetRef: {kind: Pod, namespace: ns, name: web-0}`
	for name, tc := range map[string]struct {
		docs, port string
		want       int
	}{
		"matched by the Service port's name":                  {nginx, "https-webhook", 1},
		"near miss: the named targetPort is not in the slice": {nginx, "webhook", 0},
		"matched by the resolved container port number":       {nginx, "8443", 1},
		"any port": {nginx, "", 1},
		"dual-stack pod in two slices counts once":                                 {dualStack, "https", 1},
		"one endpoint listing two addresses counts once":                           {`ports: [{name: https, port: 9443}]` + "\n" + `endpoints: [{addresses: [10.0.0.1, "fd00::1"], conditions: {ready: true}, targetRef: {kind: Pod, namespace: ns, name: a}}]`, "https", 1},
		"two pods count twice":                                                     {`endpoints: [{addresses: [10.0.0.1], targetRef: {kind: Pod, namespace: ns, name: a}}, {addresses: [10.0.0.2], targetRef: {kind: Pod, namespace: ns, name: b}}]`, "", 2},
		"no targetRef: counted by address":                                         {`endpoints: [{addresses: [10.0.0.1]}, {addresses: [10.0.0.2]}, {addresses: [10.0.0.1]}]`, "", 2},
		"near miss: not ready":                                                     {`endpoints: [{addresses: [10.0.0.1], conditions: {ready: false}, targetRef: {kind: Pod, namespace: ns, name: a}}]`, "", 0},
		"near miss: terminating":                                                   {`endpoints: [{addresses: [10.0.0.1], conditions: {ready: true, terminating: true}, targetRef: {kind: Pod, namespace: ns, name: a}}]`, "", 0},
		"near miss: publishNotReadyAddresses (ready forced true, pod not serving)": {`endpoints: [{addresses: [10.0.0.1], conditions: {ready: true, serving: false, terminating: false}, targetRef: {kind: Pod, namespace: ns, name: vault-0}}]`, "", 0},
		"publishNotReadyAddresses, pod serving":                                    {`endpoints: [{addresses: [10.0.0.1], conditions: {ready: true, serving: true, terminating: false}, targetRef: {kind: Pod, namespace: ns, name: vault-0}}]`, "", 1},
		"near miss: serving but terminating":                                       {`endpoints: [{addresses: [10.0.0.1], conditions: {ready: false, serving: true, terminating: true}, targetRef: {kind: Pod, namespace: ns, name: a}}]`, "", 0},
		"unset ready condition means ready":                                        {`endpoints: [{addresses: [10.0.0.1], targetRef: {kind: Pod, namespace: ns, name: a}}]`, "", 1},
		"near miss: another port's slice":                                          {`ports: [{name: metrics, port: 9090}]` + "\n" + `endpoints: [{addresses: [10.0.0.1]}]`, "https", 0},
		"near miss: a ready pod in the IPv6 slice of another port":                 {dualStack + "\n---\nports: [{name: metrics, port: 9090}]\nendpoints: [{addresses: [10.0.0.9], targetRef: {kind: Pod, namespace: ns, name: web-9}}]", "https", 1},
	} {
		t.Run(name, func(t *testing.T) {
			if got, ports := ReadyEndpoints(slices(t, tc.docs), tc.port); got != tc.want {
				t.Errorf("ReadyEndpoints(port %q) = %d, want %d (ports %v)", tc.port, got, tc.want, ports)
			}
		})
	}
}
