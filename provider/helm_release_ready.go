package provider

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

	"github.com/readiness-io/pulumi-readiness/provider/internal/probe"
	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/helmrelease"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// HelmReleaseReady is `helm --wait` that also waits for webhooks: it reads a release's stored
// record and waits for every object of its manifest.
type HelmReleaseReady struct {
	gate[HelmReleaseReadyArgs, HelmReleaseReadyState]
}

type HelmReleaseReadyArgs struct {
	Name      string         `pulumi:"name" provider:"replaceOnChanges"`
	Namespace *string        `pulumi:"namespace,optional" provider:"replaceOnChanges"`
	Probe     map[string]any `pulumi:"probe,optional" provider:"replaceOnChanges"`
	GateArgs
}

type HelmReleaseReadyState struct {
	HelmReleaseReadyArgs
	Revision   int      `pulumi:"revision"`
	Chart      string   `pulumi:"chart"`
	AppVersion string   `pulumi:"appVersion"`
	Objects    int      `pulumi:"objects"`
	Webhooks   []string `pulumi:"webhooks"`
}

//go:embed descriptions/helm_release_ready.md
var helmReleaseReadyDoc string

func (g *HelmReleaseReady) Annotate(a infer.Annotator) {
	a.Describe(g, markdown(helmReleaseReadyDoc))
}

func (a *HelmReleaseReadyArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Name, "The release name.")
	an.Describe(&a.Namespace, "The release's namespace; the provider's default namespace if unset.")
	an.Describe(&a.Probe, "An object (manifest map) the release's webhooks intercept, used instead of a probe derived from their rules.")
}

func (s *HelmReleaseReadyState) Annotate(a infer.Annotator) {
	a.Describe(&s.Revision, "The release revision that was waited for.")
	a.Describe(&s.Chart, "The chart as `name-version`.")
	a.Describe(&s.AppVersion, "The chart's appVersion.")
	a.Describe(&s.Objects, "How many objects the release's manifest holds.")
	a.Describe(&s.Webhooks, "The release's webhook configurations.")
}

var (
	_ = (infer.CustomCheck[HelmReleaseReadyArgs])((*HelmReleaseReady)(nil))
	_ = (infer.CustomRead[HelmReleaseReadyArgs, HelmReleaseReadyState])((*HelmReleaseReady)(nil))
)

func (*HelmReleaseReady) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[HelmReleaseReadyArgs], error) {
	return checkGate(ctx, req, func(args HelmReleaseReadyArgs, failures []p.CheckFailure) []p.CheckFailure {
		failures = append(failures, nameFailures(req.NewInputs, "name", args.Name, "namespace", args.Namespace)...)
		if len(args.Name) > 53 {
			failures = append(failures, p.CheckFailure{Property: "name", Reason: "Helm release names are at most 53 characters"})
		}
		return append(failures, probeFailures(req.NewInputs, args.Probe)...)
	})
}

func (g *HelmReleaseReady) Create(ctx context.Context, req infer.CreateRequest[HelmReleaseReadyArgs]) (infer.CreateResponse[HelmReleaseReadyState], error) {
	return createGate(ctx, req.Name, req.DryRun, req.Inputs.GateArgs, HelmReleaseReadyState{HelmReleaseReadyArgs: req.Inputs}, "helmrelease", helmBuilder(req.Inputs))
}

func (g *HelmReleaseReady) Read(ctx context.Context, req infer.ReadRequest[HelmReleaseReadyArgs, HelmReleaseReadyState]) (infer.ReadResponse[HelmReleaseReadyArgs, HelmReleaseReadyState], error) {
	return readGate(ctx, req, helmBuilder(req.Inputs))
}

