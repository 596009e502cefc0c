package provider

import (
	"context"
	_ "embed"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/readiness-io/pulumi-readiness/provider/internal/probe"
	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/conversion"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// CrdReady waits until CustomResourceDefinitions are Established and their kinds are served,
// so custom resources created after it never fail with "no matches for kind".
type CrdReady struct {
	gate[CrdReadyArgs, CrdReadyState]
}

type CrdReadyArgs struct {
	Names []string `pulumi:"names,optional" provider:"replaceOnChanges"`
	Group *string  `pulumi:"group,optional" provider:"replaceOnChanges"`
	// Conversion and ConversionProbes: see probe.Conversion.
	Conversion       *bool            `pulumi:"conversion,optional" provider:"replaceOnChanges"`
	ConversionProbes []map[string]any `pulumi:"conversionProbes,optional" provider:"replaceOnChanges"`
	GateArgs
}

type CrdReadyState struct {
	CrdReadyArgs
	Kinds          []string `pulumi:"kinds"`
	ServedVersions []string `pulumi:"servedVersions"`
	// ConversionVerified names the CRDs whose conversion webhook the gate proved.
	ConversionVerified []string `pulumi:"conversionVerified"`
}

//go:embed descriptions/crd_ready.md
var crdReadyDoc string

func (c *CrdReady) Annotate(a infer.Annotator) {
	a.Describe(c, markdown(crdReadyDoc))
}

func (a *CrdReadyArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Names, "CRD names to wait for, such as `certificates.cert-manager.io`. As an output: every CRD "+
		"the gate checked, including those found through `group`.")
	an.Describe(&a.Group, "An API group such as `cert-manager.io`: wait for every CRD of that group present when the "+
		"wait runs (at least one must appear).")
	an.Describe(&a.Conversion, "Prove the conversion webhook of every checked CRD that declares one (spec.conversion.strategy "+
		"Webhook): until it converts, reads and writes through a version other than the stored one fail with `conversion webhook "+
		"for ... failed`. Default: true for such CRDs; `false` skips the check. CRDs with strategy None have nothing to prove, "+
		"whatever this says.")
	an.Describe(&a.ConversionProbes, "Objects (manifests, as maps) to dry-run create when no object of a CRD's kind exists yet, "+
		"one per kind and served version other than the storage one, such as `{apiVersion: example.com/v2, kind: Widget, spec: "+
		"{...}}`. Without one, the gate builds a minimal object from the version's schema (its required fields); give one when "+
		"the schema (patterns, CEL rules) or an admission webhook refuses that. Nothing is persisted.")
}

func (s *CrdReadyState) Annotate(a infer.Annotator) {
	a.Describe(&s.Kinds, "The kinds the CRDs define, such as `Certificate`.")
	a.Describe(&s.ServedVersions, "Every served group/version, such as `cert-manager.io/v1`.")
	a.Describe(&s.ConversionVerified, "The CRDs whose conversion webhook the gate proved (see `conversion`); empty when none "+
		"declares one, or with `conversion: false`.")
}

var (
	_ = (infer.CustomCheck[CrdReadyArgs])((*CrdReady)(nil))
	_ = (infer.CustomRead[CrdReadyArgs, CrdReadyState])((*CrdReady)(nil))
)

func (*CrdReady) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[CrdReadyArgs], error) {
	return checkGate(ctx, req, func(args CrdReadyArgs, failures []p.CheckFailure) []p.CheckFailure {
		if isKnown(req.NewInputs, "names") && isKnown(req.NewInputs, "group") &&
			len(args.Names) == 0 && deref(args.Group) == "" {
			failures = append(failures, p.CheckFailure{Property: "names",
				Reason: "give CRD names (such as certificates.cert-manager.io), a group, or both"})
		}
		if isKnown(req.NewInputs, "names") {
			for i, n := range args.Names {
				if reason := crdNameProblem(n); reason != "" {
					failures = append(failures, p.CheckFailure{Property: fmt.Sprintf("names[%d]", i), Reason: reason})
				}
			}
		}
		if g := deref(args.Group); g != "" && isKnown(req.NewInputs, "group") {
			if errs := validation.IsDNS1123Subdomain(g); len(errs) > 0 || !strings.Contains(g, ".") {
				failures = append(failures, p.CheckFailure{Property: "group",
					Reason: fmt.Sprintf("%q is not a CRD API group (a DNS subdomain with a dot, such as cert-manager.io)", g)})
			}
		}
		if isKnown(req.NewInputs, "conversionProbes") {
			for i, pr := range args.ConversionProbes {
				u := &unstructured.Unstructured{Object: pr}
				gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
				if err != nil || gv.Group == "" || gv.Version == "" || u.GetKind() == "" {
					failures = append(failures, p.CheckFailure{Property: fmt.Sprintf("conversionProbes[%d]", i),
						Reason: "a conversion probe must be a custom resource manifest with apiVersion <group>/<version> and kind"})
				}
			}
			if args.Conversion != nil && !*args.Conversion && len(args.ConversionProbes) > 0 {
				failures = append(failures, p.CheckFailure{Property: "conversionProbes",
					Reason: "conversion is false: the probes would never be used; remove them or the `conversion: false`"})
			}
		}
		return failures
	})
}

