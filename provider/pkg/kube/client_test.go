package kube

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/restmapper"
)

const sampleKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: prod-cluster, cluster: {server: "https://10.1.2.3:6443", certificate-authority-data: Q0VSVElGSUNBVEUtREFUQS1YWFhY}}]
users: [{name: admin, user: {token: s3cr3t-t0ken-AAAAAAAAAAAAAAAAAAAAAAAA}}]
contexts: [{name: prod, context: {cluster: prod-cluster, user: admin}}]
current-context: prod
`

// secretFragments reports every piece of at least n characters of secret that appears in msg.
func secretFragments(msg, secret string, n int) []string {
	var found []string
	for i := 0; i+n <= len(secret); i++ {
		if frag := secret[i : i+n]; strings.TrimSpace(frag) == frag && strings.Contains(msg, frag) {
			found = append(found, frag)
		}
	}
	return found
}

func TestLoadConfigErrorsHoldNoPartOfTheKubeconfig(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte(sampleKubeconfig))
	for name, tc := range map[string]struct {
		value, context, want string
	}{
		// Field report: a base64 kubeconfig from a CI secret was taken for a path and echoed, cut.
		"base64 contents":        {b64, "", "base64-encoded kubeconfig"},
		"garbage taken for path": {strings.Repeat("Zm9vYmFyYmF6cXV4", 40), "", "file name too long"},
		"missing file":           {"/nonexistent/prod-cluster-cfg", "", "path of an existing file"},
		"broken YAML":            {sampleKubeconfig[:200] + "\n  - : ][", "", "not a valid kubeconfig"},
		"unknown context":        {sampleKubeconfig, "staging", "staging"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := LoadConfig(Settings{Kubeconfig: tc.value, Context: tc.context})
			if err == nil {
				t.Fatal("want an error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if leaks := secretFragments(err.Error(), tc.value, 8); len(leaks) > 0 {
				t.Errorf("error holds parts of the kubeconfig value %q: %q", leaks, err)
			}
		})
	}
}

func TestScrub(t *testing.T) {
	secret := "token: abcdefghijkl\nserver: https://prod.example:6443"
	for in, want := range map[string]string{
		`yaml: line 2: could not find "abcdefghijkl"`: `yaml: line 2: could not find "[redacted]"`,
		"context prod does not exist":                 "context prod does not exist",
		"open prod.example: denied":                   "open prod.[redacted]: denied",
	} {
		if got := scrub(in, secret, "prod"); got != want {
			t.Errorf("scrub(%q) = %q, want %q", in, got, want)
		}
	}
}

// refusingDiscovery answers every discovery request 401 and counts the resets (Invalidate).
type refusingDiscovery struct {
	discovery.CachedDiscoveryInterface
	invalidated int
}

func (d *refusingDiscovery) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	return nil, nil, apierrors.NewUnauthorized("token expired")
}
func (d *refusingDiscovery) Fresh() bool { return true }
func (d *refusingDiscovery) Invalidate() { d.invalidated++ }

// TestRefusalsResetDiscoveryAtMostOnceASecond: a flood of 401s (many gates, one revoked token)
// resets the cached discovery once, not once per lookup; a second later one refusal may reset
// it again (credentials an exec plugin refreshed since).
func TestRefusalsResetDiscoveryAtMostOnceASecond(t *testing.T) {
	d := &refusingDiscovery{}
	clock := time.Unix(1e9, 0)
	c := &Clients{Mapper: restmapper.NewDeferredDiscoveryRESTMapper(d), now: func() time.Time { return clock }}
	gvk := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	for i := 0; i < 100; i++ {
		if _, err := c.Mapping(gvk); !apierrors.IsUnauthorized(err) {
			t.Fatalf("lookup %d: err %v, want the 401", i, err)
		}
		if _, err := c.MappingAnyVersion(gvk.GroupKind()); !apierrors.IsUnauthorized(err) {
			t.Fatalf("lookup %d: err %v, want the 401", i, err)
		}
	}
	if d.invalidated != 1 {
		t.Errorf("200 refused lookups within a second reset discovery %d times, want 1", d.invalidated)
	}
	clock = clock.Add(999 * time.Millisecond)
	_, _ = c.Mapping(gvk)
	if d.invalidated != 1 {
		t.Errorf("a refusal 999 ms after the last reset reset again (%d)", d.invalidated)
	}
	clock = clock.Add(time.Millisecond)
	_, _ = c.Mapping(gvk)
	if d.invalidated != 2 {
		t.Errorf("a refusal a second after the last reset did not reset discovery (%d resets)", d.invalidated)
	}
}
