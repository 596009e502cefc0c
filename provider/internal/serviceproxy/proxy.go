// Package serviceproxy reaches a Service through the API server's service proxy, as HttpReady's
// `service` and a webhook probe's direct call (probe.CallDirect) do: the URL, kept below the
// Service's proxy path, and how an answer is read and told from the API server's own.
package serviceproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// URLBelow is the service proxy URL of path for the Service <scheme:name:port> in namespace,
// and an error unless it lies below that Service's proxy path (the REST client cleans `..` away,
// so a path can climb out). HttpReady's service and a webhook's direct call (probe.CallDirect) both go through it.
func URLBelow(rc *rest.RESTClient, namespace, schemeNamePort, path string) (*url.URL, error) {
	base := rc.Get().Namespace(namespace).Resource("services").SubResource("proxy").Name(schemeNamePort).URL()
	u := rc.Get().Namespace(namespace).Resource("services").SubResource("proxy").Name(schemeNamePort).Suffix(path).URL()
	if u.Path != base.Path && !strings.HasPrefix(u.Path, strings.TrimSuffix(base.Path, "/")+"/") {
		return nil, fmt.Errorf("%q leaves the Service's proxy path %s", path, base.Path)
	}
	return u, nil
}

// ReadAnswer is an HTTP answer's status and body (its first MiB), or the request's error.
func ReadAnswer(resp *http.Response, err error) (int, []byte, error) {
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, nil
}

// APIServerAnswer reports whether an answer that came through the service proxy is the API
// server's own (a metav1.Status of status Failure: `services "web" not found`, `no endpoints
// available for service "web"`, `error trying to reach service: ...`, Forbidden) rather than
// the backend's. The API server answers a proxied request itself only with such a Status and
// passes every backend answer through unchanged, so anything else is the backend's. A backend
// can only produce a Failure Status if it is itself a Kubernetes component (an aggregated API
// server behind the Service): its failures are then not counted either, which fails closed.
func APIServerAnswer(body []byte) (metav1.Status, bool) {
	var st metav1.Status
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &st) != nil {
		return metav1.Status{}, false
	}
	return st, st.Kind == "Status" && st.APIVersion == "v1" && st.Status == metav1.StatusFailure
}
