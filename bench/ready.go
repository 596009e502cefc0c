package main

import (
	"context"
	"crypto/sha3"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/blang/semver"
	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/integration"
	presource "github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/internal/fakes"
	"github.com/readiness-io/pulumi-readiness/provider"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/helmrelease"
)

// readyNS holds the targets of the "target already ready" run, apart from the other runs' objects.
const readyNS = "bench-ready"

var (
	externalSecrets = schema.GroupVersionResource{Group: "external-secrets.io", Version: "v1", Resource: "externalsecrets"}
	vwcResource     = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}
)

// readyKind is one gate kind of the "target already ready" run.
type readyKind struct {
	gate string
	// fresh: every trial gets a new target (made ready before the trial's clock starts);
	// otherwise every trial gates the same ready target.
	fresh bool
	// target makes trial i's target ready (when fresh) and returns the gate's inputs.
	target func(ctx context.Context, i int) (map[string]property.Value, error)
	what   string
}

type readyRow struct {
	gate, what string
	fresh      bool
	d          dist
}

// alreadyReady measures, per gate kind, Check + Create for a target that is already satisfied
// when the gate starts: sequential trials, one gate at a time, as a stack's gate that runs after
// its target is up.
func (b *bench) alreadyReady(ctx context.Context, trials int) ([]readyRow, error) {
	kinds, cleanup, err := b.readyKinds(ctx)
	defer cleanup()
	if err != nil {
		return nil, err
	}
	// Gate kinds the provider in this tree does not have yet are left out.
	sch, err := b.server.GetSchema(p.GetSchemaRequest{})
	if err != nil {
		return nil, err
	}
	kinds = slices.DeleteFunc(kinds, func(k readyKind) bool {
		return !strings.Contains(sch.Schema, `"readiness:index:`+k.gate+`"`)
	})
	var rows []readyRow
	// The first gate of a provider process also pays for reaching the API server and for API
	// discovery (the RESTMapper's cache is empty): a new provider per trial, on a ready target.
	resourceKind := slices.IndexFunc(kinds, func(k readyKind) bool { return k.gate == "ResourceReady" })
	first := readyRow{gate: "ResourceReady", what: "custom resource, Ready=True; first gate of a new provider process", fresh: true}
	for i := 1; i <= max(1, trials/5); i++ {
		s, err := b.newServer(ctx)
		if err != nil {
			return nil, err
		}
		in, err := kinds[resourceKind].target(ctx, i)
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		if _, err := b.gateOn(s, "ResourceReady", in); err != nil {
			return nil, fmt.Errorf("first gate: %w", err)
		}
		first.d = append(first.d, time.Since(t0))
	}
	for _, k := range kinds {
		// One untimed gate first: it waits (long timeout) until a shared target has become ready,
		// so every timed trial starts with the target satisfied.
		in, err := k.target(ctx, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k.gate, err)
		}
		in["timeout"] = str("120s")
		if _, err := b.gate(k.gate, in); err != nil {
			return nil, fmt.Errorf("%s: target never became ready: %w", k.gate, err)
		}
		row := readyRow{gate: k.gate, what: k.what, fresh: k.fresh}
		for i := 1; i <= trials; i++ {
			in, err := k.target(ctx, i)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k.gate, err)
			}
			in["timeout"] = str("30s")
			t0 := time.Now()
			if _, err := b.gate(k.gate, in); err != nil {
				return nil, fmt.Errorf("%s trial %d: %w", k.gate, i, err)
			}
			row.d = append(row.d, time.Since(t0))
		}
		fmt.Fprintf(os.Stderr, "  %s: p50 %s, p99 %s\n", k.gate, ms(row.d.pct(50)), ms(row.d.pct(99)))
		rows = append(rows, row)
	}
	fmt.Fprintf(os.Stderr, "  first gate of a provider: p50 %s, p99 %s\n", ms(first.d.pct(50)), ms(first.d.pct(99)))
	return append(rows, first), nil
}

