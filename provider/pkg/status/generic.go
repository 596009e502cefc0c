package status

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/jsonvalue"
)

// Result is a pure evaluation's verdict on one object.
type Result struct {
	Ready   bool
	Message string
	// Failed is set for terminal states that waiting cannot fix (kstatus Failed, a failed Job,
	// a Deployment past its progress deadline).
	Failed bool
}

// builtinGroups are API groups whose kinds kstatus knows or whose objects are complete when
// created; custom resources (any other group) need evidence from their controller.
var builtinGroups = map[string]bool{
	"": true, "apps": true, "batch": true, "policy": true, "autoscaling": true, "networking.k8s.io": true,
	"rbac.authorization.k8s.io": true, "storage.k8s.io": true, "apiextensions.k8s.io": true,
	"admissionregistration.k8s.io": true, "scheduling.k8s.io": true, "coordination.k8s.io": true,
	"discovery.k8s.io": true, "node.k8s.io": true, "certificates.k8s.io": true, "apiregistration.k8s.io": true,
}

// PositiveConditions are condition types whose True means "working": any of them that is False
// or Unknown (and fresh) makes an object not ready in the default mode, whatever kstatus says.
// The list is the types the common controllers use as their verdict: Ready (most), Available
// (APIService, Deployments, Cluster API), Established/NamesAccepted (CRDs, Crossplane XRDs),
// Synced/Healthy/Installed (Crossplane), Succeeded (Tekton, Knative jobs), Programmed/Accepted/
// ResolvedRefs (Gateway API), Reconciled (Contour, Cilium), Released (Flux HelmRelease).
var PositiveConditions = []string{
	"Ready", "Available", "Established", "NamesAccepted", "Synced", "Healthy", "Installed", "Succeeded",
	"Programmed", "Accepted", "ResolvedRefs", "Reconciled", "Released",
}

// NegativeConditions are condition types whose True means "something is wrong": any of them
// that is True (and fresh) makes an object not ready. kstatus already turns Stalled=True into
// Failed and Reconciling=True into InProgress; Degraded and Failed it does not know.
var NegativeConditions = []string{"Stalled", "Degraded", "Failed", "Reconciling"}

// requiredConditions are kinds without a kstatus rule whose readiness is one condition: the
// API server's own availability controller reports APIServices as Available=True only once the
// backing Service answers (Available=False MissingEndpoints / ServiceNotFound / FailedDiscoveryCheck
// before that, e.g. metrics-server before its pod serves).
var requiredConditions = map[schema.GroupKind]string{
	{Group: "apiregistration.k8s.io", Kind: "APIService"}: "Available",
}

// Generic is the default gate: kstatus' Current, made to fail closed.
//
//   - Stale conditions (observedGeneration older than metadata.generation) are dropped before
//     anything reads them: they describe an earlier spec.
//   - kstatus Failed (a fresh Stalled=True, a failed Job, a crash-looping Pod, a Deployment past
//     its progress deadline) fails; any status but Current is not ready.
//   - Kinds kstatus has a rule for (Deployment, StatefulSet, DaemonSet, ReplicaSet, Pod, Job,
//     PVC, Service, PDB, CRD; and ReplicationController) are also judged by their own rule
//     (kindRules: the kind's controller, kubectl rollout status and helm --wait): ready only
//     when kstatus says Current and the rule agrees; a terminal verdict of the rule (an evicted
//     or completed Pod, a Job past FailureTarget, a Lost claim) fails. ConfigMap, Secret and
//     CronJob are ready once they exist.
//   - Every other kind (custom resources, APIService, Node, ...): a fresh condition of a
//     PositiveConditions type that is not True, or of a NegativeConditions type that is True,
//     means not ready; an APIService needs Available=True.
//   - A custom resource (a group outside builtinGroups) additionally needs evidence that its
//     controller processed the current generation: a fresh positive condition that is True, or
//     status.observedGeneration equal to metadata.generation. kstatus counts a custom resource
//     with no status as Current (its "anything else is Current" fallback); that passes exactly the
//     objects no controller has looked at yet.
func Generic(obj *unstructured.Unstructured) Result {
	if obj == nil {
		return Result{Message: "not found"}
	}
	if obj.GetDeletionTimestamp() != nil {
		return Result{Message: "being deleted"}
	}
	fresh, stale := splitStale(obj)
	rule := kindRule(fresh)
	var verdict Result
	if rule != nil {
		// A terminal state the kind's rule knows (an evicted Pod, a Lost claim) fails whatever
		// kstatus says of it.
		if verdict = rule(fresh); verdict.Failed {
			return verdict
		}
	}
	res, err := kstatus.Compute(fresh)
	if err != nil {
		return Result{Message: "kstatus: " + err.Error()}
	}
	switch res.Status {
	case kstatus.FailedStatus:
		return Result{Failed: true, Message: fmt.Sprintf("Failed: %s", res.Message)}
	case kstatus.CurrentStatus:
	default:
		msg := fmt.Sprintf("%s: %s", res.Status, res.Message)
		if rule != nil && !verdict.Ready {
			msg += " (" + verdict.Message + ")"
		}
		if len(Conditions(obj)) > 0 {
			msg += " [" + SummarizeConditions(obj) + "]"
		}
		return Result{Message: msg}
	}
	if rule != nil {
		// kstatus' Current is proof only where the kind's own rule agrees (see kindRules).
		if !verdict.Ready {
			return Result{Message: "kstatus says Current, but " + verdict.Message}
		}
		return Result{Ready: true, Message: "Current: " + verdict.Message}
	}
	if kstatus.GetLegacyConditionsFn(fresh) != nil {
		return Result{Ready: true, Message: "Current: " + res.Message}
	}
	conds := Conditions(fresh)
	staleNote := ""
	var stalePositive []string
	if len(stale) > 0 {
		var all []string
		for _, c := range stale {
			s := fmt.Sprintf("%s (observedGeneration %d < generation %d)", c, c.ObservedGeneration, obj.GetGeneration())
			all = append(all, s)
			if isPositive(c.Type) {
				stalePositive = append(stalePositive, s)
			}
		}
		staleNote = "; ignored as stale: " + strings.Join(all, ", ")
	}
	if bad := conditionProblems(conds); len(bad) > 0 {
		return Result{Message: strings.Join(bad, ", ") + staleNote}
	}
	if len(stalePositive) > 0 {
		// The controller's verdict for this generation is not in yet.
		return Result{Message: strings.Join(stalePositive, ", ") + " is stale: waiting for the controller to report on generation " +
			fmt.Sprint(obj.GetGeneration())}
	}
	gk := obj.GroupVersionKind().GroupKind()
	if want, ok := requiredConditions[gk]; ok {
		if c, found := findIn(conds, want); !found || !strings.EqualFold(c.Status, "True") {
			return Result{Message: fmt.Sprintf("%s needs %s=True; has %s%s", gk.Kind, want, summarize(conds), staleNote)}
		}
		return Result{Ready: true, Message: summarize(conds)}
	}
	if builtinGroups[gk.Group] {
		return Result{Ready: true, Message: "Current: " + res.Message}
	}
	var proof []string
	for _, c := range conds {
		if isPositive(c.Type) {
			proof = append(proof, c.String())
		}
	}
	og, found, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	switch {
	case len(proof) > 0:
		return Result{Ready: true, Message: strings.Join(proof, ", ")}
	case found && og >= obj.GetGeneration(): // kstatus already rejected og != generation
		return Result{Ready: true, Message: fmt.Sprintf("observedGeneration %d is current", og)}
	case len(conds) > 0:
		return Result{Message: fmt.Sprintf("%s: no condition of a type that means ready (%s) and no status.observedGeneration; "+
			"use `condition` to name the one that does%s", summarize(conds), strings.Join(PositiveConditions, ", "), staleNote)}
	case len(stale) > 0:
		return Result{Message: "no status for generation " + fmt.Sprint(obj.GetGeneration()) + " yet" + staleNote}
	}
	return Result{Message: "no status reported yet (its controller has not processed it; a custom resource with no Ready condition or observedGeneration is not treated as ready)"}
}

