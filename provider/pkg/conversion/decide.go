// Package conversion decides CrdReady's proof of a CRD's conversion webhook from what one round
// gathered: the CRD (as status.CRD read it) and the API server's answers to the round's lists,
// GETs and dry-run creates through its served versions. It never touches a cluster, so what
// counts as proof is table-tested on YAML fixtures (testdata/) without one; the prober
// (provider/internal/probe, conversion.go) keeps the schedule, makes the calls and calls Decide.
package conversion

import (
	"fmt"
	"strings"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/wait"
)

// Input is what one round gathered for one CRD, and where its proof stood before it.
//
// A round reads an existing object through every served version: a list (limit 1) through each,
// then a GET of the object a list returned through each. The GETs are the proof: a GET without a
// resourceVersion reads etcd and converts now, while a list may be answered from the API server's
// watch cache, converted when the object last changed. When no object exists, the round
// dry-run creates a probe through every served version but the storage one instead. The round
// stops at the first error (it is decided there), so the answers after it are missing.
type Input struct {
	// Name is the CRD's name; CRD what status.CRD read of it.
	Name string
	CRD  status.CRDResult
	// Lists are the lists' answers, Gets the GETs' of Found (nil: the lists returned no object),
	// DryRuns the dry-run creates' when no object was found.
	Lists []Answer
	Found *Ref
	Gets  []Answer
	// DryRuns carry the namespace each probe was created in ("" for a cluster-scoped kind).
	DryRuns []Answer
	// Ended says the wait ended during the round (its context is done): its answers are the
	// deadline's, not the webhook's.
	Ended bool
	// Good is how many rounds in a row converted before this one; Need how many must.
	Good, Need int
}

// Answer is the API server's answer to one request of a round through Version (Err nil: it
// succeeded, so every conversion it needed did).
type Answer struct {
	Version   string
	Namespace string
	Err       error
}

// Ref names the object a round read.
type Ref struct{ Namespace, Name string }

func (r Ref) String() string {
	if r.Namespace != "" {
		return r.Namespace + "/" + r.Name
	}
	return r.Name
}

// Outcome is what a round decided; the caller maps it to the wait loop's result and schedule.
type Outcome int

const (
	// NotYet: the webhook did not convert everything (yet): retry after a backoff, counting again.
	NotYet Outcome = iota
	// Confirming: converted, in fewer than Need rounds in a row: retry soon to confirm.
	Confirming
	// Proven: converted in Need rounds in a row.
	Proven
	// NothingToConvert: nothing to prove (strategy None; or only the storage version is served
	// and no object exists). Ready, but not a proven webhook.
	NothingToConvert
	// Failed: waiting changes nothing (RBAC; a dry-run refused before any conversion ran).
	Failed
	// Interrupted: the wait ended during the round; what the last finished round said stands.
	Interrupted
)

// Verdict is Decide's answer. Message and Hint say why it is not Proven (for Proven and
// Confirming, Message says what converted); Err is Failed's error; Good the rounds in a row that
// converted, this one included; Note a line for the log, said once per CRD, whatever the outcome.
type Verdict struct {
	Outcome       Outcome
	Message, Hint string
	Err           error
	Good          int
	Note          string
}

// Decide judges a round: every answer must be a conversion, through every served version, in
// Need rounds in a row. An answer that waiting cannot change fails at once.
func Decide(in Input) Verdict {
	if !in.CRD.Ready {
		// Only an Established CRD's answers can prove its webhook (the gate waits for that first).
		return Verdict{Outcome: NotYet, Message: in.CRD.Message}
	}
	if !in.CRD.Conversion.Webhook() {
		return Verdict{Outcome: NothingToConvert, Good: in.Good,
			Note: fmt.Sprintf("CRD %s declares conversion strategy %s: its versions differ only in apiVersion, there is no conversion webhook to prove", in.Name, in.CRD.Conversion.Strategy)}
	}
	r := in.round()
	v := Verdict{Good: in.Good, Note: r.note}
	if in.Ended || wait.RefusedByRateLimiter(r.message) {
		// The wait's deadline is not the webhook's answer.
		v.Outcome, v.Hint = Interrupted, r.hint
		v.Message = "the API server had not answered the first read or dry-run through the CRD's versions yet " +
			"(the first requests after a CRD is created can take seconds; a conversion webhook that does not answer holds them up to its timeout)"
		return v
	}
	switch {
	case r.failed != nil:
		v.Outcome, v.Err = Failed, r.failed
	case r.ready && r.message == "":
		v.Outcome = NothingToConvert
	case r.ready:
		// One good round is not enough: the first answer may come from a pod on its way out.
		v.Good = in.Good + 1
		if v.Good >= in.Need {
			v.Outcome, v.Message = Proven, r.message
		} else {
			v.Outcome, v.Message = Confirming, "conversion proven once ("+r.message+"); confirming"
		}
	default:
		v.Outcome, v.Message, v.Hint, v.Good = NotYet, r.message, r.hint, 0
	}
	return v
}

