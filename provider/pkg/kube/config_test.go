package kube

import (
	"encoding/base64"
	"strings"
	"testing"
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
