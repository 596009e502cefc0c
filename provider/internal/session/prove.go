package session

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// A verdict is kept only once what it judged is proven current: the reads of a check note what
// they judged (see Read), and Checking proves it when the verdict would end the gate.

// coverWait bounds how long a verdict waits for its busy watch to prove it before reading.
const coverWait = 100 * time.Millisecond

// Checking runs check with r.ctx set to the check's context, so that the reads a check makes
// end with the gate (its timeout, a cancel) rather than run on after it. A verdict that ends
// the gate is kept only once what it judged is proven current (see Read); if a copy judged was
// stale, the check runs again at once on consistent reads.
func (r *Run) Checking(check func(context.Context) verdict.Result) func(context.Context) verdict.Result {
	return func(ctx context.Context) verdict.Result {
		outer := r.ctx
		r.ctx = ctx
		defer func() { r.ctx, r.seen, r.hints = outer, nil, nil }()
		r.seen, r.hints = nil, nil
		began := time.Now()
		res := check(ctx)
		checked := time.Now()
		res = r.prove(ctx, check, res)
		if Tracing() {
			r.traceCheck(began, checked, &res)
		}
		return res
	}
}

// prove keeps res, the verdict of check, once what it judged is proven current: a verdict that
// waits costs nothing now (what a pass will judge is proven meanwhile); one that ends the gate
// waits for its busy watches, or reads; a stale copy runs check again on consistent reads.
func (r *Run) prove(ctx context.Context, check func(context.Context) verdict.Result, res verdict.Result) verdict.Result {
	if !res.Ready && res.Failed == nil {
		for _, v := range r.seen { // it waits: prove meanwhile what a pass will judge
			v.Ahead()
		}
		return res
	}
	judged := r.seen
	if res.Failed != nil {
		judged = append(judged, r.hints...)
	}
	var reads []kube.Seen
	for _, v := range judged {
		step, err := v.Next(ctx, r.mayAwait())
		if err != nil { // the gate's time is up: the wait loop says so
			return verdict.Result{Message: "confirming that the state judged is current", Confirming: true}
		}
		switch step {
		case kube.Proven:
			continue
		case kube.AwaitWatch:
			// Its watch is busy: wait for it to pass a list's revision rather than read now.
			if r.awaited.IsZero() {
				r.awaited = time.Now()
			}
			return verdict.Result{Message: "confirming that the state judged is current (its watch is catching up)", Confirming: true, RetryIn: coverWait - time.Since(r.awaited)}
		}
		reads = append(reads, v)
	}
	ok, err := proveAll(ctx, reads)
	if err != nil {
		return *r.ReadErr("the state judged", err)
	}
	if !ok {
		r.proving, r.seen, r.hints = true, nil, nil
		return check(ctx)
	}
	r.proven = true
	return res
}

// ProveAhead begins now the proof of what the check has judged so far (kube.Seen.AheadNow), for a
// check with slow work left after its reads: by the time its verdict is in, the list (or GET) that
// proves a pass is done or in flight. AdmissionReady calls it before its dry runs, CertificateReady
// before its Secret's read.
func (r *Run) ProveAhead() {
	for _, v := range r.seen {
		v.AheadNow()
	}
}

// proveAll proves the reads at once (a HelmReleaseReady judges a dozen kinds: their consistent
// reads one after another cost their sum, under load tens of milliseconds), and reports whether
// all found what was judged, or the first error.
func proveAll(ctx context.Context, reads []kube.Seen) (bool, error) {
	if len(reads) == 1 {
		return reads[0].Prove(ctx)
	}
	oks, errs := make([]bool, len(reads)), make([]error, len(reads))
	var wg sync.WaitGroup
	for i, v := range reads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			oks[i], errs[i] = v.Prove(ctx)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return false, err
		}
	}
	return !slices.Contains(oks, false), nil
}

// mayAwait reports whether a verdict may still wait for its busy watch to prove it (see
// kube.AwaitWatch): not once the run has proven a verdict, nor for more than coverWait.
func (r *Run) mayAwait() bool {
	return !r.proven && (r.awaited.IsZero() || time.Since(r.awaited) < coverWait)
}
