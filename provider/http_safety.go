package provider

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
)

// HttpReady's service proxy request is GET <API server>/api/v1/namespaces/<ns>/services/<name>/proxy<path>,
// made with the provider's credentials. Only that path may be reached: a path that climbs out of
// it (`../../../secrets/x`) would turn the gate into a read of any API path the provider may read.

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
		if msg := proxyPathProblem(*s.Path); msg != "" {
			out = append(out, p.CheckFailure{Property: "service.path", Reason: msg})
		}
	}
	return out
}

// portProblem says what is wrong with a Service port given by name or number, or "".
func portProblem(port string) string {
	if port == "" {
		return ""
	}
	if n, err := strconv.Atoi(port); err == nil {
		if errs := validation.IsValidPortNum(n); len(errs) > 0 {
			return fmt.Sprintf("%d is not a port number: %s", n, strings.Join(errs, "; "))
		}
		return ""
	}
	if errs := validation.IsValidPortName(port); len(errs) > 0 {
		return fmt.Sprintf("%q is neither a port number nor a port name: %s", port, strings.Join(errs, "; "))
	}
	return ""
}

// proxyPathProblem says why path could reach anything but the Service's own proxy path, or "".
// Percent-encoding is refused outright: `%2e%2e` and `%2f` are how a `..` or a `/` hides from a check
// that a later decoding undoes.
func proxyPathProblem(path string) string {
	switch {
	case path == "":
		return ""
	case !strings.HasPrefix(path, "/"):
		return fmt.Sprintf("%q must start with /", path)
	case strings.ContainsAny(path, `%\?#`):
		return fmt.Sprintf("%q may not contain %%, \\, ? or #: the path is sent to the Service as given, below its proxy path, "+
			"and encoded or special characters could make it leave that path", path)
	case strings.IndexFunc(path, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return "the path may not contain control characters"
	}
	for _, seg := range strings.Split(path, "/") {
		if seg == "." || seg == ".." {
			return fmt.Sprintf("%q may not contain . or .. segments: the gate may only reach the Service's own proxy path", path)
		}
	}
	return ""
}

// serviceProxyURL is the service proxy URL for s, and an error unless it lies below the
// Service's proxy path (a check at the last moment, whatever Check let through).
func serviceProxyURL(rc *rest.RESTClient, s HttpService) (*url.URL, error) {
	path := derefOr(s.Path, "/")
	if msg := proxyPathProblem(path); msg != "" {
		return nil, errors.New("service.path: " + msg)
	}
	if msg := portProblem(deref(s.Port)); msg != "" {
		return nil, errors.New("service.port: " + msg)
	}
	u, err := proxyURLBelow(rc, s.Namespace, utilnet.JoinSchemeNamePort(derefOr(s.Scheme, "http"), s.Name, deref(s.Port)), path)
	if err != nil {
		return nil, fmt.Errorf("service.path: %w", err)
	}
	return u, nil
}

// proxyURLBelow is the service proxy URL of path for the Service <scheme:name:port> in namespace,
// and an error unless it lies below that Service's proxy path (the REST client cleans `..` away,
// so a path can climb out). HttpReady's service and a webhook's direct call both go through it.
func proxyURLBelow(rc *rest.RESTClient, namespace, schemeNamePort, path string) (*url.URL, error) {
	base := rc.Get().Namespace(namespace).Resource("services").SubResource("proxy").Name(schemeNamePort).URL()
	u := rc.Get().Namespace(namespace).Resource("services").SubResource("proxy").Name(schemeNamePort).Suffix(path).URL()
	if u.Path != base.Path && !strings.HasPrefix(u.Path, strings.TrimSuffix(base.Path, "/")+"/") {
		return nil, fmt.Errorf("%q leaves the Service's proxy path %s", path, base.Path)
	}
	return u, nil
}

// redactURL hides what a URL may carry as credentials: its userinfo and every query value.
// The result is for messages, IDs and logs; the request uses the URL as given.
func redactURL(u *url.URL) string {
	c := *u
	if c.User != nil {
		c.User = url.User("REDACTED")
	}
	if c.RawQuery != "" {
		q := c.Query()
		for k := range q {
			q[k] = []string{"REDACTED"}
		}
		c.RawQuery = strings.NewReplacer("%5B", "[", "%5D", "]").Replace(q.Encode())
	}
	c.Fragment, c.RawFragment = "", ""
	return c.String()
}

// redactURLString is redactURL for a URL as text; text that does not parse is not shown.
func redactURLString(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return redactURL(u)
}

// redactedError is err's message with the URL of a failed request redacted (net/http quotes the
// whole URL, query and user name included, in its errors).
func redactedError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Sprintf("%s %q: %v", ue.Op, redactURLString(ue.URL), ue.Err)
	}
	return err.Error()
}

// credentialRE finds `password=...`, `"token": "..."`, `Authorization: Bearer ...` and the like
// in a response body, to blank their values before a line of it is quoted.
var credentialRE = regexp.MustCompile(`(?i)((?:pass(?:word|wd)?|pwd|secret|token|api[-_]?key|access[-_]?key|auth(?:orization)?|credentials?|session|cookie|bearer|private[-_]?key)["']?\s*[:=]?\s*["']?(?:bearer\s+|basic\s+)?)[^\s"',;&<>]+`)

// userinfoRE finds the userinfo of a URL quoted in a body.
var userinfoRE = regexp.MustCompile(`(//)[^/\s@"']+@`)

// secretKindRE finds a Kubernetes Secret (or a list of them) in a JSON or YAML body.
var secretKindRE = regexp.MustCompile(`"kind"\s*:\s*"Secret(List)?"|(?m)^kind:\s*Secret\s*$|"stringData"\s*:`)

// secretLikeBody reports whether a body looks like it holds secret material as a whole (a
// Kubernetes Secret, a PEM key or certificate): such a body is never quoted, not even in part.
func secretLikeBody(body string) bool {
	return strings.Contains(body, "-----BEGIN") || secretKindRE.MatchString(body)
}

// redactBodyLine blanks credential-like values in one line of a body.
func redactBodyLine(line string) string {
	line = credentialRE.ReplaceAllString(line, "${1}[redacted]")
	return userinfoRE.ReplaceAllString(line, "${1}[redacted]@")
}
