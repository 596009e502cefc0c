package autogate

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// WebhookConfig is a webhook configuration the cluster holds now: installed by another stack,
// by hand, by an operator, or by this stack's earlier run.
type WebhookConfig struct {
	Kind     string // ValidatingWebhookConfiguration or MutatingWebhookConfiguration
	Name     string
	Webhooks []map[string]any
}

// clusterAdmission applies rule 2 to the cluster's own webhook configurations (issue 47): an
// object (or a workload's Pod) that one of them may intercept, and that no gate already proves
// admitted, gets an AdmissionReady when a dry run of it is not admitted at plan time (the
// webhook's server restarting, its Service without endpoints, its caBundle not injected yet),
// and no gate when it is. Configurations the stack installs itself are left to the stack's
// rules (their gates wait for them to exist first). One dry run per batch key.
func (d *decider) clusterAdmission() {
	kind := d.gvk.Group + "/" + d.gvk.Kind
	_, workload := podTemplateKinds[kind]
	pods := workload && d.gvk.Kind != "Pod" && !d.podsAdmitted
	if d.selfAdmitted && !pods {
		return // a gate of the stack already dry-runs it through every webhook of the cluster
	}
	configs, known := d.cluster.Webhooks()
	if !known {
		d.warnings = append(d.warnings, fmt.Sprintf("%s: the cluster's webhook configurations could not be read, so webhooks "+
			"installed outside this stack were not checked (grant list, watch on validating- and mutatingwebhookconfigurations)", d.what()))
		return
	}
	if len(configs) == 0 {
		return
	}
	if !d.selfAdmitted {
		req := Request{GVR: d.gvk.GroupVersion().WithResource(d.resource), Namespace: d.namespace,
			Labels: stringMap(d.in.Resource.Object, "metadata", "labels")}
		d.clusterGate(configs, req, d.dryRunObject(), true, slug(d.groupResource()), d.what())
	}
	if pods {
		if pod, ok := PodOf(kind, d.in.Resource.Object, d.objectName(), d.namespace); ok {
			req := Request{GVR: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: d.namespace,
				Labels: stringMap(pod, "metadata", "labels")}
			d.clusterGate(configs, req, pod, false, "pods", "the pods of "+d.what())
		}
	}
}

// clusterGate gates obj (own: the registration's own object, else a Pod like its pods) on every
// cluster configuration that may intercept req and does not admit it now.
func (d *decider) clusterGate(configs []WebhookConfig, req Request, obj map[string]any, own bool, resource, what string) {
	for _, cfg := range configs {
		if d.stackInstalls(cfg) {
			continue
		}
		var hooks, ids []string
		for _, h := range cfg.Webhooks {
			if d.intercepts(h, req) && mustAnswer(cfg.Kind, h) {
				hooks = append(hooks, strOr(h, "name", "(unnamed)"))
				ids = append(ids, WebhookID(cfg.Kind, cfg.Name, str(h, "name")))
			}
		}
		if len(hooks) == 0 {
			continue
		}
		suffix := ""
		if len(hooks) < len(cfg.Webhooks) {
			suffix = "-" + slug(strings.Join(hooks, "-"))
		}
		key := fmt.Sprintf("auto-admission-%s-%s-%s%s", resource, slugOr(d.namespace, "cluster"), slug(cfg.Name), suffix)
		if d.cluster.Admits(key, obj, ids) {
			continue // its webhooks answer now: nothing to wait for
		}
		d.add(Gate{
			Key: key, Name: key, Type: TypeAdmissionReady,
			Args: d.admissionArgs(obj, own),
			Reason: fmt.Sprintf("%s waits for webhook %s of %s %s (in the cluster, not installed by this stack) to admit it: "+
				"a dry run at plan time was not admitted", what, hooks[0], cfg.Kind, cfg.Name),
		})
	}
}

// WebhookID names one webhook of the cluster: its configuration's kind and name, and its name.
func WebhookID(kind, config, name string) string { return kind + "/" + config + "/" + name }

// mustAnswer says whether an object waits for a webhook of the cluster: one with failurePolicy
// Fail (the default) fails the create while it does not answer; a mutating one with Ignore lets
// the object in unmutated (a pod without its sidecar), a wrong result no error shows. A
// validating one with Ignore only goes unchecked while it is down: the object is as written, and
// waiting for another's policy check is waiting for nothing the object needs.
func mustAnswer(kind string, hook map[string]any) bool {
	return str(hook, "failurePolicy") != "Ignore" || kind == "MutatingWebhookConfiguration"
}

// stackInstalls says whether cfg is one of the stack's own webhook configuration installers,
// by its name, or for an autonamed one by the name pulumi-kubernetes gave it (`<Pulumi
// name>-<8 hex>`, AssignNameIfAutonamable).
func (d *decider) stackInstalls(cfg WebhookConfig) bool {
	for i := range d.in.Installers {
		inst := &d.in.Installers[i]
		if kindOf(inst.Type, inst.Object) != webhookInstaller || (!strings.HasSuffix(inst.Type, ":"+cfg.Kind) && str(inst.Object, "kind") != cfg.Kind) {
			continue
		}
		if name, _ := installerName(inst); name != "" {
			if name == cfg.Name {
				return true
			}
			continue
		}
		if autonamed(inst.Name, cfg.Name) {
			return true
		}
	}
	return false
}

var autonameSuffix = regexp.MustCompile(`^-[0-9a-f]{8}$`)

// autonamed says whether name is one pulumi-kubernetes may have given a resource named
// pulumiName: `<pulumiName>-<8 hex>`.
func autonamed(pulumiName, name string) bool {
	rest, ok := strings.CutPrefix(name, pulumiName)
	return ok && autonameSuffix.MatchString(rest)
}

func strOr(m map[string]any, key, def string) string {
	if s := str(m, key); s != "" {
		return s
	}
	return def
}
