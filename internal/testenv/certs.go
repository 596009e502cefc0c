package testenv

import (
	"testing"
	"time"

	"github.com/readiness-io/pulumi-readiness/internal/fakes"
)

// IssueCertificate is fakes.IssueCertificate for tests.
func IssueCertificate(t testing.TB, dnsName string, validFor time.Duration) fakes.Issued {
	t.Helper()
	c, err := fakes.IssueCertificate(dnsName, validFor)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// IssueBetween is fakes.IssueBetween for tests.
func IssueBetween(t testing.TB, names fakes.Names, notBefore, notAfter time.Time) fakes.Issued {
	t.Helper()
	c, err := fakes.IssueBetween(names, notBefore, notAfter)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
