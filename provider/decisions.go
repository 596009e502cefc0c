package provider

import (
	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/helmrelease"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/issuance"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/wait"
)

// The pure deciders own their result types, as kstatus's status.Result is its own, and none of
// them imports pkg/wait: a gate hands a decider what it gathered as the decider's Result (a read,
// another check's state) and returns the decision to its wait loop as a wait.Result. The
// conversions are here, one pair per decider package. A field of wait.Result that a decider's
// Result lacks is one that nothing handed to the decider sets (TestDecisionResultsCarry lists
// them): admission.Result has no RetryIn (a Service's state is a read), issuance.Result no
// Confirming (the Certificate's and the Secret's reads).

// toAdmission is a Service's state (WebhookReady's serviceReady) for admission.Configuration.
func toAdmission(w wait.Result) admission.Result {
	return admission.Result{Ready: w.Ready, Message: w.Message, Hint: w.Hint, Failed: w.Failed,
		Confirming: w.Confirming, Unsynced: w.Unsynced, Poll: w.Poll}
}

// fromAdmission is CheckConfiguration's, CheckService's or Decide's result for the wait loop.
func fromAdmission(r admission.Result) wait.Result {
	return wait.Result{Ready: r.Ready, Message: r.Message, Hint: r.Hint, Failed: r.Failed,
		Confirming: r.Confirming, Unsynced: r.Unsynced, Poll: r.Poll}
}

// toHelmRelease is an object's state, as its gate judged it, for helmrelease.Objects.
func toHelmRelease(w wait.Result) helmrelease.Result {
	return helmrelease.Result{Ready: w.Ready, Message: w.Message, Hint: w.Hint, Failed: w.Failed,
		Unsynced: w.Unsynced, Confirming: w.Confirming, Poll: w.Poll, RetryIn: w.RetryIn}
}

// fromHelmRelease is JudgeRevision's or JudgeObjects' result for the wait loop.
func fromHelmRelease(r helmrelease.Result) wait.Result {
	return wait.Result{Ready: r.Ready, Message: r.Message, Hint: r.Hint, Failed: r.Failed,
		Unsynced: r.Unsynced, Confirming: r.Confirming, Poll: r.Poll, RetryIn: r.RetryIn}
}

// toIssuance is a read CertificateReady made (the Certificate's pending one, the Secret check's)
// for issuance.Input.
func toIssuance(w wait.Result) issuance.Result {
	return issuance.Result{Ready: w.Ready, Message: w.Message, Hint: w.Hint, Failed: w.Failed,
		Unsynced: w.Unsynced, Poll: w.Poll, RetryIn: w.RetryIn}
}

// fromIssuance is Decide's result for the wait loop.
func fromIssuance(r issuance.Result) wait.Result {
	return wait.Result{Ready: r.Ready, Message: r.Message, Hint: r.Hint, Failed: r.Failed,
		Unsynced: r.Unsynced, Poll: r.Poll, RetryIn: r.RetryIn}
}
