package charts

import (
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
)

// Linkerd's charts are not among the rendered charts. LinkerdShaped writes two local charts
// under dir/linkerd, named as Linkerd's (linkerd-crds, linkerd-control-plane), as a folder that
// `helm pull --untar` of both would make (a mirror), and returns that folder. They hold only
// what the injector example relies on, shaped as Linkerd's proxy injector: one CRD of Linkerd's,
// and the injector's Deployment and Service and its MutatingWebhookConfiguration
// `linkerd-proxy-injector-webhook-config` (failurePolicy Ignore, Pods on CREATE,
// kube-system and opted-out namespaces left alone), its webhook sent to the test's server on
// 127.0.0.1 as Prepare does. That server plays the injector: it appends a `linkerd-proxy`
// container (fakes.Webhook mode "inject:linkerd-proxy"). The values the example passes (trust
// anchor, issuer) are ignored.
func LinkerdShaped(dir string, webhook Webhook) (string, error) {
	root := filepath.Join(dir, "linkerd")
	crds, err := decodeAll(linkerdCRDs)
	if err != nil {
		return "", err
	}
	if _, err := Write(root, "linkerd-crds", crds); err != nil {
		return "", err
	}
	cp, err := decodeAll(linkerdControlPlane)
	if err != nil {
		return "", err
	}
	if _, err := Write(root, "linkerd-control-plane", Prepare(cp, webhook)); err != nil {
		return "", err
	}
	return root, nil
}

func decodeAll(docs []string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, d := range docs {
		u, err := controlplane.Decode(d)
		if err != nil {
			return nil, fmt.Errorf("shaped chart: %w", err)
		}
		out = append(out, u)
	}
	return out, nil
}

var linkerdCRDs = []string{`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: serviceprofiles.linkerd.io
  labels: {linkerd.io/control-plane-ns: linkerd}
spec:
  group: linkerd.io
  scope: Namespaced
  names: {kind: ServiceProfile, plural: serviceprofiles, singular: serviceprofile, shortNames: [sp]}
  versions:
  - name: v1alpha2
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}`}

var linkerdControlPlane = []string{`apiVersion: v1
kind: Service
metadata:
  name: linkerd-proxy-injector
  namespace: linkerd
  labels: {linkerd.io/control-plane-component: proxy-injector, linkerd.io/control-plane-ns: linkerd}
spec:
  type: ClusterIP
  selector: {linkerd.io/control-plane-component: proxy-injector}
  ports:
  - {name: proxy-injector, port: 443, targetPort: proxy-injector}`,
	`apiVersion: apps/v1
kind: Deployment
metadata:
  name: linkerd-proxy-injector
  namespace: linkerd
  labels: {app.kubernetes.io/name: proxy-injector, app.kubernetes.io/part-of: Linkerd, linkerd.io/control-plane-component: proxy-injector, linkerd.io/control-plane-ns: linkerd}
spec:
  replicas: 1
  selector:
    matchLabels: {linkerd.io/control-plane-component: proxy-injector}
  template:
    metadata:
      labels: {linkerd.io/control-plane-component: proxy-injector, linkerd.io/control-plane-ns: linkerd}
    spec:
      nodeSelector: {kubernetes.io/os: linux}
      containers:
      - name: proxy-injector
        image: cr.l5d.io/linkerd/controller:edge
        args: [proxy-injector, -log-level=info]
        ports:
        - {name: proxy-injector, containerPort: 8443}`,
	`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: linkerd-proxy-injector-webhook-config
  labels: {linkerd.io/control-plane-component: proxy-injector, linkerd.io/control-plane-ns: linkerd}
webhooks:
- name: linkerd-proxy-injector.linkerd.io
  namespaceSelector:
    matchExpressions:
    - {key: config.linkerd.io/admission-webhooks, operator: NotIn, values: [disabled]}
    - {key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, cert-manager]}
  clientConfig:
    service: {name: linkerd-proxy-injector, namespace: linkerd, path: /}
  failurePolicy: Ignore
  admissionReviewVersions: [v1, v1beta1]
  reinvocationPolicy: IfNeeded
  rules:
  - {operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods], scope: Namespaced}
  sideEffects: None
  timeoutSeconds: 10`}
