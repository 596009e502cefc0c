package session

import (
	"testing"
	"time"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// A URL webhook sends no cluster event when it starts listening: a connect to its address wakes
// the gate instead, once, and costs the API server nothing.
func TestURLDialerWakesOnceWhenSomethingListens(t *testing.T) {
	wh := testenv.NewWebhook(t)
	r := &Run{Wake: make(chan struct{}, 1)}
	defer r.Close()
	if r.Listening(wh.URL()) {
		t.Fatal("listening before anything listens")
	}
	select {
	case <-r.Wake:
		t.Fatal("woke while nothing listens")
	case <-time.After(200 * time.Millisecond):
	}
	wh.Start(t)
	select {
	case <-r.Wake:
	case <-time.After(30 * time.Second):
		t.Fatal("no wake-up after the webhook started listening")
	}
	if !r.Listening(wh.URL()) {
		t.Error("not listening after the wake-up")
	}
	for u, want := range map[string]string{"https://127.0.0.1:9443/validate": "127.0.0.1:9443", "https://hook.example.test/x": "hook.example.test:443",
		"https://[::1]:8443/": "[::1]:8443", "http://h": "h:80", "not a url": "", "ftp://h/": ""} {
		if got := dialAddress(u); got != want {
			t.Errorf("dialAddress(%q) = %q, want %q", u, got, want)
		}
	}
}
