package admission

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestClassifyAdmission(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "external-secrets.io", Version: "v1beta1", Resource: "externalsecrets"}
	gr := gvr.GroupResource()
	for _, tc := range []struct {
		err      error
		terminal bool
		denier   string
		say      string
	}{
		{apierrors.NewForbidden(gr, "db", errors.New(`admission webhook "validate.externalsecret.external-secrets.io" denied the request: spec.secretStoreRef is required`)),
			true, "validate.externalsecret.external-secrets.io", "spec.secretStoreRef is required"},
		{apierrors.NewInvalid(gvr.GroupVersion().WithKind("ExternalSecret").GroupKind(), "db", nil), true, "", "invalid"},
		{errors.New(`externalsecrets.external-secrets.io "db" is forbidden: ValidatingAdmissionPolicy 'require-store' with binding 'b' denied request: failed expression: has(object.spec.secretStoreRef)`),
			true, "require-store", "ValidatingAdmissionPolicy"}, // a plain error: not a Forbidden status, but the policy is still named
		{apierrors.NewForbidden(gr, "db", errors.New(`ValidatingAdmissionPolicy 'require-store' with binding 'b' denied request: failed expression`)), true, "require-store", "require-store"},
		{apierrors.NewForbidden(gr, "db", errors.New(`User "x" cannot create resource "externalsecrets" in API group "external-secrets.io"`)), true, "", "grant verb `create`"},
		{apierrors.NewInternalError(errors.New(`failed calling webhook "validate.externalsecret.external-secrets.io": failed to call webhook: Post "https://x:443/v": dial tcp 127.0.0.1:1: connect: connection refused`)),
			false, "validate.externalsecret.external-secrets.io", "connection refused"},
		{apierrors.NewInternalError(errors.New(`failed calling webhook "v.x": failed to call webhook: Post "https://x:443/v": tls: failed to verify certificate: x509: certificate signed by unknown authority`)),
			false, "v.x", "TLS error"},
		{apierrors.NewInternalError(errors.New(`failed calling webhook "v.x": failed to call webhook: Post "https://x:443/v": no endpoints available for service "x"`)), false, "v.x", "no ready pods"},
		{apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "apps"), false, "", "namespace does not exist yet"},
		{apierrors.NewServiceUnavailable("the server is currently unable to handle the request"), false, "", "unable to handle"},
		{apierrors.NewForbidden(gr, "db", errors.New(`unable to create new content in namespace apps because it is being terminated`)), false, "", "terminated"},
		{apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p", errors.New(`violates PodSecurity "restricted:latest": runAsNonRoot != true`)), true, "PodSecurity", "PodSecurity"},
		{apierrors.NewBadRequest(`json: cannot unmarshal string into Go struct field`), true, "", "malformed"},
	} {
		a := ClassifyAdmission(tc.err, "create", gvr, " in namespace apps")
		got := a.Terminal + a.Why
		if (a.Terminal != "") != tc.terminal || a.Denier != tc.denier || !strings.Contains(got, tc.say) {
			t.Errorf("ClassifyAdmission(%v) = %+v; want terminal=%v denier=%q saying %q", tc.err, a, tc.terminal, tc.denier, tc.say)
		}
		// Only a webhook that could not be called is waited on (gates waiting on one share its polling).
		if want := strings.Contains(tc.err.Error(), "failed calling webhook"); a.Unanswered != want {
			t.Errorf("ClassifyAdmission(%v).Unanswered = %v, want %v", tc.err, a.Unanswered, want)
		}
	}
}
