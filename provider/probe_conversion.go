package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/crdschema"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/wait"
)

// Proving a CRD's conversion webhook (CrdReady's `conversion`).
//
// A CRD with spec.conversion.strategy Webhook is Established long before its webhook serves, and
// until then every read or write that needs another version than the one an object is stored in
// fails with "conversion webhook for ... failed: Post ...: connection refused". What counts as
// proof, per round:
//   - an object of the kind exists: a list (limit 1) through every served version, then a GET of
//     that object through every served version. The GETs are the proof: a GET without a
//     resourceVersion reads etcd and converts now, while a list may be answered from the API
//     server's watch cache, whose objects were converted when they last changed (the webhook may
//     have stopped since). With two or more served versions, at least one GET needs the webhook.
//   - no object exists: a server-side dry-run create through every served version that is not the
//     storage version. The API server converts the object to the storage version (the webhook) and
//     the result back (the webhook again); nothing is persisted. The object is the user's
//     `conversionProbes` entry for that kind and version, or a minimal one built from the version's
//     schema (its required fields).
//
// A dry-run refused before any conversion ran (schema validation, an admission webhook or policy
// denying it) proves nothing, and sending the same object again changes nothing: the gate fails at
// once saying so and what to give (`conversionProbes`, or `conversion: false`), rather than
// waiting its whole timeout for an object that only the stack, after this gate, would create.
// A CRD that serves only its storage version and holds no object needs no conversion yet: nothing
// to prove (said in the log, not listed in `conversionVerified`).
//
// Two good rounds, confirmDelay apart (as WebhookReady's probes), are required: the first answer
// may come from a pod on its way out. Failed rounds are retried with a capped backoff (nothing to
// watch); a change of the CRD (a caBundle injected by cert-manager's cainjector, a new URL) wakes
// the gate through the CRD watch and is probed at once.

const (
	conversionRoundsNeeded = 2
	conversionMinBackoff   = 50 * time.Millisecond
	conversionMaxBackoff   = 500 * time.Millisecond
	conversionProbePrefix  = "readiness-conversion-probe-"
)

// conversionProof is one CRD's proof, on its own schedule (as prober's).
type conversionProof struct {
	seen    string // the CRD's resourceVersion the last round ran against
	good    int
	next    time.Time
	backoff time.Duration
	last    wait.Result
	how     string // what the last good round did, for messages
	proven  bool
	reached bool // a connect to the webhook's URL succeeded (see run_wake.go)
}

// conversionOn says whether the gate proves res's conversion webhook.
func (e *crdEval) conversionOn(res status.CRDResult) bool {
	return res.Conversion.Webhook() && (e.args.Conversion == nil || *e.args.Conversion)
}

// checkConversion proves the conversion webhook of every checked CRD that declares one; results
// and objs are the Established CRDs, in the gate's order.
func (e *crdEval) checkConversion(ctx context.Context, objs []*unstructured.Unstructured, results []status.CRDResult) wait.Result {
	if e.args.Conversion != nil && !*e.args.Conversion {
		return wait.Result{Ready: true}
	}
	if err := e.matchProbes(results); err != nil {
		return wait.Result{Failed: err}
	}
	var pending []string
	var hint string
	var retry time.Duration
	confirming := true
	for i, res := range results {
		name := objs[i].GetName()
		if !res.Conversion.Webhook() {
			if e.args.Conversion != nil && !e.noted[name] {
				e.noted[name] = true
				e.r.log.Infof("CRD %s declares conversion strategy %s: its versions differ only in apiVersion, there is no conversion webhook to prove", name, res.Conversion.Strategy)
			}
			continue
		}
		r := e.conversionStep(ctx, name, objs[i].GetResourceVersion(), res)
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
		return wait.Result{Message: strings.Join(pending, "; "), Hint: hint, RetryIn: retry, Confirming: confirming}
	}
	return wait.Result{Ready: true}
}