// splitStale returns a copy of obj whose status.conditions hold only the fresh conditions, and
// the stale ones. obj itself is not modified (it may be a cache's object).
func splitStale(obj *unstructured.Unstructured) (*unstructured.Unstructured, []Condition) {
	var stale []Condition
	for _, c := range Conditions(obj) {
		if IsStale(obj, c) {
			stale = append(stale, c)
		}
	}
	if len(stale) == 0 {
		return obj, nil
	}
	cp := obj.DeepCopy()
	raw, _, _ := unstructured.NestedSlice(cp.Object, "status", "conditions")
	keep := raw[:0]
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		if g, has := m["observedGeneration"]; has && jsonvalue.Int64(g) < obj.GetGeneration() {
			continue
		}
		keep = append(keep, r)
	}
	_ = unstructured.SetNestedSlice(cp.Object, keep, "status", "conditions")
	return cp, stale
}

// conditionProblems lists the conditions that say "not ready" by their polarity.
func conditionProblems(conds []Condition) []string {
	var bad []string
	for _, c := range conds {
		switch {
		case isPositive(c.Type) && !strings.EqualFold(c.Status, "True"):
			bad = append(bad, c.String())
		case isNegative(c.Type) && strings.EqualFold(c.Status, "True"):
			bad = append(bad, c.String())
		}
	}
	return bad
}

func isPositive(t string) bool { return containsFold(PositiveConditions, t) }
func isNegative(t string) bool { return containsFold(NegativeConditions, t) }

func containsFold(list []string, s string) bool {
	for _, l := range list {
		if strings.EqualFold(l, s) {
			return true
		}
	}
	return false
}

func findIn(conds []Condition, t string) (Condition, bool) {
	for _, c := range conds {
		if strings.EqualFold(c.Type, t) {
			return c, true
		}
	}
	return Condition{}, false
}

func summarize(conds []Condition) string {
	if len(conds) == 0 {
		return "no conditions"
	}
	parts := make([]string, len(conds))
	for i, c := range conds {
		parts[i] = c.String()
	}
	return strings.Join(parts, ", ")
}

// PVC applies field report 003's rule: a PersistentVolumeClaim that is Pending only because its
// StorageClass binds on first consumer is as ready as it can be before a pod uses it.
// bindingMode is the StorageClass's volumeBindingMode ("" when unknown).
func PVC(obj *unstructured.Unstructured, bindingMode string, strict bool) Result {
	if obj == nil {
		return Result{Message: "not found"}
	}
	phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
	switch phase {
	case "Bound":
		return Result{Ready: true, Message: "Bound"}
	case "Lost":
		return Result{Failed: true, Message: "Lost: the bound volume no longer exists"}
	}
	if phase == "Pending" && bindingMode == "WaitForFirstConsumer" && !strict {
		return Result{Ready: true, Message: "Pending, and its StorageClass binds on first consumer (WaitForFirstConsumer): ready for a pod to use it"}
	}
	if phase == "" {
		phase = "no phase yet"
	}
	return Result{Message: phase}
}
