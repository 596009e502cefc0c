package provider

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/restmapper"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
)

// Deriving a probe from a webhook's rules (see admission.PickProbeKind): discovery is read here,
// the kind is picked in pkg/admission.

// servedKinds lists the creatable top-level resources of groups (discovery's answer), the
// preferred version of each group first. Create-only resources (reviews, bindings) and the
// admission configuration kinds (never sent to webhooks) are left out.
func servedKinds(groups []*restmapper.APIGroupResources) []admission.ServedKind {
	var out []admission.ServedKind
	for _, g := range groups {
		if g.Group.Name == "admissionregistration.k8s.io" {
			continue
		}
		versions := []string{g.Group.PreferredVersion.Version}
		for _, v := range g.Group.Versions {
			if v.Version != g.Group.PreferredVersion.Version {
				versions = append(versions, v.Version)
			}
		}
		for _, v := range versions {
			for _, r := range g.VersionedResources[v] {
				if strings.Contains(r.Name, "/") || r.Kind == "" || !slices.Contains(r.Verbs, "create") || !slices.Contains(r.Verbs, "get") {
					continue
				}
				out = append(out, admission.ServedKind{GVR: schema.GroupVersionResource{Group: g.Group.Name, Version: v, Resource: r.Name},
					Kind: r.Kind, Namespaced: r.Namespaced, Preferred: v == g.Group.PreferredVersion.Version})
			}
		}
	}
	return out
}

// rediscoverEvery bounds how often a gate that finds no served kind for a webhook's rules asks
// the API server's discovery again (a CRD of the same release may not be served yet).
const rediscoverEvery = 2 * time.Second

// deriveProbe builds a minimal object that one of hooks' rules intercepts (see admission.PickProbeKind),
// in namespace ns when the kind is namespaced. Without one, why says so.
func (e *webhookEval) deriveProbe(hooks []*admission.Hook, ns string) (obj *unstructured.Unstructured, why string) {
	groups, err := restmapper.GetAPIGroupResources(e.r.clients.Discovery)
	if err != nil && len(groups) == 0 {
		return nil, "reading the API server's discovery to derive a probe from the webhooks' rules: " + err.Error()
	}
	k, ok := admission.PickProbeKind(hooks, servedKinds(groups))
	if !ok {
		if time.Since(e.rediscovered) > rediscoverEvery {
			e.rediscovered = time.Now()
			e.r.clients.Mapper.Reset() // a kind installed since is served on the next try
		}
		var rules []string
		for _, h := range hooks {
			rules = append(rules, fmt.Sprintf("%s: %s", h.Name, admission.RulesString(h.Match.Rules)))
		}
		return nil, fmt.Sprintf("no kind the API server serves matches the webhooks' rules (%s), so no probe can be derived "+
			"to show they answer", strings.Join(rules, "; "))
	}
	return admission.ProbeObject(k, ns), ""
}
