package admission

import (
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/crdschema"
)

// Deriving a probe (WebhookReady without `probe`, HelmReleaseReady, which has no probe for each
// of a release's webhooks): a minimal object of a kind the API server serves that a webhook's
// rules cover. Wildcard rules (istiod's validator: resources ["*"] of its groups; Kyverno's:
// apiGroups ["*"], resources ["*/*"]) are resolved against discovery, so they are probed like any
// other: a webhook is never taken as serving on its caBundle and endpoints alone.

// ServedKind is a resource the API server serves, as discovery lists it.
type ServedKind struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
	Preferred  bool // the group's preferred version
}

// bareValid are core kinds that schema validation accepts with no spec at all.
var bareValid = map[schema.GroupKind]bool{{Kind: "ConfigMap"}: true, {Kind: "ServiceAccount"}: true}

// probeKindRank orders candidate kinds: those with a minimal spec the gate knows (probeSpecs),
// then core kinds valid without one, then namespaced kinds (custom resources), then
// cluster-scoped ones (core first); Secrets last (their answers are never quoted).
func probeKindRank(k ServedKind) int {
	gk := schema.GroupKind{Group: k.GVR.Group, Kind: k.Kind}
	switch {
	case gk == schema.GroupKind{Kind: "Secret"}:
		return 5
	case probeSpecs[gk] != nil:
		return 0
	case bareValid[gk]:
		return 1
	case k.Namespaced:
		return 2
	case k.GVR.Group == "":
		return 3
	}
	return 4
}

// ruleCovers says whether rule r sends a CREATE of k to its webhook (anyOp: any operation, and a
// subresource counts as its resource: the dry-run does not reach such a webhook, but the direct
// AdmissionReview the gate then sends it does). listed is the index of the rule's entry naming
// k's resource exactly, or len(resources) for a wildcard match.
func ruleCovers(r admissionregistrationv1.RuleWithOperations, k ServedKind, anyOp bool) (ok bool, listed int) {
	q := Request{GVR: k.GVR}
	if k.Namespaced {
		q.Namespace = "probe"
	}
	if (!anyOp && !ruleOperation(r, admissionregistrationv1.Create)) || !ruleScope(r, q) ||
		!exactOrWildcard(r.APIGroups, k.GVR.Group) || !exactOrWildcard(r.APIVersions, k.GVR.Version) {
		return false, 0
	}
	listed = len(r.Resources)
	for i, res := range r.Resources {
		name, sub, _ := strings.Cut(res, "/")
		if !anyOp && sub != "" && sub != "*" {
			continue
		}
		if name == k.GVR.Resource {
			return true, i
		}
		if name == "*" {
			ok = true
		}
	}
	return ok, listed
}

// PickProbeKind chooses the kind to derive a probe from for hooks: the first webhook, in order,
// with a rule covering a served kind; among the kinds its rules cover, the best ranked (a kind
// the rule names before a wildcard match, then probeKindRank, the rule's order, the preferred
// version, the name). Rules that send CREATE are tried first; failing those, any rule (the direct call then
// proves its webhook). ok is false when no rule covers any served kind.
func PickProbeKind(hooks []*Hook, served []ServedKind) (best ServedKind, ok bool) {
	type score struct{ wildcard, rank, rule, listed, version int }
	less := func(a, b score) bool {
		return slices.Compare([]int{a.wildcard, a.rank, a.rule, a.listed, a.version}, []int{b.wildcard, b.rank, b.rule, b.listed, b.version}) < 0
	}
	for _, anyOp := range []bool{false, true} {
		for _, h := range hooks {
			var bestScore score
			for ri, r := range h.Match.Rules {
				for _, k := range served {
					covers, listed := ruleCovers(r, k, anyOp)
					if !covers {
						continue
					}
					s := score{rank: probeKindRank(k), rule: ri, listed: listed}
					if listed == len(r.Resources) {
						s.wildcard = 1
					}
					if !k.Preferred {
						s.version = 1
					}
					if !ok || less(s, bestScore) || (s == bestScore && GVRString(k.GVR) < GVRString(best.GVR)) {
						best, bestScore, ok = k, s, true
					}
				}
			}
			if ok {
				return best, true
			}
		}
	}
	return ServedKind{}, false
}

