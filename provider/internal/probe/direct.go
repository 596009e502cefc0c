package probe

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/readiness-io/pulumi-readiness/provider/internal/serviceproxy"
	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
)

// callDirect sends the webhook an AdmissionReview for a dry-run create of the probe, the way the
// API server would: to its URL trusting only the configuration's caBundle, or, for a Service,
// through the API server's service proxy. A valid AdmissionReview answering this request's uid
// (allowed or denied) is proof that it serves; anything else is not. need says why the call is
// needed and remedy what else the user can do, for when the service proxy is forbidden.
func (p *Webhook) callDirect(ctx context.Context, h *admission.Hook, need, remedy string) (ok bool, why string, terminal error) {
	return CallDirect(ctx, p.r, p.obj, h, need, remedy)
}

// CallDirect sends webhook h an AdmissionReview for a dry-run create of obj (see
// Webhook.callDirect): WebhookReady's probe, or one of AdmissionReady's objects.
func CallDirect(ctx context.Context, r *session.Run, in *unstructured.Unstructured, h *admission.Hook, need, remedy string) (ok bool, why string, terminal error) {
	obj := in.DeepCopy()
	if obj.GetName() == "" && obj.GetGenerateName() == "" {
		obj.SetGenerateName("readiness-probe-")
	}
	m, err := r.Clients.Mapping(obj.GroupVersionKind())
	if err != nil {
		return false, err.Error(), nil
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		obj.SetNamespace("")
	} else if obj.GetNamespace() == "" {
		obj.SetNamespace(r.Clients.Namespace)
	}
	body, uid, err := admission.Review(obj, m.Resource, h.Versions)
	if err != nil {
		return false, "", fmt.Errorf("webhook %s: building the AdmissionReview: %w", h.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	var status int
	var answer []byte
	if u, serverName := h.DirectURL(); u != "" {
		status, answer, err = postURL(ctx, u, serverName, h.CABundle, body)
		if err != nil {
			return false, "POST " + u + ": " + err.Error(), nil
		}
	} else {
		// Made by hand (as HttpReady's): the exact status and body tell the API server's own
		// answers (Forbidden, no endpoints) from the webhook's.
		rc, ok := r.Clients.Typed.CoreV1().RESTClient().(*rest.RESTClient)
		if !ok || rc.Client == nil {
			return false, "", errors.New("no HTTP client for the Kubernetes API")
		}
		u, err := serviceproxy.URLBelow(rc, h.SvcNamespace, fmt.Sprintf("https:%s:%d", h.SvcName, h.SvcPort), h.Path)
		if err != nil {
			return false, "", fmt.Errorf("webhook %s: %w", h.Name, err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
		if err != nil {
			return false, "", err
		}
		req.Header.Set("Content-Type", "application/json")
		status, answer, err = serviceproxy.ReadAnswer(rc.Client.Do(req))
		if err != nil {
			return false, "through the API server's service proxy: " + err.Error(), nil
		}
		if st, ok := serviceproxy.APIServerAnswer(answer); ok {
			if st.Code == http.StatusUnauthorized || st.Code == http.StatusForbidden && strings.Contains(st.Message, "services/proxy") {
				return false, "", fmt.Errorf("%s, and calling it through the API server's service proxy is forbidden: %s; "+
					"grant verb `create` on resource \"services/proxy\" in namespace %s to the provider's identity, or %s", need, st.Message, h.SvcNamespace, remedy)
			}
			if st.Code == http.StatusServiceUnavailable || st.Code == http.StatusNotFound {
				// No endpoints (or no Endpoints object): an ExternalName Service has none, and the
				// proxy cannot reach it.
				if ext := r.ExternalName(ctx, h); ext != "" {
					eh := *h
					eh.ExternalName = ext
					return CallDirect(ctx, r, in, &eh, need, remedy)
				}
			}
			return false, fmt.Sprintf("through the API server's service proxy: HTTP %d: %s", st.Code, st.Message), nil
		}
	}
	return admission.CheckReview(answer, status, uid)
}

// postURL posts body to a webhook URL the way the API server does: TLS trusting only the
// configuration's caBundle (the system roots when it has none), no proxy, no redirects.
func postURL(ctx context.Context, url, serverName string, caBundle, body []byte) (int, []byte, error) {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caBundle) {
			return 0, nil, errors.New("the configuration's caBundle holds no PEM certificate")
		}
		tlsCfg.RootCAs = pool
	}
	client := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: tlsCfg, DisableKeepAlives: true, Proxy: nil},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, answer, err
}
