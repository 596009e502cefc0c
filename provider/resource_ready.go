package provider

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sort"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/expr"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/objectrule"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// ResourceReady is the generic gate: any kind, decided by a condition, a JSONPath, a CEL
// expression, existence, deletion, or (by default) kstatus with a stricter rule for custom
// resources.
type ResourceReady struct {
	gate[ResourceReadyArgs, ResourceReadyState]
}

type Condition struct {
	Type   string  `pulumi:"type" provider:"replaceOnChanges"`
	Status *string `pulumi:"status,optional" provider:"replaceOnChanges"`
}

func (c *Condition) Annotate(a infer.Annotator) {
	a.Describe(&c.Type, "The condition type, such as `Ready`, `Programmed` or `Available`.")
	a.Describe(&c.Status, "The status it must have: `True` (default), `False` or `Unknown`.")
}

type ResourceReadyArgs struct {
	APIVersion string     `pulumi:"apiVersion" provider:"replaceOnChanges"`
	Kind       string     `pulumi:"kind" provider:"replaceOnChanges"`
	Namespace  *string    `pulumi:"namespace,optional" provider:"replaceOnChanges"`
	Name       *string    `pulumi:"name,optional" provider:"replaceOnChanges"`
	Selector   *string    `pulumi:"selector,optional" provider:"replaceOnChanges"`
	MinCount   *int       `pulumi:"minCount,optional" provider:"replaceOnChanges"`
	Condition  *Condition `pulumi:"condition,optional" provider:"replaceOnChanges"`
	JSONPath   *string    `pulumi:"jsonPath,optional" provider:"replaceOnChanges"`
	Value      *string    `pulumi:"value,optional" provider:"replaceOnChanges"`
	Regex      *string    `pulumi:"regex,optional" provider:"replaceOnChanges"`
	Cel        *string    `pulumi:"cel,optional" provider:"replaceOnChanges"`
	FailedCel  *string    `pulumi:"failedCel,optional" provider:"replaceOnChanges"`
	Exists     *bool      `pulumi:"exists,optional" provider:"replaceOnChanges"`
	Deleted    *bool      `pulumi:"deleted,optional" provider:"replaceOnChanges"`
	StrictPvc  *bool      `pulumi:"strictPvc,optional" provider:"replaceOnChanges"`
	GateArgs
}

type ResourceReadyState struct {
	ResourceReadyArgs
	UID                string   `pulumi:"uid"`
	ResourceVersion    string   `pulumi:"resourceVersion"`
	ObservedGeneration int      `pulumi:"observedGeneration"`
	Matched            []string `pulumi:"matched"`
}

//go:embed descriptions/resource_ready.md
var resourceReadyDoc string

func (r *ResourceReady) Annotate(a infer.Annotator) {
	a.Describe(r, markdown(resourceReadyDoc))
}

func (a *ResourceReadyArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.APIVersion, "The object's apiVersion, such as `apps/v1` or `gateway.networking.k8s.io/v1`.")
	an.Describe(&a.Kind, "The object's kind, such as `Deployment` or `Gateway`. A kind not served yet (its CRD is installing) is waited for; "+
		"an apiVersion the server does not serve for a kind it serves at other versions (and no CRD could add) fails at once, naming those versions.")
	an.Describe(&a.Namespace, "The namespace, for namespaced kinds; the provider's default namespace if unset.")
	an.Describe(&a.Name, "The object's name. Give `name` or `selector`.")
	an.Describe(&a.Selector, "A label selector (`app=web,tier!=cache`): every matching object must be ready and at least `minCount` must exist.")
	an.Describe(&a.MinCount, "With `selector`: how many objects must exist at least (default 1; at least 1).")
	an.Describe(&a.Condition, "Ready when this condition has this status. A condition whose observedGeneration is older than the object's "+
		"generation does not count; one without observedGeneration (most built-in kinds' and many CRDs' conditions) counts only "+
		"while status.observedGeneration, when the object has one, is not behind, and with neither is taken as current: the "+
		"gate cannot tell which generation it describes.")
	an.Describe(&a.JSONPath, "A kubectl JSONPath (`{.status.phase}`); with `value` it must equal it, with `regex` match it, with neither be non-empty.")
	an.Describe(&a.Value, "With `jsonPath`: the value the path must yield. Not on a Secret's data: the gate never keeps a Secret's "+
		"values (only key names, emptiness and public certificates), so such a check is refused at preview; test presence with `jsonPath` alone.")
	an.Describe(&a.Regex, "With `jsonPath`: a regular expression the value must match.")
	an.Describe(&a.Cel, "A CEL expression over `object` that returns bool, such as `object.status.readyReplicas == object.spec.replicas`. "+
		"A result of another type fails: at preview when the type is known (`object.metadata.name` is a string), else at once when evaluated. "+
		"Bounded: at most 1,000,000 cost steps per evaluation and no list or string over 1 Mi built (refused at preview when the "+
		"expression alone exceeds it, else the gate fails at once).")
	an.Describe(&a.FailedCel, "A CEL expression over `object`; when it turns true the gate fails at once (like Flux's healthCheckExprs `failed`). "+
		"It must return bool, checked as for `cel`.")
	an.Describe(&a.Exists, "Ready as soon as the object exists.")
	an.Describe(&a.Deleted, "Ready once the object is gone (for teardown ordering). The kind is resolved at any version the server serves "+
		"(an object is the same at every version). A kind served at no version is an error naming what the group serves, not "+
		"\"nothing exists\"; only a CRD the gate saw defining the kind and then saw deleted proves its objects gone.")
	an.Describe(&a.StrictPvc, "For PersistentVolumeClaims: require `Bound` even under a `WaitForFirstConsumer` StorageClass.")
}