// ProbeObject is the minimal object of kind k that a derived probe dry-run creates, named by
// generateName, in namespace ns when k is namespaced. A kind without a spec of probeSpecs gets
// the least content its schema (a CRD version's openAPIV3Schema; nil when not known) requires:
// schema validation answers Invalid before any webhook runs, so a custom kind with required
// fields (cert-manager's CertificateRequest: spec.request, spec.issuerRef) needs them.
func ProbeObject(k ServedKind, ns string, schemaOfKind map[string]any) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	if spec := probeSpecs[schema.GroupKind{Group: k.GVR.Group, Kind: k.Kind}]; spec != nil {
		obj.Object = spec()
	} else if schemaOfKind != nil {
		obj.Object = crdschema.MinimalObject(schemaOfKind)
	}
	obj.SetGroupVersionKind(k.GVR.GroupVersion().WithKind(k.Kind))
	obj.SetGenerateName("readiness-probe-")
	if k.Namespaced {
		obj.SetNamespace(ns)
	}
	return obj
}

// HasProbeSpec says whether k's derived probe has a spec of its own (probeSpecs), so needs no
// schema.
func HasProbeSpec(k ServedKind) bool {
	return probeSpecs[schema.GroupKind{Group: k.GVR.Group, Kind: k.Kind}] != nil
}

// probeSpecs give derived probes of core kinds the minimal content schema validation needs, so
// the probe reaches validating webhooks (Invalid is answered before they run) and mutating ones
// (Istio's and Linkerd's injectors intercept Pods) get an object they can work on. The image
// name is never pulled: a dry run schedules nothing.
var probeSpecs = map[schema.GroupKind]func() map[string]any{
	{Kind: "Pod"}: func() map[string]any { return map[string]any{"spec": probePodSpec("")} },
	{Kind: "Service"}: func() map[string]any {
		return map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80)}}}}
	},
	{Kind: "PersistentVolumeClaim"}:      func() map[string]any { return map[string]any{"spec": probePVCSpec()} },
	{Group: "apps", Kind: "Deployment"}:  probeWorkload,
	{Group: "apps", Kind: "ReplicaSet"}:  probeWorkload,
	{Group: "apps", Kind: "StatefulSet"}: probeWorkload,
	{Group: "apps", Kind: "DaemonSet"}:   probeWorkload,
	{Group: "batch", Kind: "Job"}: func() map[string]any {
		return map[string]any{"spec": map[string]any{"template": probeTemplate("Never")}}
	},
	{Group: "batch", Kind: "CronJob"}: func() map[string]any {
		return map[string]any{"spec": map[string]any{"schedule": "0 0 1 1 *",
			"jobTemplate": map[string]any{"spec": map[string]any{"template": probeTemplate("Never")}}}}
	},
	{Group: "networking.k8s.io", Kind: "Ingress"}: func() map[string]any {
		return map[string]any{"spec": map[string]any{"defaultBackend": map[string]any{"service": map[string]any{
			"name": "readiness-probe", "port": map[string]any{"number": int64(80)}}}}}
	},
}

func probeLabels() map[string]any { return map[string]any{"app.kubernetes.io/name": "readiness-probe"} }

func probePodSpec(restartPolicy string) map[string]any {
	spec := map[string]any{"containers": []any{map[string]any{"name": "probe", "image": "readiness.invalid/probe"}}}
	if restartPolicy != "" {
		spec["restartPolicy"] = restartPolicy
	}
	return spec
}

func probeTemplate(restartPolicy string) map[string]any {
	return map[string]any{"metadata": map[string]any{"labels": probeLabels()}, "spec": probePodSpec(restartPolicy)}
}

func probeWorkload() map[string]any {
	return map[string]any{"spec": map[string]any{"selector": map[string]any{"matchLabels": probeLabels()}, "template": probeTemplate("")}}
}

func probePVCSpec() map[string]any {
	return map[string]any{"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": "1Mi"}}}
}
