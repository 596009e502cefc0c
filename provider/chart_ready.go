package provider

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	presource "github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/property"

	"github.com/readiness-io/pulumi-readiness/provider/internal/probe"
	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/helmrelease"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// ChartReady is HelmReleaseReady for a pulumi-kubernetes helm.sh/v4:Chart, which writes no
// release record: it takes the Chart's `resources` output (references to the objects it
// created) and checks those objects by the same rules.
type ChartReady struct {
	gate[ChartReadyArgs, ChartReadyState]
}

type ChartReadyArgs struct {
	// Resources arrives as resource references (URN and ID): the provider accepts references
	// (infer's Configure answers acceptResources), so the engine does not reduce them to IDs.
	// Check keeps each as the object's fields (see Check).
	Resources []any          `pulumi:"resources" provider:"replaceOnChanges"`
	Probe     map[string]any `pulumi:"probe,optional" provider:"replaceOnChanges"`
	GateArgs
}

type ChartReadyState struct {
	ChartReadyArgs
	Objects  int      `pulumi:"objects"`
	Webhooks []string `pulumi:"webhooks"`
}

//go:embed descriptions/chart_ready.md
var chartReadyDoc string

func (g *ChartReady) Annotate(a infer.Annotator) {
	a.Describe(g, markdown(chartReadyDoc))
}

func (a *ChartReadyArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Resources, "The objects to wait for: a `kubernetes:helm.sh/v4:Chart`'s `resources` output as it is "+
		"(`chart.resources`), or any list of pulumi-kubernetes resources (a `yaml/v2:ConfigGroup`'s `resources`). Each entry "+
		"must be a reference to one Kubernetes object (its type token says its kind, its ID where it is), or an object given "+
		"as `{apiVersion, kind, namespace, name}`. As an output: each object as those fields.")
	an.Describe(&a.Probe, "An object (manifest map) the chart's webhooks intercept, used instead of a probe derived from their rules.")
}

func (s *ChartReadyState) Annotate(a infer.Annotator) {
	a.Describe(&s.Objects, "How many objects were checked.")
	a.Describe(&s.Webhooks, "The chart's webhook configurations.")
}

var (
	_ = (infer.CustomCheck[ChartReadyArgs])((*ChartReady)(nil))
	_ = (infer.CustomRead[ChartReadyArgs, ChartReadyState])((*ChartReady)(nil))
)

// Check validates `resources` and keeps each entry as the object it stands for ({apiVersion,
// kind, namespace, name}): infer cannot write a resource reference held in an `any` back (it
// would come out as an empty map), and the objects are what Create, Read and the state need.
func (*ChartReady) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[ChartReadyArgs], error) {
	resp, err := checkGate(ctx, req, func(args ChartReadyArgs, failures []p.CheckFailure) []p.CheckFailure {
		failures = append(failures, resourcesFailures(req.NewInputs, "resources")...)
		return append(failures, probeFailures(req.NewInputs, args.Probe)...)
	})
	if err == nil && len(resp.Failures) == 0 {
		for i, r := range resp.Inputs.Resources {
			resp.Inputs.Resources[i] = keptObject(r)
		}
	}
	return resp, err
}

// resourcesFailures validates a list of resource references (or objects given by their fields);
// unknowns (a Chart's resources on a first preview, an ID not assigned yet) are judged when known.
func resourcesFailures(inputs property.Map, key string) []p.CheckFailure {
	v, ok := inputs.GetOk(key)
	if !ok || v.IsComputed() || !v.IsArray() {
		return nil // missing or not a list: infer's own check says so
	}
	entries := v.AsArray().AsSlice()
	if len(entries) == 0 {
		return []p.CheckFailure{{Property: key, Reason: "the list is empty: pass a Chart's `resources` output " +
			"(chart.resources), which lists the objects it created"}}
	}
	var out []p.CheckFailure
	for i, e := range entries {
		if e.HasComputed() && !e.IsResourceReference() {
			continue
		}
		if reason := entryProblem(e); reason != "" {
			out = append(out, p.CheckFailure{Property: fmt.Sprintf("%s[%d]", key, i), Reason: reason})
		}
	}
	return out
}

// objectFields are the keys of an object given by its fields.
var objectFields = []string{"apiVersion", "kind", "namespace", "name"}