func (s *ResourceReadyState) Annotate(a infer.Annotator) {
	a.Describe(&s.UID, "The object's UID (with `name`; empty for `deleted`).")
	a.Describe(&s.ResourceVersion, "The resourceVersion at which the object was seen ready.")
	a.Describe(&s.ObservedGeneration, "status.observedGeneration when reported, else metadata.generation.")
	a.Describe(&s.Matched, "Names (namespace/name for namespaced kinds) of the objects that satisfied the gate.")
}

var (
	_ = (infer.CustomCheck[ResourceReadyArgs])((*ResourceReady)(nil))
	_ = (infer.CustomRead[ResourceReadyArgs, ResourceReadyState])((*ResourceReady)(nil))
)

// rule converts the inputs for objectrule.Compile.
func (a ResourceReadyArgs) rule() objectrule.Args {
	r := objectrule.Args{APIVersion: a.APIVersion, Kind: a.Kind, Namespace: a.Namespace, Name: a.Name, Selector: a.Selector,
		MinCount: a.MinCount, JSONPath: a.JSONPath, Value: a.Value, Regex: a.Regex, Cel: a.Cel, FailedCel: a.FailedCel,
		Exists: a.Exists, Deleted: a.Deleted, StrictPVC: a.StrictPvc}
	if a.Condition != nil {
		r.Condition = &objectrule.Condition{Type: a.Condition.Type, Status: a.Condition.Status}
	}
	return r
}

func (*ResourceReady) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[ResourceReadyArgs], error) {
	return checkGate(ctx, req, func(args ResourceReadyArgs, failures []p.CheckFailure) []p.CheckFailure {
		_, fails := objectrule.Compile(args.rule(), func(k string) bool { return isKnown(req.NewInputs, k) })
		return append(failures, fails...)
	})
}

func (g *ResourceReady) Create(ctx context.Context, req infer.CreateRequest[ResourceReadyArgs]) (infer.CreateResponse[ResourceReadyState], error) {
	return createGate(ctx, req.Name, req.DryRun, req.Inputs.GateArgs, ResourceReadyState{ResourceReadyArgs: req.Inputs}, "resource", resourceBuilder(req.Inputs))
}

func (g *ResourceReady) Read(ctx context.Context, req infer.ReadRequest[ResourceReadyArgs, ResourceReadyState]) (infer.ReadResponse[ResourceReadyArgs, ResourceReadyState], error) {
	return readGate(ctx, req, resourceBuilder(req.Inputs))
}

func resourceBuilder(args ResourceReadyArgs) builder[ResourceReadyState] {
	return func(r *session.Run) (evaluation, func(*ResourceReadyState), error) {
		e, err := newObjectsEval(r, args)
		if err != nil {
			return nil, nil, err
		}
		return e, e.fill, nil
	}
}

// objectsEval evaluates a ResourceReady gate over the shared watch of its kind.
type objectsEval struct {
	r        *session.Run
	t        session.Target
	d        *objectrule.Rule
	minCount int
	pvcMode  func(*unstructured.Unstructured) (string, *verdict.Result)
	matched  []*unstructured.Unstructured
	sawCRD   string // deleted: the CRD that defined the kind, while the gate saw it
}

