package fakes

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
)

var (
	externalSecrets = schema.GroupVersionResource{Group: "external-secrets.io", Version: "v1beta1", Resource: "externalsecrets"}
	secrets         = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// SyncExternalSecrets plays External Secrets' controller for the ExternalSecrets named name in
// namespaces: `after` one appears, it writes its target Secret and then reports the sync as ESO
// does (Ready=True, syncedResourceVersion of the current generation and metadata). The player
// ends once all are synced.
func SyncExternalSecrets(dyn dynamic.Interface, name string, namespaces []string, after time.Duration) *Player {
	return play(func(ctx context.Context) error {
		pending := map[string]bool{}
		for _, ns := range namespaces {
			pending[ns] = true
		}
		for len(pending) > 0 {
			for ns := range pending {
				es, err := dyn.Resource(externalSecrets).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					continue
				}
				if err := syncExternalSecret(ctx, dyn, es, after); err != nil {
					return err
				}
				delete(pending, ns)
			}
			if !sleep(ctx, harnessTick) {
				return nil
			}
		}
		return nil
	})
}

func syncExternalSecret(ctx context.Context, dyn dynamic.Interface, es *unstructured.Unstructured, after time.Duration) error {
	if !sleep(ctx, after) {
		return nil
	}
	target, _, _ := unstructured.NestedString(es.Object, "spec", "target", "name")
	if target == "" {
		target = es.GetName()
	}
	sec := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": target, "namespace": es.GetNamespace()},
		"data":     map[string]any{"value": "cGxheWVk"}}}
	if _, err := dyn.Resource(secrets).Namespace(es.GetNamespace()).Create(ctx, sec, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// The status is written on the object as it is now, not as it was read before the wait: it
	// may have changed meanwhile (a 409 Conflict would leave it never synced).
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := dyn.Resource(externalSecrets).Namespace(es.GetNamespace()).Get(ctx, es.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Object["status"] = map[string]any{
			"refreshTime":           time.Now().UTC().Format(time.RFC3339),
			"syncedResourceVersion": status.ExternalSecretResourceVersion(cur),
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "SecretSynced",
				"message": "secret synced", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}},
		}
		_, err = dyn.Resource(externalSecrets).Namespace(es.GetNamespace()).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}
