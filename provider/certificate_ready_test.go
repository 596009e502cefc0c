package provider

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"github.com/readiness-io/pulumi-readiness/internal/fakes"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/internal/tools"
)

var certManagerCRDsOnce sync.Once

// installCertManagerCRDs installs the CRDs shipped in the pinned cert-manager module.
func installCertManagerCRDs(t *testing.T) {
	certManagerCRDsOnce.Do(func() {
		crds, err := tools.ModuleCRDs(context.Background(), tools.CertManagerModule, "deploy/crds")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range crds {
			_, err := testenv.Dynamic(t).Resource(crdResource).Create(context.Background(), c, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
	})
}

func writeTLSSecret(t *testing.T, ns, name string, c fakes.Issued) {
	t.Helper()
	sec := testenv.Object(t, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: %s, namespace: %s}\ntype: kubernetes.io/tls", name, ns))
	sec.Object["data"] = map[string]any{
		"tls.crt": base64.StdEncoding.EncodeToString(c.CertPEM),
		"tls.key": base64.StdEncoding.EncodeToString(c.KeyPEM),
		"ca.crt":  base64.StdEncoding.EncodeToString(c.CAPEM),
	}
	ri := testenv.Resource(t, sec)
	if cur, err := ri.Get(context.Background(), name, metav1.GetOptions{}); err == nil {
		sec.SetResourceVersion(cur.GetResourceVersion())
		if _, err := ri.Update(context.Background(), sec, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := ri.Create(context.Background(), sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func certificate(ns, name, secret string) string {
	return fmt.Sprintf(`apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: %s, namespace: %s}
spec:
  secretName: %s
  dnsNames: [%s.example.test]
  issuerRef: {name: vault-issuer, kind: ClusterIssuer}`, name, ns, secret, name)
}

// setCertStatus plays cert-manager writing a Certificate's status.
func setCertStatus(t *testing.T, ns, name string, status map[string]any) {
	t.Helper()
	obj := testenv.Object(t, certificate(ns, name, "x"))
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := testenv.Resource(t, obj).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Object["status"] = status
		_, err = testenv.Resource(t, obj).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func readyStatus(c fakes.Issued, revision int64) map[string]any {
	now := time.Now().UTC().Format(time.RFC3339)
	return map[string]any{
		"revision": revision, "notAfter": c.NotAfter.UTC().Format(time.RFC3339), "notBefore": now,
		"renewalTime": c.NotAfter.Add(-time.Hour).UTC().Format(time.RFC3339),
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready",
			"message": "Certificate is up to date and has not expired", "observedGeneration": int64(1), "lastTransitionTime": now}},
	}
}

func TestCertificateReady(t *testing.T) {
	ns := testenv.Namespace(t, "cert")
	s := newServer(t)

	t.Run("CRDs, Certificate and Secret all appear after the gate started", func(t *testing.T) {
		ch := createAsync(t, s, "CertificateReady", props("name", "web", "namespace", ns, "minValidity", "1h", "timeout", "90s"))
		mustNotReturn(t, ch, time.Second) // not even cert-manager's CRDs exist (in a fresh control plane)
		installCertManagerCRDs(t)
		testenv.Apply(t, certificate(ns, "web", "web-tls"))
		c := testenv.IssueCertificate(t, "web.example.test", 48*time.Hour)
		setCertStatus(t, ns, "web", readyStatus(c, 1))
		mustNotReturn(t, ch, time.Second) // Ready=True but no Secret: the FailedMount of field report 000
		writeTLSSecret(t, ns, "web-tls", c)
		r := await(t, ch, 30*time.Second)
		if r.err != nil {
			t.Fatal(r.err)
		}
		out := r.resp.Properties
		if got := out.Get("secretName").AsString(); got != "web-tls" {
			t.Errorf("secretName = %q", got)
		}
		if got := out.Get("serialNumber").AsString(); got != fmt.Sprintf("%x", c.Serial) {
			t.Errorf("serialNumber = %q, want %x", got, c.Serial)
		}
		if got := out.Get("notAfter").AsString(); got != c.NotAfter.UTC().Format(time.RFC3339) {
			t.Errorf("notAfter = %q", got)
		}
		if got := outStrings(t, out, "dnsNames"); len(got) != 1 || got[0] != "web.example.test" {
			t.Errorf("dnsNames = %v", got)
		}
		if got := out.Get("caCertificate").AsString(); got != string(c.CAPEM) {
			t.Errorf("caCertificate = %q", got)
		}
		if iss := out.Get("issuerRef").AsMap(); iss.Get("name").AsString() != "vault-issuer" || iss.Get("kind").AsString() != "ClusterIssuer" {
			t.Errorf("issuerRef = %v", iss)
		}
		all := fmt.Sprint(out)
		keyB64 := base64.StdEncoding.EncodeToString(c.KeyPEM)
		if strings.Contains(all, "PRIVATE KEY") || strings.Contains(all, keyB64) || strings.Contains(all, string(c.KeyPEM[40:80])) {
			t.Error("outputs contain private key material")
		}
	})

	t.Run("a stale Secret from the previous revision is not accepted", func(t *testing.T) {
		old := testenv.IssueCertificate(t, "web.example.test", 48*time.Hour)
		renewed := testenv.IssueCertificate(t, "web.example.test", 72*time.Hour)
		writeTLSSecret(t, ns, "web-tls", old)
		setCertStatus(t, ns, "web", readyStatus(renewed, 2)) // status already reports the renewed one
		ch := createAsync(t, s, "CertificateReady", props("name", "web", "namespace", ns, "timeout", "20s"))
		mustNotReturn(t, ch, time.Second)
		writeTLSSecret(t, ns, "web-tls", renewed)
		r := await(t, ch, 30*time.Second)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if got := r.resp.Properties.Get("revision").AsNumber(); got != 2 {
			t.Errorf("revision = %v", got)
		}
	})

	t.Run("a Secret issued for an earlier spec waits until cert-manager re-issues", func(t *testing.T) {
		testenv.Apply(t, certificate(ns, "names", "names-tls")) // asks for names.example.test
		old := testenv.IssueBetween(t, fakes.Names{DNSNames: []string{"old.example.test"}}, time.Now().Add(-time.Minute), time.Now().Add(48*time.Hour))
		writeTLSSecret(t, ns, "names-tls", old)
		setCertStatus(t, ns, "names", readyStatus(old, 1)) // the very certificate reported: only its names differ
		mustFailWith(t, createAsync(t, s, "CertificateReady", props("name", "names", "namespace", ns, "timeout", "2s")),
			"timed out", "Secret names-tls holds a certificate for DNS names [old.example.test], the Certificate asks for DNS names [names.example.test]")
		ch := createAsync(t, s, "CertificateReady", props("name", "names", "namespace", ns, "timeout", "60s"))
		mustNotReturn(t, ch, time.Second)
		reissued := testenv.IssueCertificate(t, "names.example.test", 72*time.Hour)
		writeTLSSecret(t, ns, "names-tls", reissued)
		setCertStatus(t, ns, "names", readyStatus(reissued, 2))
		if r := await(t, ch, 30*time.Second); r.err != nil {
			t.Fatal(r.err)
		}
	})

	t.Run("a certificate not valid yet passes at its notBefore, with no event to wake the gate", func(t *testing.T) {
		testenv.Apply(t, certificate(ns, "early", "early-tls"))
		notBefore := time.Now().Add(3 * time.Second).Truncate(time.Second).Add(time.Second)
		c := testenv.IssueBetween(t, fakes.Names{DNSNames: []string{"early.example.test"}}, notBefore, notBefore.Add(48*time.Hour))
		writeTLSSecret(t, ns, "early-tls", c)
		setCertStatus(t, ns, "early", readyStatus(c, 1))
		r := await(t, createAsync(t, s, "CertificateReady", props("name", "early", "namespace", ns, "timeout", "60s")), 30*time.Second)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.at.Before(notBefore) || r.at.After(notBefore.Add(5*time.Second)) {
			t.Errorf("gate returned at %s, want at its certificate's notBefore %s", r.at.Format(time.RFC3339Nano), notBefore.Format(time.RFC3339))
		}
	})

	t.Run("a missing issuer times out quoting cert-manager's reason", func(t *testing.T) {
		testenv.Apply(t, certificate(ns, "api", "api-tls"))
		setCertStatus(t, ns, "api", map[string]any{"conditions": []any{
			map[string]any{"type": "Ready", "status": "False", "reason": "DoesNotExist", "observedGeneration": int64(1),
				"message": `Issuer "vault-issuer" not found`, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)},
			map[string]any{"type": "Issuing", "status": "True", "reason": "DoesNotExist", "observedGeneration": int64(1),
				"message": "Issuing certificate as Secret does not exist", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)},
		}})
		r := await(t, createAsync(t, s, "CertificateReady", props("name", "api", "namespace", ns, "timeout", "2s")), 30*time.Second)
		if r.err == nil || !strings.Contains(r.err.Error(), `Issuer "vault-issuer" not found`) {
			t.Fatalf("want a timeout quoting the missing issuer, got %v", r.err)
		}
	})

	t.Run("a Denied CertificateRequest fails fast", func(t *testing.T) {
		testenv.Apply(t, certificate(ns, "denied", "denied-tls"))
		ch := createAsync(t, s, "CertificateReady", props("name", "denied", "namespace", ns, "timeout", "10m"))
		csr := testenv.IssueCertificate(t, "denied.example.test", time.Hour)
		cr := testenv.Apply(t, fmt.Sprintf(`apiVersion: cert-manager.io/v1
kind: CertificateRequest
metadata:
  name: denied-1
  namespace: %s
  annotations: {cert-manager.io/certificate-name: denied, cert-manager.io/certificate-revision: "1"}
spec:
  request: %s
  issuerRef: {name: vault-issuer, kind: ClusterIssuer}`, ns, base64.StdEncoding.EncodeToString(csr.CertPEM)))[0]
		now := time.Now().UTC().Format(time.RFC3339)
		cr.Object["status"] = map[string]any{"conditions": []any{
			map[string]any{"type": "Denied", "status": "True", "reason": "PolicyDenied", "message": "dnsName denied.example.test is not allowed", "lastTransitionTime": now},
			map[string]any{"type": "Ready", "status": "False", "reason": "Denied", "message": "The CertificateRequest was denied by an approval controller", "lastTransitionTime": now},
		}}
		if _, err := testenv.Resource(t, cr).UpdateStatus(context.Background(), cr, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		r := await(t, ch, 30*time.Second)
		if r.err == nil || !strings.Contains(r.err.Error(), "denied") || !strings.Contains(r.err.Error(), "PolicyDenied") {
			t.Fatalf("want a fast failure quoting the denial, got %v", r.err)
		}
	})
}

// TestCertificateReadyCACertificateKeepsOnlyCertificates: a ca.crt that holds a CERTIFICATE and
// then a PRIVATE KEY (a tool that concatenated the wrong files) must output the certificate only.
func TestCertificateReadyCACertificateKeepsOnlyCertificates(t *testing.T) {
	ns := testenv.Namespace(t, "cacrt")
	installCertManagerCRDs(t)
	testenv.Apply(t, certificate(ns, "web", "web-tls"))
	c := testenv.IssueCertificate(t, "web.example.test", 48*time.Hour)
	leaked := c
	leaked.CAPEM = append(append([]byte{}, c.CAPEM...), c.KeyPEM...)
	writeTLSSecret(t, ns, "web-tls", leaked)
	setCertStatus(t, ns, "web", readyStatus(c, 1))
	s := newServer(t)
	r := await(t, createAsync(t, s, "CertificateReady", props("name", "web", "namespace", ns, "timeout", "60s")), 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := r.resp.Properties.Get("caCertificate").AsString(); got != string(c.CAPEM) {
		t.Errorf("caCertificate = %q, want the CA certificate alone", got)
	}
	if all := fmt.Sprint(r.resp.Properties); strings.Contains(all, "PRIVATE KEY") || strings.Contains(all, string(c.KeyPEM[40:80])) {
		t.Error("outputs contain private key material")
	}
}

// TestCertificateReadyRefusedRenewal (item 10): a Ready certificate whose renewal request was
// Denied still holds a valid certificate: the gate passes and refresh keeps it. The near miss: a
// Denied request for a changed spec (Ready is stale) still fails at once.
func TestCertificateReadyRefusedRenewal(t *testing.T) {
	installCertManagerCRDs(t)
	ns := testenv.Namespace(t, "renew")
	s := newServer(t)
	cert := testenv.Apply(t, certificate(ns, "web", "web-tls"))[0]
	c := testenv.IssueCertificate(t, "web.example.test", 48*time.Hour)
	setCertStatus(t, ns, "web", readyStatus(c, 1))
	writeTLSSecret(t, ns, "web-tls", c)
	csr := testenv.IssueCertificate(t, "web.example.test", time.Hour)
	cr := testenv.Apply(t, fmt.Sprintf(`apiVersion: cert-manager.io/v1
kind: CertificateRequest
metadata:
  name: web-2
  namespace: %s
  annotations: {cert-manager.io/certificate-name: web, cert-manager.io/certificate-revision: "2"}
spec:
  request: %s
  issuerRef: {name: vault-issuer, kind: ClusterIssuer}`, ns, base64.StdEncoding.EncodeToString(csr.CertPEM)))[0]
	now := time.Now().UTC().Format(time.RFC3339)
	writeStatus(t, cr, map[string]any{"conditions": []any{
		map[string]any{"type": "Denied", "status": "True", "reason": "PolicyDenied", "message": "renewals are frozen", "lastTransitionTime": now},
		map[string]any{"type": "Ready", "status": "False", "reason": "Denied", "message": "The CertificateRequest was denied by an approval controller", "lastTransitionTime": now},
	}})

	inputs := props("name", "web", "namespace", ns, "timeout", "30s")
	r := mustPass(t, createAsync(t, s, "CertificateReady", inputs))
	read, err := s.Read(p.ReadRequest{ID: r.resp.ID, Urn: urn("CertificateReady"), Properties: r.resp.Properties, Inputs: property.NewMap(inputs)})
	if err != nil {
		t.Fatalf("refresh failed on a refused renewal: %v", err)
	}
	if read.Properties.Get("notAfter").AsString() != c.NotAfter.UTC().Format(time.RFC3339) {
		t.Errorf("refresh outputs: %v", read.Properties)
	}

	// The spec changes (generation 2): Ready=True is now stale, and the request that would
	// issue the new spec was denied: that is a broken certificate.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := testenv.Resource(t, cert).Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Object["spec"].(map[string]any)["dnsNames"] = []any{"www.example.test"}
		_, err = testenv.Resource(t, cert).Update(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	mustFailWith(t, createAsync(t, s, "CertificateReady", props("name", "web", "namespace", ns, "timeout", "60s")), "denied", "PolicyDenied")
}

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

// TestCertificateReadyAheadOfReady: cert-manager writes the Secret from the CertificateRequest's
// certificate before its readiness controller sets Ready=True; the gate passes on the Secret
// once it provably holds this Certificate's issuance (issuance.issuedAhead), and not on near
// misses that look issued: a request of an earlier Certificate of the same name, a request
// that issued another certificate than the Secret holds, a Secret cert-manager did not write.
func TestCertificateReadyAheadOfReady(t *testing.T) {
	installCertManagerCRDs(t)
	ns := testenv.Namespace(t, "ahead")
	s := newServer(t)
	crt := testenv.Apply(t, certificate(ns, "web", "web-tls"))[0]
	now := time.Now().UTC().Format(time.RFC3339)
	issuing := map[string]any{"type": "Issuing", "status": "True", "reason": "DoesNotExist", "message": "Issuing certificate as Secret does not exist", "observedGeneration": int64(1), "lastTransitionTime": now}
	notReady := map[string]any{"type": "Ready", "status": "False", "reason": "DoesNotExist", "message": "Issuing certificate as Secret does not exist", "observedGeneration": int64(1), "lastTransitionTime": now}
	setCertStatus(t, ns, "web", map[string]any{"conditions": []any{notReady, issuing}})
	ch := createAsync(t, s, "CertificateReady", props("name", "web", "namespace", ns, "timeout", "60s"))

	c := testenv.IssueCertificate(t, "web.example.test", 48*time.Hour)
	// request writes CertificateRequest name, owned by Certificate owner (its uid), issued with cert.
	request := func(name string, owner *unstructured.Unstructured, cert []byte) {
		cr := testenv.Apply(t, fmt.Sprintf(`apiVersion: cert-manager.io/v1
kind: CertificateRequest
metadata:
  name: %s
  namespace: %s
  annotations: {cert-manager.io/certificate-name: web, cert-manager.io/certificate-revision: "1"}
  ownerReferences: [{apiVersion: cert-manager.io/v1, kind: Certificate, name: %s, uid: %s, controller: true, blockOwnerDeletion: true}]
spec:
  request: %s
  issuerRef: {name: vault-issuer, kind: ClusterIssuer}`, name, ns, owner.GetName(), owner.GetUID(), base64.StdEncoding.EncodeToString(c.CertPEM)))[0]
		writeStatus(t, cr, map[string]any{"certificate": base64.StdEncoding.EncodeToString(cert), "conditions": []any{
			map[string]any{"type": "Approved", "status": "True", "reason": "cert-manager.io", "message": "approved", "lastTransitionTime": now},
			map[string]any{"type": "Ready", "status": "True", "reason": "Issued", "message": "Certificate fetched from issuer successfully", "lastTransitionTime": now}}})
	}
	// The Secret, as cert-manager's issuing controller writes it, but first without its annotations.
	writeTLSSecret(t, ns, "web-tls", c)
	// A request of another Certificate (an owner that exists, named as it is: the garbage collector
	// removes a request whose owner reference names no object of that UID, as it removes an
	// earlier Certificate's of the same name, in time).
	other := testenv.Apply(t, certificate(ns, "other", "other-tls"))[0]
	request("web-old", other, c.CertPEM)
	request("web-other", crt, testenv.IssueCertificate(t, "web.example.test", 48*time.Hour).CertPEM)
	mustNotReturn(t, ch, time.Second)
	request("web-1", crt, c.CertPEM)
	mustNotReturn(t, ch, time.Second) // the Secret lacks cert-manager's annotations
	sec := testenv.Object(t, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: web-tls, namespace: %s}", ns))
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := testenv.Resource(t, sec).Get(context.Background(), "web-tls", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.SetAnnotations(map[string]string{"cert-manager.io/certificate-name": "web", "cert-manager.io/issuer-name": "vault-issuer",
			"cert-manager.io/issuer-kind": "ClusterIssuer", "cert-manager.io/issuer-group": "cert-manager.io"})
		_, err = testenv.Resource(t, sec).Update(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	r := await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	out := r.resp.Properties
	if got := out.Get("serialNumber").AsString(); got != fmt.Sprintf("%x", c.Serial) {
		t.Errorf("serialNumber = %q, want %x", got, c.Serial)
	}
	if got := out.Get("revision").AsNumber(); got != 1 {
		t.Errorf("revision = %v, want the request's 1 (cert-manager has not written status.revision)", got)
	}
	if all := fmt.Sprint(out); strings.Contains(all, "PRIVATE KEY") || strings.Contains(all, base64.StdEncoding.EncodeToString(c.KeyPEM)) {
		t.Error("outputs contain private key material")
	}
}
