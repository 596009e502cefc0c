package realnode

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestNodeDiskShortfall(t *testing.T) {
	const gi = uint64(1 << 30)
	for _, tc := range []struct {
		name         string
		total, avail uint64
		want         string // a part of the refusal; "" when the node may start
	}{
		{"plenty free", 252 * gi, 31 * gi, ""},
		{"exactly the threshold and the headroom", 100 * gi, gi + nodeDiskHeadroom, ""},
		{"a small disk, its small threshold", 10 * gi, 3 * gi, ""},
		// The disk of the failed cold run: above the kubelet's 1 % (2.5 GiB), but the node's
		// images and the builds beside it took it below.
		{"above the threshold, short of the headroom", 252 * gi, 4 * gi, "has 4.0 GiB free of 252.0 GiB"},
		{"one byte short", 100 * gi, gi + nodeDiskHeadroom - 1, "admits no pod below 1.0 GiB (evictionHard 1%)"},
		{"below the kubelet's threshold", 252 * gi, 2 * gi, "needs about 2.0 GiB more"},
		{"full", 252 * gi, 0, "has 0 MiB free"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := nodeDiskShortfall("/tmp/cp", tc.total, tc.avail)
			if tc.want == "" {
				if got != "" {
					t.Fatalf("refused: %s", got)
				}
				return
			}
			if !strings.Contains(got, tc.want) || !strings.Contains(got, "/tmp/cp") {
				t.Fatalf("got %q, want it to name /tmp/cp and contain %q", got, tc.want)
			}
		})
	}
}

func TestNodePressure(t *testing.T) {
	cond := func(typ corev1.NodeConditionType, s corev1.ConditionStatus, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: s, Message: msg}
	}
	for _, tc := range []struct {
		name  string
		conds []corev1.NodeCondition
		want  string
	}{
		{"a healthy node", []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionTrue, "kubelet is posting ready status"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "kubelet has no disk pressure"),
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, ""),
		}, ""},
		{"no conditions yet", nil, ""},
		// Near miss: unknown is not pressure (a node the kubelet stopped posting for).
		{"disk pressure unknown", []corev1.NodeCondition{cond(corev1.NodeDiskPressure, corev1.ConditionUnknown, "")}, ""},
		// Ready and under disk pressure: Ready alone would pass it.
		{"ready with disk pressure", []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionTrue, "kubelet is posting ready status"),
			cond(corev1.NodeDiskPressure, corev1.ConditionTrue, "kubelet has disk pressure"),
		}, "DiskPressure (kubelet has disk pressure)"},
		{"two pressures", []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionTrue, "m"),
			cond(corev1.NodePIDPressure, corev1.ConditionTrue, "p"),
		}, "MemoryPressure (m); PIDPressure (p)"},
		{"network unavailable is not a pressure", []corev1.NodeCondition{cond(corev1.NodeNetworkUnavailable, corev1.ConditionTrue, "")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nodePressure(&corev1.Node{Status: corev1.NodeStatus{Conditions: tc.conds}}); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
