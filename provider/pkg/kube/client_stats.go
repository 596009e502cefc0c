package kube

import (
	"net/http"
	"sync/atomic"
)

// Stats are process-wide counters for benchmarks and tests: how many HTTP requests the
// provider's clients sent (a watch counts once, when opened) and how many shared watches
// (informers) it started.
var Stats struct {
	Requests      atomic.Int64
	WatchesOpened atomic.Int64
}

type countingTransport struct{ next http.RoundTripper }

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	Stats.Requests.Add(1)
	return t.next.RoundTrip(r)
}

func countRequests(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt} }
