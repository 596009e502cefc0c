package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/httpcheck"
)

// The API server's service proxy, as HttpReady and a webhook probe's direct call (callDirect)
// reach a Service through it: the URL, checked at preview, and how an answer is read and told
// from the API server's own.
//
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
		if msg := httpcheck.ProxyPathProblem(*s.Path); msg != "" {
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

// readAnswer is an HTTP answer's status and body (its first MiB), or the request's error.
func readAnswer(resp *http.Response, err error) (int, []byte, error) {
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, nil
}

// apiServerAnswer reports whether an answer that came through the service proxy is the API
// server's own (a metav1.Status of status Failure: `services "web" not found`, `no endpoints
// available for service "web"`, `error trying to reach service: ...`, Forbidden) rather than
// the backend's. The API server answers a proxied request itself only with such a Status and
// passes every backend answer through unchanged, so anything else is the backend's. A backend
// can only produce a Failure Status if it is itself a Kubernetes component (an aggregated API
// server behind the Service): its failures are then not counted either, which fails closed.
func apiServerAnswer(body []byte) (metav1.Status, bool) {
	var st metav1.Status
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &st) != nil {
		return metav1.Status{}, false
	}
	return st, st.Kind == "Status" && st.APIVersion == "v1" && st.Status == metav1.StatusFailure
}
