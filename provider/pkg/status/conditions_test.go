package status

import "testing"

// TestConditionHoldsWithoutItsOwnObservedGeneration: a condition that carries no
// observedGeneration is judged by status.observedGeneration when there is one, and taken as
// current when there is none.
func TestConditionHoldsWithoutItsOwnObservedGeneration(t *testing.T) {
	for name, tc := range map[string]struct {
		doc   string
		holds bool
	}{
		"near miss: status.observedGeneration behind": {`
metadata: {generation: 2}
status: {observedGeneration: 1, conditions: [{type: Ready, status: "True"}]}`, false},
		"status.observedGeneration current": {`
metadata: {generation: 2}
status: {observedGeneration: 2, conditions: [{type: Ready, status: "True"}]}`, true},
		"no observedGeneration anywhere: taken as current": {`
metadata: {generation: 2}
status: {conditions: [{type: Ready, status: "True"}]}`, true},
		"its own observedGeneration wins over a lagging status one": {`
metadata: {generation: 2}
status: {observedGeneration: 1, conditions: [{type: Ready, status: "True", observedGeneration: 2}]}`, true},
	} {
		t.Run(name, func(t *testing.T) {
			if got, msg := ConditionHolds(fromYAML(t, tc.doc), "Ready", "True"); got != tc.holds {
				t.Errorf("ConditionHolds = %v (%s), want %v", got, msg, tc.holds)
			}
		})
	}
}
