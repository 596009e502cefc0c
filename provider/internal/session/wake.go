package session

import (
	"context"
	"net"
	"net/url"
	"sync/atomic"
	"time"
)

// A webhook registered by URL sends no cluster event when it starts serving (a Service-backed
// one has its EndpointSlice turning ready), so a gate would notice it only on its probe backoff.
// While the gate waits, a urlDialer dials the URL's host:port; the first connect that succeeds
// wakes the gate, which then probes at once. A TCP connect costs the API server nothing, and a
// connect is no proof: only the probe's answer is.

const (
	reachMinInterval = 5 * time.Millisecond
	// reachMaxInterval bounds the wait between dials: with the probe and its confirming probe
	// 50 ms later, a webhook that starts listening is proven within about 100 ms.
	reachMaxInterval = 25 * time.Millisecond
	reachDialTimeout = time.Second
	// reachResolveEvery bounds DNS lookups of a URL's host name: its addresses are dialled
	// between lookups.
	reachResolveEvery = time.Second
	// reachMaxAddresses bounds the addresses of a host name dialled in one round.
	reachMaxAddresses = 4
)

// urlDialer dials one address until a connect succeeds or it is stopped.
type urlDialer struct {
	up   atomic.Bool
	stop chan struct{}
}

// Listening says whether a TCP connect to webhook URL u's host:port has succeeded during this
// gate's run, starting a dialer for it on the first call. A URL that cannot be parsed is never
// dialled (false).
func (r *Run) Listening(u string) bool {
	addr := dialAddress(u)
	if addr == "" {
		return false
	}
	if d, ok := r.dialers[addr]; ok {
		return d.up.Load()
	}
	if r.dialers == nil {
		r.dialers = map[string]*urlDialer{}
	}
	d := &urlDialer{stop: make(chan struct{})}
	r.dialers[addr] = d
	go d.dial(addr, r.Wake)
	return false
}

// dialAddress is the host:port a webhook URL's client connects to ("" when u is not an http(s)
// URL with a host).
func dialAddress(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Hostname() == "" {
		return ""
	}
	port := p.Port()
	switch {
	case port != "":
	case p.Scheme == "https":
		port = "443"
	case p.Scheme == "http":
		port = "80"
	default:
		return ""
	}
	return net.JoinHostPort(p.Hostname(), port)
}

// dial connects to addr on a short backoff until a connect succeeds (then marks the dialer up
// and pokes wake once) or stop closes; a host name is looked up at most every
// reachResolveEvery.
func (d *urlDialer) dial(addr string, wake chan<- struct{}) {
	// Every lookup and dial is cancelled when the gate ends, so no dialer outlives its gate.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-d.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	dialer := net.Dialer{Timeout: reachDialTimeout}
	host, port, _ := net.SplitHostPort(addr)
	var ips []string
	var resolved time.Time
	interval := reachMinInterval
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if net.ParseIP(host) != nil {
			ips = []string{host}
		} else if time.Since(resolved) > reachResolveEvery {
			ips, _ = net.DefaultResolver.LookupHost(ctx, host)
			ips = ips[:min(len(ips), reachMaxAddresses)]
			resolved = time.Now()
		}
		for _, ip := range ips {
			if ctx.Err() != nil {
				return
			}
			if c, err := dialer.DialContext(ctx, "tcp", net.JoinHostPort(ip, port)); err == nil {
				_ = c.Close()
				d.up.Store(true)
				select {
				case wake <- struct{}{}:
				default: // a wake-up is already pending
				}
				return
			}
		}
		interval = min(interval*2, reachMaxInterval)
		timer.Reset(interval)
	}
}

// stopReach ends the gate's dialers.
func (r *Run) stopReach() {
	for _, d := range r.dialers {
		close(d.stop)
	}
	r.dialers = nil
}
