package charts

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The `apisix` umbrella chart (apache/apisix-helm-chart charts/apisix 2.14.0: the APISIX gateway,
// and apisix-ingress-controller 1.1.x as its subchart `ingress-controller`) is not among the
// rendered charts; its subchart is (apisix-ingress-controller 1.1.2, the same commit).
// APISIXShaped writes a local chart dir/apisix that is that umbrella as the apisix example
// installs it (release `apisix` in namespace `apisix`, values `ingress-controller.enabled: true`
// and `ingress-controller.webhook.failurePolicy: Fail`), and returns its path. The values the
// example passes are not read: the templates are the rendered objects.
//
// Real: every object of the rendered apisix-ingress-controller chart, with Prepare's changes:
// APISIX's CRDs (GatewayProxy, ApisixRoute, ...) and the Gateway API's, RBAC, ConfigMap, the
// controller's Deployment, the webhook's Secret and Service, the IngressClass and the
// ValidatingWebhookConfiguration `apisix-ingress-controller-webhook` (12 webhooks, its
// `vgatewayproxy-v1alpha1.kb.io` the one the report's GatewayProxy met). Their names are the
// umbrella's too: the subchart's fullname for release `apisix` is `apisix-ingress-controller`.
//
// Changed as the umbrella with the example's values renders them: every namespace
// `apisix-ingress-system` (the fixture's release namespace) is `apisix`, and every webhook's
// failurePolicy is Fail (the subchart's `webhook.failurePolicy`, default Ignore: with Ignore
// the API server admits without the webhook while it is down, and nothing fails the way the
// report did). Labels keep the standalone chart's values.
//
// Shaped (not rendered): the umbrella's own gateway, as its templates deployment.yaml,
// service-admin.yaml, service-gateway.yaml and configmap.yaml make it with default values: the
// Deployment `apisix` (image apache/apisix:3.16.0-ubuntu, ports 9080/9443/9180), the Services
// `apisix-admin` (ClusterIP 9180) and `apisix-gateway` (NodePort 80 -> 9080), and a short
// ConfigMap `apisix`. The umbrella's etcd subchart (bitnami etcd, a StatefulSet with volume
// claims no local provisioner binds) is left out: nothing in the example waits for it.
func APISIXShaped(dir string, webhook Webhook) (string, error) {
	objs, err := Rendered("apisix-ingress-controller")
	if err != nil {
		return "", err
	}
	for _, u := range objs {
		inUmbrellaNamespace(u, "apisix-ingress-system", "apisix")
		if u.GetKind() == "ValidatingWebhookConfiguration" {
			setFailurePolicy(u, "Fail")
		}
	}
	gateway, err := decodeAll(apisixGateway)
	if err != nil {
		return "", err
	}
	return Write(dir, "apisix", Prepare(append(objs, gateway...), webhook))
}

// inUmbrellaNamespace moves u from namespace from to to: its own namespace and the namespaces
// it names (role binding subjects, webhook Services).
func inUmbrellaNamespace(u *unstructured.Unstructured, from, to string) {
	if u.GetNamespace() == from {
		u.SetNamespace(to)
	}
	for _, field := range []string{"subjects", "webhooks"} {
		items, found, _ := unstructured.NestedSlice(u.Object, field)
		if !found {
			continue
		}
		for _, it := range items {
			m, _ := it.(map[string]any)
			if m["namespace"] == from {
				m["namespace"] = to
			}
			if ns, _, _ := unstructured.NestedString(m, "clientConfig", "service", "namespace"); ns == from {
				_ = unstructured.SetNestedField(m, to, "clientConfig", "service", "namespace")
			}
		}
		_ = unstructured.SetNestedSlice(u.Object, items, field)
	}
}

func setFailurePolicy(cfg *unstructured.Unstructured, policy string) {
	hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
	for _, h := range hooks {
		if m, ok := h.(map[string]any); ok {
			m["failurePolicy"] = policy
		}
	}
	_ = unstructured.SetNestedSlice(cfg.Object, hooks, "webhooks")
}

// The umbrella's gateway, shaped (see APISIXShaped).
var apisixGateway = []string{`apiVersion: v1
kind: ConfigMap
metadata:
  name: apisix
  namespace: apisix
  labels: {app.kubernetes.io/name: apisix, app.kubernetes.io/instance: apisix, app.kubernetes.io/managed-by: Helm}
data:
  config.yaml: |
    deployment:
      role: traditional
      role_traditional: {config_provider: etcd}
      admin:
        allow_admin: [127.0.0.1/24]
        admin_listen: {ip: 0.0.0.0, port: 9180}
      etcd:
        host: ["http://apisix-etcd.apisix.svc.cluster.local:2379"]
        prefix: /apisix`,
	`apiVersion: v1
kind: Service
metadata:
  name: apisix-admin
  namespace: apisix
  labels: {app.kubernetes.io/name: apisix, app.kubernetes.io/instance: apisix, app.kubernetes.io/service: apisix-admin}
spec:
  type: ClusterIP
  ports:
  - {name: apisix-admin, port: 9180, targetPort: 9180, protocol: TCP}
  selector: {app.kubernetes.io/name: apisix, app.kubernetes.io/instance: apisix}`,
	`apiVersion: v1
kind: Service
metadata:
  name: apisix-gateway
  namespace: apisix
  labels: {app.kubernetes.io/name: apisix, app.kubernetes.io/instance: apisix, app.kubernetes.io/service: apisix-gateway}
spec:
  type: NodePort
  externalTrafficPolicy: Cluster
  ports:
  - {name: apisix-gateway, port: 80, targetPort: 9080, protocol: TCP}
  selector: {app.kubernetes.io/name: apisix, app.kubernetes.io/instance: apisix}`,
	`apiVersion: apps/v1
kind: Deployment
metadata:
  name: apisix
  namespace: apisix
  labels: {app.kubernetes.io/name: apisix, app.kubernetes.io/instance: apisix, app.kubernetes.io/version: 3.16.0, app.kubernetes.io/managed-by: Helm}
spec:
  replicas: 1
  selector:
    matchLabels: {app.kubernetes.io/name: apisix, app.kubernetes.io/instance: apisix}
  template:
    metadata:
      labels: {app.kubernetes.io/name: apisix, app.kubernetes.io/instance: apisix}
    spec:
      containers:
      - name: apisix
        image: apache/apisix:3.16.0-ubuntu
        imagePullPolicy: IfNotPresent
        ports:
        - {name: http, containerPort: 9080, protocol: TCP}
        - {name: tls, containerPort: 9443, protocol: TCP}
        - {name: admin, containerPort: 9180, protocol: TCP}
        readinessProbe:
          tcpSocket: {port: 9080}
          initialDelaySeconds: 10
          periodSeconds: 10
          failureThreshold: 6
        volumeMounts:
        - {name: apisix-config, mountPath: /usr/local/apisix/conf/config.yaml, subPath: config.yaml}
      volumes:
      - name: apisix-config
        configMap: {name: apisix}`}
