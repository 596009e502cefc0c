package admission

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// WebhookReady's object checks: the caller gathers the configurations and the state of the
// webhooks' Services from its watch caches; CheckConfiguration and CheckService decide over them
// whether every checked webhook is registered, has its caBundle and its Service ready. None of
// this shows a webhook answers: only the probe that follows does.

// Configuration is what WebhookReady gathered for a configuration target.
type Configuration struct {
	Kind, Name string
	Object     *unstructured.Unstructured // nil: not found
	Want       []string                   // `webhooks`: the webhooks to check; empty: all
	// Services are the states of the checked Service-backed webhooks' Services (endpoints
	// ready on the webhook's port), by ServiceKey, as the caller judged them, settled: a read
	// that gave no answer is returned by the gather step itself. A Service missing from the map
	// is not ready.
	Services map[string]verdict.Result
}

// ServiceKey keys Configuration.Services: namespace/name:port.
func ServiceKey(namespace, name string, port int) string {
	return fmt.Sprintf("%s/%s:%d", namespace, name, port)
}

// Checked is the decision over a gathered snapshot: Result (Ready when the checks hold), and the
// webhooks checked so far: their hooks and names, Policy ("Ignore" when any ignores failures,
// else "Fail") and caBundles.
type Checked struct {
	Result    verdict.Result
	Hooks     []*Hook
	Names     []string
	Policy    string
	CABundles []string
	// Of a `service` target: Ambiguous names webhooks whose name a webhook the Service does not
	// back also has (a denial naming it proves nothing); Seen, the configurations the checked
	// webhooks are in, as Kind/name@resourceVersion.
	Ambiguous map[string]bool
	Seen      []string
}

// Selected are the webhooks of hooks that want names (all of them when want is empty).
func Selected(hooks []*Hook, want []string) []*Hook {
	var out []*Hook
	for _, h := range hooks {
		if len(want) == 0 || slices.Contains(want, h.Name) {
			out = append(out, h)
		}
	}
	return out
}

// CheckConfiguration decides a configuration target, webhook by webhook in the configuration's
// order: the configuration exists, has every webhook asked for (a missing one is not served,
// whatever the others do), and each checked webhook has a caBundle and, when Service-backed,
// its Service ready.
func CheckConfiguration(c Configuration) Checked {
	out := Checked{Policy: "Fail"}
	if c.Object == nil {
		out.Result = verdict.Result{Message: c.Kind + " not found (not created yet)", Hint: "is the chart that registers the webhook part of the stack?"}
		return out
	}
	all := WebhooksOf(c.Kind, c.Object)
	var present, missing []string
	for _, h := range all {
		present = append(present, h.Name)
	}
	for _, w := range c.Want {
		if !slices.Contains(present, w) {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		out.Result = verdict.Result{Message: fmt.Sprintf("webhooks %s not in %s %s yet (it has: %s)", strings.Join(missing, ", "), c.Kind, c.Name, strings.Join(present, ", ")),
			Hint: "check the names in `webhooks` against `kubectl get " + strings.ToLower(c.Kind) + " " + c.Name + " -o yaml`"}
		return out
	}
	for _, h := range Selected(all, c.Want) {
		out.Names = append(out.Names, h.Name)
		out.Hooks = append(out.Hooks, h)
		if h.Policy == "Ignore" {
			out.Policy = "Ignore"
		}
		if h.URL == "" {
			if len(h.CABundle) == 0 {
				why := "caBundle is empty"
				if inj := InjectionAnnotation(c.Object); inj != "" {
					why = "caBundle not injected yet (" + inj + ")"
				}
				out.Result = verdict.Result{Message: fmt.Sprintf("webhook %s: %s", h.Name, why),
					Hint: "is cert-manager's cainjector (or the chart's certificate job) running?"}
				return out
			}
			res, ok := c.Services[ServiceKey(h.SvcNamespace, h.SvcName, h.SvcPort)]
			if !ok {
				res = verdict.Result{Message: fmt.Sprintf("service %s/%s not read yet", h.SvcNamespace, h.SvcName)}
			}
			if !res.Ready {
				res.Message = fmt.Sprintf("webhook %s: %s", h.Name, res.Message)
				out.Result = res
				return out
			}
		}
		out.CABundles = append(out.CABundles, string(h.CABundle))
	}
	if len(out.Names) == 0 {
		out.Result = verdict.Result{Message: fmt.Sprintf("%s %s has no webhooks yet", c.Kind, c.Name)}
		return out
	}
	out.Result = verdict.Result{Ready: true}
	return out
}

// ServiceTarget is what WebhookReady gathered for a `service` target (its Service's endpoints
// already ready): every Mutating- and ValidatingWebhookConfiguration in the cluster, each list
// sorted by name.
type ServiceTarget struct {
	Namespace, Name string
	Port            int
	Want            []string // `webhooks`; empty: all the Service backs
	Mutating        []*unstructured.Unstructured
	Validating      []*unstructured.Unstructured
}

// CheckService decides a `service` target: the webhooks the Service backs (its namespace, name
// and port; URL webhooks never) in any configuration, which the probe must then prove exactly as
// for a configuration target. Each needs a caBundle; with `webhooks`, every one named must be
// among them; none at all is not ready (no probe can prove a Service nothing calls).
func CheckService(s ServiceTarget) Checked {
	out := Checked{Policy: "Fail", Ambiguous: map[string]bool{}}
	seen := map[string]bool{}
	for _, kc := range []struct {
		kind string
		cfgs []*unstructured.Unstructured
	}{{"MutatingWebhookConfiguration", s.Mutating}, {"ValidatingWebhookConfiguration", s.Validating}} {
		for _, cfg := range kc.cfgs {
			for _, h := range WebhooksOf(kc.kind, cfg) {
				if seen[h.Name] {
					out.Ambiguous[h.Name] = true
				}
				seen[h.Name] = true
				if h.URL != "" || h.SvcNamespace != s.Namespace || h.SvcName != s.Name || h.SvcPort != s.Port ||
					(len(s.Want) > 0 && !slices.Contains(s.Want, h.Name)) {
					continue
				}
				out.Seen = append(out.Seen, fmt.Sprintf("%s/%s@%s", kc.kind, cfg.GetName(), cfg.GetResourceVersion()))
				if len(h.CABundle) == 0 {
					out.Result = verdict.Result{Message: fmt.Sprintf("webhook %s (%s %s): caBundle is empty", h.Name, kc.kind, cfg.GetName()),
						Hint: "is cert-manager's cainjector (or the chart's certificate job) running?"}
					return out
				}
				out.Names = append(out.Names, h.Name)
				out.Hooks = append(out.Hooks, h)
				if h.Policy == "Ignore" {
					out.Policy = "Ignore"
				}
				out.CABundles = append(out.CABundles, string(h.CABundle))
			}
		}
	}
	var missing []string
	for _, w := range s.Want {
		if !slices.Contains(out.Names, w) {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		out.Result = verdict.Result{Message: fmt.Sprintf("webhooks %s not in any configuration pointing at Service %s/%s:%d yet (it has: %s)",
			strings.Join(missing, ", "), s.Namespace, s.Name, s.Port, strings.Join(out.Names, ", "))}
		return out
	}
	if len(out.Hooks) == 0 {
		out.Result = verdict.Result{Message: fmt.Sprintf("no webhook configuration points at Service %s/%s:%d yet, so no probe can prove it serves", s.Namespace, s.Name, s.Port),
			Hint: "is the chart that registers the webhook part of the stack? its clientConfig.service must name this Service and port"}
		return out
	}
	out.Result = verdict.Result{Ready: true}
	return out
}
