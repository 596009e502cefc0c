package provider

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"golang.org/x/net/http/httpguts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"

	"github.com/readiness-io/pulumi-readiness/provider/internal/probe"
	"github.com/readiness-io/pulumi-readiness/provider/internal/serviceproxy"
	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/httpcheck"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// HttpReady waits until an HTTP(S) endpoint answers as expected, several times in a row: the
// connectivity probe of field report 002's last wave. Nothing to watch, so it polls with
// capped backoff.
type HttpReady struct {
	gate[HttpReadyArgs, HttpReadyState]
}

type HttpService struct {
	Namespace string  `pulumi:"namespace"`
	Name      string  `pulumi:"name"`
	Port      *string `pulumi:"port,optional"`
	Path      *string `pulumi:"path,optional"`
	Scheme    *string `pulumi:"scheme,optional"`
}

func (s *HttpService) Annotate(a infer.Annotator) {
	a.Describe(&s.Namespace, "The Service's namespace.")
	a.Describe(&s.Name, "The Service's name.")
	a.Describe(&s.Port, "The Service port, by name or number 1-65535 (default: its first port).")
	a.Describe(&s.Path, "The path to request (default `/`), below the Service's proxy path: it must start with `/` and may not "+
		"hold `.` or `..` segments, `%`, `\\`, `?` or `#` (checked at preview), so the gate reaches nothing but that Service.")
	a.Describe(&s.Scheme, "`http` (default) or `https`.")
}

type HttpReadyArgs struct {
	URL                  *string           `pulumi:"url,optional" provider:"replaceOnChanges"`
	Headers              map[string]string `pulumi:"headers,optional" provider:"secret,replaceOnChanges"`
	Service              *HttpService      `pulumi:"service,optional" provider:"replaceOnChanges"`
	ExpectedStatus       *string           `pulumi:"expectedStatus,optional" provider:"replaceOnChanges"`
	BodyRegex            *string           `pulumi:"bodyRegex,optional" provider:"replaceOnChanges"`
	CACertificate        *string           `pulumi:"caCertificate,optional" provider:"replaceOnChanges"`
	InsecureSkipVerify   *bool             `pulumi:"insecureSkipVerify,optional" provider:"replaceOnChanges"`
	ConsecutiveSuccesses *int              `pulumi:"consecutiveSuccesses,optional" provider:"replaceOnChanges"`
	GateArgs
}

type HttpReadyState struct {
	HttpReadyArgs
	StatusCode int `pulumi:"statusCode"`
	Attempts   int `pulumi:"attempts"`
}

//go:embed descriptions/http_ready.md
var httpReadyDoc string

func (g *HttpReady) Annotate(a infer.Annotator) {
	a.Describe(g, markdown(httpReadyDoc))
}

func (a *HttpReadyArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.URL, "The URL to request. Give `url` or `service`. A URL that may carry a credential (a user part "+
		"`https://user:password@host/`, a query `?token=...` or a fragment) is kept secret in the state, inputs and outputs alike; "+
		"a URL without one stays plain. Its user part, query values and fragment are shown as `REDACTED` in the gate's ID, progress and errors.")
	an.Describe(&a.Headers, "Request headers for `url` (`Authorization: Bearer ...`, an API key, `Host` for a virtual host): always "+
		"kept secret in the state and never shown in a message. Not with `service`: through the service proxy the API server "+
		"takes `Authorization` for itself.")
	an.Describe(&a.Service, "A Service to request through the API server's service proxy (needs `get` on `services/proxy`).")
	an.Describe(&a.ExpectedStatus, "Accepted status codes: a code, a range or a list (`200`, `200-399`, `200,204`). Default `200-399`.")
	an.Describe(&a.BodyRegex, "A regular expression the response body must match.")
	an.Describe(&a.CACertificate, "PEM CA certificate(s) to trust for `url` (in addition to the system's).")
	an.Describe(&a.InsecureSkipVerify, "Skip TLS verification for `url` (not recommended).")
	an.Describe(&a.ConsecutiveSuccesses, "How many good answers in a row are needed (default 2), so a flapping endpoint does not pass.")
}

func (s *HttpReadyState) Annotate(a infer.Annotator) {
	a.Describe(&s.StatusCode, "The last status code.")
	a.Describe(&s.Attempts, "How many requests the gate made.")
}

var (
	_ = (infer.CustomCheck[HttpReadyArgs])((*HttpReady)(nil))
	_ = (infer.CustomRead[HttpReadyArgs, HttpReadyState])((*HttpReady)(nil))
)

