package registry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	corev1 "k8s.io/api/core/v1"
)

func TestClassify(t *testing.T) {
	anon := Attempt{Registry: "reg.example:5000", Repository: "team/app", Reference: "reg.example:5000/team/app:v1"}
	withCreds := anon
	withCreds.Creds = "ns/pull"
	basic := anon
	basic.Basic = true
	token := anon
	token.TokenPhase = true
	status := func(code int, codes ...transport.ErrorCode) error {
		e := &transport.Error{StatusCode: code}
		for _, c := range codes {
			e.Errors = append(e.Errors, transport.Diagnostic{Code: c, Message: strings.ToLower(string(c))})
		}
		return e
	}
	urlErr := func(err error) error { return &url.Error{Op: "Get", URL: "https://reg.example:5000/v2/", Err: err} }
	refused := urlErr(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})
	for name, tc := range map[string]struct {
		rc       Attempt
		err      error
		terminal bool
		want     string
	}{
		"tag not pushed":                {anon, status(404, transport.ManifestUnknownErrorCode), false, "not pushed yet"},
		"repository not created":        {anon, status(404, transport.NameUnknownErrorCode), false, "does not exist in reg.example:5000 yet"},
		"bare 404":                      {anon, status(404), false, "not found"},
		"connection refused":            {anon, refused, false, "connection refused"},
		"refused on both schemes":       {anon, errors.Join(refused, urlErr(&PlainHTTPRefused{Host: "reg.example:5000"})), false, "connection refused"},
		"5xx":                           {anon, status(503, transport.UnavailableErrorCode), false, "HTTP 503"},
		"rate limited":                  {anon, status(429, transport.TooManyRequestsErrorCode), false, "rate-limiting"},
		"timeout":                       {anon, urlErr(context.DeadlineExceeded), false, "did not answer in time"},
		"DNS":                           {anon, urlErr(&net.DNSError{Err: "no such host", Name: "reg.example"}), false, "cannot resolve"},
		"unknown answer":                {anon, errors.New("HEAD: response did not include Docker-Content-Digest header"), false, "Docker-Content-Digest"},
		"anonymous, bearer repo denied": {anon, status(401, transport.UnauthorizedErrorCode), false, "does not exist yet, or it is private"},
		"anonymous, basic registry":     {basic, status(401, transport.UnauthorizedErrorCode), true, "set pullSecret"},
		"anonymous, token refused":      {token, status(401), true, "requires credentials"},
		"credentials refused":           {withCreds, status(401, transport.UnauthorizedErrorCode), true, "refused the credentials from pullSecret ns/pull"},
		"credentials denied":            {withCreds, status(403, transport.DeniedErrorCode), true, "refused the credentials"},
		"unknown CA":                    {anon, urlErr(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), true, "set caCertificate"},
		"unknown CA among fallbacks":    {anon, errors.Join(urlErr(x509.UnknownAuthorityError{}), status(400)), true, "set caCertificate"},
		"wrong host in certificate":     {anon, urlErr(x509.HostnameError{Certificate: &x509.Certificate{}, Host: "reg.example"}), true, "not valid for that host"},
		"plain HTTP server":             {anon, urlErr(http.ErrSchemeMismatch), true, "set insecure: true"},
		"plain HTTP refused":            {anon, errors.Join(urlErr(errors.New("tls: first record does not look like a TLS handshake")), urlErr(&PlainHTTPRefused{Host: "10.0.0.5:5000"})), true, "set insecure: true"},
		"invalid name":                  {anon, status(400, transport.NameInvalidErrorCode), true, "rejects the reference"},
	} {
		t.Run(name, func(t *testing.T) {
			msg, terminal, _ := tc.rc.Classify(tc.err)
			if terminal != tc.terminal || !strings.Contains(msg, tc.want) {
				t.Errorf("Classify(%v) = %q terminal=%v, want terminal=%v containing %q", tc.err, msg, terminal, tc.terminal, tc.want)
			}
		})
	}
}