// entryProblem says why e is neither a reference to one Kubernetes object nor an object given by
// its fields ("" when it is one).
func entryProblem(e property.Value) string {
	switch {
	case e.IsResourceReference():
		ref := e.AsResourceReference()
		if ref.ID.IsComputed() {
			_, _, err := helmrelease.ChartKind(string(ref.URN.Type()))
			return errText(err)
		}
		id, _ := ref.IDString()
		_, err := helmrelease.ChartObject(string(ref.URN.Type()), id)
		return errText(err)
	case e.IsString():
		// The Node.js SDK passes a resource whose class no loaded module defines (a custom
		// resource's) as its ID: the kind is lost.
		return fmt.Sprintf("%q is a resource's ID, not a reference to the resource: its kind is unknown. In TypeScript a "+
			"Chart's custom resources (kinds no imported SDK module defines) arrive this way: give them as "+
			"{apiVersion, kind, namespace, name}, or leave them out "+
			"(`chart.resources.apply(rs => rs.filter(r => pulumi.Resource.isInstance(r)))`) and gate them with ResourceReady", e.AsString())
	case e.IsMap():
		fields := map[string]string{}
		for k, v := range e.AsMap().All {
			if !slices.Contains(objectFields, k) || !v.IsString() {
				return fmt.Sprintf("an object given by its fields has only the string fields %s (found %q)", strings.Join(objectFields, ", "), k)
			}
			fields[k] = v.AsString()
		}
		_, err := helmrelease.ParseObjectRef(fields["apiVersion"], fields["kind"], fields["namespace"], fields["name"])
		return errText(err)
	}
	return "not a reference to a pulumi-kubernetes object: pass a Chart's `resources` output (chart.resources), " +
		"resources themselves, or objects as {apiVersion, kind, namespace, name}"
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// keptObject is what Check keeps of a valid entry: the object's fields. A reference whose ID is
// not known yet (a preview) keeps its apiVersion and kind; unknown entries stay as they are.
func keptObject(entry any) any {
	switch r := entry.(type) {
	case presource.ResourceReference:
		typ := string(r.URN.Type())
		if r.ID.ContainsUnknowns() {
			apiVersion, kind, _ := helmrelease.ChartKind(typ)
			return map[string]any{"apiVersion": apiVersion, "kind": kind}
		}
		id, _ := r.IDString()
		if o, err := helmrelease.ChartObject(typ, id); err == nil {
			return objectFieldsOf(o)
		}
	case map[string]any:
		if o, err := objectOf(r); err == nil {
			return objectFieldsOf(o)
		}
	}
	return entry
}

func objectFieldsOf(o helmrelease.ObjectRef) map[string]any {
	m := map[string]any{"apiVersion": o.APIVersion, "kind": o.Kind, "name": o.Name}
	if o.Namespace != "" {
		m["namespace"] = o.Namespace
	}
	return m
}

func objectOf(m map[string]any) (helmrelease.ObjectRef, error) {
	str := func(k string) string { s, _ := m[k].(string); return s }
	return helmrelease.ParseObjectRef(str("apiVersion"), str("kind"), str("namespace"), str("name"))
}

// chartObjects are the objects Check kept.
func chartObjects(resources []any) ([]helmrelease.ObjectRef, error) {
	refs := make([]helmrelease.ObjectRef, 0, len(resources))
	for i, r := range resources {
		m, ok := keptObject(r).(map[string]any)
		if !ok {
			return nil, fmt.Errorf("resources[%d]: not a reference to a Kubernetes object", i)
		}
		o, err := objectOf(m)
		if err != nil {
			return nil, fmt.Errorf("resources[%d]: %w", i, err)
		}
		refs = append(refs, o)
	}
	return refs, nil
}

func (g *ChartReady) Create(ctx context.Context, req infer.CreateRequest[ChartReadyArgs]) (infer.CreateResponse[ChartReadyState], error) {
	return createGate(ctx, req.Name, req.DryRun, req.Inputs.GateArgs, ChartReadyState{ChartReadyArgs: req.Inputs}, "chart", chartBuilder(req.Inputs))
}

func (g *ChartReady) Read(ctx context.Context, req infer.ReadRequest[ChartReadyArgs, ChartReadyState]) (infer.ReadResponse[ChartReadyArgs, ChartReadyState], error) {
	return readGate(ctx, req, chartBuilder(req.Inputs))
}

func chartBuilder(a ChartReadyArgs) builder[ChartReadyState] {
	return func(r *session.Run) (evaluation, func(*ChartReadyState), error) {
		refs, err := chartObjects(a.Resources)
		if err != nil {
			return nil, nil, err
		}
		ns := mostCommonNamespace(refs)
		if ns == "" {
			ns = r.DefaultNamespace(nil)
		}
		e := &chartEval{refs: refs, objs: newRenderedObjects(r, ns, a.Probe, refs)}
		return e, e.fill, nil
	}
}

// mostCommonNamespace is the chart's namespace as its objects say: the one most of them are in
// (on a tie, the one that got there first; "" when every object is cluster-scoped). Probes
// derived from its webhooks' rules are dry-run created there, as HelmReleaseReady does in the
// release's namespace.
func mostCommonNamespace(refs []helmrelease.ObjectRef) string {
	count, best := map[string]int{}, ""
	for _, r := range refs {
		if r.Namespace == "" {
			continue
		}
		count[r.Namespace]++
		if count[r.Namespace] > count[best] {
			best = r.Namespace
		}
	}
	return best
}

type chartEval struct {
	refs []helmrelease.ObjectRef
	objs *renderedObjects
}

func (e *chartEval) what() string { return fmt.Sprintf("the chart's %d objects", len(e.refs)) }

func (e *chartEval) check(ctx context.Context) verdict.Result {
	return e.objs.judge(ctx, e.what(), 0)
}

// maxBackoff: a chart with webhooks is probed like WebhookReady.
func (e *chartEval) maxBackoff() time.Duration { return probe.MaxBackoff }

func (e *chartEval) fill(s *ChartReadyState) {
	s.Objects, s.Webhooks = len(e.refs), []string{}
	for _, r := range e.refs {
		if r.Kind == session.VWCGVK.Kind || r.Kind == session.MWCGVK.Kind {
			s.Webhooks = append(s.Webhooks, r.Name)
		}
	}
}