func (*HttpReady) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[HttpReadyArgs], error) {
	return checkGate(ctx, req, func(args HttpReadyArgs, failures []p.CheckFailure) []p.CheckFailure {
		if (args.URL == nil) == (args.Service == nil) {
			failures = append(failures, p.CheckFailure{Property: "url", Reason: "give exactly one of url or service"})
		}
		if args.URL != nil && isKnown(req.NewInputs, "url") {
			if u, err := url.Parse(*args.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				failures = append(failures, p.CheckFailure{Property: "url", Reason: fmt.Sprintf("%q is not an http(s) URL", httpcheck.RedactURLString(*args.URL))})
			}
		}
		failures = append(failures, headerFailures(args)...)
		if args.Service != nil && isKnown(req.NewInputs, "service") {
			failures = append(failures, nameFailures(req.NewInputs, "service.name", args.Service.Name, "service.namespace", &args.Service.Namespace)...)
			if args.Service.Namespace == "" {
				failures = append(failures, p.CheckFailure{Property: "service.namespace", Reason: "must not be empty"})
			}
			failures = append(failures, proxyFailures(*args.Service)...)
		}
		if args.ExpectedStatus != nil && isKnown(req.NewInputs, "expectedStatus") {
			if _, err := httpcheck.ParseStatusSet(*args.ExpectedStatus); err != nil {
				failures = append(failures, p.CheckFailure{Property: "expectedStatus", Reason: err.Error()})
			}
		}
		if args.BodyRegex != nil && isKnown(req.NewInputs, "bodyRegex") {
			if _, err := regexp.Compile(*args.BodyRegex); err != nil {
				failures = append(failures, p.CheckFailure{Property: "bodyRegex", Reason: fmt.Sprintf("invalid regex: %v", err)})
			}
		}
		if args.ConsecutiveSuccesses != nil && *args.ConsecutiveSuccesses < 1 {
			failures = append(failures, p.CheckFailure{Property: "consecutiveSuccesses", Reason: "must be at least 1"})
		}
		if args.CACertificate != nil && isKnown(req.NewInputs, "caCertificate") {
			if !x509.NewCertPool().AppendCertsFromPEM([]byte(*args.CACertificate)) {
				failures = append(failures, p.CheckFailure{Property: "caCertificate", Reason: "no PEM certificate found"})
			}
		}
		return failures
	})
}

func (g *HttpReady) Create(ctx context.Context, req infer.CreateRequest[HttpReadyArgs]) (infer.CreateResponse[HttpReadyState], error) {
	return createGate(ctx, req.Name, req.DryRun, req.Inputs.GateArgs, HttpReadyState{HttpReadyArgs: req.Inputs}, "http", httpBuilder(req.Inputs))
}

func (g *HttpReady) Read(ctx context.Context, req infer.ReadRequest[HttpReadyArgs, HttpReadyState]) (infer.ReadResponse[HttpReadyArgs, HttpReadyState], error) {
	return readGate(ctx, req, httpBuilder(req.Inputs))
}

func httpBuilder(a HttpReadyArgs) builder[HttpReadyState] {
	return func(r *session.Run) (evaluation, func(*HttpReadyState), error) {
		accept, err := httpcheck.ParseStatusSet(derefOr(a.ExpectedStatus, "200-399"))
		if err != nil {
			return nil, nil, fmt.Errorf("expectedStatus: %v", err)
		}
		e := &httpEval{r: r, args: a, accept: accept, need: 2}
		if a.ConsecutiveSuccesses != nil {
			e.need = *a.ConsecutiveSuccesses
		}
		if a.BodyRegex != nil {
			if e.body, err = regexp.Compile(*a.BodyRegex); err != nil {
				return nil, nil, fmt.Errorf("bodyRegex: %v", err)
			}
		}
		tlsCfg := &tls.Config{InsecureSkipVerify: deref(a.InsecureSkipVerify)} //nolint:gosec // the user's explicit choice
		if a.CACertificate != nil {
			pool, err := x509.SystemCertPool()
			if err != nil || pool == nil {
				pool = x509.NewCertPool()
			}
			pool.AppendCertsFromPEM([]byte(*a.CACertificate))
			tlsCfg.RootCAs = pool
		}
		e.client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}, CheckRedirect: noRedirects}
		return e, func(s *HttpReadyState) { s.StatusCode, s.Attempts = e.code, e.attempts }, nil
	}
}

type httpEval struct {
	r        *session.Run
	args     HttpReadyArgs
	accept   func(int) bool
	body     *regexp.Regexp
	need     int
	client   *http.Client
	good     int
	code     int
	attempts int
}

func (e *httpEval) what() string {
	if e.args.URL != nil {
		return "HTTP " + httpcheck.RedactURLString(*e.args.URL)
	}
	s := e.args.Service
	return fmt.Sprintf("HTTP service %s/%s%s", s.Namespace, s.Name, derefOr(s.Path, "/"))
}