// round is what the answers alone prove: ready with a message saying what converted, ready with
// none when nothing needs conversion, not ready (message: what failed), or failed.
type round struct {
	ready         bool
	message, hint string
	failed        error
	note          string
}

func (in Input) round() round {
	res, name := in.CRD, in.Name
	hint := fmt.Sprintf("the conversion webhook %s (spec.conversion.webhook.clientConfig of CRD %s): is it running and listening, "+
		"and does the CRD's caBundle trust its certificate (cert-manager's cainjector injects it when the CRD has the annotation "+
		"cert-manager.io/inject-ca-from)? `kubectl get --raw /apis/%s/<version>/%s?limit=1` shows the API server's error", res.Conversion.Endpoint(), name, res.Group, res.Plural)
	if res.Conversion.Endpoint() == "" {
		return round{message: "conversion strategy Webhook, but spec.conversion.webhook.clientConfig names no URL or Service", hint: hint}
	}
	// judge is nil for a conversion, else the round's decision.
	judge := func(op, v string, a *Answer) *round {
		if a == nil {
			// A version the round did not reach proves nothing (the caller stops at an error).
			return &round{message: fmt.Sprintf("%s through %s: not answered in this round", op, v), hint: hint}
		}
		o := status.ClassifyConversion(a.Err)
		why := admission.StripGeneratedNames(o.Why, ProbePrefix)
		switch o.Verdict {
		case status.Converted:
			return nil
		case status.Refused:
			return &round{failed: fmt.Errorf("CRD %s: proving its conversion webhook needs verbs list, get and create (dry-run, "+
				"persisting nothing) on %s.%s, which the provider may not use (%s: %s); grant them, or set `conversion: false`", name, res.Plural, res.Group, op, why)}
		case status.NoProof:
			return &round{failed: fmt.Errorf("CRD %s: cannot prove its conversion webhook: no %s exists to read through every "+
				"served version, and the dry-run create of a %s in %s was refused before any conversion ran (%s), which proves nothing; "+
				"give `conversionProbes` an object of apiVersion %s/%s, kind %s that passes the CRD's schema and admission, or set "+
				"`conversion: false`", name, res.Kind, res.Kind, v, why, res.Group, v, res.Kind)}
		}
		return &round{message: fmt.Sprintf("%s through %s: %s", op, v, why), hint: hint}
	}

	for _, v := range res.Versions {
		if r := judge("list", v, answerOf(in.Lists, v)); r != nil {
			return *r
		}
	}
	if in.Found != nil {
		ref := in.Found.String()
		for _, v := range res.Versions {
			if r := judge("get "+ref, v, answerOf(in.Gets, v)); r != nil {
				return *r
			}
		}
		return round{ready: true, message: fmt.Sprintf("read %s %s through %s", res.Kind, ref, strings.Join(res.Versions, ", "))}
	}

	// No object: the dry-runs, through every served version but the storage one (a create there
	// converts nothing).
	var converted []string
	for _, v := range res.Versions {
		if v == res.StorageVersion {
			continue
		}
		a := answerOf(in.DryRuns, v)
		op := "dry-run create"
		if a != nil && a.Namespace != "" {
			op += " in namespace " + a.Namespace
		}
		if r := judge(op, v, a); r != nil {
			return *r
		}
		converted = append(converted, v)
	}
	if len(converted) == 0 {
		return round{ready: true, note: fmt.Sprintf("CRD %s serves only its storage version %s and holds no object: nothing needs conversion yet, "+
			"so there is nothing to prove", name, res.StorageVersion)}
	}
	return round{ready: true, message: fmt.Sprintf("no %s exists; dry-run created one through %s (converted to the storage version %s and back)",
		res.Kind, strings.Join(converted, ", "), res.StorageVersion)}
}

// answerOf is the answer through version v, nil when the round has none.
func answerOf(answers []Answer, v string) *Answer {
	for i := range answers {
		if answers[i].Version == v {
			return &answers[i]
		}
	}
	return nil
}
