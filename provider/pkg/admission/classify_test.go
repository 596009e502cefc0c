package admission

import (
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestClassifyProbe(t *testing.T) {
	target := ProbeTarget{What: "ValidatingWebhookConfiguration externalsecret-validate", Webhooks: []string{"validate.externalsecret.external-secrets.io"}}
	for msg, answered := range map[string]bool{
		`admission webhook "validate.externalsecret.external-secrets.io" denied the request: spec invalid`:                                       true,
		`admission webhook "validate.externalsecret.external-secrets.io" denied the request without explanation`:                                 true,
		`admission webhook "mutate.kyverno.svc-fail" denied the request: policy require-labels: validation error`:                                false,
		`admission webhook "gatekeeper.sh" denied the request: [deny-all] denied`:                                                                false,
		`widgets.x "p" is forbidden: ValidatingAdmissionPolicy 'deny' with binding 'deny' denied request: failed expression: false`:              false,
		`Internal error occurred: failed calling webhook "v.x": failed to call webhook: Post "https://x.svc:443/v": service "x" not found`:       false,
		`failed calling webhook "v.x": Post "https://10.0.0.5:443/v": dial tcp 10.0.0.5:443: connect: connection refused`:                        false,
		`failed calling webhook "v.x": Post "https://x:443/v": no endpoints available for service "x"`:                                           false,
		`failed calling webhook "v.x": Post "https://x:443/v": tls: failed to verify certificate: x509: certificate signed by unknown authority`: false,
		`failed calling webhook "v.x": Post "https://x:443/v": context deadline exceeded`:                                                        false,
	} {
		if o := ClassifyProbe(fmt.Errorf("%s", msg), target); o.Answered != answered {
			t.Errorf("ClassifyProbe(%q) = %v (%s)", msg, o.Answered, o.Why)
		}
	}
	if o := ClassifyProbe(fmt.Errorf(`admission webhook "mutate.kyverno.svc-fail" denied the request: no`), target); !strings.Contains(o.Why,
		`probe denied by policy webhook "mutate.kyverno.svc-fail" before reaching ValidatingWebhookConfiguration externalsecret-validate`) {
		t.Errorf("progress for another webhook's denial: %s", o.Why)
	}
	// An Invalid verdict is judged by its reason, whatever words its message holds.
	for _, msg := range []string{`Certificate.cert-manager.io "p" is invalid: spec.secretName: Required value`,
		`Widget.x "p" is invalid: spec.timeoutSeconds: Invalid value: -1`} {
		invalid := apierrors.NewInvalid(schema.GroupKind{Group: "x", Kind: "Widget"}, "p", nil)
		invalid.ErrStatus.Message = msg
		if o := ClassifyProbe(invalid, target); !o.Invalid {
			t.Errorf("ClassifyProbe(Invalid %q) = %+v, want Invalid", msg, o)
		}
	}
	if o := ClassifyProbe(nil, target); !o.Answered {
		t.Error("a successful dry-run is an answer")
	}
}

func TestProbeMessagesDoNotQuoteGeneratedNames(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	obj.SetGenerateName("readiness-probe-")
	msg := `admission webhook "v.x" denied the request: Widget "readiness-probe-x7k2p" is not allowed; readiness-probe-b5d4q too`
	if got, want := StableMessage(obj, msg), `admission webhook "v.x" denied the request: Widget "readiness-probe-*" is not allowed; readiness-probe-* too`; got != want {
		t.Errorf("StableMessage() = %q, want %q", got, want)
	}
	obj.SetName("fixed-name")
	if got := StableMessage(obj, msg); got != msg {
		t.Errorf("a probe with a fixed name keeps its message: %q", got)
	} // A CRD conversion probe's generated name, by its prefix.
	if got := StripGeneratedNames(`"readiness-conversion-probe-ab12c" denied`, "readiness-conversion-probe-"); got != `"readiness-conversion-probe-*" denied` {
		t.Errorf("StripGeneratedNames = %q", got)
	}
	// Near miss: a longer name that merely starts with the prefix is the user's, not generated.
	if got := StripGeneratedNames("readiness-probe-abcdefg", "readiness-probe-"); got != "readiness-probe-abcdefg" {
		t.Errorf("StripGeneratedNames stripped a user's name: %q", got)
	}
}