func helmBuilder(a HelmReleaseReadyArgs) builder[HelmReleaseReadyState] {
	return func(r *session.Run) (evaluation, func(*HelmReleaseReadyState), error) {
		mc, err := metadata.NewForConfig(r.Clients.Config)
		if err != nil {
			return nil, nil, err
		}
		e := &helmEval{r: r, name: a.Name, namespace: r.DefaultNamespace(a.Namespace), probe: a.Probe, meta: mc}
		return e, e.fill, nil
	}
}

type helmEval struct {
	r               *session.Run
	name, namespace string
	probe           map[string]any
	meta            metadata.Interface

	// newest is the highest revision among the release's records (0: none), found by listing
	// their metadata; listed says it is current. Two named watches then say when it changes:
	// one on the newest record (Helm rewrites it when the revision's status changes) and one
	// on the next revision's record (an upgrade or rollback writes it).
	newest   int
	listed   bool
	store    schema.GroupVersionResource // where the records are: Secrets or ConfigMaps (Helm's two in-cluster drivers)
	newestRV string                      // the watched record's resourceVersion that rel was read for
	latest   *helmrelease.Release
	rel      *helmrelease.Release // the deployed revision whose objects are checked
	objs     *renderedObjects
}

func (e *helmEval) what() string { return fmt.Sprintf("Helm release %s/%s", e.namespace, e.name) }

var (
	secretsResource    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	configMapsResource = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// recordStores are where Helm 3's in-cluster storage drivers keep release records: the
// default `secret` driver, and `configmap` (HELM_DRIVER=configmap). The `sql` driver keeps them
// in a database outside the cluster, which the gate cannot read.
var recordStores = []schema.GroupVersionResource{secretsResource, configMapsResource}

// recordsErr turns a failed read of the release's records into a result: RBAC fails at once
// (naming verb, resource, namespace and user, as the API server's message does), anything else
// is retried.
func (e *helmEval) recordsErr(verb string, store schema.GroupVersionResource, err error) *verdict.Result {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return &verdict.Result{Failed: fmt.Errorf("%s: cannot %s its release records (%s labelled owner=helm,name=%s in namespace %s): %w; "+
			"grant list and watch on %s in namespace %s", e.what(), verb, store.Resource, e.name, e.namespace, err, store.Resource, e.namespace)}
	}
	return &verdict.Result{Message: fmt.Sprintf("%s the release's records: %v", verb, err), Poll: true}
}

// listRecords finds the release's newest revision from its records' metadata, in Secrets and
// in ConfigMaps (whichever driver Helm used; no input says which): no values are transferred
// (a record holds the whole chart, often hundreds of kilobytes). A store the user may not list
// is skipped when the other holds the records; when neither does, its refusal is the answer.
//
// A quick list (consistent false) is answered from the API server's watch cache at once and
// may lag: it is a hint, which load confirms by reading the next records by name (fresh GETs).
// A consistent list waits for the watch cache to catch up with etcd.
func (e *helmEval) listRecords(ctx context.Context, consistent bool) *verdict.Result {
	newest, store := 0, secretsResource
	var refused *verdict.Result
	rv := "0"
	if consistent {
		rv = ""
	}
	for _, st := range recordStores {
		list, err := e.meta.Resource(st).Namespace(e.namespace).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + e.name, ResourceVersion: rv})
		if err != nil {
			res := e.recordsErr("list", st, err)
			if res.Failed == nil {
				return res // transient: list again
			}
			if refused == nil {
				refused = res
			}
			continue
		}
		for _, m := range list.Items {
			if v, ok := helmrelease.RecordRevision(e.name, m.Name, m.Labels); ok && v > newest {
				newest, store = v, st
			}
		}
	}
	if newest == 0 && refused != nil {
		return refused
	}
	if newest != e.newest || store != e.store {
		e.newest, e.newestRV, e.latest = newest, "", nil
	}
	e.store, e.listed = store, true
	return nil
}

