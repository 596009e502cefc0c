package admission

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

// Request is a create (or an update) as the API server matches webhooks against it: WebhookReady's
// probe, or one of AdmissionReady's objects.
type Request struct {
	GVR schema.GroupVersionResource
	// Update: the request is an UPDATE (AdmissionReady's dry-run apply of an existing object),
	// not a CREATE.
	Update bool
	// Equivalents are the same group and resource at the other versions the API server serves
	// (matchPolicy Equivalent: the API server converts the request for a rule naming one).
	Equivalents []schema.GroupVersionResource
	Namespace   string            // "" for a cluster-scoped object
	Labels      map[string]string // the object's labels
	// NSLabels are the labels of the object's namespace (for a Namespace, its own); NSErr says
	// why they are unknown.
	NSLabels map[string]string
	NSErr    string
}

// NamespacesResource is the core Namespace resource: a Namespace is matched by its own labels.
var NamespacesResource = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

func (q Request) String() string {
	return fmt.Sprintf("%s of %s", q.operation(), GVRString(q.GVR))
}

func (q Request) operation() admissionregistrationv1.OperationType {
	if q.Update {
		return admissionregistrationv1.Update
	}
	return admissionregistrationv1.Create
}

// GVRString is "resource.group/version" (no group for the core group).
func GVRString(r schema.GroupVersionResource) string {
	s := r.Resource
	if r.Group != "" {
		s += "." + r.Group
	}
	return s + "/" + r.Version
}

// Match is what of a webhook decides whether the API server calls it for a request.
type Match struct {
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

// NeedsNamespaceLabels says whether deciding needs the labels of the probe's namespace: a
// namespaceSelector that asks more than the kubernetes.io/metadata.name label, which every
// namespace carries with its own name.
func (m Match) NeedsNamespaceLabels() bool {
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

// NotReached says why the API server does not provably call the webhook for q; "" when it does.
func (m Match) NotReached(q Request) string {
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
func (m Match) Excludes(q Request) string { return m.skips(q, true) }

// skips decides by rules, namespaceSelector and objectSelector; with unknownMatches, a
// namespaceSelector over labels the gate cannot read does not skip.
func (m Match) skips(q Request, unknownMatches bool) string {
	if q.GVR.Group == "admissionregistration.k8s.io" {
		return "the API server never calls webhooks for its admission configuration objects"
	}
	if !m.RulesMatch(q) {
		return fmt.Sprintf("its rules (%s) do not match the probe's %s", RulesString(m.Rules), q)
	}
	if q.Namespace != "" || q.GVR.Resource == "namespaces" && q.GVR.Group == "" {
		sel, err := selectorOf(m.NamespaceSelector)
		if err != nil {
			return "its namespaceSelector cannot be read: " + err.Error()
		}
		if !sel.Empty() {
			nsLabels := q.NSLabels
			if !m.NeedsNamespaceLabels() && q.GVR != NamespacesResource {
				nsLabels = map[string]string{corev1.LabelMetadataName: q.Namespace}
			} else if q.NSErr != "" {
				if unknownMatches {
					return ""
				}
				return fmt.Sprintf("its namespaceSelector {%s} needs the labels of the probe's namespace %s, which the gate cannot read (%s)",
					sel, q.Namespace, q.NSErr)
			}
			if !sel.Matches(labels.Set(nsLabels)) {
				what := "the labels of the probe's namespace " + q.Namespace
				if q.Namespace == "" {
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
	if !sel.Empty() && !sel.Matches(labels.Set(q.Labels)) {
		return fmt.Sprintf("its objectSelector {%s} does not match the probe's labels {%s}", sel, labels.Set(q.Labels))
	}
	return ""
}

// RulesMatch says whether one of the webhook's rules sends q to it (selectors aside): a rule for
// q's operation (CREATE or UPDATE), in q's scope, for q's group, version and resource; with
// matchPolicy Equivalent (the default), also for the same group and resource at another served
// version.
func (m Match) RulesMatch(q Request) bool {
	candidates := []schema.GroupVersionResource{q.GVR}
	if m.MatchPolicy == nil || *m.MatchPolicy == admissionregistrationv1.Equivalent {
		candidates = append(candidates, q.Equivalents...)
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

func ruleScope(r admissionregistrationv1.RuleWithOperations, q Request) bool {
	isNamespace := q.GVR.Group == "" && q.GVR.Resource == "namespaces"
	switch {
	case r.Scope == nil || *r.Scope == admissionregistrationv1.AllScopes:
		return true
	case *r.Scope == admissionregistrationv1.NamespacedScope:
		return !isNamespace && q.Namespace != ""
	case *r.Scope == admissionregistrationv1.ClusterScope:
		return isNamespace || q.Namespace == ""
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

// RulesString spells rules out for messages: "CREATE pods of /v1; ...".
func RulesString(rules []admissionregistrationv1.RuleWithOperations) string {
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
