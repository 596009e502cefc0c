package controlplane

// What a cluster needs between two builds of the same stack, as a rebuilt cluster would start.

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// WaitCRDCaches waits (up to a minute per CRD) until the API server lists the objects of every
// CRD of group from its watch cache (resourceVersion=0). The CRD finalizer needs that cache: a
// CRD deleted while it still starts stays Terminating until the finalizer's backoff retries
// (minutes on a loaded machine), and a Helm release that deletes it then times out uninstalling.
func (cp *ControlPlane) WaitCRDCaches(ctx context.Context, group string) error {
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crds, err := dyn.Resource(crdGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, c := range crds.Items {
		if g, _, _ := unstructured.NestedString(c.Object, "spec", "group"); g != group {
			continue
		}
		plural, _, _ := unstructured.NestedString(c.Object, "spec", "names", "plural")
		versions, _, _ := unstructured.NestedSlice(c.Object, "spec", "versions")
		version := ""
		for _, v := range versions {
			if vm, ok := v.(map[string]any); ok && vm["storage"] == true {
				version, _ = vm["name"].(string)
			}
		}
		gvr := schema.GroupVersionResource{Group: group, Version: version, Resource: plural}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			if _, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{ResourceVersion: "0", Limit: 1}); err == nil {
				break
			} else if time.Now().After(deadline) {
				return fmt.Errorf("%s: objects not listed from the cache after a minute: %w", c.GetName(), err)
			}
		}
	}
	return nil
}

// DropLeases deletes the leader-election Leases in ns whose names start with prefix, as a
// rebuilt cluster starts without them. cert-manager v1.11 keeps its Leases after an uninstall
// (its pods do not release them on shutdown); a reinstall within their 60 s leaseDuration
// waits them out, and the cainjector injects the webhook's CA only after that: meanwhile every
// cert-manager object fails admission with `x509: certificate signed by unknown authority`,
// and the chart's startupapicheck hook (1 minute) can fail the release.
func (cp *ControlPlane) DropLeases(ctx context.Context, ns, prefix string) error {
	leases, err := cp.Client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, l := range leases.Items {
		if strings.HasPrefix(l.Name, prefix) {
			if err := cp.Client.CoordinationV1().Leases(ns).Delete(ctx, l.Name, metav1.DeleteOptions{}); err != nil {
				return err
			}
		}
	}
	return nil
}
