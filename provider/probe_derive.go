package provider

import (
	"fmt"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/restmapper"
)

// Deriving a probe (HelmReleaseReady, which has no `probe` for each of a release's webhooks):
// a minimal object of a kind the API server serves that a webhook's rules cover. Wildcard rules
// (istiod's validator: resources ["*"] of its groups; Kyverno's: apiGroups ["*"], resources
// ["*/*"]) are resolved against discovery, so they are probed like any other: a webhook is never
// taken as serving on its caBundle and endpoints alone.

// servedKind is a resource the API server serves, as discovery lists it.
type servedKind struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
	preferred  bool // the group's preferred version
}

// servedKinds lists the creatable top-level resources of groups (discovery's answer), the
// preferred version of each group first. Create-only resources (reviews, bindings) and the
// admission configuration kinds (never sent to webhooks) are left out.
func servedKinds(groups []*restmapper.APIGroupResources) []servedKind {
	var out []servedKind
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
				out = append(out, servedKind{gvr: schema.GroupVersionResource{Group: g.Group.Name, Version: v, Resource: r.Name},
					kind: r.Kind, namespaced: r.Namespaced, preferred: v == g.Group.PreferredVersion.Version})
			}
		}
	}
	return out
}

// bareValid are core kinds that schema validation accepts with no spec at all.
var bareValid = map[schema.GroupKind]bool{{Kind: "ConfigMap"}: true, {Kind: "ServiceAccount"}: true}

// probeKindRank orders candidate kinds: those with a minimal spec the gate knows (probeSpecs),
// then core kinds valid without one, then namespaced kinds (custom resources), then
// cluster-scoped ones (core first); Secrets last (their answers are never quoted).
func probeKindRank(k servedKind) int {
	gk := schema.GroupKind{Group: k.gvr.Group, Kind: k.kind}
	switch {
	case gk == schema.GroupKind{Kind: "Secret"}:
		return 5
	case probeSpecs[gk] != nil:
		return 0
	case bareValid[gk]:
		return 1
	case k.namespaced:
		return 2
	case k.gvr.Group == "":
		return 3
	}
	return 4
}

// ruleCovers says whether rule r sends a CREATE of k to its webhook (anyOp: any operation, and a
// subresource counts as its resource: the dry-run does not reach such a webhook, but the direct
// AdmissionReview the gate then sends it does). listed is the index of the rule's entry naming
// k's resource exactly, or len(resources) for a wildcard match.
func ruleCovers(r admissionregistrationv1.RuleWithOperations, k servedKind, anyOp bool) (ok bool, listed int) {
	q := probeRequest{gvr: k.gvr}
	if k.namespaced {
		q.namespace = "probe"
	}
	if (!anyOp && !ruleOperation(r, admissionregistrationv1.Create)) || !ruleScope(r, q) ||
		!exactOrWildcard(r.APIGroups, k.gvr.Group) || !exactOrWildcard(r.APIVersions, k.gvr.Version) {
		return false, 0
	}
	listed = len(r.Resources)
	for i, res := range r.Resources {
		name, sub, _ := strings.Cut(res, "/")
		if !anyOp && sub != "" && sub != "*" {
			continue
		}
		if name == k.gvr.Resource {
			return true, i
		}
		if name == "*" {
			ok = true
		}
	}
	return ok, listed
}

// pickProbeKind chooses the kind to derive a probe from for hooks: the first webhook, in order,
// with a rule covering a served kind; among the kinds its rules cover, the best ranked (a kind
// the rule names before a wildcard match, then probeKindRank, the rule's order, the preferred
// version, the name). Rules that send CREATE are tried first; failing those, any rule (the direct call then
// proves its webhook). ok is false when no rule covers any served kind.
func pickProbeKind(hooks []*admissionHook, served []servedKind) (best servedKind, ok bool) {
	type score struct{ wildcard, rank, rule, listed, version int }
	less := func(a, b score) bool {
		return slices.Compare([]int{a.wildcard, a.rank, a.rule, a.listed, a.version}, []int{b.wildcard, b.rank, b.rule, b.listed, b.version}) < 0
	}
	for _, anyOp := range []bool{false, true} {
		for _, h := range hooks {
			var bestScore score
			for ri, r := range h.match.Rules {
				for _, k := range served {
					covers, listed := ruleCovers(r, k, anyOp)
					if !covers {
						continue
					}
					s := score{rank: probeKindRank(k), rule: ri, listed: listed}
					if listed == len(r.Resources) {
						s.wildcard = 1
					}
					if !k.preferred {
						s.version = 1
					}
					if !ok || less(s, bestScore) || (s == bestScore && gvrString(k.gvr) < gvrString(best.gvr)) {
						best, bestScore, ok = k, s, true
					}
				}
			}
			if ok {
				return best, true
			}
		}
	}
	return servedKind{}, false
}

// rediscoverEvery bounds how often a gate that finds no served kind for a webhook's rules asks
// the API server's discovery again (a CRD of the same release may not be served yet).
const rediscoverEvery = 2 * time.Second

// deriveProbe builds a minimal object that one of hooks' rules intercepts (see pickProbeKind),
// in namespace ns when the kind is namespaced. Without one, why says so.
func (e *webhookEval) deriveProbe(hooks []*admissionHook, ns string) (obj *unstructured.Unstructured, why string) {
	groups, err := restmapper.GetAPIGroupResources(e.r.clients.Discovery)
	if err != nil && len(groups) == 0 {
		return nil, "reading the API server's discovery to derive a probe from the webhooks' rules: " + err.Error()
	}
	k, ok := pickProbeKind(hooks, servedKinds(groups))
	if !ok {
		if time.Since(e.rediscovered) > rediscoverEvery {
			e.rediscovered = time.Now()
			e.r.clients.Mapper.Reset() // a kind installed since is served on the next try
		}
		var rules []string
		for _, h := range hooks {
			rules = append(rules, fmt.Sprintf("%s: %s", h.name, rulesString(h.match.Rules)))
		}
		return nil, fmt.Sprintf("no kind the API server serves matches the webhooks' rules (%s), so no probe can be derived "+
			"to show they answer", strings.Join(rules, "; "))
	}
	obj = &unstructured.Unstructured{Object: map[string]any{}}
	if spec := probeSpecs[schema.GroupKind{Group: k.gvr.Group, Kind: k.kind}]; spec != nil {
		obj.Object = spec()
	}
	obj.SetGroupVersionKind(k.gvr.GroupVersion().WithKind(k.kind))
	obj.SetGenerateName("readiness-probe-")
	if k.namespaced {
		obj.SetNamespace(ns)
	}
	return obj, ""
}
