package status

import (
	"strings"
	"testing"
)

func TestNodeSchedulable(t *testing.T) {
	const ready = "status: {conditions: [{type: Ready, status: \"True\"}]}\n"
	node := func(spec string) string { return "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n" + ready + spec }
	tests := map[string]struct {
		doc      string
		tolerate []string
		ok       bool
		msg      string
	}{
		"Ready, no taints": {doc: node(""), ok: true},
		"near miss: Ready=False": {doc: "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {conditions: [{type: Ready, status: \"False\"}]}",
			msg: "Ready=False"},
		"near miss: cordoned":                       {doc: node("spec: {unschedulable: true}"), msg: "cordoned"},
		"near miss: network-unavailable":            {doc: node("spec: {taints: [{key: node.kubernetes.io/network-unavailable, effect: NoSchedule}]}"), msg: "node.kubernetes.io/network-unavailable:NoSchedule"},
		"near miss: not-ready taint still on":       {doc: node("spec: {taints: [{key: node.kubernetes.io/not-ready, effect: NoSchedule}]}"), msg: "not-ready"},
		"near miss: unreachable NoExecute":          {doc: node("spec: {taints: [{key: node.kubernetes.io/unreachable, effect: NoExecute}]}"), msg: "unreachable:NoExecute"},
		"near miss: disk-pressure":                  {doc: node("spec: {taints: [{key: node.kubernetes.io/disk-pressure, effect: NoSchedule}]}"), msg: "disk-pressure"},
		"near miss: cloud provider not initialized": {doc: node("spec: {taints: [{key: node.cloudprovider.kubernetes.io/uninitialized, value: \"true\", effect: NoSchedule}]}"), msg: "uninitialized=true:NoSchedule"},
		"near miss: cloud provider shutdown":        {doc: node("spec: {taints: [{key: node.cloudprovider.kubernetes.io/shutdown, effect: NoSchedule}]}"), msg: "shutdown"},
		"near miss: control plane":                  {doc: node("spec: {taints: [{key: node-role.kubernetes.io/control-plane, effect: NoSchedule}]}"), msg: "control-plane"},
		"near miss: autoscaler removing it":         {doc: node("spec: {taints: [{key: ToBeDeletedByClusterAutoscaler, value: \"1700000000\", effect: NoSchedule}]}"), msg: "ToBeDeletedByClusterAutoscaler"},
		"near miss: Karpenter disrupting it":        {doc: node("spec: {taints: [{key: karpenter.sh/disrupted, effect: NoSchedule}]}"), msg: "karpenter.sh/disrupted"},
		"near miss: CNI agent not ready":            {doc: node("spec: {taints: [{key: node.cilium.io/agent-not-ready, value: \"true\", effect: NoExecute}]}"), msg: "agent-not-ready"},
		"a user's own taint does not count":         {doc: node("spec: {taints: [{key: dedicated, value: gpu, effect: NoSchedule}]}"), ok: true},
		"PreferNoSchedule only steers":              {doc: node("spec: {taints: [{key: node.kubernetes.io/memory-pressure, effect: PreferNoSchedule}]}"), ok: true},
		"control plane, tolerated":                  {doc: node("spec: {taints: [{key: node-role.kubernetes.io/control-plane, effect: NoSchedule}]}"), tolerate: []string{"node-role.kubernetes.io/control-plane"}, ok: true},
		"near miss: tolerating one taint of two":    {doc: node("spec: {taints: [{key: node-role.kubernetes.io/control-plane, effect: NoSchedule}, {key: node.kubernetes.io/pid-pressure, effect: NoSchedule}]}"), tolerate: []string{"node-role.kubernetes.io/control-plane"}, msg: "pid-pressure"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ok, msg := NodeSchedulable(fromYAML(t, tc.doc), tc.tolerate)
			if ok != tc.ok || !strings.Contains(msg, tc.msg) {
				t.Errorf("NodeSchedulable = %v, %q; want %v, containing %q", ok, msg, tc.ok, tc.msg)
			}
		})
	}
}
