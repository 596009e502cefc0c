package kube

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// NoKindError says the API server does not serve a kind (yet): usually its CRD is not installed.
type NoKindError struct {
	GVK schema.GroupVersionKind
}

func (e *NoKindError) Error() string {
	hint := "is its CRD installed?"
	if e.GVK.Group == "" || !containsDot(e.GVK.Group) {
		hint = "check the apiVersion and kind spelling"
	}
	return fmt.Sprintf("the API server does not serve kind %q in %q (no matches for kind): %s",
		e.GVK.Kind, e.GVK.GroupVersion().String(), hint)
}

func containsDot(s string) bool {
	for _, r := range s {
		if r == '.' {
			return true
		}
	}
	return false
}

// Mapping resolves a kind to its resource and scope. On a miss it forgets the cached discovery
// and asks again once, because a CRD may have been installed since the last lookup.
func (c *Clients) Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err == nil {
		return m, nil
	}
	if !meta.IsNoMatchError(err) {
		return nil, err
	}
	c.Mapper.Reset()
	m, err = c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return nil, &NoKindError{GVK: gvk}
	}
	return m, err
}