// conversionStep runs a round for one CRD when due and judges it.
func (e *crdEval) conversionStep(ctx context.Context, name, rv string, res status.CRDResult) wait.Result {
	p := e.proofs[name]
	if p == nil {
		p = &conversionProof{}
		e.proofs[name] = p
	}
	if rv != p.seen {
		// A new CRD spec (a caBundle injected, a new URL): probe at once, prove again.
		p.seen, p.next, p.good, p.proven, p.backoff = rv, time.Time{}, 0, false, conversionMinBackoff/2
		delete(e.verified, name)
	}
	if p.proven {
		return wait.Result{Ready: true}
	}
	if res.Conversion.URL != "" && !p.reached && e.r.listening(res.Conversion.URL) {
		// Something listens at the URL now (see run_wake.go): try at once, unless confirming.
		p.reached = true
		if p.good == 0 {
			p.next, p.backoff = time.Time{}, conversionMinBackoff/2
		}
	}
	if now := time.Now(); now.Before(p.next) {
		r := p.last
		r.RetryIn = p.next.Sub(now)
		return r
	}
	r := e.conversionRound(ctx, name, res)
	// client-go's rate limiter refuses a request that could not start before the context's
	// deadline ("would exceed context deadline") while ctx itself is still live.
	if ctx.Err() != nil || strings.Contains(r.Message, "would exceed context deadline") {
		// The wait ended during this round: its deadline is not the webhook's answer.
		if p.last.Message != "" {
			return p.last
		}
		return wait.Result{Message: "the API server had not answered the first read or dry-run through the CRD's versions yet " +
			"(the first requests after a CRD is created can take seconds; a conversion webhook that does not answer holds them up to its timeout)", Hint: r.Hint}
	}
	switch {
	case r.Failed != nil:
		return r
	case r.Ready && r.Message == "":
		p.proven = true // nothing to convert
		return r
	case r.Ready:
		p.good++
		p.how = r.Message
		if p.good >= conversionRoundsNeeded {
			p.proven = true
			e.verified[name] = true
			return wait.Result{Ready: true}
		}
		r = wait.Result{Message: "conversion proven once (" + r.Message + "); confirming", Confirming: true, RetryIn: confirmDelay}
	default:
		p.good = 0
		p.backoff = min(p.backoff*2, conversionMaxBackoff)
		r.RetryIn = p.backoff
	}
	p.next = time.Now().Add(r.RetryIn)
	p.last = r
	return r
}

// conversionRound is one proof attempt: Ready with a message saying what converted, Ready with
// no message when nothing needs conversion, not ready (what failed), or Failed.
func (e *crdEval) conversionRound(ctx context.Context, name string, res status.CRDResult) wait.Result {
	hint := fmt.Sprintf("the conversion webhook %s (spec.conversion.webhook.clientConfig of CRD %s): is it running and listening, "+
		"and does the CRD's caBundle trust its certificate (cert-manager's cainjector injects it when the CRD has the annotation "+
		"cert-manager.io/inject-ca-from)? `kubectl get --raw /apis/%s/<version>/%s?limit=1` shows the API server's error", res.Conversion.Endpoint(), name, res.Group, res.Plural)
	if res.Conversion.Endpoint() == "" {
		return wait.Result{Message: "conversion strategy Webhook, but spec.conversion.webhook.clientConfig names no URL or Service", Hint: hint}
	}
	ri := func(v, ns string) dynamic.ResourceInterface {
		r := e.r.clients.Dynamic.Resource(schema.GroupVersionResource{Group: res.Group, Version: v, Resource: res.Plural})
		if ns != "" {
			return r.Namespace(ns)
		}
		return r
	}
	judge := func(op, v string, err error) *wait.Result {
		o := status.ClassifyConversion(err)
		why := admission.StripGeneratedNames(o.Why, conversionProbePrefix)
		switch o.Verdict {
		case status.Converted:
			return nil
		case status.Refused:
			return &wait.Result{Failed: fmt.Errorf("CRD %s: proving its conversion webhook needs verbs list, get and create (dry-run, "+
				"persisting nothing) on %s.%s, which the provider may not use (%s: %s); grant them, or set `conversion: false`", name, res.Plural, res.Group, op, why)}
		case status.NoProof:
			return &wait.Result{Failed: fmt.Errorf("CRD %s: cannot prove its conversion webhook: no %s exists to read through every "+
				"served version, and the dry-run create of a %s in %s was refused before any conversion ran (%s), which proves nothing; "+
				"give `conversionProbes` an object of apiVersion %s/%s, kind %s that passes the CRD's schema and admission, or set "+
				"`conversion: false`", name, res.Kind, res.Kind, v, why, res.Group, v, res.Kind)}
		}
		return &wait.Result{Message: fmt.Sprintf("%s through %s: %s", op, v, why), Hint: hint}
	}

	// An existing object: read it through every served version.
	var found *unstructured.Unstructured
	for _, v := range res.Versions {
		list, err := ri(v, "").List(ctx, metav1.ListOptions{Limit: 1})
		if r := judge("list", v, err); r != nil {
			return *r
		}
		if found == nil && len(list.Items) > 0 {
			found = &list.Items[0]
		}
	}
	if found != nil {
		ref := found.GetName()
		if found.GetNamespace() != "" {
			ref = found.GetNamespace() + "/" + ref
		}
		for _, v := range res.Versions {
			_, err := ri(v, found.GetNamespace()).Get(ctx, found.GetName(), metav1.GetOptions{})
			if r := judge("get "+ref, v, err); r != nil {
				return *r
			}
		}
		return wait.Result{Ready: true, Message: fmt.Sprintf("read %s %s through %s", res.Kind, ref, strings.Join(res.Versions, ", "))}
	}

	// None: dry-run create through every served version but the storage one.
	var converted []string
	for _, v := range res.Versions {
		if v == res.StorageVersion {
			continue
		}
		obj := e.conversionProbe(res, v)
		var err error
		dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
		if res.Scope == "Namespaced" {
			_, err = ri(v, obj.GetNamespace()).Create(ctx, obj, dryRun)
		} else {
			_, err = ri(v, "").Create(ctx, obj, dryRun)
		}
		op := "dry-run create"
		if obj.GetNamespace() != "" {
			op += " in namespace " + obj.GetNamespace()
		}
		if r := judge(op, v, err); r != nil {
			return *r
		}
		converted = append(converted, v)
	}
	if len(converted) == 0 {
		if !e.noted[name] {
			e.noted[name] = true
			e.r.log.Infof("CRD %s serves only its storage version %s and holds no object: nothing needs conversion yet, so there is nothing to prove", name, res.StorageVersion)
		}
		return wait.Result{Ready: true}
	}
	return wait.Result{Ready: true, Message: fmt.Sprintf("no %s exists; dry-run created one through %s (converted to the storage version %s and back)",
		res.Kind, strings.Join(converted, ", "), res.StorageVersion)}
}

