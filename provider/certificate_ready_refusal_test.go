package provider

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// A CertificateRequest cert-manager will retry (Failed: the issuer's error) keeps the gate
// waiting, quoting it, until its timeout; one refused for good (Denied, InvalidRequest) fails at
// once, and for a Ready certificate only when nothing but a renewal could make it acceptable
// (expired or under minValidity), not over a stale Secret that cert-manager rewrites.
func TestCertificateReadyWaitsOnRetriedRequests(t *testing.T) {
	installCertManagerCRDs(t)
	s := newServer(t)
	now := time.Now().UTC().Format(time.RFC3339)
	denied := []any{
		map[string]any{"type": "Denied", "status": "True", "reason": "PolicyDenied", "message": "renewals are frozen", "lastTransitionTime": now},
		map[string]any{"type": "Ready", "status": "False", "reason": "Denied", "message": "The CertificateRequest was denied by an approval controller", "lastTransitionTime": now},
	}
	failed := []any{
		map[string]any{"type": "Approved", "status": "True", "reason": "cert-manager.io", "message": "approved", "lastTransitionTime": now},
		map[string]any{"type": "Ready", "status": "False", "reason": "Failed", "message": "ACME order failed", "lastTransitionTime": now},
	}
	request := func(ns string, revision int, conds []any) {
		csr := testenv.IssueCertificate(t, "web.example.test", time.Hour)
		cr := testenv.Apply(t, fmt.Sprintf(`apiVersion: cert-manager.io/v1
kind: CertificateRequest
metadata:
  name: web-%d
  namespace: %s
  annotations: {cert-manager.io/certificate-name: web, cert-manager.io/certificate-revision: "%d"}
spec:
  request: %s
  issuerRef: {name: vault-issuer, kind: ClusterIssuer}`, revision, ns, revision, base64.StdEncoding.EncodeToString(csr.CertPEM)))[0]
		writeStatus(t, cr, map[string]any{"conditions": conds})
	}
	// firstIssuance: no certificate yet, its first request in the state conds.
	firstIssuance := func(conds []any) string {
		ns := testenv.Namespace(t, "crfirst")
		testenv.Apply(t, certificate(ns, "web", "web-tls"))
		setCertStatus(t, ns, "web", map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "False",
			"reason": "DoesNotExist", "message": "Issuing certificate as Secret does not exist", "observedGeneration": int64(1), "lastTransitionTime": now}}})
		request(ns, 1, conds)
		return ns
	}
	// renewal: a Ready certificate valid for 1h whose Secret holds secretValid's certificate
	// (another one than reported: a stale Secret), its renewal in the state conds.
	renewal := func(conds []any, stale bool) string {
		ns := testenv.Namespace(t, "crrenew")
		testenv.Apply(t, certificate(ns, "web", "web-tls"))
		c := testenv.IssueCertificate(t, "web.example.test", time.Hour)
		setCertStatus(t, ns, "web", readyStatus(c, 1))
		if stale {
			c = testenv.IssueCertificate(t, "web.example.test", 30*time.Minute)
		}
		writeTLSSecret(t, ns, "web-tls", c)
		request(ns, 2, conds)
		return ns
	}
	gate := func(ns, minValidity string) <-chan gateResult {
		in := props("name", "web", "namespace", ns, "timeout", "3s")
		if minValidity != "" {
			in = props("name", "web", "namespace", ns, "timeout", "3s", "minValidity", minValidity)
		}
		return createAsync(t, s, "CertificateReady", in)
	}
	waits := map[string]<-chan gateResult{
		"a failed first issuance (retried)":                gate(firstIssuance(failed), ""),
		"a failed renewal under minValidity (retried)":     gate(renewal(failed, false), "2h"),
		"a denied renewal with a stale Secret (rewritten)": gate(renewal(denied, true), ""),
	}
	fails := map[string]<-chan gateResult{
		"near miss: a denied first issuance":            gate(firstIssuance(denied), ""),
		"near miss: a denied renewal under minValidity": gate(renewal(denied, false), "2h"),
	}
	for name, ch := range waits {
		r := await(t, ch, 60*time.Second)
		if r.err == nil || !strings.Contains(r.err.Error(), "timed out") {
			t.Errorf("%s: want the gate to wait until its timeout, got %v", name, r.err)
		}
	}
	for name, ch := range fails {
		r := await(t, ch, 60*time.Second)
		if r.err == nil || strings.Contains(r.err.Error(), "timed out") || !strings.Contains(r.err.Error(), "PolicyDenied") {
			t.Errorf("%s: want the gate to fail at once quoting the denial, got %v", name, r.err)
		}
	}
}
