package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/pulumi/pulumi-go-provider/infer"
)

// The answers autoGateRetry gives before it reaches any cluster: what is never retried, and input
// it cannot prove. (The retries themselves, proven on a real API server and the real plugin:
// tests/e2e/autogate/retry_test.go.)
func TestAutoGateRetryAnswersWithoutACluster(t *testing.T) {
	refused := `Internal error occurred: failed calling webhook "w.example.com": failed to call webhook: Post "https://svc.ns.svc:443/x": dial tcp 10.0.0.1:443: connect: connection refused`
	obj := map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w", "namespace": "default"},
		"data": map[string]any{"password": "hunter2"}}
	bad := "soon"
	cases := []struct {
		name string
		in   AutoGateRetryArgs
		why  string
	}{
		{"a denial", AutoGateRetryArgs{Type: "kubernetes:example.com/v1:Widget", FailedOperation: "create", Object: obj,
			Errors: []string{`admission webhook "w.example.com" denied the request: no`}}, "denied"},
		{"a delete", AutoGateRetryArgs{Type: "kubernetes:example.com/v1:Widget", FailedOperation: "delete", Object: obj, Errors: []string{refused}}, "delete"},
		{"a Release", AutoGateRetryArgs{Type: "kubernetes:helm.sh/v3:Release", FailedOperation: "create", Errors: []string{refused}}, "Release"},
		{"an object it cannot dry-run", AutoGateRetryArgs{Type: "kubernetes:example.com/v1:Widget", FailedOperation: "create",
			Object: map[string]any{"metadata": map[string]any{"name": "w"}}, Errors: []string{refused}}, "cannot be dry-run"},
		{"a timeout that is no duration", AutoGateRetryArgs{Type: "kubernetes:example.com/v1:Widget", FailedOperation: "create", Object: obj,
			Errors: []string{refused}, Timeout: &bad}, "not a positive duration"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := (&AutoGateRetry{}).Invoke(context.Background(), infer.FunctionRequest[AutoGateRetryArgs]{Input: c.in})
			if err != nil {
				t.Fatal(err)
			}
			if res.Output.Retry || !strings.Contains(res.Output.Why, c.why) {
				t.Fatalf("answer %+v, want no retry saying %q", res.Output, c.why)
			}
			if strings.Contains(res.Output.Why, "hunter2") || strings.Contains(res.Output.Why, "10.0.0.1") {
				t.Errorf("the answer quotes the object or the failure: %q", res.Output.Why)
			}
		})
	}
}