// idTarget is what the gate's ID (kept in the state file, never a secret) says of a URL: its
// scheme and host and a digest of the rest, since a path may carry a token (a hook URL) even
// when userinfo and query values are redacted.
func (e *httpEval) idTarget() string {
	if e.args.URL == nil {
		return e.what()
	}
	u, err := url.Parse(*e.args.URL)
	if err != nil {
		return "HTTP (a URL that does not parse)"
	}
	// The digest is of the redacted URL: a short digest of a password is a dictionary attack's target.
	sum := sha256.Sum256([]byte(httpcheck.RedactURL(u)))
	return fmt.Sprintf("HTTP %s://%s (url sha256 %x)", u.Scheme, u.Host, sum[:6])
}

func (e *httpEval) check(ctx context.Context) verdict.Result {
	e.attempts++
	code, body, err := e.request(ctx)
	e.code = code
	var pe *proxyError
	if errors.As(err, &pe) {
		// The API server answered in the backend's place: never the backend's answer.
		e.good, e.code = 0, 0
		if pe.terminal() {
			return verdict.Result{Failed: fmt.Errorf("%s: %s", e.what(), pe.rbacMessage(e.args.Service.Namespace))}
		}
		return verdict.Result{Message: pe.Error(), Poll: true, Hint: pe.hint()}
	}
	ok := err == nil && e.accept(code) && (e.body == nil || e.body.Match(body))
	if !ok {
		e.good = 0
		var msg string
		switch {
		case err != nil:
			msg = httpcheck.RedactedError(err)
		case !e.accept(code):
			msg = fmt.Sprintf("HTTP %d (want %s)%s", code, derefOr(e.args.ExpectedStatus, "200-399"), httpcheck.Excerpt(body))
		default:
			msg = fmt.Sprintf("HTTP %d, but the body does not match /%s/", code, e.body)
		}
		return verdict.Result{Message: msg, Poll: true, Hint: "is the backend running, and is the URL/Service right?"}
	}
	e.good++
	if e.good < e.need {
		// One good answer of several: a proof under way, not a verdict (refresh keeps going).
		// The next answer is asked for after probe.ConfirmDelay, as WebhookReady confirms, not after a
		// backoff step: an endpoint that already answers passes in ~10 ms.
		return verdict.Result{Message: fmt.Sprintf("HTTP %d (%d of %d good answers in a row)", code, e.good, e.need), RetryIn: probe.ConfirmDelay, Confirming: true}
	}
	return verdict.Result{Ready: true, Message: fmt.Sprintf("HTTP %d", code)}
}

func (e *httpEval) request(ctx context.Context) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if e.args.URL != nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, *e.args.URL, nil)
		if err != nil {
			return 0, nil, err
		}
		for k, v := range e.args.Headers {
			if http.CanonicalHeaderKey(k) == "Host" {
				req.Host = v // net/http sends req.Host, never a Host header
				continue
			}
			req.Header.Set(k, v)
		}
		return serviceproxy.ReadAnswer(e.client.Do(req))
	}
	// Through the API server's service proxy, with the provider's credentials. The request is
	// made by hand (not ProxyGet().DoRaw()) to keep the exact status code and the body of every
	// answer, so the API server's own answers can be told from the backend's.
	s := e.args.Service
	rc, ok := e.r.Clients.Typed.CoreV1().RESTClient().(*rest.RESTClient)
	if !ok || rc.Client == nil {
		return 0, nil, errors.New("no HTTP client for the Kubernetes API")
	}
	u, err := serviceProxyURL(rc, *s)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, nil, err
	}
	client := *rc.Client // a shallow copy: the shared client follows redirects, the gate must not
	client.CheckRedirect = noRedirects
	code, body, err := serviceproxy.ReadAnswer(client.Do(req))
	if err != nil {
		return 0, nil, err
	}
	if st, ok := serviceproxy.APIServerAnswer(body); ok {
		return code, body, &proxyError{code: code, status: st}
	}
	return code, body, nil
}

// HttpReady's `service`: GET <API server>/api/v1/namespaces/<ns>/services/<name>/proxy<path>,
// made with the provider's credentials (see package serviceproxy). Only that path may be reached:
// a path that climbs out of it (`../../../secrets/x`) would turn the gate into a read of any API
// path the provider may read, so it is checked at preview (proxyFailures) and again at the last
// moment (serviceProxyURL).

