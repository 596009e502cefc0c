package realnode

// The pieces of the field reports' programs, as users write them with pulumi-kubernetes, shared
// by the reports' tests, the soak and the figures.

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/readiness-io/pulumi-readiness/internal/stack"
)

// report001Namespaces are the field report's four namespaces, one ExternalSecret in each.
var report001Namespaces = []string{"default", "hello-world", "nodejs-demo", "storage-validator"}

func after(rs ...pulumi.Resource) pulumi.ResourceOption { return pulumi.DependsOn(rs) }

// externalSecretsRelease installs External Secrets' chart without waiting (skipAwait, as users
// set it when Helm's wait hangs their stack).
func externalSecretsRelease(ctx *pulumi.Context, chart string) (*stack.HelmRelease, error) {
	return stack.NewHelmRelease(ctx, "external-secrets", pulumi.Map{
		"chart": pulumi.String(chart), "name": pulumi.String("external-secrets"),
		"namespace": pulumi.String("external-secrets"), "createNamespace": pulumi.Bool(true),
		"skipAwait": pulumi.Bool(true),
	})
}

// certManagerRelease installs cert-manager's chart with its CRDs; Helm still runs the chart's
// startupapicheck hook, and with wait it waits for the Deployments too.
func certManagerRelease(ctx *pulumi.Context, chart string, wait bool) (*stack.HelmRelease, error) {
	return stack.NewHelmRelease(ctx, "cert-manager", pulumi.Map{
		"chart": pulumi.String(chart), "name": pulumi.String("cert-manager"),
		"namespace": pulumi.String("cert-manager"), "createNamespace": pulumi.Bool(true), "skipAwait": pulumi.Bool(!wait),
		"values": pulumi.Map{"installCRDs": pulumi.Bool(true)}, "timeout": pulumi.Int(240),
	})
}

// report001ExternalSecrets are the report's four ExternalSecrets (and their namespaces), each
// after deps.
func report001ExternalSecrets(ctx *pulumi.Context, deps ...pulumi.Resource) error {
	for _, ns := range report001Namespaces {
		opts := []pulumi.ResourceOption{after(deps...)}
		if ns != "default" {
			n, err := stack.NewKube(ctx, "ns-"+ns, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}")
			if err != nil {
				return err
			}
			opts = append(opts, after(n))
		}
		if _, err := stack.NewKube(ctx, "ghcr-pull-secret-"+ns, report001ExternalSecret(ns), opts...); err != nil {
			return err
		}
	}
	return nil
}

func report001ExternalSecret(ns string) string {
	return `apiVersion: external-secrets.io/v1beta1
kind: ExternalSecret
metadata: {name: ghcr-pull-secret, namespace: ` + ns + `}
spec:
  refreshInterval: 1h
  secretStoreRef: {kind: ClusterSecretStore, name: pulumi-esc}
  target: {name: ghcr-pull-secret}
  dataFrom: [{extract: {key: ghcr}}]`
}

// report000Certificate is a CA issuer bootstrapped from a self-signed one (cert-manager's
// documented pattern), after deps, and the report's Certificate in namespace ai-ops.
func report000Certificate(ctx *pulumi.Context, deps ...pulumi.Resource) (pulumi.Resource, error) {
	selfSigned, err := stack.NewKube(ctx, "selfsigned", `apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: {name: selfsigned}
spec: {selfSigned: {}}`, after(deps...))
	if err != nil {
		return nil, err
	}
	caCert, err := stack.NewKube(ctx, "readiness-ca", `apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: readiness-ca, namespace: cert-manager}
spec: {isCA: true, commonName: readiness-ca, secretName: readiness-ca, issuerRef: {name: selfsigned, kind: ClusterIssuer}}`, after(selfSigned))
	if err != nil {
		return nil, err
	}
	caIssuer, err := stack.NewKube(ctx, "ca-issuer", `apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: {name: ca-issuer}
spec: {ca: {secretName: readiness-ca}}`, after(caCert))
	if err != nil {
		return nil, err
	}
	ns, err := stack.NewKube(ctx, "ns-ai-ops", "apiVersion: v1\nkind: Namespace\nmetadata: {name: ai-ops}")
	if err != nil {
		return nil, err
	}
	return stack.NewKube(ctx, "ai-ops-agent-cert", `apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: ai-ops-agent, namespace: ai-ops}
spec: {secretName: ai-ops-agent-tls, dnsNames: [ai-ops-agent.ai-ops.svc], issuerRef: {name: ca-issuer, kind: ClusterIssuer}}`,
		after(caIssuer, ns))
}

// report000Deployment is the report's Deployment mounting the Certificate's Secret, after
// before (the Certificate, or a gate on it). Its image is the node's own pause image.
func report000Deployment(ctx *pulumi.Context, before pulumi.Resource) error {
	_, err := stack.NewKube(ctx, "ai-ops-agent", `apiVersion: apps/v1
kind: Deployment
metadata: {name: ai-ops-agent, namespace: ai-ops}
spec:
  selector: {matchLabels: {app: ai-ops-agent}}
  template:
    metadata: {labels: {app: ai-ops-agent}}
    spec:
      containers: [{name: agent, image: readiness.local/pause:1, volumeMounts: [{name: tls, mountPath: /etc/tls, readOnly: true}]}]
      volumes: [{name: tls, secret: {secretName: ai-ops-agent-tls}}]`, after(before))
	return err
}
