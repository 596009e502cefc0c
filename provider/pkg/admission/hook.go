package admission

import (
	"encoding/base64"
	"fmt"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/jsonvalue"
	"net"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Hook is one webhook of a configuration, as the API server calls it.
type Hook struct {
	Name, Policy string
	// Config is the configuration holding it (Kind/name); Mutating says it is a
	// MutatingWebhookConfiguration's.
	Config   string
	Mutating bool
	URL      string // clientConfig.url; empty for a Service-backed webhook
	// ExternalName is the external name of an ExternalName Service the webhook is behind,
	// which the API server dials (at SvcPort) instead of a ClusterIP; set by WebhookReady.
	ExternalName string
	SvcNamespace string
	SvcName      string
	SvcPort      int
	Path         string
	CABundle     []byte
	Versions     []string // admissionReviewVersions
	Timeout      time.Duration
	// Match decides whether the API server calls it for a request; MatchErr says why it could
	// not be read (then it is never taken as called).
	Match    Match
	MatchErr string
}

// WebhooksOf reads the webhooks of a configuration of kind (Validating- or
// MutatingWebhookConfiguration) as the API server calls them, with its defaults (failurePolicy
// Fail, timeoutSeconds 10, Service port 443).
func WebhooksOf(kind string, cfg *unstructured.Unstructured) []*Hook {
	raw, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
	var out []*Hook
	for _, w := range raw {
		wm, _ := w.(map[string]any)
		h := &Hook{Policy: "Fail", Timeout: 10 * time.Second, SvcPort: 443,
			Config: kind + "/" + cfg.GetName(), Mutating: kind == "MutatingWebhookConfiguration"}
		h.Name, _ = wm["name"].(string)
		if fp, _ := wm["failurePolicy"].(string); fp != "" {
			h.Policy = fp
		}
		if ts := jsonvalue.Int64(wm["timeoutSeconds"]); ts > 0 {
			h.Timeout = time.Duration(ts) * time.Second
		}
		h.Versions = jsonvalue.Strings(wm["admissionReviewVersions"])
		cc, _ := wm["clientConfig"].(map[string]any)
		if ca, _ := cc["caBundle"].(string); ca != "" {
			h.CABundle, _ = base64.StdEncoding.DecodeString(ca)
			if len(h.CABundle) == 0 {
				h.CABundle = []byte(ca) // not base64: kept so it is not taken for "empty"
			}
		}
		h.URL, _ = cc["url"].(string)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(wm, &h.Match); err != nil {
			h.MatchErr = err.Error()
		}
		if svc, ok := cc["service"].(map[string]any); ok {
			h.SvcNamespace, _ = svc["namespace"].(string)
			h.SvcName, _ = svc["name"].(string)
			if p, ok := svc["port"]; ok {
				h.SvcPort = int(jsonvalue.Int64(p))
			}
			h.Path, _ = svc["path"].(string)
		}
		out = append(out, h)
	}
	return out
}

// DirectURL is where the gate calls the webhook itself, as the API server does: its URL, or
// for a webhook behind an ExternalName Service, the external name at the webhook's port with
// the TLS server name <service>.<namespace>.svc (the API server's service proxy cannot reach an
// ExternalName Service: it has no endpoints). "" for any other Service (the service proxy).
func (h *Hook) DirectURL() (u, serverName string) {
	switch {
	case h.URL != "":
		return h.URL, ""
	case h.ExternalName != "":
		return "https://" + net.JoinHostPort(h.ExternalName, strconv.Itoa(h.SvcPort)) + h.Path, h.SvcName + "." + h.SvcNamespace + ".svc"
	}
	return "", ""
}

// Endpoint names where the webhook is served, for messages.
func (h *Hook) Endpoint() string {
	if h.URL != "" {
		return h.URL
	}
	return fmt.Sprintf("service %s/%s:%d%s", h.SvcNamespace, h.SvcName, h.SvcPort, h.Path)
}

// Interceptors are the hooks the API server may call for q (see Match.Excludes); one whose
// match cannot be read may.
func Interceptors(hooks []*Hook, q Request) []*Hook {
	var out []*Hook
	for _, h := range hooks {
		if h.MatchErr != "" || h.Match.Excludes(q) == "" {
			out = append(out, h)
		}
	}
	return out
}

// InjectionAnnotation is cert-manager's CA injection annotation of a configuration ("key:
// value"), "" when it has none: it says who should fill an empty caBundle.
func InjectionAnnotation(cfg *unstructured.Unstructured) string {
	for _, k := range []string{"cert-manager.io/inject-ca-from", "cert-manager.io/inject-ca-from-secret", "cert-manager.io/inject-apiserver-ca"} {
		if v, ok := cfg.GetAnnotations()[k]; ok {
			return k + ": " + v
		}
	}
	return ""
}

// ExternalNameOf is an ExternalName Service's external name; "" for any other Service.
func ExternalNameOf(svc *unstructured.Unstructured) string {
	if t, _, _ := unstructured.NestedString(svc.Object, "spec", "type"); t != "ExternalName" {
		return ""
	}
	ext, _, _ := unstructured.NestedString(svc.Object, "spec", "externalName")
	return ext
}

// SlicePort is the name the EndpointSlices of svc give its port number port; found is false
// when svc has no such port. EndpointSlices name their ports after the Service port (with the
// resolved container port's number), never after a named targetPort: ingress-nginx's admission
// Service is {name: https-webhook, port: 443, targetPort: webhook}. An unnamed port (a
// single-port Service) is "": any slice port.
func SlicePort(svc *unstructured.Unstructured, port int) (name string, found bool) {
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	for _, p := range ports {
		pm, _ := p.(map[string]any)
		if int(jsonvalue.Int64(pm["port"])) == port {
			name, _ = pm["name"].(string)
			found = true
		}
	}
	return name, found
}
