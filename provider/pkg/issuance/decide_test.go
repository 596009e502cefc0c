package issuance

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/internal/fixtures"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// now is when every fixture is judged: the fixtures' dates are absolute.
var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// result is a Result as a fixture writes it: a gathered read, or what must be decided.
type result struct {
	Ready    bool   `json:"ready"`
	Message  string `json:"message"`
	Hint     string `json:"hint"`
	Failed   string `json:"failed"`
	Unsynced bool   `json:"unsynced"`
	Poll     bool   `json:"poll"`
	// RetryIn is a Go duration ("24h0m0s"): when only time makes the state acceptable.
	RetryIn string `json:"retryIn"`
}

func (r result) asResult() verdict.Result {
	w := verdict.Result{Ready: r.Ready, Message: r.Message, Hint: r.Hint, Unsynced: r.Unsynced, Poll: r.Poll}
	if r.RetryIn != "" {
		w.RetryIn, _ = time.ParseDuration(r.RetryIn)
	}
	if r.Failed != "" {
		w.Failed = errors.New(r.Failed)
	}
	return w
}

func resultOf(w verdict.Result) result {
	r := result{Ready: w.Ready, Message: w.Message, Hint: w.Hint, Unsynced: w.Unsynced, Poll: w.Poll}
	if w.RetryIn != 0 {
		r.RetryIn = w.RetryIn.String()
	}
	if w.Failed != nil {
		r.Failed = w.Failed.Error()
	}
	return r
}

// issued is the certificate the Secret's tls.crt holds; the test signs it. Its names are only
// those written (no common name unless commonName is).
type issued struct {
	NotBefore      string   `json:"notBefore"`
	NotAfter       string   `json:"notAfter"`
	CommonName     string   `json:"commonName"`
	DNSNames       []string `json:"dnsNames"`
	IPAddresses    []string `json:"ipAddresses"`
	URIs           []string `json:"uris"`
	EmailAddresses []string `json:"emailAddresses"`
}

// secret is what the Secret check returned; when ready, the Secret (with Annotations) holds
// Issued, or TLSCrt as is.
type secret struct {
	result      `json:",inline"`
	Issued      *issued           `json:"issued"`
	TLSCrt      string            `json:"tlsCrt"`
	Annotations map[string]string `json:"annotations"`
	// Key is what tls.key holds: "own" the certificate's private key, "other" another key,
	// "marker" what the provider's cache holds for a matching pair, "" bytes that are no key.
	Key string `json:"key"`
}

// Two markers a request's status.certificate may hold: the Secret's tls.crt, or a certificate
// of its own (another issuance).
const (
	secretsCertificate = "SECRET'S TLS.CRT"
	otherCertificate   = "ANOTHER CERTIFICATE"
)

func TestDecideFixtures(t *testing.T) {
	type tc struct {
		Name        string           `json:"name"`
		Pending     *result          `json:"pending"`
		Certificate map[string]any   `json:"certificate"`
		Secret      secret           `json:"secret"`
		Requests    []map[string]any `json:"requests"`
		MinValidity string           `json:"minValidity"`
		Want        result           `json:"want"`
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := func(k *ecdsa.PrivateKey) string {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	}
	sign := func(t *testing.T, c issued) string {
		t.Helper()
		parse := func(s string) time.Time {
			v, err := time.Parse(time.RFC3339, s)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: c.CommonName}, DNSNames: c.DNSNames,
			EmailAddresses: c.EmailAddresses, NotBefore: parse(c.NotBefore), NotAfter: parse(c.NotAfter)}
		for _, s := range c.IPAddresses {
			ip := net.ParseIP(s)
			if ip == nil {
				t.Fatalf("ipAddresses: %q is no IP address", s)
			}
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		}
		for _, s := range c.URIs {
			u, err := url.Parse(s)
			if err != nil {
				t.Fatal(err)
			}
			tmpl.URIs = append(tmpl.URIs, u)
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	}
	for _, c := range fixtures.Load[tc](t, "certificates.yaml") {
		t.Run(c.Name, func(t *testing.T) {
			in := Input{Namespace: "apps", Name: "web", Secret: c.Secret.asResult(), Now: now}
			if c.Pending != nil {
				// The gather step resolves an unanswered read before Decide.
				if got := resultOf(Unread(c.Pending.asResult())); got != c.Want {
					t.Errorf("got %+v\nwant %+v", got, c.Want)
				}
				return
			}
			if c.Certificate != nil {
				in.Certificate = fixtures.Object(t, c.Certificate)
			}
			if c.MinValidity != "" {
				if in.MinValidity, err = time.ParseDuration(c.MinValidity); err != nil {
					t.Fatal(err)
				}
			}
			if c.Secret.Ready {
				crt := c.Secret.TLSCrt
				if c.Secret.Issued != nil {
					crt = sign(t, *c.Secret.Issued)
				}
				tlsKey := map[string]string{"": "a2V5", "own": keyPEM(key), "other": keyPEM(other), "marker": status.KeyPairsMarker}[c.Secret.Key]
				in.SecretObject = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
					"metadata": map[string]any{"name": "web-tls", "namespace": "apps"},
					"data":     map[string]any{"tls.crt": crt, "tls.key": tlsKey}}}
				if c.Secret.Annotations != nil {
					in.SecretObject.SetAnnotations(c.Secret.Annotations)
				}
			}
			for _, r := range c.Requests {
				cr := fixtures.Object(t, r)
				switch marker, _, _ := unstructured.NestedString(cr.Object, "status", "certificate"); marker {
				case secretsCertificate:
					_ = unstructured.SetNestedField(cr.Object, in.SecretObject.Object["data"].(map[string]any)["tls.crt"], "status", "certificate")
				case otherCertificate:
					_ = unstructured.SetNestedField(cr.Object, sign(t, issued{NotBefore: "2025-12-30T00:00:00Z", NotAfter: "2026-03-30T00:00:00Z", DNSNames: []string{"web.example.test"}}), "status", "certificate")
				}
				in.Requests = append(in.Requests, cr)
			}
			v := Decide(in)
			got := resultOf(v.Result)
			if got != c.Want {
				t.Errorf("Decide =\n  %+v\nwant\n  %+v", got, c.Want)
			}
			if said := got.Message + got.Hint + got.Failed; strings.Contains(said, "a2V5") || strings.Contains(said, keyPEM(key)) || strings.Contains(said, keyPEM(other)) || c.Secret.Issued != nil && strings.Contains(said, in.SecretObject.Object["data"].(map[string]any)["tls.crt"].(string)) {
				t.Errorf("the verdict quotes the Secret's data: %q", said)
			}
			if c.Want.Ready != (v.Certificate != nil && v.Secret != nil) {
				t.Errorf("ready %v, but the verdict's objects: Certificate %v, Secret %v", c.Want.Ready, v.Certificate != nil, v.Secret != nil)
			}
		})
	}
}
