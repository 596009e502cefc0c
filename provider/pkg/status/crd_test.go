package status

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// fromYAML decodes a fixture into an unstructured object, as the API server would return it.
func fromYAML(t testing.TB, doc string) *unstructured.Unstructured {
	t.Helper()
	// Through JSON, as the API server's objects arrive: integers decode as int64.
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	m := map[string]any{}
	if err := utiljson.Unmarshal(j, &m); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return &unstructured.Unstructured{Object: m}
}

const crdHead = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: certificates.cert-manager.io
  generation: 1
spec:
  group: cert-manager.io
  scope: Namespaced
  names: {kind: Certificate, plural: certificates}
  versions:
  - {name: v1, served: true, storage: true}
  - {name: v1alpha2, served: false, storage: false}
`

func TestCRD(t *testing.T) {
	tests := map[string]struct {
		doc       string
		ready     bool
		msgSubstr string
	}{
		"absent": {doc: "", ready: false, msgSubstr: "not found"},
		"no status yet": {
			doc: crdHead, ready: false, msgSubstr: "no NamesAccepted condition yet, no Established condition yet",
		},
		"names accepted, installing": {
			doc: crdHead + `
status:
  conditions:
  - {type: NamesAccepted, status: "True", reason: NoConflicts}
  - {type: Established, status: "False", reason: Installing, message: the initial names have been accepted}
`, ready: false, msgSubstr: "Established=False (Installing: the initial names have been accepted)"},
		"name conflict": {
			doc: crdHead + `
status:
  conditions:
  - {type: NamesAccepted, status: "False", reason: KindConflict, message: '"Certificate" is already in use'}
`, ready: false, msgSubstr: "NamesAccepted=False (KindConflict"},
		"established": {
			doc: crdHead + `
status:
  acceptedNames: {kind: Certificate, plural: certificates, singular: certificate, listKind: CertificateList}
  conditions:
  - {type: NamesAccepted, status: "True", reason: NoConflicts}
  - {type: Established, status: "True", reason: InitialNamesAccepted}
`, ready: true, msgSubstr: "Established"},
		"established, but a renamed plural not accepted yet (no observedGeneration to tell)": {
			doc: strings.Replace(crdHead, "plural: certificates}", "plural: certs}", 1) + `
status:
  acceptedNames: {kind: Certificate, plural: certificates}
  conditions:
  - {type: NamesAccepted, status: "True", reason: NoConflicts}
  - {type: Established, status: "True", reason: InitialNamesAccepted}
`, ready: false, msgSubstr: `plural "certs", accepted "certificates"`},
		"established, but a new short name not accepted yet": {
			doc: strings.Replace(crdHead, "plural: certificates}", "plural: certificates, shortNames: [cert]}", 1) + `
status:
  acceptedNames: {kind: Certificate, plural: certificates}
  conditions:
  - {type: NamesAccepted, status: "True", reason: NoConflicts}
  - {type: Established, status: "True", reason: InitialNamesAccepted}
`, ready: false, msgSubstr: "shortNames [cert], accepted <nil>"},
		"established without acceptedNames": {
			doc: crdHead + `
status:
  conditions:
  - {type: NamesAccepted, status: "True", reason: NoConflicts}
  - {type: Established, status: "True", reason: InitialNamesAccepted}
`, ready: false, msgSubstr: "no status.acceptedNames"},
		"established but terminating": {
			doc: strings.Replace(crdHead, "generation: 1", "generation: 1\n  deletionTimestamp: \"2026-01-01T00:00:00Z\"", 1) + `
status:
  conditions:
  - {type: NamesAccepted, status: "True"}
  - {type: Established, status: "True"}
`, ready: false, msgSubstr: "being deleted"},
		"established with a stale condition": {
			doc: strings.Replace(crdHead, "generation: 1", "generation: 3", 1) + `
status:
  conditions:
  - {type: NamesAccepted, status: "True", observedGeneration: 3}
  - {type: Established, status: "True", observedGeneration: 2}
`, ready: false, msgSubstr: "stale"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var obj *unstructured.Unstructured
			if tc.doc != "" {
				obj = fromYAML(t, tc.doc)
			}
			got := CRD(obj)
			if got.Ready != tc.ready {
				t.Errorf("Ready = %v, want %v (message %q)", got.Ready, tc.ready, got.Message)
			}
			if !strings.Contains(got.Message, tc.msgSubstr) {
				t.Errorf("Message = %q, want it to contain %q", got.Message, tc.msgSubstr)
			}
			if obj != nil {
				if got.Kind != "Certificate" || got.Group != "cert-manager.io" {
					t.Errorf("kind/group = %s/%s", got.Kind, got.Group)
				}
				if len(got.ServedVersions) != 1 || got.ServedVersions[0] != "cert-manager.io/v1" {
					t.Errorf("ServedVersions = %v, want only the served v1", got.ServedVersions)
				}
			}
		})
	}
}

func TestConditionHolds(t *testing.T) {
	obj := fromYAML(t, `
metadata: {generation: 2}
status:
  conditions:
  - {type: Ready, status: "true", observedGeneration: 2}
  - {type: Synced, status: "True", observedGeneration: 1}
  - {type: Available, status: "False", reason: MinimumReplicasUnavailable}
`)
	tests := []struct {
		cond, want string
		holds      bool
	}{
		{"Ready", "True", true}, // status compared case-insensitively, as kubectl wait does
		{"ready", "True", true},
		{"Synced", "True", false}, // stale: observedGeneration 1 < generation 2
		{"Available", "True", false},
		{"Available", "False", true},
		{"Missing", "True", false},
	}
	for _, tc := range tests {
		if got, msg := ConditionHolds(obj, tc.cond, tc.want); got != tc.holds {
			t.Errorf("ConditionHolds(%s=%s) = %v (%s), want %v", tc.cond, tc.want, got, msg, tc.holds)
		}
	}
	if s := SummarizeConditions(obj); !strings.HasPrefix(s, "Available=False (MinimumReplicasUnavailable)") {
		t.Errorf("SummarizeConditions = %q", s)
	}
}
