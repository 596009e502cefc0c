// Package reportstack holds the pieces of the field reports' programs as users write them with
// pulumi-kubernetes, for a real node (real controllers' pods from internal/charts): shared by
// tests/e2e/realnode (the reports' tests, the soak, the figures) and `make demo`.
package reportstack

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/readiness-io/pulumi-readiness/internal/stack"
)

// Namespaces001 are the field report's four namespaces, one ExternalSecret in each.
var Namespaces001 = []string{"default", "hello-world", "nodejs-demo", "storage-validator"}

// After is pulumi.DependsOn(rs).
func After(rs ...pulumi.Resource) pulumi.ResourceOption { return pulumi.DependsOn(rs) }

// ExternalSecretsRelease installs External Secrets' chart without waiting (skipAwait, as users
// set it when Helm's wait hangs their stack).
func ExternalSecretsRelease(ctx *pulumi.Context, chart string) (*stack.HelmRelease, error) {
	return stack.NewHelmRelease(ctx, "external-secrets", pulumi.Map{
		"chart": pulumi.String(chart), "name": pulumi.String("external-secrets"),
		"namespace": pulumi.String("external-secrets"), "createNamespace": pulumi.Bool(true),
		"skipAwait": pulumi.Bool(true),
	})
}

// CertManagerRelease installs cert-manager's chart with its CRDs; Helm still runs the chart's
// startupapicheck hook, and with wait it waits for the Deployments too.
func CertManagerRelease(ctx *pulumi.Context, chart string, wait bool) (*stack.HelmRelease, error) {
	return stack.NewHelmRelease(ctx, "cert-manager", pulumi.Map{
		"chart": pulumi.String(chart), "name": pulumi.String("cert-manager"),
		"namespace": pulumi.String("cert-manager"), "createNamespace": pulumi.Bool(true), "skipAwait": pulumi.Bool(!wait),
		"values": pulumi.Map{"installCRDs": pulumi.Bool(true)}, "timeout": pulumi.Int(240),
	})
}

// ExternalSecrets001 are the report's four ExternalSecrets (and their namespaces), each
// after deps.
func ExternalSecrets001(ctx *pulumi.Context, deps ...pulumi.Resource) error {
	for _, ns := range Namespaces001 {
		opts := []pulumi.ResourceOption{After(deps...)}
		if ns != "default" {
			n, err := stack.NewKube(ctx, "ns-"+ns, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}")
			if err != nil {
				return err
			}
			opts = append(opts, After(n))
		}
		if _, err := stack.NewKube(ctx, "ghcr-pull-secret-"+ns, ExternalSecret001(ns), opts...); err != nil {
			return err
		}
	}
	return nil
}

func ExternalSecret001(ns string) string {
	return `apiVersion: external-secrets.io/v1beta1
kind: ExternalSecret
metadata: {name: ghcr-pull-secret, namespace: ` + ns + `}
spec:
  refreshInterval: 1h
  secretStoreRef: {kind: ClusterSecretStore, name: pulumi-esc}
  target: {name: ghcr-pull-secret}
  dataFrom: [{extract: {key: ghcr}}]`
}

// The report 000 objects' manifests, as Certificate000 and Deployment000 create them (an observer
// outside the product dry-runs them to learn when each could have been created).
const (
	SelfSignedIssuer000 = `apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: {name: selfsigned}
spec: {selfSigned: {}}`
	CACertificate000 = `apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: readiness-ca, namespace: cert-manager}
spec: {isCA: true, commonName: readiness-ca, secretName: readiness-ca, issuerRef: {name: selfsigned, kind: ClusterIssuer}}`
	CAIssuer000 = `apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: {name: ca-issuer}
spec: {ca: {secretName: readiness-ca}}`
	Certificate000Doc = `apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: ai-ops-agent, namespace: ai-ops}
spec: {secretName: ai-ops-agent-tls, dnsNames: [ai-ops-agent.ai-ops.svc], issuerRef: {name: ca-issuer, kind: ClusterIssuer}}`
	Deployment000Doc = `apiVersion: apps/v1
kind: Deployment
metadata: {name: ai-ops-agent, namespace: ai-ops}
spec:
  selector: {matchLabels: {app: ai-ops-agent}}
  template:
    metadata: {labels: {app: ai-ops-agent}}
    spec:
      containers: [{name: agent, image: readiness.local/pause:1, volumeMounts: [{name: tls, mountPath: /etc/tls, readOnly: true}]}]
      volumes: [{name: tls, secret: {secretName: ai-ops-agent-tls}}]`
)

// Certificate000 is a CA issuer bootstrapped from a self-signed one (cert-manager's
// documented pattern), after deps, and the report's Certificate in namespace ai-ops.
func Certificate000(ctx *pulumi.Context, deps ...pulumi.Resource) (pulumi.Resource, error) {
	selfSigned, err := stack.NewKube(ctx, "selfsigned", SelfSignedIssuer000, After(deps...))
	if err != nil {
		return nil, err
	}
	caCert, err := stack.NewKube(ctx, "readiness-ca", CACertificate000, After(selfSigned))
	if err != nil {
		return nil, err
	}
	caIssuer, err := stack.NewKube(ctx, "ca-issuer", CAIssuer000, After(caCert))
	if err != nil {
		return nil, err
	}
	ns, err := stack.NewKube(ctx, "ns-ai-ops", "apiVersion: v1\nkind: Namespace\nmetadata: {name: ai-ops}")
	if err != nil {
		return nil, err
	}
	return stack.NewKube(ctx, "ai-ops-agent-cert", Certificate000Doc, After(caIssuer, ns))
}

// Deployment000 is the report's Deployment mounting the Certificate's Secret, after
// before (the Certificate, or a gate on it). Its image is the node's own pause image.
func Deployment000(ctx *pulumi.Context, before pulumi.Resource) error {
	_, err := stack.NewKube(ctx, "ai-ops-agent", Deployment000Doc, After(before))
	return err
}

// IngressNginxRelease installs ingress-nginx's chart as field report 002 does: Helm waits
// (for the controller's Deployment and the hooks that make and patch the webhook's
// certificate), which still says nothing of the admission webhook listening.
func IngressNginxRelease(ctx *pulumi.Context, chart string) (*stack.HelmRelease, error) {
	return stack.NewHelmRelease(ctx, "ingress-nginx", pulumi.Map{
		"chart": pulumi.String(chart), "name": pulumi.String("ingress-nginx"),
		"namespace": pulumi.String("ingress-nginx"), "createNamespace": pulumi.Bool(true), "timeout": pulumi.Int(300),
	})
}

// Ingress002Doc is the report's Ingress; skipAwait: no load balancer fills its status here.
const Ingress002Doc = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: apps, annotations: {pulumi.com/skipAwait: "true"}}
spec:
  ingressClassName: nginx
  rules: [{host: web.example.test, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]`

// Ingress002 is the report's Ingress (in its own namespace), after deps.
func Ingress002(ctx *pulumi.Context, deps ...pulumi.Resource) error {
	ns, err := stack.NewKube(ctx, "ns-apps", "apiVersion: v1\nkind: Namespace\nmetadata: {name: apps}")
	if err != nil {
		return err
	}
	_, err = stack.NewKube(ctx, "web", Ingress002Doc, After(append(deps, ns)...))
	return err
}
