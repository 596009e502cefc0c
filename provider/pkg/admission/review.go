package admission

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// Review encodes the AdmissionReview the API server would send for a dry-run create of
// obj, in the first version the webhook accepts (v1 unless it only takes v1beta1), with a fresh uid.
func Review(obj *unstructured.Unstructured, gvr schema.GroupVersionResource, versions []string) ([]byte, types.UID, error) {
	raw, err := obj.MarshalJSON()
	if err != nil {
		return nil, "", err
	}
	apiVersion := "admission.k8s.io/v1"
	if len(versions) > 0 && !slices.Contains(versions, "v1") && slices.Contains(versions, "v1beta1") {
		apiVersion = "admission.k8s.io/v1beta1"
	}
	gvk := obj.GroupVersionKind()
	kind := metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
	res := metav1.GroupVersionResource{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource}
	opts, _ := json.Marshal(metav1.CreateOptions{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "CreateOptions"}, DryRun: []string{metav1.DryRunAll}})
	dryRun := true
	uid := uuid.NewUUID()
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: uid, Kind: kind, Resource: res, RequestKind: &kind, RequestResource: &res,
			Name: obj.GetName(), Namespace: obj.GetNamespace(), Operation: admissionv1.Create,
			UserInfo: authenticationv1.UserInfo{Username: "readiness-probe"},
			Object:   runtime.RawExtension{Raw: raw}, DryRun: &dryRun, Options: runtime.RawExtension{Raw: opts},
		},
	}
	body, err := json.Marshal(review)
	return body, uid, err
}

// CheckReview says whether answer is a webhook's AdmissionReview response to the request uid.
// The answer's content is never quoted: whatever answers there is not ours to print.
func CheckReview(answer []byte, status int, uid types.UID) (bool, string, error) {
	if status != http.StatusOK {
		return false, fmt.Sprintf("answered HTTP %d, not an AdmissionReview (%d bytes)", status, len(answer)), nil
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(answer, &review); err != nil || review.Kind != "AdmissionReview" ||
		(review.APIVersion != "admission.k8s.io/v1" && review.APIVersion != "admission.k8s.io/v1beta1") || review.Response == nil {
		return false, fmt.Sprintf("answered HTTP 200 with something that is not an AdmissionReview response (%d bytes): not a webhook", len(answer)), nil
	}
	if review.Response.UID != uid {
		return false, "answered an AdmissionReview for another request (uid mismatch): not an answer to this one", nil
	}
	if review.Response.Allowed {
		return true, "allowed", nil
	}
	return true, "denied", nil
}