func TestAuth(t *testing.T) {
	repo := func(s string) name.Repository {
		r, err := name.NewRepository(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	secret := func(typ corev1.SecretType, config string) *corev1.Secret {
		return &corev1.Secret{Type: typ, Data: map[string][]byte{".dockerconfigjson": []byte(config)}}
	}
	enc := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	const dcj = corev1.SecretTypeDockerConfigJson
	for name, tc := range map[string]struct {
		secret   *corev1.Secret
		repo     string
		user     string // want; "" = want an error containing errText
		errText  string
		noLeak   string
		password string
	}{
		"host key":             {secret(dcj, `{"auths":{"reg.example:5000":{"auth":"`+enc("u:p")+`"}}}`), "reg.example:5000/app", "u", "", "", "p"},
		"URL key":              {secret(dcj, `{"auths":{"https://reg.example:5000/v1/":{"username":"u","password":"p"}}}`), "reg.example:5000/app", "u", "", "", "p"},
		"Docker Hub legacy":    {secret(dcj, `{"auths":{"https://index.docker.io/v1/":{"username":"hub","password":"p"}}}`), "library/nginx", "hub", "", "", "p"},
		"wildcard":             {secret(dcj, `{"auths":{"*.example.com":{"username":"w","password":"p"}}}`), "reg.example.com/app", "w", "", "", "p"},
		"longest path wins":    {secret(dcj, `{"auths":{"reg.io":{"username":"all","password":"p"},"reg.io/team":{"username":"team","password":"p"}}}`), "reg.io/team/app", "team", "", "", "p"},
		"path of another repo": {secret(dcj, `{"auths":{"reg.io/other":{"username":"o","password":"p"}}}`), "reg.io/team/app", "", "has no credentials for registry reg.io", "", ""},
		"port must match":      {secret(dcj, `{"auths":{"reg.io:5000":{"username":"o","password":"p"}}}`), "reg.io/app", "", "has no credentials for registry reg.io", "reg.io:5000", ""},
		"wildcard one label":   {secret(dcj, `{"auths":{"*.io":{"username":"o","password":"p"}}}`), "a.reg.io/app", "", "has no credentials", "", ""},
		"identity token":       {secret(dcj, `{"auths":{"reg.io":{"identitytoken":"tok"}}}`), "reg.io/app", "", "", "", ""},
		"Opaque":               {secret(corev1.SecretTypeOpaque, `{}`), "reg.io/app", "", `has type "Opaque"`, "", ""},
		"not JSON":             {secret(dcj, `{"auths": secret-value-here`), "reg.io/app", "", "is not a JSON object", "secret-value-here", ""},
		"bad auth":             {secret(dcj, `{"auths":{"reg.io":{"auth":"not base64 hunter2"}}}`), "reg.io/app", "", "not base64 of user:password", "hunter2", ""},
		"empty entry":          {secret(dcj, `{"auths":{"reg.io":{}}}`), "reg.io/app", "", "has no username, password, auth or token", "", ""},
		"no key":               {&corev1.Secret{Type: dcj}, "reg.io/app", "", "has no .dockerconfigjson key", "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := Auth(tc.secret, repo(tc.repo))
			switch {
			case name == "identity token":
				if err != nil || cfg.IdentityToken != "tok" {
					t.Errorf("got %+v, %v", cfg.Username, err)
				}
			case tc.user != "":
				if err != nil || cfg.Username != tc.user || cfg.Password != tc.password {
					t.Errorf("got user %q, err %v; want %q", cfg.Username, err, tc.user)
				}
			default:
				if err == nil || !strings.Contains(err.Error(), tc.errText) {
					t.Fatalf("err = %v, want %q", err, tc.errText)
				}
				if tc.noLeak != "" && strings.Contains(err.Error(), tc.noLeak) {
					t.Errorf("error quotes the Secret (%q): %v", tc.noLeak, err)
				}
			}
		})
	}
}

func TestPinnedBase(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:5000/app:v1":                   "127.0.0.1:5000/app",
		"127.0.0.1:5000/app":                      "127.0.0.1:5000/app",
		"nginx":                                   "nginx",
		"nginx:1.27":                              "nginx",
		"reg.io:443/team/app@sha256:" + hex64:     "reg.io:443/team/app",
		"reg.io/team/app:v1@sha256:" + hex64:      "reg.io/team/app",
		"localhost:5001/deep/path/app:2026-11-23": "localhost:5001/deep/path/app",
	} {
		if got := PinnedBase(in); got != want {
			t.Errorf("PinnedBase(%q) = %q, want %q", in, got, want)
		}
	}
}

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// Plain HTTP only with insecure or on loopback. The inner transport never dials: a broken
// guard fails this test, it does not reach a private address.
func TestSchemeGuard(t *testing.T) {
	var reached []string
	inner := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		reached = append(reached, r.URL.String())
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	})
	for _, tc := range []struct {
		url     string
		plainOK bool
		pass    bool
	}{
		{"http://10.1.2.3:5000/v2/", false, false},
		{"http://192.168.1.9/v2/", false, false},
		{"http://registry.internal/v2/", false, false},
		{"http://10.1.2.3:5000/v2/", true, true},
		{"http://127.0.0.1:5000/v2/", false, true},
		{"http://localhost:5000/v2/", false, true},
		{"http://[::1]:5000/v2/", false, true},
		{"https://10.1.2.3:5000/v2/", false, true},
	} {
		reached = nil
		req, _ := http.NewRequest(http.MethodGet, tc.url, nil)
		_, err := (&SchemeGuard{Inner: inner, PlainOK: tc.plainOK}).RoundTrip(req)
		if pass := err == nil && len(reached) == 1; pass != tc.pass {
			t.Errorf("%s (insecure=%v): passed=%v err=%v, want passed=%v", tc.url, tc.plainOK, pass, err, tc.pass)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
