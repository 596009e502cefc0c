package provider

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Whether the API server calls a webhook for the probe's dry-run create, decided the way its
// admission plugin does (k8s.io/apiserver/pkg/admission/plugin/webhook: predicates/rules,
// predicates/namespace, predicates/object, generic.Webhook.ShouldCallHook). That code needs the
// apiserver module and an admission.Attributes; these few lines mirror it on what the gate has.
// matchConditions (CEL over the request) are not evaluated: a webhook that has them is never
// taken as called.

// probeRequest is what the API server matches webhooks against for the probe's dry-run create.
type probeRequest struct {
	gvr schema.GroupVersionResource
	// update: the request is an UPDATE (AdmissionReady's dry-run apply of an existing object),
	// not a CREATE.
	update bool
	// equivalents are the same group and resource at the other versions the API server serves
	// (matchPolicy Equivalent: the API server converts the request for a rule naming one).
	equivalents []schema.GroupVersionResource
	namespace   string            // "" for a cluster-scoped probe
	labels      map[string]string // the probe's labels
	// nsLabels are the probe namespace's labels (for a Namespace probe, its own); nsErr says why
	// they are unknown.
	nsLabels map[string]string
	nsErr    string
}

var namespacesResource = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

func (q probeRequest) String() string {
	return fmt.Sprintf("%s of %s", q.operation(), gvrString(q.gvr))
}

func (q probeRequest) operation() admissionregistrationv1.OperationType {
	if q.update {
		return admissionregistrationv1.Update
	}
	return admissionregistrationv1.Create
}

func gvrString(r schema.GroupVersionResource) string {
	s := r.Resource
	if r.Group != "" {
		s += "." + r.Group
	}
	return s + "/" + r.Version
}

// hookMatch is what of a webhook decides whether the API server calls it for a request.
type hookMatch struct {
	Rules             []admissionregistrationv1.RuleWithOperations `json:"rules,omitempty"`
	MatchPolicy       *admissionregistrationv1.MatchPolicyType     `json:"matchPolicy,omitempty"`
	NamespaceSelector *metav1.LabelSelector                        `json:"namespaceSelector,omitempty"`
	ObjectSelector    *metav1.LabelSelector                        `json:"objectSelector,omitempty"`
	MatchConditions   []admissionregistrationv1.MatchCondition     `json:"matchConditions,omitempty"`
}

// selectorOf is a webhook's selector; unset selects everything (the API server's default), not
// nothing as metav1.LabelSelectorAsSelector(nil) would say.
func selectorOf(ls *metav1.LabelSelector) (labels.Selector, error) {
	if ls == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(ls)
}

// needsNamespaceLabels says whether deciding needs the labels of the probe's namespace: a
// namespaceSelector that asks more than the kubernetes.io/metadata.name label, which every
// namespace carries with its own name.
func (m hookMatch) needsNamespaceLabels() bool {
	sel, err := selectorOf(m.NamespaceSelector)
	if err != nil || sel.Empty() {
		return false
	}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		if r.Key() != corev1.LabelMetadataName {
			return true
		}
	}
	return false
}

// notReached says why the API server does not provably call the webhook for q; "" when it does.
func (m hookMatch) notReached(q probeRequest) string {
	if why := m.skips(q, false); why != "" {
		return why
	}
	if len(m.MatchConditions) > 0 {
		var names []string
		for _, c := range m.MatchConditions {
			names = append(names, c.Name)
		}
		return fmt.Sprintf("its matchConditions (%s) are CEL, not evaluated by the gate, so an admitted dry-run does not show the API server called it",
			strings.Join(names, ", "))
	}
	return ""
}

// excludes says why the API server provably does not call the webhook for q; "" when it may
// (matchConditions, and a namespaceSelector over labels the gate cannot read, are taken as
// matching: fail closed).
func (m hookMatch) excludes(q probeRequest) string { return m.skips(q, true) }

