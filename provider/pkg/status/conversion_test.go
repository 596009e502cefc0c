package status

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// apiErr is an error as client-go returns the API server's Status.
func apiErr(code int32, reason metav1.StatusReason, msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg}}
}

const convPrefix = `conversion webhook for g.test/v2, Kind=Widget failed: `

// The API server's own texts (kube-apiserver 1.34, seen against the test control plane).
func TestClassifyConversion(t *testing.T) {
	gr := schema.GroupResource{Group: "g.test", Resource: "widgets"}
	cases := map[string]struct {
		err     error
		verdict ConversionVerdict
		why     string
	}{
		"ok": {nil, Converted, "converted"},
		"connection refused": {apiErr(500, metav1.StatusReasonInternalError,
			convPrefix+`Post "https://127.0.0.1:40237/convert?timeout=30s": dial tcp 127.0.0.1:40237: connect: connection refused`),
			NotYet, "not listening (connection refused)"},
		"x509": {apiErr(500, metav1.StatusReasonInternalError,
			convPrefix+`Post "https://127.0.0.1:1/convert?timeout=30s": tls: failed to verify certificate: x509: certificate signed by unknown authority`),
			NotYet, "caBundle is not injected yet"},
		"timeout": {apiErr(500, metav1.StatusReasonInternalError,
			convPrefix+`Post "https://127.0.0.1:1/convert?timeout=30s": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`),
			NotYet, "did not answer in time"},
		"no endpoints": {apiErr(500, metav1.StatusReasonInternalError,
			convPrefix+`Post "https://w.ns.svc:443/convert?timeout=30s": no endpoints available for service "w"`),
			NotYet, "no ready pods"},
		"service missing": {apiErr(500, metav1.StatusReasonInternalError,
			convPrefix+`Post "https://w.ns.svc:443/convert?timeout=30s": service "w" not found`),
			NotYet, "Service does not exist"},
		"not a ConversionReview": {apiErr(500, metav1.StatusReasonInternalError,
			convPrefix+`expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got /, Kind=`),
			NotYet, "not a ConversionReview"},
		"another request's uid": {apiErr(500, metav1.StatusReasonInternalError,
			convPrefix+`expected response.uid="4c73aa21", got "00000000-0000-0000-0000-000000000000"`),
			NotYet, "uid mismatch"},
		"HTTP 500": {apiErr(500, metav1.StatusReasonInternalError,
			convPrefix+`an error on the server ("internal error") has prevented the request from succeeding`),
			NotYet, "HTTP error"},
		"webhook refuses a version": {apiErr(500, metav1.StatusReasonInternalError,
			convPrefix+`cannot convert from v1 to v1beta1: this webhook does not know v1beta1`),
			NotYet, "failed to convert: " + convPrefix + "cannot convert from v1 to v1beta1"},
		"bad converted object": {apiErr(500, metav1.StatusReasonInternalError,
			`conversion webhook for g.test/v1, Kind=Widget returned invalid converted object at index 0: invalid groupVersion (expected g.test/v2, received g.test/v1)`),
			NotYet, "wrong converted object"},
		"wrapped as Internal error occurred": {apierrors.NewInternalError(errors.New(convPrefix + "dial tcp 127.0.0.1:1: connect: connection refused")),
			NotYet, "connection refused"},
		// Refused before any conversion ran: no proof, and the same object will be refused again.
		"schema Invalid": {apierrors.NewInvalid(schema.GroupKind{Group: "g.test", Kind: "Widget"}, "readiness-conversion-probe-abcde",
			field.ErrorList{field.Required(field.NewPath("spec"), "")}), NoProof, "schema validation rejected"},
		"admission denial": {apiErr(http.StatusForbidden, metav1.StatusReasonForbidden,
			`admission webhook "validate.widgets.g.test" denied the request: spec.store is required`), NoProof, `admission webhook "validate.widgets.g.test" denied`},
		"admission denial quoting a conversion webhook": {apiErr(http.StatusForbidden, metav1.StatusReasonForbidden,
			`admission webhook "v.g.test" denied the request: the conversion webhook is configured wrong`), NoProof, "denied"},
		"admission policy": {apiErr(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
			`widgets.g.test "x" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: no`), NoProof, "admission policy"},
		// Before the conversion: transient.
		"admission webhook down": {apiErr(500, metav1.StatusReasonInternalError,
			`Internal error occurred: failed calling webhook "validate.widgets.g.test": failed to call webhook: Post "https://127.0.0.1:1/validate": dial tcp 127.0.0.1:1: connect: connection refused`),
			NotYet, `admission webhook "validate.widgets.g.test" does not answer`},
		"namespace missing":      {apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "team-a"), NotYet, "namespace does not exist"},
		"version not served yet": {apierrors.NewNotFound(gr, ""), NotYet, "not served yet"},
		"forbidden":              {apierrors.NewForbidden(gr, "", errors.New(`User "ci" cannot list resource "widgets"`)), Refused, "cannot list"},
		"anything else":          {errors.New("http2: client connection lost"), NotYet, "client connection lost"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := ClassifyConversion(tc.err)
			if o.Verdict != tc.verdict {
				t.Errorf("verdict %d, want %d (%s)", o.Verdict, tc.verdict, o.Why)
			}
			if !strings.Contains(o.Why, tc.why) {
				t.Errorf("why %q does not contain %q", o.Why, tc.why)
			}
		})
	}
}

