package registry

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
)

// SchemeGuard refuses plain HTTP unless PlainOK (the gate's `insecure`) is set or the registry
// is on loopback. go-containerregistry falls back to HTTP for RFC 1918 addresses too; Docker does
// not, and a gate should not trust a private network more than a container runtime would.
type SchemeGuard struct {
	Inner   http.RoundTripper
	PlainOK bool
}

// PlainHTTPRefused is SchemeGuard's refusal.
type PlainHTTPRefused struct{ Host string }

func (e *PlainHTTPRefused) Error() string {
	return fmt.Sprintf("plain HTTP to %s refused: set insecure: true if the registry does not speak HTTPS", e.Host)
}

func (g *SchemeGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !g.PlainOK && !IsLoopbackHost(req.URL.Hostname()) {
		return nil, &PlainHTTPRefused{Host: req.URL.Host}
	}
	return g.Inner.RoundTrip(req)
}

// IsLoopbackHost reports whether h (a host without port) is `localhost` or a loopback IP.
func IsLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// ChallengeRecorder notes whether the registry's ping asked for HTTP Basic auth: then an
// anonymous 401 is a verdict (set pullSecret), not a repository that may appear.
type ChallengeRecorder struct {
	Inner http.RoundTripper
	basic atomic.Bool // the HTTPS and HTTP pings of a loopback registry run at once
}

// Basic reports whether a ping answered 401 with a Basic challenge.
func (c *ChallengeRecorder) Basic() bool { return c.basic.Load() }

func (c *ChallengeRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.Inner.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusUnauthorized && req.URL.Path == "/v2/" &&
		strings.HasPrefix(strings.ToLower(resp.Header.Get("WWW-Authenticate")), "basic") {
		c.basic.Store(true)
	}
	return resp, err
}