// newServer is a new provider process's gRPC surface (in-process), configured for the cluster.
func (b *bench) newServer(ctx context.Context) (integration.Server, error) {
	prov, err := provider.New()
	if err != nil {
		return nil, err
	}
	s, err := integration.NewServer(ctx, provider.Name, semver.MustParse("0.1.0"), integration.WithProvider(prov))
	if err != nil {
		return nil, err
	}
	return s, s.Configure(p.ConfigureRequest{Args: property.NewMap(map[string]property.Value{
		"kubeconfig": property.New(string(b.cp.Kubeconfig))})})
}

// gateOn runs one gate's Check and Create on server s.
func (b *bench) gateOn(s integration.Server, typ string, inputs map[string]property.Value) (p.CreateResponse, error) {
	urn := presource.NewURN("bench", "readiness", "", tokens.Type("readiness:index:"+typ), fmt.Sprintf("g%d", b.seq.Add(1)))
	chk, err := s.Check(p.CheckRequest{Urn: urn, Inputs: property.NewMap(inputs)})
	if err != nil {
		return p.CreateResponse{}, err
	}
	if len(chk.Failures) > 0 {
		return p.CreateResponse{}, fmt.Errorf("check: %v", chk.Failures)
	}
	return s.Create(p.CreateRequest{Urn: urn, Properties: chk.Inputs})
}

func props(kv ...any) map[string]property.Value {
	m := map[string]property.Value{}
	for i := 0; i < len(kv); i += 2 {
		switch v := kv[i+1].(type) {
		case string:
			m[kv[i].(string)] = str(v)
		case int:
			m[kv[i].(string)] = property.New(float64(v))
		case []string:
			var l []property.Value
			for _, s := range v {
				l = append(l, str(s))
			}
			m[kv[i].(string)] = property.New(l)
		case property.Value:
			m[kv[i].(string)] = v
		default:
			panic(fmt.Sprintf("props: %T", v))
		}
	}
	return m
}

// esoSyncedVersion is the status.syncedResourceVersion External Secrets (0.17 and later) writes
// when it has synced es as it is: <generation>-<sha3-224 of its labels and annotations>.
func esoSyncedVersion(es *unstructured.Unstructured) string {
	type meta struct {
		annotations map[string]string
		labels      map[string]string
	}
	text := fmt.Sprintf("%+v", meta{annotations: es.GetAnnotations(), labels: es.GetLabels()})
	return fmt.Sprintf("%d-%x", es.GetGeneration(), sha3.Sum224([]byte(text)))
}

func (b *bench) updateStatus(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, st map[string]any) error {
	obj = obj.DeepCopy()
	obj.Object["status"] = st
	_, err := b.dyn.Resource(gvr).Namespace(obj.GetNamespace()).UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	return err
}

func (b *bench) tlsSecret(ctx context.Context, ns, name, host string) (notAfter time.Time, err error) {
	c, err := fakes.IssueCertificate(host, 48*time.Hour)
	if err != nil {
		return time.Time{}, err
	}
	sec := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": name, "namespace": ns}, "type": "kubernetes.io/tls",
		"data": map[string]any{"tls.crt": base64.StdEncoding.EncodeToString(c.CertPEM), "tls.key": base64.StdEncoding.EncodeToString(c.KeyPEM)}}}
	_, err = b.dyn.Resource(secrets).Namespace(ns).Create(ctx, sec, metav1.CreateOptions{})
	return c.NotAfter, err
}