// firstRecord looks for revision 1 by name (a GET reads etcd at once) when the quick list found
// no record, as for a release installed just before the gate: the walk to newer revisions by
// name follows in load. False when not found (or not readable): a consistent list decides.
func (e *helmEval) firstRecord(ctx context.Context) bool {
	name := helmrelease.RecordName(e.name, 1)
	for _, st := range recordStores {
		m, err := e.meta.Resource(st).Namespace(e.namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil && m.Labels["owner"] == "helm" && m.Labels["name"] == e.name {
			e.newest, e.newestRV, e.latest, e.store = 1, "", nil, st
			return true
		}
	}
	return false
}

// readNewest reads and decodes the newest record. Records are read directly, never through the
// shared Secret cache (which drops values), and decoded only to chart metadata and object
// references.
func (e *helmEval) readNewest(ctx context.Context) (*helmrelease.Release, *verdict.Result) {
	name := helmrelease.RecordName(e.name, e.newest)
	// A GET reads etcd at once; without `get` (the README's minimal role has list and watch),
	// a list narrowed to the name.
	opts := metav1.ListOptions{FieldSelector: "metadata.name=" + name, LabelSelector: "owner=helm,name=" + e.name}
	var payload []byte
	found := false
	var err error
	if e.store == configMapsResource {
		cms := e.r.Clients.Typed.CoreV1().ConfigMaps(e.namespace)
		var cm *corev1.ConfigMap
		if cm, err = cms.Get(ctx, name, metav1.GetOptions{}); err == nil && cm.Labels["owner"] == "helm" {
			payload, found = []byte(cm.Data["release"]), true // the configmap driver stores the same base64 text
		} else if apierrors.IsForbidden(err) {
			var list *corev1.ConfigMapList
			if list, err = cms.List(ctx, opts); err == nil && len(list.Items) > 0 {
				payload, found = []byte(list.Items[0].Data["release"]), true
			}
		}
	} else {
		secrets := e.r.Clients.Typed.CoreV1().Secrets(e.namespace)
		var sec *corev1.Secret
		if sec, err = secrets.Get(ctx, name, metav1.GetOptions{}); err == nil && sec.Labels["owner"] == "helm" {
			payload, found = sec.Data["release"], true
		} else if apierrors.IsForbidden(err) {
			var list *corev1.SecretList
			if list, err = secrets.List(ctx, opts); err == nil && len(list.Items) > 0 {
				payload, found = list.Items[0].Data["release"], true
			}
		}
	}
	if apierrors.IsNotFound(err) {
		err = nil
	}
	if err != nil {
		return nil, e.recordsErr("read", e.store, err)
	}
	if !found {
		e.listed = false // gone meanwhile (uninstalled): find the newest again
		return nil, &verdict.Result{Message: "release record " + name + " disappeared; listing again", Poll: true}
	}
	rel, err := helmrelease.Decode(payload)
	if err != nil {
		return nil, &verdict.Result{Failed: fmt.Errorf("%s: record %s: %v", e.what(), name, err)}
	}
	return rel, nil
}

// load brings the newest revision up to date and decides (helmrelease.JudgeRevision) whether
// its objects can be checked: only a deployed newest revision is.
func (e *helmEval) load(ctx context.Context) *verdict.Result {
	for attempt := 0; ; attempt++ {
		if !e.listed {
			// The quick list first; a consistent one when it found nothing (a record written
			// just before the gate may be missing from the cache) or records moved under us.
			consistent := attempt > 0
			if res := e.listRecords(ctx, consistent); res != nil {
				return res
			}
			if e.newest == 0 && !consistent && !e.firstRecord(ctx) {
				if res := e.listRecords(ctx, true); res != nil {
					return res
				}
			}
		}
		next := e.r.Watch(kube.WatchKey{Resource: e.store, Namespace: e.namespace, Name: helmrelease.RecordName(e.name, e.newest+1)})
		if res := e.recordWatch(next); res != nil {
			return res
		}
		nextRec, err := e.r.Read(next, helmrelease.RecordName(e.name, e.newest+1))
		if err != nil {
			return e.recordsErr("read", e.store, err)
		}
		if nextRec != nil && attempt < 10 {
			// A newer revision than the list said (written since, or a lagging list): move on
			// to it by name; its record's watch is read fresh the same way.
			e.newest, e.newestRV, e.latest = e.newest+1, "", nil
			continue
		}
		moved := nextRec != nil
		var cur *kube.Subscription
		var obj *unstructured.Unstructured
		if e.newest > 0 {
			cur = e.r.Watch(kube.WatchKey{Resource: e.store, Namespace: e.namespace, Name: helmrelease.RecordName(e.name, e.newest)})
			if res := e.recordWatch(cur); res != nil {
				return res
			}
			if obj, err = e.r.Read(cur, helmrelease.RecordName(e.name, e.newest)); err != nil {
				return e.recordsErr("read", e.store, err)
			}
			moved = moved || obj == nil
		}
		if moved && attempt < 3 {
			e.listed = false // a newer revision was written, or the newest was deleted
			continue
		}
		if moved {
			// Still moving after every attempt: never judge a revision known to be superseded.
			e.listed = false
			return &verdict.Result{Message: "release records are changing; reading again", Poll: true}
		}
		if e.newest == 0 || cur == nil {
			return &verdict.Result{Message: fmt.Sprintf("no release record of %q yet (looked in Secrets and ConfigMaps, where Helm's secret and configmap drivers keep them)", e.name),
				Hint: "is the release installed in this namespace (helm list -n " + e.namespace + ")? A release installed with HELM_DRIVER=sql keeps its records in a database outside the cluster, which this gate cannot read: gate its objects with ResourceReady, RolloutReady and WebhookReady instead"}
		}
		if obj == nil {
			return &verdict.Result{Message: "release records are changing; reading again", Poll: true}
		}
		if e.latest == nil || obj.GetResourceVersion() != e.newestRV {
			rel, res := e.readNewest(ctx)
			if res != nil {
				return res
			}
			e.latest, e.newestRV = rel, obj.GetResourceVersion()
		}
		break
	}
	rel := e.latest
	if ok, res := helmrelease.JudgeRevision(rel, e.namespace, e.name); !ok {
		return &res
	}
	if e.rel == nil || e.rel.Revision != rel.Revision {
		e.rel, e.objs = rel, newRenderedObjects(e.r, e.namespace, e.probe, rel.Objects)
	}
	return nil
}

// recordWatch reports a named watch on a release record that cannot be used yet.
func (e *helmEval) recordWatch(s *kube.Subscription) *verdict.Result {
	if terminal, note := session.WatchErr(e.store.Resource+" in namespace "+e.namespace, s); terminal != nil {
		return &verdict.Result{Failed: fmt.Errorf("%s: %w; grant list and watch on %s in namespace %s", e.what(), terminal, e.store.Resource, e.namespace)}
	} else if note != "" && !s.Synced() {
		return &verdict.Result{Message: note, Unsynced: true}
	}
	if !s.Synced() {
		return &verdict.Result{Message: "reading the release's records", Unsynced: true}
	}
	return nil
}

// check gathers the newest record (load), then judges its objects (renderedObjects.judge).
func (e *helmEval) check(ctx context.Context) verdict.Result {
	if res := e.load(ctx); res != nil {
		return *res
	}
	return e.objs.judge(ctx, e.what(), e.rel.Revision)
}

// maxBackoff: a release with webhooks is probed like WebhookReady.
func (e *helmEval) maxBackoff() time.Duration { return probe.MaxBackoff }

func (e *helmEval) fill(s *HelmReleaseReadyState) {
	s.Revision, s.Chart, s.AppVersion, s.Objects = e.rel.Revision, e.rel.Chart+"-"+e.rel.ChartVersion, e.rel.App, len(e.rel.Objects)
	s.Webhooks = []string{}
	for _, w := range e.rel.Webhooks {
		s.Webhooks = append(s.Webhooks, w.GetName())
	}
}