// proxyFailures checks service.port, service.scheme and service.path at preview.
func proxyFailures(s HttpService) []p.CheckFailure {
	var out []p.CheckFailure
	if s.Port != nil {
		if msg := portProblem(*s.Port); msg != "" {
			out = append(out, p.CheckFailure{Property: "service.port", Reason: msg})
		}
	}
	if s.Scheme != nil && *s.Scheme != "" && *s.Scheme != "http" && *s.Scheme != "https" {
		out = append(out, p.CheckFailure{Property: "service.scheme", Reason: fmt.Sprintf(
			"%q is not a scheme the API server's service proxy speaks: give http or https", *s.Scheme)})
	}
	if s.Path != nil {
		if msg := httpcheck.ProxyPathProblem(*s.Path); msg != "" {
			out = append(out, p.CheckFailure{Property: "service.path", Reason: msg})
		}
	}
	return out
}

// serviceProxyURL is the service proxy URL for s, and an error unless it lies below the
// Service's proxy path (a check at the last moment, whatever Check let through).
func serviceProxyURL(rc *rest.RESTClient, s HttpService) (*url.URL, error) {
	path := derefOr(s.Path, "/")
	if msg := httpcheck.ProxyPathProblem(path); msg != "" {
		return nil, errors.New("service.path: " + msg)
	}
	if msg := portProblem(deref(s.Port)); msg != "" {
		return nil, errors.New("service.port: " + msg)
	}
	u, err := serviceproxy.URLBelow(rc, s.Namespace, utilnet.JoinSchemeNamePort(derefOr(s.Scheme, "http"), s.Name, deref(s.Port)), path)
	if err != nil {
		return nil, fmt.Errorf("service.path: %w", err)
	}
	return u, nil
}

// proxyError is an answer the API server gave in place of the backend.
type proxyError struct {
	code   int
	status metav1.Status
}

func (p *proxyError) Error() string {
	return fmt.Sprintf("not the backend's answer: the API server's service proxy answered HTTP %d (%s): %s",
		p.code, p.status.Reason, p.status.Message)
}

// terminal: the API server refused the provider's credentials or the proxy permission, which
// waiting does not fix.
func (p *proxyError) terminal() bool {
	switch p.status.Reason {
	case metav1.StatusReasonUnauthorized:
		return true
	case metav1.StatusReasonForbidden:
		// RBAC on the proxy subresource; another Forbidden Status (from a Kubernetes component
		// behind the Service) is just not proof.
		return strings.Contains(p.status.Message, "services/proxy")
	}
	return false
}

func (p *proxyError) rbacMessage(namespace string) string {
	if p.status.Reason == metav1.StatusReasonUnauthorized {
		return fmt.Sprintf("the API server refused the provider's credentials for the service proxy (HTTP %d): %s", p.code, p.status.Message)
	}
	return fmt.Sprintf("the API server refused the service proxy request (HTTP %d): %s; "+
		"grant verb \"get\" on resource \"services/proxy\" in namespace %q to this user "+
		"(a Role rule {apiGroups: [\"\"], resources: [\"services/proxy\"], verbs: [\"get\"]}, bound by a RoleBinding)",
		p.code, p.status.Message, namespace)
}

func (p *proxyError) hint() string {
	msg := p.status.Message
	switch {
	case p.status.Reason == metav1.StatusReasonNotFound:
		return "the Service (or its port) does not exist yet: kubectl get service -n <namespace>"
	case strings.Contains(msg, "no endpoints available"):
		return "no ready pod behind the Service: kubectl get pods,endpointslices -n <namespace>"
	case strings.Contains(msg, "error trying to reach service"):
		return "a pod is ready but does not accept connections on the target port: the backend's logs"
	}
	return "the API server could not proxy to the backend: kubectl get service,endpointslices -n <namespace>"
}

// noRedirects keeps the answer of the endpoint asked: a /healthz that redirects to a login page
// answering 200 is not healthy. A redirect is judged by its own status against expectedStatus.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// headerFailures checks `headers` without ever quoting a value: names must be HTTP tokens,
// values must hold no line break (a header injection), and headers go with `url` only.
func headerFailures(a HttpReadyArgs) []p.CheckFailure {
	if len(a.Headers) == 0 {
		return nil
	}
	var failures []p.CheckFailure
	if a.Service != nil {
		failures = append(failures, p.CheckFailure{Property: "headers", Reason: "headers apply to `url` only: through " +
			"the service proxy the API server takes Authorization for itself; probe the Service's URL with `url` instead"})
	}
	names := make([]string, 0, len(a.Headers))
	for k := range a.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !httpguts.ValidHeaderFieldName(k) {
			failures = append(failures, p.CheckFailure{Property: "headers", Reason: fmt.Sprintf("%q is not an HTTP header name", k)})
		} else if !httpguts.ValidHeaderFieldValue(a.Headers[k]) {
			failures = append(failures, p.CheckFailure{Property: fmt.Sprintf("headers[%q]", k), Reason: "the value holds a line break or a control character (not shown)"})
		}
	}
	return failures
}
