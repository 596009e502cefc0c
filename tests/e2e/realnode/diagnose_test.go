package realnode

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// observed says when the observer first saw each condition, relative to began ("never" when
// it did not): beside a round that failed, it tells the product's fault (the condition held,
// the gate did not see it) from the controller's (the API server never admitted it).
func observed(first map[string]time.Time, began time.Time) string {
	var parts []string
	for _, k := range []string{"admitted", "stores", "available"} {
		if at := first[k]; at.IsZero() {
			parts = append(parts, k+" never")
		} else {
			parts = append(parts, fmt.Sprintf("%s at +%s", k, at.Sub(began).Round(time.Millisecond)))
		}
	}
	return strings.Join(parts, ", ")
}

// externalSecretsState is what External Secrets' webhooks stand on, for a round that failed:
// each webhook's caBundle (a digest: the CA's certificate, public) beside the CA in the
// cert-controller's Secret, and the namespace's pods (old ones still terminating race the new
// cert-controller). Only ca.crt of the Secret is read, as a digest.
func externalSecretsState(ctx context.Context, ns string) string {
	digest := func(b []byte) string {
		if len(b) == 0 {
			return "empty"
		}
		return fmt.Sprintf("%x", sha256.Sum256(b))[:12]
	}
	var b strings.Builder
	c := testenv.CP.Client
	if sec, err := c.CoreV1().Secrets(ns).Get(ctx, "external-secrets-webhook", metav1.GetOptions{}); err != nil {
		fmt.Fprintf(&b, "secret external-secrets-webhook: %v\n", err)
	} else {
		fmt.Fprintf(&b, "secret external-secrets-webhook (rv %s): ca.crt %s\n", sec.ResourceVersion, digest(sec.Data["ca.crt"]))
	}
	if cfgs, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{}); err != nil {
		fmt.Fprintf(&b, "validating webhook configurations: %v\n", err)
	} else {
		for _, cfg := range cfgs.Items {
			for _, w := range cfg.Webhooks {
				if w.ClientConfig.Service != nil && w.ClientConfig.Service.Namespace == ns {
					fmt.Fprintf(&b, "%s (rv %s) %s: caBundle %s\n", cfg.Name, cfg.ResourceVersion, w.Name, digest(w.ClientConfig.CABundle))
				}
			}
		}
	}
	if pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
		fmt.Fprintf(&b, "pods: %v\n", err)
	} else {
		for _, p := range pods.Items {
			state := string(p.Status.Phase)
			if p.DeletionTimestamp != nil {
				state += ", terminating"
			}
			fmt.Fprintf(&b, "pod %s: %s, created %s ago\n", p.Name, state, time.Since(p.CreationTimestamp.Time).Round(time.Second))
		}
	}
	return b.String()
}

// terminatingPods counts ns's pods being deleted (the last round's, at a round's start).
func terminatingPods(ctx context.Context, ns string) int {
	pods, err := testenv.CP.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return -1
	}
	n := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			n++
		}
	}
	return n
}
