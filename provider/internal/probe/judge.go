package probe

import (
	"context"
	"fmt"
	"strings"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

func (p *Webhook) judge(ctx context.Context) verdict.Result {
	o := p.once(ctx)
	// The wait ended during this probe (or client-go's rate limiter refused to start one that
	// could not finish before the deadline): its own deadline is not the webhook's answer.
	if EndedByDeadline(ctx, o.Why) && p.last.Message != "" {
		return p.last
	}
	if o.Terminal != nil {
		return verdict.Result{Failed: o.Terminal}
	}
	if o.Blocked {
		if res := p.proveBlocked(ctx, &o); res != nil {
			return *res
		}
	}
	if o.Answered && !o.Direct {
		needs, credited, err := p.unproven(o)
		if err != nil {
			o.Answered, o.Why = false, err.Error()
		}
		for _, c := range credited {
			o.Why += fmt.Sprintf("; the result satisfies expect, which proves mutating webhook %s (failurePolicy Ignore, the only mutating webhook intercepting the probe)", c)
		}
		for _, n := range needs {
			ok, why, terminal := p.callDirect(ctx, n.hook, n.why, n.remedy)
			if ctx.Err() != nil && p.last.Message != "" {
				return p.last
			}
			if terminal != nil {
				return verdict.Result{Failed: terminal}
			}
			if !ok {
				o.Answered = false
				o.Why = n.why + "; calling it directly: " + why
				break
			}
			o.Why += "; " + n.hook.Name + " answered a direct call"
		}
	}
	if !o.Answered {
		p.good = 0
		hint := "kubectl get pods,endpointslices -n <webhook namespace>; the webhook's logs"
		if o.Hint != "" {
			hint = o.Hint + "; " + hint
		}
		return verdict.Result{Message: "dry-run probe: " + o.Why, Hint: hint}
	}
	p.good++
	if p.good < Needed {
		return verdict.Result{Message: fmt.Sprintf("dry-run probe answered (%s); confirming", o.Why), Confirming: true}
	}
	return verdict.Result{Ready: true, Message: "dry-run probe answered: " + o.Why}
}

// proveBlocked: a policy that denies the probe before the target (a policy engine's mutating
// webhook, a ValidatingAdmissionPolicy) may deny it forever, so the target's webhooks are proven
// the way an Ignore webhook is: each must answer a direct AdmissionReview for the probe. o
// becomes answered when all do; it stays unanswered, saying which did not, otherwise. With
// `expect`, no direct answer shows the mutation, so the gate keeps waiting for an admitted probe.
// Non-nil: the wait ended during a call, or a call may not be made (terminal).
func (p *Webhook) proveBlocked(ctx context.Context, o *admission.ProbeOutcome) *verdict.Result {
	if len(p.Hooks) == 0 || p.Expect != nil {
		return nil
	}
	var answered []string
	for _, h := range p.Hooks {
		need := fmt.Sprintf("the probe never reaches webhook %s (%s)", h.Name, o.Why)
		ok, why, terminal := p.callDirect(ctx, h, need, "give a `probe` the policy admits")
		if ctx.Err() != nil && p.last.Message != "" {
			return &p.last
		}
		if terminal != nil {
			return &verdict.Result{Failed: terminal}
		}
		if !ok {
			o.Why += fmt.Sprintf("; calling webhook %s directly instead: %s", h.Name, why)
			return nil
		}
		answered = append(answered, h.Name)
	}
	o.Answered, o.Blocked, o.Direct = true, false, true
	o.Why += "; instead, " + strings.Join(answered, ", ") + " answered a direct call"
	return nil
}

// directNeed is a checked webhook that the dry-run's answer does not prove, why, and what the
// user can do when the gate may not call it directly either.
type directNeed struct {
	hook        *admission.Hook
	why, remedy string
}

// unproven lists the checked webhooks the answered dry-run o does not prove, each to be called
// directly, and the Ignore webhooks proven by the mutation `expect` sees (credited). Proven: the webhook whose denial o is; a failurePolicy Fail webhook the API server
// provably called for the probe (its rules, namespaceSelector and objectSelector match it, it has
// no matchConditions) when the probe was admitted, since the API server admits only with its
// answer; for a mutating target denied by one of its webhooks, the webhooks before that one (the
// API server calls them in order). Not proven: a failurePolicy Ignore webhook (the API server
// admits without it when it is down) unless the result satisfies expect and admission.CreditsMutation
// credits it with the mutation, a webhook the probe is not provably intercepted by, and,
// when one webhook denied the probe, the others of a validating configuration (called in
// parallel: the denial is one answer, not theirs).
func (p *Webhook) unproven(o admission.ProbeOutcome) (needs []directNeed, credited []string, err error) {
	if p.Hooks == nil {
		return nil, nil, nil
	}
	q, err := p.Request()
	if err != nil {
		return nil, nil, err
	}
	q.NSLabels, q.NSErr = p.NSLabels, p.NSErr
	if q.GVR == admission.NamespacesResource {
		q.NSLabels, q.NSErr = p.obj.GetLabels(), ""
	}
	deniedAt := -1
	for i, h := range p.Hooks {
		if h.Name == o.DeniedBy {
			deniedAt = i
		}
	}
	for i, h := range p.Hooks {
		if h.Name == o.DeniedBy {
			continue // its denial is its answer
		}
		reason := h.MatchErr
		if reason == "" {
			reason = h.Match.NotReached(q)
		}
		switch {
		case reason != "":
			needs = append(needs, directNeed{hook: h,
				why:    fmt.Sprintf("the probe is not intercepted by webhook %q: %s, so an admitted dry-run proves nothing about it", h.Name, reason),
				remedy: "give a probe it intercepts, or list only the webhooks you need in `webhooks`"})
		case h.Policy == "Ignore":
			why := fmt.Sprintf("webhook %s has failurePolicy Ignore, so the API server admits the dry-run without it", h.Name)
			if o.ExpectHeld && h.Mutating {
				not := admission.CreditsMutation(p.Expect, p.obj, h, admission.Interceptors(p.Mutators, q))
				if not == "" {
					credited = append(credited, h.Name)
					continue
				}
				why += "; the result satisfies expect, but " + not
			}
			needs = append(needs, directNeed{hook: h, why: why,
				remedy: "set failurePolicy: Fail on the webhook, or leave it out of `webhooks`"})
		case o.DeniedBy != "" && !(p.Target.Mutating && i < deniedAt):
			needs = append(needs, directNeed{hook: h,
				why:    fmt.Sprintf("the probe was denied by webhook %q, which does not show that webhook %q answered", o.DeniedBy, h.Name),
				remedy: fmt.Sprintf("give a probe that webhook %q admits, or list only the webhooks you need in `webhooks`", o.DeniedBy)})
		}
	}
	return needs, credited, nil
}
