package retry

import (
	"strings"
	"testing"
)

const refused = `resource default/ghcr-pull-secret was not successfully created by the Kubernetes API server: Internal error occurred: ` +
	`failed calling webhook "validate.externalsecret.external-secrets.io": failed to call webhook: Post ` +
	`"https://external-secrets-webhook.external-secrets.svc:443/validate-external-secrets-io-v1beta1-externalsecret?timeout=5s": ` +
	`dial tcp 10.96.0.12:443: connect: connection refused`

func TestDecide(t *testing.T) {
	cases := []struct {
		name, typ, op string
		retry         bool
		why           string
	}{
		{name: "a custom resource's create", typ: "kubernetes:external-secrets.io/v1beta1:ExternalSecret", op: "create", retry: true},
		{name: "an Ingress's update", typ: "kubernetes:networking.k8s.io/v1:Ingress", op: "update", retry: true},
		{name: "a custom resource registered by a Chart v4", typ: "kubernetes:cert-manager.io/v1:Certificate", op: "create", retry: true},
		{name: "near miss: a delete", typ: "kubernetes:core/v1:ConfigMap", op: "delete", why: "delete"},
		{name: "near miss: a Release (Helm keeps the failed release)", typ: "kubernetes:helm.sh/v3:Release", op: "create", why: "Release"},
		{name: "near miss: a Chart v4 component", typ: "kubernetes:helm.sh/v4:Chart", op: "create", why: "component"},
		{name: "near miss: a ConfigGroup component", typ: "kubernetes:yaml/v2:ConfigGroup", op: "create", why: "not a Kubernetes object"},
		{name: "near miss: the kubernetes provider", typ: "pulumi:providers:kubernetes", op: "create", why: "not a Kubernetes object"},
		{name: "near miss: another package", typ: "aws:s3/bucket:Bucket", op: "create", why: "not a Kubernetes object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := Decide(c.typ, c.op, []string{refused})
			if v.Retry != c.retry || !strings.Contains(v.Why, c.why) {
				t.Fatalf("Decide = %+v, want retry %t saying %q", v, c.retry, c.why)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		name    string
		errs    []string
		retry   bool
		webhook string
		why     string
	}{
		// Transport failures: retried once the gate's proof holds again.
		{name: "connection refused (the webhook's pod restarting)", errs: []string{refused}, retry: true, webhook: "validate.externalsecret.external-secrets.io", why: "connection refused"},
		{name: "no endpoints (its pod not Ready)", errs: []string{`Internal error occurred: failed calling webhook "w.example.com": failed to call webhook: Post "https://svc.ns.svc:443/x": no endpoints available for service "svc"`}, retry: true, webhook: "w.example.com"},
		{name: "timeout", errs: []string{`failed calling webhook "w.example.com": failed to call webhook: Post "https://svc.ns.svc:443/x?timeout=10s": context deadline exceeded`}, retry: true},
		{name: "x509 (its serving certificate rotated under the caBundle)", errs: []string{`failed calling webhook "w.example.com": failed to call webhook: Post "https://svc.ns.svc:443/x": tls: failed to verify certificate: x509: certificate signed by unknown authority`}, retry: true},
		{name: "its Service not found yet", errs: []string{`failed calling webhook "w.example.com": failed to call webhook: Post "https://svc.ns.svc:443/x": service "svc" not found`}, retry: true},
		{name: "the second try of four", errs: []string{refused, refused}, retry: true},
		// Verdicts: never retried.
		{name: "near miss: a webhook's denial", errs: []string{`admission webhook "validate.externalsecret.external-secrets.io" denied the request: spec.secretStoreRef: not found`}, why: "denied"},
		{name: "near miss: a denial after an earlier transport failure (the newest decides)", errs: []string{`admission webhook "w.example.com" denied the request: no`, refused}, why: "denied"},
		{name: "near miss: a denial naming a failed call of another webhook", errs: []string{`admission webhook "a.example.com" denied the request: failed calling webhook "b.example.com": connection refused`}, why: "denied"},
		{name: "near miss: an invalid object", errs: []string{`ExternalSecret.external-secrets.io "x" is invalid: spec.target.name: Invalid value`}, why: "invalid"},
		{name: "near miss: RBAC", errs: []string{`externalsecrets.external-secrets.io is forbidden: User "ci" cannot create resource`}, why: "forbidden"},
		{name: "near miss: a quota", errs: []string{`pods "p" is forbidden: exceeded quota: compute, requested: cpu=2`}, why: "forbidden"},
		{name: "near miss: an admission policy", errs: []string{`deployments.apps "d" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request`}},
		// The API server itself could not be reached (restarting): retried once it admits the object.
		{name: "the API server's port closed (restarting)", errs: []string{`Post "https://127.0.0.1:6443/api/v1/namespaces/default/configmaps?fieldManager=pulumi": dial tcp 127.0.0.1:6443: connect: connection refused`}, retry: true, why: "could not be reached"},
		{name: "the API server not serving yet", errs: []string{`the server is currently unable to handle the request (post configmaps)`}, retry: true},
		{name: "etcd changed leader", errs: []string{`etcdserver: leader changed`}, retry: true},
		{name: "the API server closed the connection while stopping", errs: []string{`resource "urn:pulumi:dev::faults::kubernetes:external-secrets.io/v1beta1:ExternalSecret::es" was not successfully created by the Kubernetes API server: Post "https://127.0.0.1:37397/apis/external-secrets.io/v1beta1/namespaces/ns/externalsecrets?fieldManager=pulumi-kubernetes": EOF`}, retry: true, why: "closed"},
		{name: "near miss: the API server unreachable five times", errs: []string{`etcdserver: leader changed`, `etcdserver: leader changed`, `etcdserver: leader changed`, `etcdserver: leader changed`, `etcdserver: leader changed`}, why: "5 tries"},
		{name: "near miss: an await that failed after the create (the object exists)", errs: []string{`resource default/web was successfully created, but the Kubernetes API server reported that it failed to fully initialize or become live: Resource operation was cancelled for "web"`}, why: "API server answered"},
		{name: "near miss: a failed call for a reason not known to pass", errs: []string{`failed calling webhook "w.example.com": failed to call webhook: the server rejected our request for an unknown reason`}, why: "not known to pass"},
		{name: "near miss: the tries are used up", errs: []string{refused, refused, refused, refused, refused}, why: "5 tries"},
		{name: "near miss: nothing to judge", errs: nil, why: "no failure"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := Classify(c.errs)
			if v.Retry != c.retry {
				t.Fatalf("Retry = %t, want %t (%s)", v.Retry, c.retry, v.Why)
			}
			if c.webhook != "" && v.Webhook != c.webhook {
				t.Errorf("Webhook = %q, want %q", v.Webhook, c.webhook)
			}
			if c.why != "" && !strings.Contains(v.Why, c.why) {
				t.Errorf("Why = %q, want it to say %q", v.Why, c.why)
			}
			if strings.Contains(v.Why, "10.96.0.12") || strings.Contains(v.Why, "secretStoreRef") {
				t.Errorf("Why quotes the failure's text: %q", v.Why)
			}
		})
	}
}
