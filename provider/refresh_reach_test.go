package provider

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// TestRefreshKeepsAReadyProbedWebhookGate: refresh runs the gate's whole proof (two good probes)
// before judging it. Judging on the first probe ("confirming") dropped a ready gate from the state.
func TestRefreshKeepsAReadyProbedWebhookGate(t *testing.T) {
	group := widgetCRD(t)
	wh := testenv.NewWebhook(t)
	cfg := "refresh-" + strings.Split(group, ".")[0]
	wh.Register(t, cfg, group)
	wh.Start(t)
	s := newServer(t)
	inputs := props("validatingWebhookConfiguration", cfg, "probe", probeOf(group), "timeout", "60s")
	created := await(t, createAsync(t, s, "WebhookReady", inputs), 30*time.Second)
	if created.err != nil {
		t.Fatal(created.err)
	}
	read, err := s.Read(p.ReadRequest{ID: created.resp.ID, Urn: urn("WebhookReady"), Properties: created.resp.Properties,
		Inputs: property.NewMap(inputs)})
	if err != nil {
		t.Fatal(err)
	}
	if read.ID != created.resp.ID {
		t.Fatalf("refresh dropped a ready gate (id %q, state %v)", read.ID, read.Properties)
	}
	// Near miss: the webhook stops answering; refresh now drops the gate so the next up waits.
	wh.Mode.Store("error")
	read, err = s.Read(p.ReadRequest{ID: created.resp.ID, Urn: urn("WebhookReady"), Properties: created.resp.Properties,
		Inputs: property.NewMap(inputs)})
	if err != nil {
		t.Fatal(err)
	}
	if read.ID != "" {
		t.Errorf("refresh kept a gate whose webhook answers 500: %v", read.Properties)
	}
}

// statusLines captures what the provider logs (status lines included) while the test runs.
func statusLines(t *testing.T) func() []string {
	h := &lineHandler{}
	old := slog.Default()
	slog.SetDefault(slog.New(h))
	t.Cleanup(func() { slog.SetDefault(old) })
	return h.all
}

type lineHandler struct {
	mu    sync.Mutex
	lines []string
}

func (h *lineHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines = append(h.lines, r.Message)
	return nil
}
func (h *lineHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *lineHandler) WithGroup(string) slog.Handler      { return h }
func (h *lineHandler) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.lines...)
}

// TestGateTimeoutWinsOverTheReachWindow: `timeout: 2s` against a dead API server fails as a
// 2 s timeout that says the API was unreachable, not after the 30 s reach window, and the status
// line said so meanwhile.
func TestGateTimeoutWinsOverTheReachWindow(t *testing.T) {
	lines := statusLines(t)
	s := newServerWithConfig(t, map[string]property.Value{"kubeconfig": property.New(unreachableKubeconfig(t))})
	r := await(t, createAsync(t, s, "CrdReady", map[string]property.Value{"names": strs("a.b.test"), "timeout": property.New("2s")}), 60*time.Second)
	if r.err == nil {
		t.Fatal("gate passed against a cluster that does not exist")
	}
	for _, want := range []string{"timed out after 2", "waiting for CRD a.b.test", "last seen: cannot reach the Kubernetes API at https://127.0.0.1:"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, r.err)
		}
	}
	seen := false
	for _, l := range lines() {
		if strings.Contains(l, "cannot reach the Kubernetes API at https://127.0.0.1:") && strings.Contains(l, "(retrying, ") {
			seen = true
		}
	}
	if !seen {
		t.Errorf("no status line said the API is unreachable; lines: %q", lines())
	}
}

// TestCancelWhileUnreachableSaysCancelled: Ctrl-C while the API server does not answer gives the
// documented "cancelled while waiting for ...", not a bare "context canceled".
func TestCancelWhileUnreachableSaysCancelled(t *testing.T) {
	s := newServerWithConfig(t, map[string]property.Value{"kubeconfig": property.New(unreachableKubeconfig(t))})
	ch := createAsync(t, s, "CrdReady", map[string]property.Value{"names": strs("a.b.test"), "timeout": property.New("60s")})
	mustNotReturn(t, ch, time.Second)
	if err := s.Cancel(); err != nil {
		t.Fatal(err)
	}
	r := await(t, ch, 10*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "cancelled while waiting for CRD a.b.test") ||
		!strings.Contains(r.err.Error(), "cannot reach the Kubernetes API") {
		t.Fatalf("want `cancelled while waiting for CRD a.b.test; last seen: cannot reach ...`, got %v", r.err)
	}
}
