package status

import (
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
)

// KeyPairsMarker is what a Secret's tls.key holds in the provider's caches when it was the private
// key of the same Secret's tls.crt: the caches keep no private key (kube's trimSecret judges the
// pair before it drops the value). The base64 of a phrase, never key data.
const KeyPairsMarker = "cHJlc2VudCwgdGhlIHByaXZhdGUga2V5IG9mIHRscy5jcnQ=" // "present, the private key of tls.crt"

// KeyPairs reports whether a Secret's base64 tls.key holds the private key of cert, its tls.crt's
// leaf: a TLS server that mounts the pair fails to load one whose halves differ. Errors say what is
// wrong, never what the key holds. PKCS#8, PKCS#1 (RSA) and SEC 1 (EC) PEM blocks are read, as
// cert-manager writes them (spec.privateKey.encoding PKCS1 or PKCS8). KeyPairsMarker is no key
// here: only the cache's trim writes it, after this judged the real value.
func KeyPairs(keyB64 string, cert *x509.Certificate) error {
	raw, err := base64.StdEncoding.DecodeString(keyB64)
	if err != nil {
		return errors.New("tls.key is not base64")
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		return errors.New("tls.key holds no PEM block")
	}
	var key any
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return fmt.Errorf("tls.key holds a %q PEM block, not a private key", block.Type)
	}
	if err != nil {
		return fmt.Errorf("tls.key does not parse as a %s", block.Type)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return errors.New("tls.key holds a key of an unknown type")
	}
	pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return errors.New("tls.key is not the private key of tls.crt's certificate")
	}
	return nil
}
