// Package status holds pure readiness evaluation over unstructured objects: no client, no
// cluster, no clock. Each function takes what the API server returned and says whether it is
// ready and why, so the wait engine and the tests can share it.
package status

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/jsonvalue"
)

// Condition is one entry of status.conditions, as read from an unstructured object.
type Condition struct {
	Type               string
	Status             string
	Reason             string
	Message            string
	ObservedGeneration int64
	// HasObservedGeneration tells a condition that reports observedGeneration 0 from one that
	// does not report it at all (most built-in kinds and many CRDs do not).
	HasObservedGeneration bool
}

// String renders a condition the way progress messages show it: "Ready=False (Pending: msg)".
func (c Condition) String() string {
	s := c.Type + "=" + c.Status
	switch {
	case c.Reason != "" && c.Message != "":
		s += " (" + c.Reason + ": " + c.Message + ")"
	case c.Reason != "":
		s += " (" + c.Reason + ")"
	case c.Message != "":
		s += " (" + c.Message + ")"
	}
	return s
}

// Conditions returns status.conditions of obj; nil when it has none or obj is nil.
func Conditions(obj *unstructured.Unstructured) []Condition {
	if obj == nil {
		return nil
	}
	raw, found, err := unstructured.NestedSlice(obj.Object, "status", "conditions")
	if err != nil || !found {
		return nil
	}
	out := make([]Condition, 0, len(raw))
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		c := Condition{
			Type:    str(m["type"]),
			Status:  str(m["status"]),
			Reason:  str(m["reason"]),
			Message: str(m["message"]),
		}
		if g, ok := m["observedGeneration"]; ok {
			c.HasObservedGeneration = true
			c.ObservedGeneration = jsonvalue.Int64(g)
		}
		out = append(out, c)
	}
	return out
}

// FindCondition returns the condition of the given type and whether it exists.
func FindCondition(obj *unstructured.Unstructured, condType string) (Condition, bool) {
	for _, c := range Conditions(obj) {
		if strings.EqualFold(c.Type, condType) {
			return c, true
		}
	}
	return Condition{}, false
}

// IsStale reports whether a condition describes an older generation of obj than the current
// one: kubectl, kstatus and pulumi-kubernetes all ignore such conditions, and so do we.
func IsStale(obj *unstructured.Unstructured, c Condition) bool {
	return c.HasObservedGeneration && c.ObservedGeneration < obj.GetGeneration()
}

// ConditionHolds reports whether obj has a fresh condition condType with the wanted status
// (compared case-insensitively, as kubectl wait does), and a one-line description of what it saw.
// Fresh: its own observedGeneration, or else status.observedGeneration, is not behind
// metadata.generation; with neither, it is taken as current (nothing says otherwise).
func ConditionHolds(obj *unstructured.Unstructured, condType, want string) (bool, string) {
	c, ok := FindCondition(obj, condType)
	if !ok {
		return false, fmt.Sprintf("no %s condition yet", condType)
	}
	if IsStale(obj, c) {
		return false, fmt.Sprintf("%s is stale (observedGeneration %d < generation %d)", c, c.ObservedGeneration, obj.GetGeneration())
	}
	// A condition without its own observedGeneration is as fresh as the status it sits in: when
	// status.observedGeneration is behind, the controller has not reported on this spec yet.
	if og, found, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration"); !c.HasObservedGeneration && found && og < obj.GetGeneration() {
		return false, fmt.Sprintf("%s may be stale (status.observedGeneration %d < generation %d)", c, og, obj.GetGeneration())
	}
	return strings.EqualFold(c.Status, want), c.String()
}

// SummarizeConditions renders every condition of obj, sorted by type, for progress and errors.
func SummarizeConditions(obj *unstructured.Unstructured) string {
	cs := Conditions(obj)
	if len(cs) == 0 {
		return "no conditions"
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].Type < cs[j].Type })
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.String()
	}
	return strings.Join(parts, ", ")
}

func str(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}
