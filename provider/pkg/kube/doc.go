// Package kube is the one place that talks to the Kubernetes API: it builds the clients from the
// provider configuration, maps kinds to resources (re-discovering when a CRD appears mid-run) and
// keeps the watches that every gate of the provider process shares. Three file sets, one job each:
//
//   - client*.go, the clients: LoadConfig and NewClients (client.go), kind to resource
//     mapping and discovery refusals (client_mapping.go), request counters (client_stats.go).
//   - watch*.go, the shared watches: one informer per WatchKey, shared by every gate that asks
//     for it (watch.go); a gate's Subscription to one, with all its methods
//     (watch_subscription.go); what a watch keeps of a Secret, a CRD or a Helm record
//     (watch_trim.go).
//   - proof*.go, the freshness proof: why a verdict read from a shared watch may be trusted
//     (proof.go), the consistent reads that prove it (proof_read.go), each resource's clock of
//     list revisions (proof_clock.go), and lists and reads made while gates wait (proof_ahead.go).
//
// How a verdict becomes trusted. A shared informer another gate started earlier may not yet
// have seen a write made just before this gate started, so its copy may be stale. A check
// judges the copy at once (Subscription.Peek, PeekList) and notes what it saw (Seen: the
// objects' resourceVersions and how far the store had reflected its watch). A verdict that
// waits ("not ready") costs nothing: the watch delivers the newer state in order, and
// Seen.Ahead asks for the list (or, for a lone gate's existing object, the GET) that will prove
// the pass while the gate waits. A verdict that
// would end the gate (ready, or failed) is kept only once Seen.Next says Proven: a consistent
// list of the resource, begun after the subscription, was served at a revision the store has
// reflected (revisionClock.covers). Otherwise it awaits a list already in flight, or the busy
// watch passing one, or reads (Seen.Prove): the subscription's own consistent read, begun
// after it asked and shared with the watch's other subscriptions (readGroup), must find
// exactly the resourceVersions judged. If it does not, the copy was stale and the caller
// judges again on consistent reads (Subscription.Read, ReadList). A watch of one named object
// (a Secret, a Helm record) is read consistently at once instead. The provider's run (its
// checking and read) is the caller.
package kube
