package fakes

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
)

// TestIssueCarriesTheSpecNames: the played cert-manager issues a certificate for exactly the
// names a Certificate's spec asks for, so CertificateReady's names check passes it as it passes
// cert-manager's own.
func TestIssueCarriesTheSpecNames(t *testing.T) {
	for name, spec := range map[string]status.CertificateSpec{
		"dnsNames":           {DNSNames: []string{"web.example.test", "www.example.test"}},
		"commonName":         {CommonName: "readiness-ca"},
		"every kind of name": {CommonName: "web", DNSNames: []string{"web.example.test"}, IPAddresses: []string{"10.0.0.1", "::1"}, URIs: []string{"spiffe://cluster.local/ns/apps/sa/web"}, EmailAddresses: []string{"ops@example.test"}},
	} {
		c, err := Issue(Names{CommonName: spec.CommonName, DNSNames: spec.DNSNames, IPAddresses: spec.IPAddresses, URIs: spec.URIs, EmailAddresses: spec.EmailAddresses}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := status.LeafCertificate(base64.StdEncoding.EncodeToString(c.CertPEM))
		if err != nil {
			t.Fatal(err)
		}
		if got, asked, differ := status.NamesDiffer(leaf, spec); differ {
			t.Errorf("%s: the certificate is for %s, the spec asks for %s", name, got, asked)
		}
	}
}