func crdNameProblem(n string) string {
	if n == "" {
		return "a CRD name must not be empty"
	}
	if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
		return fmt.Sprintf("%q is not a valid CRD name: %s", n, strings.Join(errs, "; "))
	}
	if !strings.Contains(n, ".") {
		return fmt.Sprintf("%q is not a CRD name: CRD names are <plural>.<group>, such as certificates.cert-manager.io", n)
	}
	return ""
}

func (c *CrdReady) Create(ctx context.Context, req infer.CreateRequest[CrdReadyArgs]) (infer.CreateResponse[CrdReadyState], error) {
	return createGate(ctx, req.Name, req.DryRun, req.Inputs.GateArgs, CrdReadyState{CrdReadyArgs: req.Inputs}, "crd", crdBuilder(req.Inputs))
}

// Read re-evaluates the gate once, without waiting (see readGate).
func (c *CrdReady) Read(ctx context.Context, req infer.ReadRequest[CrdReadyArgs, CrdReadyState]) (infer.ReadResponse[CrdReadyArgs, CrdReadyState], error) {
	return readGate(ctx, req, crdBuilder(req.Inputs))
}

func crdBuilder(args CrdReadyArgs) builder[CrdReadyState] {
	return func(r *session.Run) (evaluation, func(*CrdReadyState), error) {
		e := newCrdEval(r, args)
		return e, e.fill, nil
	}
}

// crdEval is one evaluation of a CrdReady gate over the shared CRD watch.
type crdEval struct {
	r      *session.Run
	args   CrdReadyArgs
	ready  []status.CRDResult
	names  []string
	served map[string]bool // "<group/version>/<plural>" that discovery confirmed
	// proofs are the conversion proofs under way, by CRD (see probe.Conversion), and noted
	// what was already logged about them (see note).
	proofs map[string]*probe.Conversion
	noted  map[string]bool
}

func newCrdEval(r *session.Run, args CrdReadyArgs) *crdEval {
	return &crdEval{r: r, args: args, served: map[string]bool{}, proofs: map[string]*probe.Conversion{},
		noted: map[string]bool{}}
}

func (e *crdEval) what() string {
	var parts []string
	if len(e.args.Names) > 0 {
		parts = append(parts, "CRD "+strings.Join(e.args.Names, ", "))
	}
	if g := deref(e.args.Group); g != "" {
		parts = append(parts, "CRDs of group "+g)
	}
	return strings.Join(parts, " and ")
}

// crdWatch subscribes to the CRD named name (every CRD when name is ""), or says why it cannot be read yet.
func (e *crdEval) crdWatch(name string) (*kube.Subscription, *verdict.Result) {
	sub := e.r.Watch(kube.WatchKey{Resource: session.CRDResource, Name: name})
	what := "customresourcedefinitions (cluster-wide)"
	if name != "" {
		what = "customresourcedefinition " + name
	}
	if terminal, note := session.WatchErr(what, sub); terminal != nil {
		return nil, &verdict.Result{Failed: terminal}
	} else if note != "" && !sub.Synced() {
		return nil, &verdict.Result{Message: note, Unsynced: true}
	}
	if !sub.Synced() {
		return nil, &verdict.Result{Message: "listing CRDs", Unsynced: true}
	}
	return sub, nil
}

