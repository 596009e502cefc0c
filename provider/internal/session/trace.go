package session

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// The trace: with READINESS_TRACE=FILE in the provider's environment, every gate appends to
// FILE, as it happens, when each check began, what woke it (the newest watch event), how long
// the check and its proof took and what they decided, and when Create returned. It answers
// "why did this gate return late?" (the watch delivered late, the check or its proof was
// slow, or the engine was) without a debugger. Lines: unix-nanoseconds TAB gate TAB event.
// Messages are the gates' own progress lines, which never carry Secret data.
var tracer = openTrace(os.Getenv("READINESS_TRACE"))

type traceFile struct {
	mu sync.Mutex
	f  *os.File
}

// Tracing reports whether READINESS_TRACE is set: a caller that gathers what to trace
// (timings, slow objects) does so only then.
func Tracing() bool { return tracer != nil }

func openTrace(path string) *traceFile {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return nil
	}
	return &traceFile{f: f}
}

// Trace writes one line for the gate what; a no-op without READINESS_TRACE.
func Trace(what, format string, args ...any) {
	t := tracer
	if t == nil {
		return
	}
	line := fmt.Sprintf("%d\t%s\t%s\n", time.Now().UnixNano(), what, strings.Join(strings.Fields(fmt.Sprintf(format, args...)), " "))
	t.mu.Lock()
	defer t.mu.Unlock()
	_, _ = t.f.WriteString(line)
}

// lastEvent is the newest event any of the run's watches delivered.
func (r *Run) lastEvent() time.Time {
	var last time.Time
	for _, s := range r.subs {
		if t := s.LastEvent(); t.After(last) {
			last = t
		}
	}
	return last
}

// traceCheck writes one check: how long after the newest watch event it began, how long the
// check and then its proof took, and the verdict.
func (r *Run) traceCheck(began, checked time.Time, res *verdict.Result) {
	woke := "no watch event yet"
	if ev := r.lastEvent(); !ev.IsZero() {
		woke = fmt.Sprintf("newest watch event %dus before", began.Sub(ev).Microseconds())
	}
	verdict := "waits"
	switch {
	case res.Failed != nil:
		verdict = "failed"
	case res.Ready:
		verdict = "ready"
	case res.Confirming:
		verdict = "confirming"
	}
	Trace(r.What, "check began (%s); check %dus, proof %dus: %s: %s", woke,
		checked.Sub(began).Microseconds(), time.Since(checked).Microseconds(), verdict, res.Message)
}
