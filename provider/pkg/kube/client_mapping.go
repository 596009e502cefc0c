package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/restmapper"
)

// NoKindError says the API server does not serve a kind (yet) at the version asked for:
// usually its CRD is not installed, sometimes the apiVersion is wrong. It names what the server
// does serve, so the message says which of the two it is.
type NoKindError struct {
	GVK schema.GroupVersionKind
	// Served lists the group/versions at which the server serves this group and kind instead
	// (apps/v1 when apps/v1beta1 was asked for), preferred first; empty when none.
	Served []string
	// GroupKinds lists the kinds the server serves in the group, when it serves the group but
	// not this kind at any version (a misspelt kind); empty otherwise.
	GroupKinds []string
}

func (e *NoKindError) Error() string {
	base := fmt.Sprintf("the API server does not serve kind %q in %q (no matches for kind)", e.GVK.Kind, e.GVK.GroupVersion().String())
	switch {
	case len(e.Served) > 0:
		return fmt.Sprintf("%s: it serves %s as %s; fix apiVersion", base, e.GVK.Kind, strings.Join(e.Served, ", "))
	case len(e.GroupKinds) > 0:
		hint := "check the kind's spelling"
		if strings.Contains(e.GVK.Group, ".") {
			hint += ", or is its CRD installed?"
		}
		return fmt.Sprintf("%s: group %q serves %s; %s", base, groupName(e.GVK.Group), strings.Join(e.GroupKinds, ", "), hint)
	case e.GVK.Group == "" || !strings.Contains(e.GVK.Group, "."):
		return base + ": check the apiVersion and kind spelling"
	}
	return base + ": is its CRD installed?"
}

func groupName(g string) string {
	if g == "" {
		return "core"
	}
	return g
}

// Mapping resolves a kind to its resource and scope. On a miss it forgets the cached discovery
// and asks again once, because a CRD may have been installed since the last lookup; a kind
// still unknown is a *NoKindError naming what the server serves instead.
func (c *Clients) Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := c.mapping(gvk)
	if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
		// Once more, with the credentials an exec plugin refreshes after a 401 (see retryAuthOnce).
		c.resetAfterRefusal()
		m, err = c.mapping(gvk)
	}
	return m, err
}

// refusalResetEvery is how often a refusal may reset discovery.
const refusalResetEvery = time.Second

// resetAfterRefusal forgets the cached discovery after a 401/403, so the next lookup asks
// again with the credentials an exec plugin refreshed: at most once a second, so that a flood
// of refusals (a thousand gates on a revoked token) does not re-run discovery for each. The
// lookups that skip the reset still ask again: a failed discovery is not cached.
func (c *Clients) resetAfterRefusal() {
	now := time.Now
	if c.now != nil {
		now = c.now
	}
	c.refusalMu.Lock()
	t := now()
	due := c.refusalReset.IsZero() || t.Sub(c.refusalReset) >= refusalResetEvery
	if due {
		c.refusalReset = t
	}
	c.refusalMu.Unlock()
	if due {
		c.Mapper.Reset()
	}
}

func (c *Clients) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
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
		return nil, c.noKind(gvk)
	}
	return m, err
}

// MappingAnyVersion resolves a group and kind at the version the server prefers among those it
// serves (for gates that read fields every version shares, and for `deleted`, whose objects are
// the same at every version). Misses re-discover once, as Mapping does.
func (c *Clients) MappingAnyVersion(gk schema.GroupKind) (*meta.RESTMapping, error) {
	m, err := c.mappingAnyVersion(gk)
	if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
		c.resetAfterRefusal()
		m, err = c.mappingAnyVersion(gk)
	}
	return m, err
}

func (c *Clients) mappingAnyVersion(gk schema.GroupKind) (*meta.RESTMapping, error) {
	m, err := c.Mapper.RESTMapping(gk)
	if err == nil {
		return m, nil
	}
	if !meta.IsNoMatchError(err) {
		return nil, err
	}
	c.Mapper.Reset()
	m, err = c.Mapper.RESTMapping(gk)
	if meta.IsNoMatchError(err) {
		return nil, c.noKind(gk.WithVersion(""))
	}
	return m, err
}

// noKind builds the NoKindError for gvk from the (just refreshed) discovery cache.
func (c *Clients) noKind(gvk schema.GroupVersionKind) *NoKindError {
	e := &NoKindError{GVK: gvk}
	if ms, err := c.Mapper.RESTMappings(gvk.GroupKind()); err == nil {
		for _, m := range ms {
			if gv := m.GroupVersionKind.GroupVersion().String(); m.GroupVersionKind.Version != gvk.Version {
				e.Served = append(e.Served, gv)
			}
		}
	}
	if len(e.Served) > 0 {
		return e
	}
	groups, err := restmapper.GetAPIGroupResources(c.Discovery)
	if err != nil {
		return e
	}
	kinds := map[string]bool{}
	for _, g := range groups {
		if g.Group.Name != gvk.Group {
			continue
		}
		for _, rs := range g.VersionedResources {
			for _, r := range rs {
				if !strings.Contains(r.Name, "/") && r.Kind != "" {
					kinds[r.Kind] = true
				}
			}
		}
	}
	for k := range kinds {
		e.GroupKinds = append(e.GroupKinds, k)
	}
	sort.Strings(e.GroupKinds)
	if len(e.GroupKinds) > 15 {
		e.GroupKinds = append(e.GroupKinds[:15], fmt.Sprintf("... (%d more)", len(kinds)-15))
	}
	return e
}

// DiscoveryRefusal asks the API server once, plainly (GET /api as JSON), why it refuses
// discovery: the discovery client negotiates aggregated discovery and reports a refusal as a
// bare "unknown", while the plain request returns the server's own message (verb, path, user).
// It returns nil when the plain request succeeds.
func (c *Clients) DiscoveryRefusal(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return c.Typed.Discovery().RESTClient().Get().AbsPath("/api").SetHeader("Accept", "application/json").Do(ctx).Error()
}