func (e *crdEval) check(ctx context.Context) verdict.Result {
	var objs []*unstructured.Unstructured
	var names []string
	var pending []string
	// Named CRDs are watched one by one (a list of one object, where the cluster-wide list
	// decodes every CRD of the cluster), the group through the cluster-wide watch.
	for _, n := range e.args.Names {
		sub, res := e.crdWatch(n)
		if res != nil {
			return *res
		}
		o, err := e.r.Read(sub, n)
		if err != nil {
			return *e.r.ReadErr("CRD "+n, err)
		}
		objs = append(objs, o)
		names = append(names, n)
	}
	if g := deref(e.args.Group); g != "" {
		var inGroup []*unstructured.Unstructured
		sub, res := e.crdWatch("")
		if res != nil {
			return *res
		}
		all, err := e.r.ReadList(sub, nil)
		if err != nil {
			return *e.r.ReadErr("CRDs", err)
		}
		for _, o := range all {
			if grp, _, _ := unstructured.NestedString(o.Object, "spec", "group"); grp == g {
				inGroup = append(inGroup, o)
			}
		}
		slices.SortFunc(inGroup, func(a, b *unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
		if len(inGroup) == 0 {
			pending = append(pending, "no CRD of group "+g+" exists yet")
		}
		for _, o := range inGroup {
			if !slices.Contains(names, o.GetName()) {
				objs = append(objs, o)
				names = append(names, o.GetName())
			}
		}
	}
	var results []status.CRDResult
	for i, o := range objs {
		res := status.CRD(o)
		if !res.Ready {
			pending = append(pending, names[i]+": "+res.Message)
		}
		results = append(results, res)
	}
	if len(pending) > 0 {
		return verdict.Result{Message: strings.Join(pending, "; "),
			Hint: "is the chart or manifest that installs these CRDs part of the stack, and did it apply? `kubectl get crd` lists what is installed"}
	}
	// Established means the API server is about to serve the kind; discovery confirms it does.
	// Each CRD's own resource, at each version: one kind of a group being served says nothing
	// of the others.
	lists := map[string]*metav1.APIResourceList{} // this evaluation's discovery answers, by group/version
	for _, res := range results {
		for _, gv := range res.ServedVersions {
			if e.served[gv+"/"+res.Plural] {
				continue
			}
			if ok, msg := e.discoveryServes(lists, gv, res.Plural); !ok {
				return verdict.Result{Message: msg, Poll: true}
			}
			e.served[gv+"/"+res.Plural] = true
		}
	}
	if res := e.checkConversion(ctx, objs, results); !res.Ready {
		return res
	}
	e.ready, e.names = results, names
	return verdict.Result{Ready: true, Message: "Established"}
}

func (e *crdEval) discoveryServes(lists map[string]*metav1.APIResourceList, gv, plural string) (bool, string) {
	list, ok := lists[gv]
	if !ok {
		var err error
		if list, err = e.r.Clients.Typed.Discovery().ServerResourcesForGroupVersion(gv); err != nil {
			return false, fmt.Sprintf("Established, but discovery does not serve %s yet: %v", gv, err)
		}
		lists[gv] = list
	}
	for _, r := range list.APIResources {
		if r.Name == plural {
			return true, ""
		}
	}
	return false, fmt.Sprintf("Established, but discovery does not list %s in %s yet", plural, gv)
}

func (e *crdEval) fill(s *CrdReadyState) {
	kinds, versions := map[string]bool{}, map[string]bool{}
	for _, r := range e.ready {
		kinds[r.Kind] = true
		for _, v := range r.ServedVersions {
			versions[v] = true
		}
	}
	s.Names = e.names
	s.Kinds = sortedKeys(kinds)
	s.ServedVersions = sortedKeys(versions)
	verified := map[string]bool{}
	for name, proof := range e.proofs {
		if proof.Verified() {
			verified[name] = true
		}
	}
	s.ConversionVerified = sortedKeys(verified)
}

// note logs text once per gate under key.
func (e *crdEval) note(key, text string) {
	if !e.noted[key] {
		e.noted[key] = true
		e.r.Log.Infof("%s", text)
	}
}

// checkConversion proves the conversion webhook of every checked CRD that declares one; results
// and objs are the Established CRDs, in the gate's order.
func (e *crdEval) checkConversion(ctx context.Context, objs []*unstructured.Unstructured, results []status.CRDResult) verdict.Result {
	if e.args.Conversion != nil && !*e.args.Conversion {
		return verdict.Result{Ready: true}
	}
	notes, err := conversion.MatchProbes(e.args.ConversionProbes, results)
	for _, n := range notes {
		e.note(n.Key, n.Text)
	}
	if err != nil {
		return verdict.Result{Failed: err}
	}
	var pending []string
	var hint string
	var retry time.Duration
	confirming := true
	for i, res := range results {
		name := objs[i].GetName()
		if !res.Conversion.Webhook() {
			// Nothing to read: Decide says there is nothing to prove, logged when conversion was asked for.
			if v := conversion.Decide(conversion.Input{Name: name, CRD: res}); e.args.Conversion != nil {
				e.note(name, v.Note)
			}
			continue
		}
		proof := e.proofs[name]
		if proof == nil {
			proof = probe.NewConversion(e.r, e.args.ConversionProbes)
			e.proofs[name] = proof
		}
		r, note := proof.Step(ctx, name, objs[i].GetResourceVersion(), res)
		if note != "" {
			e.note(name, note)
		}
		if r.Failed != nil {
			return r
		}
		if r.Ready {
			continue
		}
		pending = append(pending, name+": "+r.Message)
		if hint == "" {
			hint = r.Hint
		}
		if retry == 0 || (r.RetryIn > 0 && r.RetryIn < retry) {
			retry = r.RetryIn
		}
		confirming = confirming && r.Confirming
	}
	if len(pending) > 0 {
		return verdict.Result{Message: strings.Join(pending, "; "), Hint: hint, RetryIn: retry, Confirming: confirming}
	}
	return verdict.Result{Ready: true}
}

// sortedKeys is m's keys in order: empty, not nil, for an empty map (the output is then []).
func sortedKeys(m map[string]bool) []string {
	keys := slices.AppendSeq(make([]string, 0, len(m)), maps.Keys(m))
	slices.Sort(keys)
	return keys
}
