package kube

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// Settings is what the provider configuration says about the cluster.
type Settings struct {
	// Kubeconfig holds a kubeconfig's contents or a path to one; empty means KUBECONFIG,
	// ~/.kube/config, then in-cluster configuration.
	Kubeconfig string
	Context    string
	Namespace  string
	// ReachTimeout bounds how long the first request retries a cluster that does not answer
	// (the rebuild case: the cluster comes up while the stack runs).
	ReachTimeout time.Duration
}

// DefaultReachTimeout is how long a cluster may take to answer before gates fail with
// "cannot reach the Kubernetes API".
const DefaultReachTimeout = 30 * time.Second

// LoadConfig resolves Settings into a REST config and the default namespace. It reads files
// but never calls the cluster, so a bad kubeconfig fails here and at once. Its errors never
// hold any part of the kubeconfig value (a secret: Pulumi masks it only where it appears whole).
func LoadConfig(s Settings) (*rest.Config, string, error) {
	// Library errors may quote the document; our own words stay as they are.
	clean := func(err error) string { return scrub(err.Error(), s.Kubeconfig, s.Context) }
	var cc clientcmd.ClientConfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: s.Context}
	switch kc := strings.TrimSpace(s.Kubeconfig); {
	case kc == "":
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		cc = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	case looksLikeKubeconfig(kc):
		raw, err := clientcmd.Load([]byte(kc))
		if err != nil {
			return nil, "", fmt.Errorf("kubeconfig: the value is not a valid kubeconfig document: %s", clean(err))
		}
		cc = clientcmd.NewNonInteractiveClientConfig(*raw, s.Context, overrides, nil)
	case looksLikeBase64Kubeconfig(kc):
		return nil, "", errors.New("kubeconfig: the value looks like a base64-encoded kubeconfig; pass the decoded " +
			"contents (or the path of a kubeconfig file)")
	default:
		// The path is not quoted: it is the secret value itself, and Pulumi would show it as [secret] anyway.
		path := expandHome(kc)
		raw, err := clientcmd.LoadFromFile(path)
		if err != nil {
			var pe *fs.PathError
			switch {
			case errors.Is(err, os.ErrNotExist):
				return nil, "", errors.New("kubeconfig: the value is neither kubeconfig contents nor the path of an existing file")
			case errors.As(err, &pe):
				return nil, "", fmt.Errorf("kubeconfig: the value is neither kubeconfig contents nor the path of a readable file (%s)", clean(pe.Err))
			}
			return nil, "", fmt.Errorf("kubeconfig: the file it names is not a valid kubeconfig: %s", clean(err))
		}
		cc = clientcmd.NewNonInteractiveClientConfig(*raw, s.Context, overrides, &clientcmd.ClientConfigLoadingRules{ExplicitPath: path})
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, "", errors.New("kubeconfig: no configuration found: set the provider's kubeconfig, KUBECONFIG or ~/.kube/config, or run in a cluster")
		}
		return nil, "", fmt.Errorf("kubeconfig: %s", clean(err))
	}
	ns := s.Namespace
	if ns == "" {
		if n, _, err := cc.Namespace(); err == nil && n != "" {
			ns = n
		} else {
			ns = "default"
		}
	}
	// Gates share one client; hundreds of them start at once in a large stack, and each makes
	// a few requests at its start (a watch's list, a consistent read). The client-side limiter
	// only delays them (100/s made every gate of a busy run wait ~10 ms per request); the API
	// server's own priority and fairness protects it.
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.UserAgent = "pulumi-resource-readiness"
	cfg.Wrap(countRequests)
	return cfg, ns, nil
}

func looksLikeKubeconfig(s string) bool {
	return strings.Contains(s, "\n") || strings.HasPrefix(s, "{") || strings.HasPrefix(s, "apiVersion:")
}

func expandHome(p string) string {
	if strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[2:])
		}
	}
	return p
}

func looksLikeBase64Kubeconfig(s string) bool {
	b, err := base64.StdEncoding.DecodeString(s)
	return err == nil && looksLikeKubeconfig(string(b))
}

// minSecretFragment is the shortest piece of a secret value that scrub removes from messages.
const minSecretFragment = 6