func TestConversionWhyIsTrimmed(t *testing.T) {
	long := convPrefix + strings.Repeat("é", 600)
	o := ClassifyConversion(apiErr(500, metav1.StatusReasonInternalError, long))
	if len(o.Why) > 520 || !strings.HasSuffix(o.Why, "…") {
		t.Errorf("not trimmed (%d bytes): %q", len(o.Why), o.Why[len(o.Why)-20:])
	}
}

func TestCRDConversion(t *testing.T) {
	base := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.g.test, generation: 1}
spec:
  group: g.test
  scope: Namespaced
  names: {kind: Widget, plural: widgets}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, required: [spec]}}}
  - {name: v2, served: true, storage: false}
  - {name: v1alpha1, served: false, storage: false}
status:
  acceptedNames: {kind: Widget, plural: widgets}
  conditions:
  - {type: NamesAccepted, status: "True"}
  - {type: Established, status: "True"}
`
	cases := map[string]struct {
		conversion string
		want       CRDConversion
		endpoint   string
	}{
		"none by default": {"", CRDConversion{Strategy: "None"}, ""},
		"url": {"  conversion: {strategy: Webhook, webhook: {conversionReviewVersions: [v1], clientConfig: {url: 'https://127.0.0.1:9443/convert', caBundle: Zm9v}}}\n",
			CRDConversion{Strategy: "Webhook", URL: "https://127.0.0.1:9443/convert", CABundle: true}, "https://127.0.0.1:9443/convert"},
		"service without caBundle": {"  conversion: {strategy: Webhook, webhook: {clientConfig: {service: {namespace: eso, name: eso-webhook, path: /convert}}}}\n",
			CRDConversion{Strategy: "Webhook", Service: "eso/eso-webhook:443/convert"}, "service eso/eso-webhook:443/convert"},
		"webhook without clientConfig": {"  conversion: {strategy: Webhook}\n", CRDConversion{Strategy: "Webhook"}, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			doc := strings.Replace(base, "  versions:\n", tc.conversion+"  versions:\n", 1)
			r := CRD(fromYAML(t, doc))
			if !r.Ready {
				t.Fatalf("not ready: %s", r.Message)
			}
			if r.Conversion != tc.want || r.Conversion.Endpoint() != tc.endpoint {
				t.Errorf("conversion %+v (endpoint %q), want %+v (%q)", r.Conversion, r.Conversion.Endpoint(), tc.want, tc.endpoint)
			}
			if !reflect.DeepEqual(r.Versions, []string{"v1", "v2"}) || r.StorageVersion != "v1" {
				t.Errorf("versions %v storage %q", r.Versions, r.StorageVersion)
			}
			if r.Schemas["v1"] == nil || r.Schemas["v2"] != nil {
				t.Errorf("schemas %v", r.Schemas)
			}
		})
	}
}
