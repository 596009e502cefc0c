package probe

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/conversion"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
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
// Two good rounds, ConfirmDelay apart (as WebhookReady's probes), are required: the first answer
// may come from a pod on its way out. Failed rounds are retried with a capped backoff (nothing to
// watch); a change of the CRD (a caBundle injected by cert-manager's cainjector, a new URL) wakes
// the gate through the CRD watch and is probed at once.
//
// This file keeps the schedule and makes the calls; what a round's answers prove, and what the
// conversionProbes say, is decided in pkg/conversion (pure, table-tested); CrdReady (crd_ready.go
// in the provider root) keeps a Conversion per CRD that declares a webhook, and logs its notes.

const (
	conversionRoundsNeeded = 2
	conversionMinBackoff   = 50 * time.Millisecond
	conversionMaxBackoff   = 500 * time.Millisecond
)

// Conversion proves one CRD's conversion webhook (CrdReady's `conversion`), on its own schedule
// (as Webhook's).
type Conversion struct {
	r *session.Run
	// probes are the user's conversionProbes (see conversion.Probe).
	probes   []map[string]any
	seen     string // the CRD's resourceVersion the last round ran against
	good     int
	next     time.Time
	backoff  time.Duration
	last     verdict.Result
	proven   bool
	verified bool // proven on a webhook, not for lack of anything to convert
	reached  bool // a connect to the webhook's URL succeeded (see session.Run.Listening)
}

// NewConversion is the conversion proof of one CRD on run r, dry-running probes (the user's
// conversionProbes) when the kind has no object.
func NewConversion(r *session.Run, probes []map[string]any) *Conversion {
	return &Conversion{r: r, probes: probes}
}

// Verified reports whether the proof passed on the CRD's webhook as it is now (a CRD with nothing
// to convert passes, but is not verified).
func (p *Conversion) Verified() bool { return p.verified }

// Step runs a round for the CRD name (at resourceVersion rv, whose status is res) when due, has it
// decided (conversion.Decide), and schedules the next. note is what the round says to log (once
// per CRD: the caller keeps track).
func (p *Conversion) Step(ctx context.Context, name, rv string, res status.CRDResult) (r verdict.Result, note string) {
	if rv != p.seen {
		// A new CRD spec (a caBundle injected, a new URL): probe at once, prove again.
		p.seen, p.next, p.good, p.proven, p.backoff = rv, time.Time{}, 0, false, conversionMinBackoff/2
		p.verified = false
	}
	if p.proven {
		return verdict.Result{Ready: true}, ""
	}
	if res.Conversion.URL != "" && !p.reached && p.r.Listening(res.Conversion.URL) {
		// Something listens at the URL now (see session.Run.Listening): try at once, unless confirming.
		p.reached = true
		if p.good == 0 {
			p.next, p.backoff = time.Time{}, conversionMinBackoff/2
		}
	}
	if now := time.Now(); now.Before(p.next) {
		r := p.last
		r.RetryIn = p.next.Sub(now)
		return r, ""
	}
	in := p.round(ctx, name, res)
	in.Ended, in.Good, in.Need = ctx.Err() != nil, p.good, conversionRoundsNeeded
	v := conversion.Decide(in)
	note = v.Note
	p.good = v.Good
	switch v.Outcome {
	case conversion.Interrupted:
		// What the last finished round said stands, with its schedule.
		if p.last.Message != "" {
			return p.last, note
		}
		return verdict.Result{Message: v.Message, Hint: v.Hint}, note
	case conversion.Failed:
		return verdict.Result{Failed: v.Err}, note
	case conversion.NothingToConvert:
		p.proven = true // not a proven webhook: not Verified
		return verdict.Result{Ready: true}, note
	case conversion.Proven:
		p.proven, p.verified = true, true
		return verdict.Result{Ready: true}, note
	case conversion.Confirming:
		r = verdict.Result{Message: v.Message, Confirming: true, RetryIn: ConfirmDelay}
	default:
		p.backoff = min(p.backoff*2, conversionMaxBackoff)
		r = verdict.Result{Message: v.Message, Hint: v.Hint, RetryIn: p.backoff}
	}
	p.next = time.Now().Add(r.RetryIn)
	p.last = r
	return r, note
}

// round gathers one round's answers for Decide: lists through every served version,
// then GETs of an object they returned, or else dry-run creates of a probe through every served
// version but the storage one. It stops at the first error: the round is decided there.
func (p *Conversion) round(ctx context.Context, name string, res status.CRDResult) conversion.Input {
	in := conversion.Input{Name: name, CRD: res}
	if res.Conversion.Endpoint() == "" {
		return in // nowhere to send a ConversionReview: nothing to read
	}
	ri := func(v, ns string) dynamic.ResourceInterface {
		r := p.r.Clients.Dynamic.Resource(schema.GroupVersionResource{Group: res.Group, Version: v, Resource: res.Plural})
		if ns != "" {
			return r.Namespace(ns)
		}
		return r
	}

	// An existing object: read it through every served version.
	var found *unstructured.Unstructured
	for _, v := range res.Versions {
		list, err := ri(v, "").List(ctx, metav1.ListOptions{Limit: 1})
		in.Lists = append(in.Lists, conversion.Answer{Version: v, Err: err})
		if err != nil {
			return in
		}
		if found == nil && len(list.Items) > 0 {
			found = &list.Items[0]
		}
	}
	if found != nil {
		in.Found = &conversion.Ref{Namespace: found.GetNamespace(), Name: found.GetName()}
		for _, v := range res.Versions {
			_, err := ri(v, found.GetNamespace()).Get(ctx, found.GetName(), metav1.GetOptions{})
			in.Gets = append(in.Gets, conversion.Answer{Version: v, Err: err})
			if err != nil {
				return in
			}
		}
		return in
	}

	// None: dry-run create through every served version but the storage one (a cluster-scoped
	// probe has no namespace).
	for _, v := range res.Versions {
		if v == res.StorageVersion {
			continue
		}
		obj := conversion.Probe(res, v, p.probes, p.r.Clients.Namespace)
		_, err := ri(v, obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		in.DryRuns = append(in.DryRuns, conversion.Answer{Version: v, Namespace: obj.GetNamespace(), Err: err})
		if err != nil {
			return in
		}
	}
	return in
}
