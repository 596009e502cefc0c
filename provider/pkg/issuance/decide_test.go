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
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/internal/fixtures"
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
}

func (r result) asResult() Result {
	w := Result{Ready: r.Ready, Message: r.Message, Hint: r.Hint, Unsynced: r.Unsynced, Poll: r.Poll}
	if r.Failed != "" {
		w.Failed = errors.New(r.Failed)
	}
	return w
}

func resultOf(w Result) result {
	r := result{Ready: w.Ready, Message: w.Message, Hint: w.Hint, Unsynced: w.Unsynced, Poll: w.Poll}
	if w.Failed != nil {
		r.Failed = w.Failed.Error()
	}
	return r
}

// issued is the certificate the Secret's tls.crt holds; the test signs it.
type issued struct {
	NotBefore string   `json:"notBefore"`
	NotAfter  string   `json:"notAfter"`
	DNSNames  []string `json:"dnsNames"`
}

// secret is what the Secret check returned; when ready, the Secret holds Issued, or TLSCrt as is.
type secret struct {
	result `json:",inline"`
	Issued *issued `json:"issued"`
	TLSCrt string  `json:"tlsCrt"`
}

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
	sign := func(t *testing.T, c issued) string {
		t.Helper()
		parse := func(s string) time.Time {
			v, err := time.Parse(time.RFC3339, s)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "web"}, DNSNames: c.DNSNames,
			NotBefore: parse(c.NotBefore), NotAfter: parse(c.NotAfter)}
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
				p := c.Pending.asResult()
				in.Pending = &p
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
				in.SecretObject = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
					"metadata": map[string]any{"name": "web-tls", "namespace": "apps"},
					"data":     map[string]any{"tls.crt": crt, "tls.key": "a2V5"}}}
			}
			for _, r := range c.Requests {
				in.Requests = append(in.Requests, fixtures.Object(t, r))
			}
			v := Decide(in)
			if got := resultOf(v.Result); got != c.Want {
				t.Errorf("Decide =\n  %+v\nwant\n  %+v", got, c.Want)
			}
			if c.Want.Ready != (v.Certificate != nil && v.Secret != nil) {
				t.Errorf("ready %v, but the verdict's objects: Certificate %v, Secret %v", c.Want.Ready, v.Certificate != nil, v.Secret != nil)
			}
		})
	}
}