// readyKinds prepares every gate kind's targets: shared ones now, fresh ones per trial.
func (b *bench) readyKinds(ctx context.Context) (kinds []readyKind, cleanup func(), err error) {
	var cleanups []func()
	cleanup = func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	if _, err := b.cp.Apply(ctx, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+readyNS+"}"); err != nil {
		return nil, cleanup, err
	}
	// ExternalSecret's CRD (as the tests install it); CrdReady below waits until it is served.
	if _, err := b.cp.Apply(ctx, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: externalsecrets.external-secrets.io}
spec:
  group: external-secrets.io
  scope: Namespaced
  names: {kind: ExternalSecret, plural: externalsecrets, singular: externalsecret, listKind: ExternalSecretList, shortNames: [es]}
  versions:
  - {name: v1, served: true, storage: true, subresources: {status: {}}, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}`); err != nil {
		return nil, cleanup, err
	}
	// A Deployment whose pods kwok makes ready, and a Service in front of it.
	if _, err := b.cp.Apply(ctx, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %[1]s}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {type: kwok}
      tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
      containers: [{name: web, image: registry.local/web:1, ports: [{name: http, containerPort: 8080}]}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: %[1]s}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: app-config, namespace: %[1]s}
data: {a: b}`, readyNS)); err != nil {
		return nil, cleanup, err
	}
	// A URL webhook on 127.0.0.1 that is already serving, intercepting the bench's Probe kind.
	wh, err := fakes.NewWebhook()
	if err != nil {
		return nil, cleanup, err
	}
	cleanups = append(cleanups, wh.Close)
	if err := wh.Start(); err != nil {
		return nil, cleanup, err
	}
	if _, err := b.cp.Apply(ctx, wh.ConfigurationFor("ValidatingWebhookConfiguration", "bench-ready-webhook", group, "probes")); err != nil {
		return nil, cleanup, err
	}
	cleanups = append(cleanups, func() {
		_ = b.dyn.Resource(vwcResource).Delete(context.Background(), "bench-ready-webhook", metav1.DeleteOptions{})
	})
	// An HTTP server on 127.0.0.1 that answers 200.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, cleanup, err
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"status":"ok"}`)
	})}
	go func() { _ = srv.Serve(l) }()
	cleanups = append(cleanups, func() { _ = srv.Close() })
	healthz := "http://" + l.Addr().String() + "/healthz"

	probe := property.New(property.NewMap(map[string]property.Value{"apiVersion": str(group + "/v1"), "kind": str("Probe"),
		"metadata": property.New(property.NewMap(map[string]property.Value{"name": str("probe"), "namespace": str(readyNS)}))}))
	name := func(prefix string, i int) string { return fmt.Sprintf("%s-%d-%d", prefix, i, b.seq.Add(1)) }

	kinds = []readyKind{
		{gate: "CrdReady", what: "2 CRDs, established", target: func(context.Context, int) (map[string]property.Value, error) {
			return props("names", []string{"widgets." + group, "externalsecrets.external-secrets.io"}), nil
		}},
		{gate: "ResourceReady", what: "custom resource, Ready=True", fresh: true, target: func(ctx context.Context, i int) (map[string]property.Value, error) {
			n := name("ready", i)
			o, err := b.create(ctx, widgets, readyNS, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: %s, namespace: %s}", group, n, readyNS))
			if err != nil {
				return nil, err
			}
			if err := b.setReady(ctx, widgets, o, nil); err != nil {
				return nil, err
			}
			return props("apiVersion", group+"/v1", "kind", "Widget", "namespace", readyNS, "name", n,
				"condition", property.New(property.NewMap(map[string]property.Value{"type": str("Ready")}))), nil
		}},
		{gate: "RolloutReady", what: "Deployment, 2 replicas available", target: func(context.Context, int) (map[string]property.Value, error) {
			return props("kind", "Deployment", "name", "web", "namespace", readyNS), nil
		}},
		{gate: "ServiceReady", what: "Service, 2 ready endpoints", target: func(context.Context, int) (map[string]property.Value, error) {
			return props("name", "web", "namespace", readyNS, "port", "http", "minReadyEndpoints", 2), nil
		}},
		{gate: "SecretReady", what: "Secret with its keys", fresh: true, target: func(ctx context.Context, i int) (map[string]property.Value, error) {
			n := name("creds", i)
			if _, err := b.create(ctx, secrets, readyNS, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: %s, namespace: %s}\nstringData: {token: t0ken}", n, readyNS)); err != nil {
				return nil, err
			}
			return props("name", n, "namespace", readyNS, "requiredKeys", []string{"token"}), nil
		}},
		{gate: "CertificateReady", what: "Certificate Ready=True and its Secret", fresh: true, target: func(ctx context.Context, i int) (map[string]property.Value, error) {
			n := name("cert", i)
			o, err := b.create(ctx, certificates, readyNS, fmt.Sprintf(`apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: %[1]s, namespace: %[2]s}
