// Package admission holds every pure webhook and admission decision of WebhookReady,
// AdmissionReady and HelmReleaseReady's webhooks: functions over objects and API errors that
// never touch a cluster, table-tested without one. The gates in the provider root gather what a
// decision needs from their watch caches, make the calls (dry-runs, direct AdmissionReviews) and
// keep the schedule; what follows decides.
//
// What decides what:
//
//   - Results: the decisions a gate waits on (CheckConfiguration, CheckService, Decide) answer
//     with verdict.Result, the one answer of every decider and of the gates' wait loop.
//   - Which webhooks a request reaches (match.go): Match.NotReached (the API server provably
//     calls the webhook, so an admission proves it answered), Match.Excludes (it provably does
//     not, so it cannot have mutated or denied), Match.RulesMatch (rules alone). They mirror
//     k8s.io/apiserver's admission plugin predicates on a Request; matchConditions are not
//     evaluated (never taken as called, always as possibly calling).
//   - The webhooks of a configuration (hook.go): WebhooksOf reads them as the API server calls
//     them, with its defaults; Interceptors keeps those that may intercept a request.
//   - WebhookReady's object checks (objects.go): CheckConfiguration and CheckService decide over
//     a gathered snapshot (configurations, Service states) whether every checked webhook is
//     registered with a caBundle and ready endpoints. That is never proof it answers.
//   - What a probe's dry-run proves (classify.go): ClassifyProbe. A denial is an answer only when
//     it names one of the target's webhooks; DeniedBy and FailedCall read the webhook an API error
//     names, for every classifier (ClassifyConversion in pkg/status too).
//   - Probe derivation (derive.go): PickProbeKind chooses a served kind a webhook's rules cover,
//     ProbeObject builds the minimal object of it.
//   - A direct call (review.go): Review builds the AdmissionReview the API server would send;
//     CheckReview accepts only a valid AdmissionReview answering that request's uid.
//   - AdmissionReady's verdicts (verdict.go, round.go): ClassifyAdmission tells a verdict (a
//     webhook's or policy's denial, invalid, forbidden) from a reason to wait; Decide judges a
//     round of answers; NeedDirect lists the failurePolicy Ignore webhooks that must answer a
//     direct call.
//   - Mutation (mutation.go, expect.go): MutatedBy tells a webhook's change from the API server's
//     defaults; an Expect judges a dry-run result, and CreditsMutation says when the mutation it
//     sees proves one mutating webhook served.
//   - Secrets (secret.go): IsSecret and SecretRedactor keep a Secret's data out of every message.
//   - Manifests (manifest.go): ManifestProblem, what the API server would refuse on every try.
package admission