// conversionProbe is the object dry-run created through version v: the user's conversionProbes
// entry for that kind and version, or a minimal one from v's schema, in the provider's default
// namespace (a namespace that does not exist is waited for, with a message saying so).
func (e *crdEval) conversionProbe(res status.CRDResult, v string) *unstructured.Unstructured {
	gv := schema.GroupVersion{Group: res.Group, Version: v}.String()
	var obj *unstructured.Unstructured
	for _, p := range e.args.ConversionProbes {
		u := (&unstructured.Unstructured{Object: p}).DeepCopy()
		if u.GetAPIVersion() == gv && u.GetKind() == res.Kind {
			obj = u
			break
		}
	}
	if obj == nil {
		obj = &unstructured.Unstructured{Object: crdschema.MinimalObject(res.Schemas[v])}
		obj.SetAPIVersion(gv)
		obj.SetKind(res.Kind)
	}
	if obj.GetName() == "" && obj.GetGenerateName() == "" {
		obj.SetGenerateName(conversionProbePrefix)
	}
	if res.Scope != "Namespaced" {
		obj.SetNamespace("")
	} else if obj.GetNamespace() == "" {
		ns := e.r.clients.Namespace
		if ns == "" {
			ns = "default"
		}
		obj.SetNamespace(ns)
	}
	return obj
}

// matchProbes checks that every conversionProbes entry is a kind of a checked CRD (else a typo:
// fails) and not in its storage version (a create there converts nothing: fails); a probe for a
// CRD without a conversion webhook or for a version it does not serve is only logged.
func (e *crdEval) matchProbes(results []status.CRDResult) error {
	for i, p := range e.args.ConversionProbes {
		u := (&unstructured.Unstructured{Object: p}).DeepCopy()
		gv, _ := schema.ParseGroupVersion(u.GetAPIVersion())
		var kinds []string
		matched := false
		for _, res := range results {
			kinds = append(kinds, res.Group+" "+res.Kind)
			if res.Group != gv.Group || res.Kind != u.GetKind() {
				continue
			}
			matched = true
			// A probe written for another release of the CRD (one with a conversion webhook, or
			// serving that version) is not used, and said so once: charts drop conversion webhooks.
			note := fmt.Sprintf("conversionProbes[%d]", i)
			switch {
			case !res.Conversion.Webhook():
				if !e.noted[note] {
					e.noted[note] = true
					e.r.log.Infof("conversionProbes[%d] is not used: CRD %s.%s declares conversion strategy %s (no conversion webhook)", i, res.Plural, res.Group, res.Conversion.Strategy)
				}
			case !slices.Contains(res.Versions, gv.Version):
				if !e.noted[note] {
					e.noted[note] = true
					e.r.log.Infof("conversionProbes[%d] is not used: CRD %s.%s does not serve version %s (served: %s)", i, res.Plural, res.Group,
						gv.Version, strings.Join(res.Versions, ", "))
				}
			case gv.Version == res.StorageVersion:
				return fmt.Errorf("conversionProbes[%d]: %s is the storage version of CRD %s.%s: creating it converts nothing; "+
					"write the probe in another served version (served: %s)", i, gv.Version, res.Plural, res.Group, strings.Join(res.Versions, ", "))
			}
		}
		if !matched {
			return fmt.Errorf("conversionProbes[%d]: %s %s is not a kind of the checked CRDs (%s)", i, u.GetAPIVersion(), u.GetKind(), strings.Join(kinds, ", "))
		}
	}
	return nil
}