func newObjectsEval(r *session.Run, a ResourceReadyArgs) (*objectsEval, error) {
	d, fails := objectrule.Compile(a.rule(), func(string) bool { return true })
	if len(fails) > 0 {
		return nil, fmt.Errorf("%s: %s", fails[0].Property, fails[0].Reason)
	}
	gv, _ := schema.ParseGroupVersion(a.APIVersion)
	t := session.Target{GVK: gv.WithKind(a.Kind), Namespace: r.DefaultNamespace(a.Namespace), Name: deref(a.Name)}
	if m, err := r.Clients.MappingAnyVersion(t.GVK.GroupKind()); err == nil && m.Scope.Name() != meta.RESTScopeNameNamespace {
		t.Namespace = "" // cluster-scoped: no namespace in messages, hints or watches
	}
	if a.Selector != nil {
		t.Selector, _ = labels.Parse(*a.Selector)
	}
	e := &objectsEval{r: r, t: t, d: d, minCount: 1}
	if a.MinCount != nil {
		e.minCount = *a.MinCount
	}
	if d.Mode == "kstatus" && t.GVK.Group == "" && t.GVK.Kind == "PersistentVolumeClaim" {
		e.pvcMode = e.storageClassMode
	}
	return e, nil
}

func (e *objectsEval) what() string { return e.t.String() + " (" + e.d.Mode + ")" }

// storageClassMode reads the volumeBindingMode of a PVC's StorageClass from a shared watch.
func (e *objectsEval) storageClassMode(pvc *unstructured.Unstructured) (string, *verdict.Result) {
	sc, _, _ := unstructured.NestedString(pvc.Object, "spec", "storageClassName")
	if sc == "" {
		return "", nil
	}
	sub := e.r.Watch(kube.WatchKey{Resource: schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}})
	if terminal, note := session.WatchErr("storageclasses (to read the volumeBindingMode of PVC "+objectName(pvc)+"'s StorageClass "+sc+")", sub); terminal != nil {
		return "", &verdict.Result{Failed: terminal}
	} else if note != "" && !sub.Synced() {
		return "", &verdict.Result{Message: note, Unsynced: true}
	}
	if !sub.Synced() {
		return "", &verdict.Result{Message: "listing storage classes", Unsynced: true}
	}
	o, err := e.r.Read(sub, sc)
	if err != nil {
		return "", e.r.ReadErr("StorageClass "+sc, err)
	}
	if o != nil {
		m, _, _ := unstructured.NestedString(o.Object, "volumeBindingMode")
		return m, nil
	}
	return "", nil
}

func (e *objectsEval) decide(o *unstructured.Unstructured) (status.Result, *verdict.Result) {
	if e.d.FailedCel != nil {
		bad, msg, err := e.d.FailedCel.Eval(o.Object)
		switch {
		case expr.IsTerminal(err):
			return status.Result{Failed: true, Message: "failedCel: " + err.Error()}, nil
		case err == nil && bad:
			return status.Result{Failed: true, Message: "failedCel holds: " + msg}, nil
		}
	}
	if e.pvcMode != nil {
		mode, pending := e.pvcMode(o)
		if pending != nil {
			return status.Result{}, pending
		}
		return status.PVC(o, mode, e.d.StrictPVC), nil
	}
	res := e.d.Eval(o)
	if admission.IsSecret(o) {
		// The cache keeps a marker in place of each value (kube.trimSecret): never show it as data.
		res.Message = strings.NewReplacer(kube.SecretPresent, "(set; a Secret's values are not kept)",
			status.KeyPairsMarker, "(set; a Secret's values are not kept)").Replace(res.Message)
	}
	return res, nil
}

func (e *objectsEval) check(ctx context.Context) verdict.Result {
	if e.d.Deleted {
		return e.checkDeleted()
	}
	objs, pending := e.r.Objects(e.t)
	if pending != nil {
		return *pending
	}
	if len(objs) == 0 || len(objs) < e.minCount {
		msg := "not found (not created yet)"
		if e.t.Selector != nil {
			msg = fmt.Sprintf("%d of at least %d found", len(objs), e.minCount)
		}
		return verdict.Result{Message: msg, Hint: "is whatever creates it part of the stack, and is the namespace right?"}
	}
	var notReady []string
	for _, o := range objs {
		res, pend := e.decide(o)
		if pend != nil {
			return *pend
		}
		if res.Failed {
			return verdict.Result{Failed: fmt.Errorf("%s %s failed: %s", o.GetKind(), objectName(o), res.Message)}
		}
		if !res.Ready {
			notReady = append(notReady, objectName(o)+": "+res.Message)
		}
	}
	if len(notReady) > 0 {
		sort.Strings(notReady)
		return verdict.Result{Message: strings.Join(notReady, "; "), Hint: e.describeHint()}
	}
	e.matched = objs
	return verdict.Result{Ready: true}
}

