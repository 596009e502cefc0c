package verdict

import "time"

// Result is one evaluation of a gate, or of a part of one (an object, a Service, a read): see
// the package's doc for what each state means. The zero Result is "not ready yet", with no
// message.
type Result struct {
	// Ready ends the wait successfully.
	Ready bool
	// Message is what is pending and what was last seen, for progress and timeout errors.
	Message string
	// Failed ends the wait at once: a terminal state (a Denied request, a failed Job,
	// Forbidden) that no amount of waiting fixes.
	Failed error
	// Poll asks to be evaluated again after a capped backoff (100 ms doubling to 1 s) even
	// without a watch event: for probes and discovery, which have nothing to watch.
	Poll bool
	// Hint says what to check if the wait times out in this state.
	Hint string
	// Unsynced says the watch caches are still loading: the state is unknown, not "not ready".
	Unsynced bool
	// Confirming says a proof is under way (one good probe of the several required): the state
	// is not judged yet, so a refresh keeps evaluating instead of calling the gate not ready.
	Confirming bool
	// RetryIn asks to be evaluated again after exactly this long, even without a watch event,
	// instead of Poll's backoff: for a probe that keeps its own schedule (a quick confirming
	// probe, a backoff that restarts when what it watches changes).
	RetryIn time.Duration
}