spec: {secretName: %[1]s-tls, dnsNames: [%[1]s.example.test], issuerRef: {name: ca, kind: ClusterIssuer}}`, n, readyNS))
			if err != nil {
				return nil, err
			}
			notAfter, err := b.tlsSecret(ctx, readyNS, n+"-tls", n+".example.test")
			if err != nil {
				return nil, err
			}
			if err := b.setReady(ctx, certificates, o, map[string]any{"revision": int64(1), "notAfter": notAfter.UTC().Format(time.RFC3339)}); err != nil {
				return nil, err
			}
			return props("name", n, "namespace", readyNS), nil
		}},
		{gate: "ExternalSecretReady", what: "ExternalSecret synced and its Secret", fresh: true, target: func(ctx context.Context, i int) (map[string]property.Value, error) {
			n := name("es", i)
			o, err := b.create(ctx, externalSecrets, readyNS, fmt.Sprintf(`apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  secretStoreRef: {name: vault, kind: ClusterSecretStore}
  target: {name: %[1]s-synced}
  data: [{secretKey: token, remoteRef: {key: app}}]`, n, readyNS))
			if err != nil {
				return nil, err
			}
			if _, err := b.create(ctx, secrets, readyNS, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: %s-synced, namespace: %s}\nstringData: {token: t0ken}", n, readyNS)); err != nil {
				return nil, err
			}
			st := map[string]any{"refreshTime": time.Now().UTC().Format(time.RFC3339), "syncedResourceVersion": esoSyncedVersion(o),
				"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "SecretSynced", "message": "secret synced",
					"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}
			if err := b.updateStatus(ctx, externalSecrets, o, st); err != nil {
				return nil, err
			}
			return props("name", n, "namespace", readyNS), nil
		}},
		{gate: "NodesReady", what: "1 kwok node Ready", target: func(context.Context, int) (map[string]property.Value, error) {
			return props("minCount", 1, "selector", "type=kwok"), nil
		}},
		{gate: "WebhookReady", what: "URL webhook on 127.0.0.1, serving, with probe", target: func(context.Context, int) (map[string]property.Value, error) {
			return props("validatingWebhookConfiguration", "bench-ready-webhook", "probe", probe), nil
		}},
		{gate: "HttpReady", what: "HTTP server on 127.0.0.1, answering 200", target: func(context.Context, int) (map[string]property.Value, error) {
			return props("url", healthz), nil
		}},
		{gate: "HttpReady", what: "the same, `consecutiveSuccesses: 1`", target: func(context.Context, int) (map[string]property.Value, error) {
			return props("url", healthz, "consecutiveSuccesses", 1), nil
		}},
		{gate: "AdmissionReady", what: "a ConfigMap the API server admits (dry-run)", target: func(context.Context, int) (map[string]property.Value, error) {
			cm := property.New(property.NewMap(map[string]property.Value{"apiVersion": str("v1"), "kind": str("ConfigMap"),
				"metadata": property.New(property.NewMap(map[string]property.Value{"name": str("admitted"), "namespace": str(readyNS)})),
				"data":     property.New(property.NewMap(map[string]property.Value{"a": str("b")}))}))
			return props("objects", property.New([]property.Value{cm})), nil
		}},
		{gate: "HelmReleaseReady", what: "deployed release record: Deployment, Service, ConfigMap", fresh: true, target: func(ctx context.Context, i int) (map[string]property.Value, error) {
			n := name("rel", i)
			manifest := fmt.Sprintf("---\n# Source: app/templates/deployment.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: %[1]s}\n"+
				"---\n# Source: app/templates/service.yaml\napiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: %[1]s}\n"+
				"---\n# Source: app/templates/configmap.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-config, namespace: %[1]s}\n", readyNS)
			rec, err := helmrelease.Encode(n, readyNS, 1, "deployed", "app", "1.2.3", "4.5.6", manifest)
			if err != nil {
				return nil, err
			}
			sec := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
				"metadata": map[string]any{"name": "sh.helm.release.v1." + n + ".v1", "namespace": readyNS,
					"labels": map[string]any{"owner": "helm", "name": n, "status": "deployed", "version": "1"}},
				"type": "helm.sh/release.v1", "stringData": map[string]any{"release": rec}}}
			if _, err := b.dyn.Resource(secrets).Namespace(readyNS).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
				return nil, err
			}
			return props("name", n, "namespace", readyNS), nil
		}},
	}
	return kinds, cleanup, nil
}
