// Package verdict holds Result, the one answer every readiness decision gives, as kstatus's
// status.Result is the one answer of its Compute. The pure deciders in provider/pkg (admission,
// helmrelease, issuance, status's callers) return it, the gates return it to their wait loop
// (pkg/wait), and the loop acts on it; nothing converts between result types.
//
// What a Result means, in the order the wait loop reads it:
//
//   - Failed set: a terminal state (a Denied request, a failed revision or Job, Forbidden) that
//     no amount of waiting fixes. The wait ends at once with that error (after FailureGrace, if
//     the gate sets one).
//   - Ready: what was judged holds. The wait ends successfully (once it has held for
//     StableFor, if the gate sets one).
//   - Neither: not ready yet. Message says what is pending and what was last seen (progress
//     lines and the timeout error quote it); Hint what to check if it stays so.
//
// A not-ready Result says further what kind of "not yet" it is, and when to look again:
//
//   - Unsynced: the watch caches are still loading; the state is unknown, not "not ready".
//   - Confirming: a proof is under way (one good probe of the several required); the state is
//     not judged yet, so a refresh keeps evaluating instead of calling the gate not ready.
//   - Poll: evaluate again after a capped backoff even without a watch event (probes,
//     discovery: nothing to watch).
//   - RetryIn: evaluate again after exactly this long (a probe keeping its own schedule, a
//     certificate not valid yet: only time changes the answer).
//
// Without Poll or RetryIn the loop waits for a watch event: a state that a watch reports is
// never polled.
//
// A decider decides over what a gate gathered; a read that returned no answer (a kind not
// served yet, a cache loading, RBAC) is resolved by the gather step, which returns that read's
// Result itself, before any decider is called.
package verdict