// checkDeleted is `deleted`: ready once no object matches. An object is the same at every
// version of its kind, so the kind is resolved at any version the server serves (a Deployment
// asked for as apps/v1beta1 is watched as apps/v1). A kind served at no version is an error,
// not "nothing exists", unless the gate saw the CRD that defined it and then saw it go.
func (e *objectsEval) checkDeleted() verdict.Result {
	t := e.t
	if _, err := e.r.Clients.Mapping(t.GVK); err != nil {
		var nk *kube.NoKindError
		if !errors.As(err, &nk) {
			_, pending := e.r.Objects(t) // reports discovery errors (RBAC fails at once)
			return *pending
		}
		if len(nk.Served) == 0 {
			return e.kindGone(nk)
		}
		gv, _ := schema.ParseGroupVersion(nk.Served[0])
		t.GVK = gv.WithKind(t.GVK.Kind)
	}
	objs, pending := e.r.Objects(t)
	if pending != nil {
		return *pending
	}
	e.sawCRD = ""
	if len(objs) == 0 {
		e.matched = nil
		return verdict.Result{Ready: true, Message: "gone"}
	}
	return verdict.Result{Message: fmt.Sprintf("%d still present: %s", len(objs), strings.Join(objectNames(objs), ", "))}
}

// kindGone judges `deleted` on a kind the server serves at no version. While a CRD defines it
// (installing, or terminating) the gate waits; once a CRD it saw is gone, so are its objects.
// A kind no CRD defines is an error: nothing can prove an object of an unknown kind is gone,
// and a misspelt kind would otherwise pass forever.
func (e *objectsEval) kindGone(nk *kube.NoKindError) verdict.Result {
	gk := e.t.GVK.GroupKind()
	sub := e.r.Watch(kube.WatchKey{Resource: session.CRDResource})
	if terminal, note := session.WatchErr("customresourcedefinitions (kind "+gk.Kind+" is not served, so `deleted` looks for its CRD)", sub); terminal != nil {
		return verdict.Result{Failed: terminal}
	} else if note != "" && !sub.Synced() {
		return verdict.Result{Message: note, Unsynced: true}
	}
	if !sub.Synced() {
		return verdict.Result{Message: "listing CRDs", Unsynced: true}
	}
	for _, c := range sub.List(nil) {
		if res := status.CRD(c); res.Group == gk.Group && res.Kind == gk.Kind {
			e.sawCRD = c.GetName()
			return verdict.Result{Message: fmt.Sprintf("kind %s is defined by CRD %s (%s) but not served", gk.Kind, c.GetName(), res.Message), Poll: res.Ready}
		}
	}
	if e.sawCRD != "" {
		e.matched = nil
		return verdict.Result{Ready: true, Message: fmt.Sprintf("CRD %s was deleted, and with it every %s", e.sawCRD, gk.Kind)}
	}
	return verdict.Result{Failed: fmt.Errorf("%s: %w; `deleted` cannot prove that an object of a kind the API server does not know is gone "+
		"(if its CRD was removed on purpose, nothing of it exists and the gate can go)", e.t, nk)}
}

func (e *objectsEval) fill(s *ResourceReadyState) {
	s.Matched = objectNames(e.matched)
	if s.Matched == nil {
		s.Matched = []string{}
	}
	s.UID, s.ResourceVersion, s.ObservedGeneration = "", "", 0
	if len(e.matched) == 1 {
		o := e.matched[0]
		s.UID, s.ResourceVersion = string(o.GetUID()), o.GetResourceVersion()
		og, found, _ := unstructured.NestedInt64(o.Object, "status", "observedGeneration")
		if !found {
			og = o.GetGeneration()
		}
		s.ObservedGeneration = int(og)
	}
}

func objectName(o *unstructured.Unstructured) string {
	if o.GetNamespace() != "" {
		return o.GetNamespace() + "/" + o.GetName()
	}
	return o.GetName()
}

func objectNames(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, objectName(o))
	}
	sort.Strings(out)
	return out
}

// subject is the one named object, for Warning events in timeout errors (none with a selector).
// Events about cluster-scoped objects are recorded in the default namespace.
func (e *objectsEval) subject() (string, string) {
	if e.t.Namespace == "" {
		return metav1.NamespaceDefault, e.t.Name
	}
	return e.t.Namespace, e.t.Name
}

// describeHint names the kubectl command that shows the object's conditions and events.
func (e *objectsEval) describeHint() string {
	kind := strings.ToLower(e.t.GVK.Kind)
	if e.t.GVK.Group != "" {
		kind += "." + e.t.GVK.Group
	}
	target := e.t.Name
	if target == "" {
		target = "-l '" + e.t.Selector.String() + "'"
	}
	ns := ""
	if e.t.Namespace != "" {
		ns = " -n " + e.t.Namespace
	}
	return "kubectl describe " + kind + " " + target + ns
}
