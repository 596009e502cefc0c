package fakes

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"time"
)

// Issued is a certificate a test "issues" as cert-manager would, with its key and CA.
type Issued struct {
	CertPEM, KeyPEM, CAPEM []byte
	NotAfter               time.Time
	Serial                 *big.Int
}

// Names are what a certificate is issued for, as a Certificate's spec asks (spec.commonName,
// dnsNames, ipAddresses, uris, emailAddresses).
type Names struct {
	CommonName                                  string
	DNSNames, IPAddresses, URIs, EmailAddresses []string
}

// IssueCertificate makes a CA and a leaf certificate for dnsName (or an IP address) valid for
// validFor, dnsName also its common name.
func IssueCertificate(dnsName string, validFor time.Duration) (Issued, error) {
	if net.ParseIP(dnsName) != nil {
		return Issue(Names{CommonName: dnsName, IPAddresses: []string{dnsName}}, validFor)
	}
	return Issue(Names{CommonName: dnsName, DNSNames: []string{dnsName}}, validFor)
}

// Issue makes a CA and a leaf certificate carrying exactly names, valid for validFor: what
// cert-manager's CA issuer signs for a request made from a Certificate's spec (no common name
// unless the spec asks for one).
func Issue(names Names, validFor time.Duration) (Issued, error) {
	return IssueBetween(names, time.Now().Add(-time.Minute), time.Now().Add(validFor))
}

// IssueBetween is Issue with the leaf's notBefore and notAfter (each truncated to the second, as
// X.509 keeps them).
func IssueBetween(names Names, notBefore, notAfter time.Time) (Issued, error) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return Issued{}, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	notAfter = notAfter.Truncate(time.Second)
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: names.CommonName}, DNSNames: names.DNSNames,
		EmailAddresses: names.EmailAddresses, NotBefore: notBefore.Truncate(time.Second), NotAfter: notAfter}
	for _, s := range names.IPAddresses {
		ip := net.ParseIP(s)
		if ip == nil {
			return Issued{}, fmt.Errorf("ipAddresses: %q is not an IP address", s)
		}
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	}
	for _, s := range names.URIs {
		u, err := url.Parse(s)
		if err != nil {
			return Issued{}, fmt.Errorf("uris: %v", err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return Issued{}, err
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return Issued{
		CertPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:   pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		CAPEM:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		NotAfter: notAfter, Serial: serial,
	}, nil
}
