package kube

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// apiServer is a stand-in API server's /version: answer decides each call's answer (by its
// number, from 1); conns counts the connections made to it.
func apiServer(t *testing.T, answer func(call int32, w http.ResponseWriter, r *http.Request)) (*Clients, *atomic.Int32) {
	t.Helper()
	var calls, conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer(calls.Add(1), w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := NewClients(&rest.Config{Host: srv.URL}, "default", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c, &conns
}

func version(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"major":"1","minor":"34","gitVersion":"v1.34.2"}`))
}

// After the API server was unreachable, a request left hanging (sent while it started) must not
// hold the wait: each try is bounded and asks on a connection of its own; a 503 (starting) is
// not an answer.
func TestAwaitServingAsksEachTryOnAConnectionOfItsOwn(t *testing.T) {
	c, conns := apiServer(t, func(call int32, w http.ResponseWriter, r *http.Request) {
		switch call {
		case 1:
			<-r.Context().Done() // hangs until the client gives up
		case 2:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			version(w)
		}
	})
	if err := c.AwaitServing(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("three tries made %d connections, want one each", n)
	}
}

// Near miss: an API server that only ever says 503 never answered; the error names it and the wait.
func TestAwaitServingNeverTakesA503ForAnAnswer(t *testing.T) {
	c, _ := apiServer(t, func(_ int32, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	err := c.AwaitServing(context.Background(), 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not answer again within 300ms") || !strings.Contains(err.Error(), c.Config.Host) {
		t.Fatalf("want the wait's end naming the API server, got %v", err)
	}
}

// Any HTTP answer but 503 is an answer (a refusal surfaces later, with context), and a
// cancelled step ends the wait at once.
func TestAwaitServingAnswers(t *testing.T) {
	c, _ := apiServer(t, func(_ int32, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) })
	if err := c.AwaitServing(context.Background(), time.Second); err != nil {
		t.Fatalf("a 403 is an answer: %v", err)
	}
	down, _ := apiServer(t, func(_ int32, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if err := down.AwaitServing(ctx, time.Minute); err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("want cancelled, got %v", err)
	}
}

// Fresh clients do not share the shared clients' connection, and Close ends theirs.
func TestFreshClientsHaveConnectionsOfTheirOwn(t *testing.T) {
	c, conns := apiServer(t, func(_ int32, w http.ResponseWriter, _ *http.Request) { version(w) })
	ctx := context.Background()
	for range 2 {
		if _, err := c.Typed.Discovery().ServerVersion(); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("the shared clients made %d connections, want 1", n)
	}
	f, err := c.Fresh()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.EnsureReachable(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("after a fresh set's first request: %d connections, want 2", n)
	}
	if f.Watches == c.Watches || f.Mapper == c.Mapper {
		t.Error("a fresh set shares the shared clients' watches or mapping")
	}
}

// A fresh set does not sleep on a starting API server's Retry-After (client-go would wait 1 s and
// ask again, up to 10 times): a 503 is returned at once, for the caller's own schedule. Near
// miss: the shared clients keep client-go's behaviour.
func TestFreshClientsDoNotSleepOnA503sRetryAfter(t *testing.T) {
	var calls atomic.Int32
	c, _ := apiServer(t, func(call int32, w http.ResponseWriter, _ *http.Request) {
		calls.Store(call)
		if call <= 2 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		version(w)
	})
	f, err := c.Fresh()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Typed.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(context.Background()); err == nil {
		t.Fatal("a fresh set retried the 503 itself")
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("a fresh set's one request reached the API server %d times: it slept on Retry-After and asked again", n)
	}
	// The shared clients: client-go sleeps and asks again, and gets the third call's answer.
	if _, err := c.Typed.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(context.Background()); err != nil {
		t.Fatalf("the shared clients did not retry after Retry-After: %v", err)
	}
}