// scrub removes from msg every word (a run between spaces, quotes and separators) of at least
// minSecretFragment characters that appears inside secret, and cuts long messages: parse errors
// quote the document they failed on, and a cut-off quote is no longer masked by Pulumi.
// Words equal to keep (the context name, given in the clear) stay.
func scrub(msg, secret, keep string) string {
	if strings.TrimSpace(secret) != "" {
		isSep := func(r rune) bool { return strings.ContainsRune(" \t\n\"'`:,;()[]{}=./+", r) }
		var b strings.Builder
		word := func(w string) {
			if len(w) >= minSecretFragment && w != keep && strings.Contains(secret, w) {
				b.WriteString("[redacted]")
				return
			}
			b.WriteString(w)
		}
		start := 0
		for i, r := range msg {
			if isSep(r) {
				word(msg[start:i])
				b.WriteRune(r)
				start = i + len(string(r))
			}
		}
		word(msg[start:])
		msg = b.String()
	}
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	return msg
}

// Clients are the Kubernetes clients shared by every gate of the provider process.
type Clients struct {
	Config    *rest.Config
	Namespace string
	Dynamic   dynamic.Interface
	Typed     kubernetes.Interface
	Discovery discovery.CachedDiscoveryInterface
	Mapper    *restmapper.DeferredDiscoveryRESTMapper
	Watches   *WatchCache

	reachTimeout time.Duration
	reachable    chan struct{} // closed once the API server answered
	reachOnce    sync.Once
	release      func() // a Fresh set's: closes its connections

	// refusalReset rate-limits the discovery resets after a 401/403 (see resetAfterRefusal).
	refusalMu    sync.Mutex
	refusalReset time.Time
	now          func() time.Time // nil: time.Now (tests set a clock)
}

// NewClients builds the clients for cfg. It does not call the cluster.
func NewClients(cfg *rest.Config, namespace string, reachTimeout time.Duration) (*Clients, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return newClients(cfg, hc, namespace, reachTimeout)
}

func newClients(cfg *rest.Config, hc *http.Client, namespace string, reachTimeout time.Duration) (*Clients, error) {
	dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	typed, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	disco := memory.NewMemCacheClient(typed.Discovery())
	if reachTimeout <= 0 {
		reachTimeout = DefaultReachTimeout
	}
	return &Clients{
		Config:       cfg,
		Namespace:    namespace,
		Dynamic:      dyn,
		Typed:        typed,
		Discovery:    disco,
		Mapper:       restmapper.NewDeferredDiscoveryRESTMapper(disco),
		Watches:      NewWatchCache(dyn),
		reachTimeout: reachTimeout,
		reachable:    make(chan struct{}),
	}, nil
}

// UnreachableError says the API server did not answer within the retry window.
type UnreachableError struct {
	Host   string
	Window time.Duration
	Last   error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the Kubernetes API at %s (retried for %s): %v; check that the cluster is up and that the provider's kubeconfig/context point at it",
		e.Host, e.Window, e.Last)
}

func (e *UnreachableError) Unwrap() error { return e.Last }

// EnsureReachable returns once the API server answers /version, retrying with backoff for the
// configured window (or until ctx ends, when that comes first): a stack that creates the cluster
// and its gates in one run is fine, a kubeconfig pointing at nothing fails in seconds rather
// than at the gate's timeout. retrying, when set, hears of every failed attempt.
func (c *Clients) EnsureReachable(ctx context.Context, retrying func(waited time.Duration)) error {
	select {
	case <-c.reachable:
		return nil
	default:
	}
	ctx, cancel := context.WithTimeout(ctx, c.reachTimeout)
	defer cancel()
	backoff := 100 * time.Millisecond
	start := time.Now()
	last, err := c.awaitAnswer(ctx, 5*time.Second, func() time.Duration {
		if retrying != nil {
			retrying(time.Since(start))
		}
		backoff = min(backoff*2, 3*time.Second)
		return backoff
	}, func() (rest.Interface, func(), error) { return c.Typed.Discovery().RESTClient(), func() {}, nil })
	if err == nil {
		c.reachOnce.Do(func() { close(c.reachable) })
		return nil
	}
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	return &UnreachableError{Host: c.Config.Host, Window: time.Since(start).Round(time.Second), Last: last}
}

