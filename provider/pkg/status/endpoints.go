package status

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/jsonvalue"
)

// ReadyEndpoints counts the distinct serving endpoints in a Service's EndpointSlices, restricted
// to slices that expose port (a port name or number; "" for any). An endpoint is counted once
// per pod (its targetRef), not per address: a dual-stack pod appears in an IPv4 and an IPv6
// slice, or lists two addresses, and is still one endpoint. Endpoints without a targetRef
// (hand-written Endpoints of a selector-less Service) count once per address set. It returns
// the ports the slices expose as "name:port/protocol".
func ReadyEndpoints(slices []*unstructured.Unstructured, port string) (int, []string) {
	ready := map[string]bool{}
	portSet := map[string]bool{}
	for _, s := range slices {
		ports, _, _ := unstructured.NestedSlice(s.Object, "ports")
		matches := port == ""
		for _, p := range ports {
			pm, _ := p.(map[string]any)
			name := str(pm["name"])
			num := jsonvalue.Int64(pm["port"])
			proto := str(pm["protocol"])
			if proto == "" {
				proto = "TCP"
			}
			portSet[fmt.Sprintf("%s:%d/%s", name, num, proto)] = true
			if port != "" && (name == port || strconv.FormatInt(num, 10) == port) {
				matches = true
			}
		}
		if !matches {
			continue
		}
		eps, _, _ := unstructured.NestedSlice(s.Object, "endpoints")
		for _, e := range eps {
			em, _ := e.(map[string]any)
			if !endpointServing(em) {
				continue
			}
			if key := endpointKey(em); key != "" {
				ready[key] = true
			}
		}
	}
	ports := make([]string, 0, len(portSet))
	for p := range portSet {
		ports = append(ports, p)
	}
	sort.Strings(ports)
	return len(ready), ports
}

// endpointServing reports whether an EndpointSlice endpoint stands for a backend that answers:
// serving and not terminating. `serving` is the pod's own readiness; `ready` is not enough, for
// the EndpointSlice controller sets ready=true for every pod of a Service with
// publishNotReadyAddresses (Vault's and most StatefulSet charts' headless Services) whatever the
// pod's state. Unset conditions mean ready (EndpointSlice API semantics): serving falls back to
// ready for writers that predate it.
func endpointServing(em map[string]any) bool {
	cond, _ := em["conditions"].(map[string]any)
	if t, ok := cond["terminating"].(bool); ok && t {
		return false
	}
	if s, ok := cond["serving"].(bool); ok {
		return s
	}
	r, ok := cond["ready"].(bool)
	return !ok || r
}

// endpointKey identifies the backend behind an EndpointSlice endpoint: its targetRef (the pod)
// when set, else its addresses; "" for an endpoint with neither.
func endpointKey(em map[string]any) string {
	if ref, ok := em["targetRef"].(map[string]any); ok && str(ref["name"]) != "" {
		return "ref:" + str(ref["kind"]) + "/" + str(ref["namespace"]) + "/" + str(ref["name"])
	}
	addrs := jsonvalue.Strings(em["addresses"])
	if len(addrs) == 0 {
		return ""
	}
	sort.Strings(addrs)
	return "addr:" + strings.Join(addrs, ",")
}
