package admission

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func TestCheckReview(t *testing.T) {
	const uid = "7d3c1f0e-0000-4000-8000-000000000001"
	review := func(apiVersion, kind, respUID string, allowed bool) []byte {
		return []byte(fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"response":{"uid":%q,"allowed":%v}}`, apiVersion, kind, respUID, allowed))
	}
	for name, tc := range map[string]struct {
		answer []byte
		status int
		proof  bool
	}{
		"allowed":                     {review("admission.k8s.io/v1", "AdmissionReview", uid, true), 200, true},
		"denied is an answer too":     {review("admission.k8s.io/v1", "AdmissionReview", uid, false), 200, true},
		"v1beta1":                     {review("admission.k8s.io/v1beta1", "AdmissionReview", uid, true), 200, true},
		"near miss: another uid":      {review("admission.k8s.io/v1", "AdmissionReview", "00000000-0000-0000-0000-000000000000", true), 200, false},
		"near miss: not a review":     {[]byte(`{"status":"ok"}`), 200, false},
		"near miss: a Status":         {[]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":503}`), 200, false},
		"near miss: no response":      {[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), 200, false},
		"near miss: HTML":             {[]byte(`<html>hello</html>`), 200, false},
		"near miss: HTTP 500":         {review("admission.k8s.io/v1", "AdmissionReview", uid, true), 500, false},
		"near miss: another apiGroup": {review("example.com/v1", "AdmissionReview", uid, true), 200, false},
	} {
		ok, why, err := CheckReview(tc.answer, tc.status, types.UID(uid))
		if ok != tc.proof || err != nil {
			t.Errorf("%s: checkReview = %v (%s, %v), want %v", name, ok, why, err, tc.proof)
		}
	}
}

func TestAdmissionReviewRequest(t *testing.T) {
	obj := object(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {generateName: readiness-probe-, namespace: ns}")
	gvr := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	for _, tc := range []struct {
		versions []string
		want     string
	}{{nil, "admission.k8s.io/v1"}, {[]string{"v1", "v1beta1"}, "admission.k8s.io/v1"}, {[]string{"v1beta1"}, "admission.k8s.io/v1beta1"}} {
		body, uid, err := Review(obj, gvr, tc.versions)
		if err != nil {
			t.Fatal(err)
		}
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &review); err != nil {
			t.Fatal(err)
		}
		rq := review.Request
		if review.APIVersion != tc.want || review.Kind != "AdmissionReview" || rq == nil || rq.UID != uid || uid == "" ||
			rq.Operation != admissionv1.Create || rq.DryRun == nil || !*rq.DryRun || rq.Resource.Resource != "deployments" ||
			rq.Kind.Kind != "Deployment" || rq.Namespace != "ns" || !strings.Contains(string(rq.Object.Raw), `"generateName":"readiness-probe-"`) {
			t.Errorf("versions %v: review = %s", tc.versions, body)
		}
	}
	_, a, _ := Review(obj, gvr, nil)
	if _, b, _ := Review(obj, gvr, nil); a == b {
		t.Error("two requests got the same uid")
	}
}
