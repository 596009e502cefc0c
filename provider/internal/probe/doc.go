// Package probe proves that a webhook answers, by calling it: an admission webhook (Webhook) or a
// CRD's conversion webhook (Conversion). The gates in the provider root build a prober on their
// session (session.Run, whose clients they pass in) and step it at each check. It never reads the provider's configuration, and decides nothing the pure packages
// decide (pkg/admission classifies an answer, pkg/conversion judges a conversion round).
//
// A file per verb:
//
//   - webhook.go: the Webhook prober (NewWebhook) and its schedule (Step): probe at once when
//     what the gate watches changed, back off otherwise, two answers in a row; the shared
//     schedule constants (ConfirmDelay, MaxBackoff, the hot window) that AdmissionReady's rounds
//     and HttpReady's confirmations follow too.
//   - judge.go: what one probe proves: the dry-run's answer, then a direct call to each checked
//     webhook that answer does not prove (failurePolicy Ignore, not intercepted, blocked by a policy).
//   - dryrun.go: the server-side dry-run create of the probe (once), `expect` on its result, and
//     the request the API server matches webhooks against (RequestFor).
//   - direct.go: an AdmissionReview sent to a webhook directly (CallDirect), to its URL or
//     through the API server's service proxy; AdmissionReady calls it too.
//   - async.go: a composite gate's probes in the background, hedged when slow.
//   - deadline.go: telling the gate's own deadline from a call's answer (EndedByDeadline).
//   - conversion.go: CrdReady's proof of a conversion webhook: a round of lists, GETs or dry-run
//     creates through every served version, on its own schedule (Conversion).
package probe