// AwaitServing waits, at most timeout, until the API server answers again after it could not be
// reached, asking /version every 50 ms, each time on a connection of its own (see Fresh): a
// request sent while it was down or starting can wait on its connection long after the API server
// serves again (measured: a dry run hung 6 s). Not /readyz: it turns ready after every post-start
// hook, measured 1.5 s after the API server admitted a custom resource again.
func (c *Clients) AwaitServing(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last, err := c.awaitAnswer(ctx, 500*time.Millisecond, func() time.Duration { return 50 * time.Millisecond },
		func() (rest.Interface, func(), error) {
			cfg, hc, err := ownClient(c.Config)
			if err != nil {
				return nil, nil, err
			}
			d, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
			if err != nil {
				return nil, nil, err
			}
			return d.RESTClient(), hc.CloseIdleConnections, nil
		})
	switch {
	case err == nil:
		return nil
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("the API server at %s did not answer again within %s: %v", c.Config.Host, timeout, last)
	}
	return fmt.Errorf("cancelled while waiting for the API server at %s to answer again: %v", c.Config.Host, last)
}

// awaitAnswer asks /version with the client each try makes until the API server answers (any
// HTTP answer but 503 means something is serving; auth errors surface later, with context) or
// ctx ends, each request bounded by per, waiting next() between tries. Nothing can be watched
// before the API server answers: it polls, and stops at once when ctx ends. last is the newest
// failure.
func (c *Clients) awaitAnswer(ctx context.Context, per time.Duration, next func() time.Duration,
	client func() (rest.Interface, func(), error)) (last, err error) {
	for {
		rc, done, cerr := client()
		if cerr != nil {
			return cerr, cerr
		}
		reqCtx, cancelReq := context.WithTimeout(ctx, per)
		res := rc.Get().AbsPath("/version").Do(reqCtx)
		cancelReq()
		done()
		var code int
		res.StatusCode(&code)
		if last = res.Error(); last == nil || (code != 0 && code != http.StatusServiceUnavailable) {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(next()):
		}
	}
}

// ownClient is a copy of cfg and an HTTP client for it on a transport of its own, which does not
// sleep on a 503's Retry-After (NoRetryAfter). client-go's transport cache keeps one transport per
// TLS configuration (one HTTP/2 connection for every client of a cluster) and never caches one
// with a Proxy function, so the copy is given the one client-go would use.
func ownClient(cfg *rest.Config) (*rest.Config, *http.Client, error) {
	cp := rest.CopyConfig(cfg)
	if cp.Proxy == nil {
		cp.Proxy = http.ProxyFromEnvironment
	}
	cp.Wrap(NoRetryAfter)
	hc, err := rest.HTTPClientFor(cp)
	return cp, hc, err
}

// NoRetryAfter drops Retry-After from 503 answers. client-go sleeps that long (1 s from a
// starting API server) and sends the request again, up to 10 times, so a request sent while the
// API server starts returns seconds after it serves; a caller on its own schedule (a proof's
// rounds, every 40 ms while hot) asks again sooner. 429, the API server's flow control, keeps it.
func NoRetryAfter(rt http.RoundTripper) http.RoundTripper { return noRetryAfter{rt} }

type noRetryAfter struct{ next http.RoundTripper }

func (n noRetryAfter) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := n.next.RoundTrip(req)
	if err == nil && res.StatusCode == http.StatusServiceUnavailable {
		res.Header.Del("Retry-After")
	}
	return res, err
}

// Fresh is a second set of clients for c's cluster on connections of their own, with their own
// discovery and watches, for a proof that must not wait behind a request sent while the API
// server was down or starting (see AwaitServing). Close it when done.
func (c *Clients) Fresh() (*Clients, error) {
	cfg, hc, err := ownClient(c.Config)
	if err != nil {
		return nil, err
	}
	f, err := newClients(cfg, hc, c.Namespace, c.reachTimeout)
	if err != nil {
		return nil, err
	}
	f.release = hc.CloseIdleConnections
	return f, nil
}

// Close ends a Fresh set's connections; the shared clients have nothing to close.
func (c *Clients) Close() {
	if c.release != nil {
		c.release()
	}
}
