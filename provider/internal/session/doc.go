// Package session is one gate's use of the cluster during a Create or a Read: a Run holds its
// watches, its wake-up channel and its status line, and closes them when the gate returns. The
// gates in the provider root build a Run on the provider's clients (New) and call its verbs; it
// never reads the provider's configuration.
//
// A file per verb:
//
//   - run.go: the Run, reaching the API server, subscribing to watches, the wait loop (Wait) and
//     a refresh's verdict (Judge), a timeout's Warning events.
//   - read.go: what a check reads (Objects, Read, ReadList, NamespaceLabels, ExternalName), a
//     kind not served yet (KindPending) and a failed read (ReadErr).
//   - prove.go: a verdict kept only once what it judged is proven current (Checking).
//   - wake.go: the URL dialers that wake a gate when a webhook URL starts listening.
//   - webhook_waiters.go: gates waiting on one webhook poll it together, and its first answer
//     wakes them all.
//   - trace.go: the gates' trace (READINESS_TRACE).
//   - target.go: what a gate watches (Target), and the built-in kinds gates read.
package session