// skips decides by rules, namespaceSelector and objectSelector; with unknownMatches, a
// namespaceSelector over labels the gate cannot read does not skip.
func (m hookMatch) skips(q probeRequest, unknownMatches bool) string {
	if q.gvr.Group == "admissionregistration.k8s.io" {
		return "the API server never calls webhooks for its admission configuration objects"
	}
	if !m.rulesMatch(q) {
		return fmt.Sprintf("its rules (%s) do not match the probe's %s", rulesString(m.Rules), q)
	}
	if q.namespace != "" || q.gvr.Resource == "namespaces" && q.gvr.Group == "" {
		sel, err := selectorOf(m.NamespaceSelector)
		if err != nil {
			return "its namespaceSelector cannot be read: " + err.Error()
		}
		if !sel.Empty() {
			nsLabels := q.nsLabels
			if !m.needsNamespaceLabels() && q.gvr != namespacesResource {
				nsLabels = map[string]string{corev1.LabelMetadataName: q.namespace}
			} else if q.nsErr != "" {
				if unknownMatches {
					return ""
				}
				return fmt.Sprintf("its namespaceSelector {%s} needs the labels of the probe's namespace %s, which the gate cannot read (%s)",
					sel, q.namespace, q.nsErr)
			}
			if !sel.Matches(labels.Set(nsLabels)) {
				what := "the labels of the probe's namespace " + q.namespace
				if q.namespace == "" {
					what = "the probe's labels (a Namespace)"
				}
				return fmt.Sprintf("its namespaceSelector {%s} does not match %s {%s}", sel, what, labels.Set(nsLabels))
			}
		}
	}
	sel, err := selectorOf(m.ObjectSelector)
	if err != nil {
		return "its objectSelector cannot be read: " + err.Error()
	}
	if !sel.Empty() && !sel.Matches(labels.Set(q.labels)) {
		return fmt.Sprintf("its objectSelector {%s} does not match the probe's labels {%s}", sel, labels.Set(q.labels))
	}
	return ""
}

// rulesMatch: a rule for the request's operation (CREATE or UPDATE) for the probe's group, version and resource in its scope; with
// matchPolicy Equivalent (the default), or for the same group and resource at another served version.
func (m hookMatch) rulesMatch(q probeRequest) bool {
	candidates := []schema.GroupVersionResource{q.gvr}
	if m.MatchPolicy == nil || *m.MatchPolicy == admissionregistrationv1.Equivalent {
		candidates = append(candidates, q.equivalents...)
	}
	for _, r := range m.Rules {
		if !ruleOperation(r, q.operation()) || !ruleScope(r, q) {
			continue
		}
		for _, c := range candidates {
			if exactOrWildcard(r.APIGroups, c.Group) && exactOrWildcard(r.APIVersions, c.Version) && ruleResource(r.Resources, c.Resource) {
				return true
			}
		}
	}
	return false
}

func ruleOperation(r admissionregistrationv1.RuleWithOperations, want admissionregistrationv1.OperationType) bool {
	for _, op := range r.Operations {
		if op == admissionregistrationv1.OperationAll || op == want {
			return true
		}
	}
	return false
}

func ruleScope(r admissionregistrationv1.RuleWithOperations, q probeRequest) bool {
	isNamespace := q.gvr.Group == "" && q.gvr.Resource == "namespaces"
	switch {
	case r.Scope == nil || *r.Scope == admissionregistrationv1.AllScopes:
		return true
	case *r.Scope == admissionregistrationv1.NamespacedScope:
		return !isNamespace && q.namespace != ""
	case *r.Scope == admissionregistrationv1.ClusterScope:
		return isNamespace || q.namespace == ""
	}
	return false
}

func exactOrWildcard(items []string, want string) bool {
	for _, it := range items {
		if it == "*" || it == want {
			return true
		}
	}
	return false
}

// ruleResource: the probe is the resource itself, no subresource ("x", "x/*", "*", "*/*").
func ruleResource(resources []string, want string) bool {
	for _, r := range resources {
		res, sub, _ := strings.Cut(r, "/")
		if (res == "*" || res == want) && (sub == "*" || sub == "") {
			return true
		}
	}
	return false
}

func rulesString(rules []admissionregistrationv1.RuleWithOperations) string {
	if len(rules) == 0 {
		return "none"
	}
	var out []string
	for _, r := range rules {
		var ops []string
		for _, o := range r.Operations {
			ops = append(ops, string(o))
		}
		s := fmt.Sprintf("%s %s of %s/%s", strings.Join(ops, ","), strings.Join(r.Resources, ","),
			strings.Join(r.APIGroups, ","), strings.Join(r.APIVersions, ","))
		if r.Scope != nil && *r.Scope != admissionregistrationv1.AllScopes {
			s += " scope " + string(*r.Scope)
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}
