package status

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

func TestKeyPairs(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	certOf := func(pub, signer any) *x509.Certificate {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "web"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, signer)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := x509.ParseCertificate(der)
		return c
	}
	enc := func(typ string, der []byte) string {
		return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	pkcs8 := func(k any) []byte { b, _ := x509.MarshalPKCS8PrivateKey(k); return b }
	sec1, _ := x509.MarshalECPrivateKey(ec)
	ecCert, rsaCert := certOf(&ec.PublicKey, ec), certOf(&rsaKey.PublicKey, rsaKey)
	for _, c := range []struct {
		name, key string
		cert      *x509.Certificate
		want      string // "" passes; else part of the error
	}{
		{"EC key, PKCS#8", enc("PRIVATE KEY", pkcs8(ec)), ecCert, ""},
		{"EC key, SEC 1", enc("EC PRIVATE KEY", sec1), ecCert, ""},
		{"RSA key, PKCS#1", enc("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey)), rsaCert, ""},
		{"RSA key, PKCS#8", enc("PRIVATE KEY", pkcs8(rsaKey)), rsaCert, ""},
		{"near miss: another key of the same kind", enc("PRIVATE KEY", pkcs8(other)), ecCert, "not the private key"},
		{"near miss: the RSA key beside an EC certificate", enc("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey)), ecCert, "not the private key"},
		{"near miss: a certificate where the key belongs", enc("CERTIFICATE", ecCert.Raw), ecCert, `"CERTIFICATE" PEM block`},
		{"near miss: a block that does not parse", enc("PRIVATE KEY", []byte("nonsense")), ecCert, "does not parse"},
		{"near miss: no PEM", base64.StdEncoding.EncodeToString([]byte("key")), ecCert, "no PEM block"},
		{"near miss: not base64", "%%%", ecCert, "not base64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := KeyPairs(c.key, c.cert)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("KeyPairs: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("KeyPairs = %v, want an error with %q", err, c.want)
			case err != nil && strings.Contains(err.Error(), c.key):
				t.Fatalf("the error quotes the key: %v", err)
			}
		})
	}
}
