package registry

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Attempt is what a registry error is judged against: the pull asked for and what the
// exchange showed before it failed.
type Attempt struct {
	Registry, Repository, Reference string
	Creds                           string // the pull Secret, "ns/name", or "" for anonymous
	Basic                           bool   // the registry asked for HTTP Basic auth (no anonymous token exists)
	TokenPhase                      bool   // the error came from the ping or the token endpoint, not the manifest
}

// Classify describes a registry error and says whether it is terminal (waiting cannot fix it:
// the message says which input to set) or transient (hint says what to look at meanwhile).
func (a Attempt) Classify(err error) (msg string, terminal bool, hint string) {
	var (
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
		terr      *transport.Error
		plain     *PlainHTTPRefused
		dnsErr    *net.DNSError
	)
	switch {
	case errors.As(err, &unknownCA):
		return fmt.Sprintf("the TLS certificate of registry %s is signed by an unknown authority: set caCertificate to the PEM "+
			"of the CA that signed it (or insecure: true to skip verification)", a.Registry), true, ""
	case errors.As(err, &hostErr):
		return fmt.Sprintf("the TLS certificate of registry %s is not valid for that host (%v): use the host name the certificate "+
			"names in image, or fix the certificate", a.Registry, hostErr.Error()), true, ""
	case errors.As(err, &invalid):
		return fmt.Sprintf("the TLS certificate of registry %s is invalid: %v", a.Registry, invalid.Error()), true, ""
	case errors.Is(err, http.ErrSchemeMismatch):
		return fmt.Sprintf("registry %s speaks plain HTTP, not HTTPS: set insecure: true to allow plain HTTP", a.Registry), true, ""
	case errors.As(err, &terr):
		return a.classifyStatus(terr)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("connection refused by %s (the registry is not listening yet)", a.Registry), false,
			"is the registry running and listening at " + a.Registry + "?"
	case errors.As(err, &dnsErr):
		return fmt.Sprintf("cannot resolve %s: %v", a.Registry, dnsErr), false, "is the registry host name right, and does it resolve from where the provider runs?"
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return fmt.Sprintf("%s did not answer in time: %v", a.Registry, err), false, "is the registry reachable from where the provider runs?"
	case errors.As(err, &plain):
		// Only after the transient causes: with HTTPS refused too, the registry is just down.
		return plain.Error(), true, ""
	}
	return err.Error(), false, "is " + a.Registry + " an OCI registry, reachable from where the provider runs?"
}

func (a Attempt) classifyStatus(terr *transport.Error) (string, bool, string) {
	code := func(c transport.ErrorCode) bool {
		for _, d := range terr.Errors {
			if d.Code == c {
				return true
			}
		}
		return false
	}
	what := fmt.Sprintf("HTTP %d", terr.StatusCode)
	if len(terr.Errors) > 0 {
		what += " " + string(terr.Errors[0].Code)
		if m := terr.Errors[0].Message; m != "" {
			what += ": " + m
		}
	}
	denied := terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden ||
		code(transport.UnauthorizedErrorCode) || code(transport.DeniedErrorCode)
	switch {
	case denied && a.Creds != "":
		return fmt.Sprintf("registry %s refused the credentials from pullSecret %s for %s (%s): check that they are valid "+
			"and may pull %s", a.Registry, a.Creds, a.Repository, what, a.Repository), true, ""
	case denied && (a.Basic || a.TokenPhase):
		return fmt.Sprintf("registry %s requires credentials (%s): set pullSecret to a kubernetes.io/dockerconfigjson Secret "+
			"with an entry for %s", a.Registry, what, a.Registry), true, ""
	case denied:
		// A token registry that gave an anonymous token but refuses the repository: Docker
		// Hub answers so for a repository that does not exist yet, which CI may be about to
		// create. Not proof, not a verdict.
		return fmt.Sprintf("registry %s refuses anonymous pulls of %s (%s): the repository does not exist yet, or it is private",
			a.Registry, a.Repository, what), false, "if the repository is private, set pullSecret"
	case code(transport.NameUnknownErrorCode):
		return fmt.Sprintf("repository %s does not exist in %s yet (%s)", a.Repository, a.Registry, what), false,
			"has CI pushed " + a.Reference + "? Is the repository name right?"
	case code(transport.ManifestUnknownErrorCode) || terr.StatusCode == http.StatusNotFound:
		return fmt.Sprintf("%s not found (%s): not pushed yet", a.Reference, what), false,
			"has CI pushed " + a.Reference + "? Is the tag right?"
	case code(transport.NameInvalidErrorCode) || code(transport.TagInvalidErrorCode):
		return fmt.Sprintf("registry %s rejects the reference %s (%s)", a.Registry, a.Reference, what), true, ""
	case terr.StatusCode == http.StatusTooManyRequests || code(transport.TooManyRequestsErrorCode):
		return fmt.Sprintf("registry %s is rate-limiting (%s)", a.Registry, what), false, "the registry's pull rate limits; set pullSecret to pull as a user"
	case terr.StatusCode >= 500:
		return fmt.Sprintf("registry %s answered %s", a.Registry, what), false, "the registry's health and logs"
	}
	return fmt.Sprintf("registry %s answered %s", a.Registry, what), false, "is " + a.Registry + " an OCI registry?"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
