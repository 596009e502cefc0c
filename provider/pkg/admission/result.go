package admission

// Result is a judgement of this package (CheckConfiguration's, CheckService's, Decide's, or a
// Service's state as the gate judged it), as kstatus's status.Result is its own: the gate
// converts it to and from its wait loop's result, whose schedule is the gate's. Failed empty and
// not Ready: not ready yet, Message says why.
type Result struct {
	// Ready: what was judged holds (the checks, the round, the Service's endpoints).
	Ready bool
	// Message is what is pending and what was seen; Hint, what to check if it stays so.
	Message, Hint string
	// Failed is a verdict that no amount of waiting changes (a denial, RBAC).
	Failed error
	// Confirming: every object was admitted, in fewer consecutive rounds than needed.
	Confirming bool
	// Unsynced and Poll come from a gathered Service state (Configuration.Services), passed on
	// as the caller judged it: the state is unknown yet (its watch cache loading); read it again
	// after a backoff (nothing to watch wakes the gate).
	Unsynced, Poll bool
}
