package provider

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/property"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
)

// Gates waiting on one webhook poll it together (session/webhook_waiters.go), against a real API
// server calling real webhooks: more gates than session.SharedPollers behind one erroring webhook
// are each noted as waiting on it, by the name the API server's "failed calling webhook" gives;
// once it admits, every one of them passes on its own dry run and none is left noted. Near miss:
// a gate behind another webhook that still errors is not passed by the first one's answers, and
// times out naming its own webhook.
func TestAdmissionReadyGatesShareAWebhook(t *testing.T) {
	group, otherGroup := widgetCRD(t), widgetCRD(t)
	wh, other := testenv.NewWebhook(t), testenv.NewWebhook(t)
	hook := wh.RegisterAs(t, "ValidatingWebhookConfiguration", "share-"+strings.Split(group, ".")[0], "Fail", group, "widgets")
	otherHook := other.RegisterAs(t, "ValidatingWebhookConfiguration", "share-"+strings.Split(otherGroup, ".")[0], "Fail", otherGroup, "widgets")
	for _, w := range []*testenv.Webhook{wh, other} {
		w.Mode.Store("error") // listening, answering 500: the API server could not call it
		w.Start(t)
	}
	s := newServer(t)
	gate := func(group, name, timeout string) <-chan gateResult {
		return createAsync(t, s, "AdmissionReady", props("objects", manifests(t, widgetIn(group, "default", name)),
			"retried", property.New(true), "timeout", timeout))
	}
	const n = 2*session.SharedPollers + 1
	var gates []<-chan gateResult
	for i := range n {
		gates = append(gates, gate(group, fmt.Sprint("shared-", i), "60s"))
	}
	lone := gate(otherGroup, "lone", "8s")
	for deadline := time.Now().Add(30 * time.Second); session.Waiting(hook) < n || session.Waiting(otherHook) < 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d gates noted waiting on %s, %d on %s", session.Waiting(hook), n, hook, session.Waiting(otherHook), otherHook)
		}
	}
	if got := session.Waiting(hook); got != n {
		t.Fatalf("%d gates noted waiting on %s, want %d", got, hook, n)
	}

	wh.Mode.Store("allow")
	for i, ch := range gates {
		r := await(t, ch, 30*time.Second)
		if r.err != nil {
			t.Fatalf("gate %d: %v", i, r.err)
		}
		if got := outStrings(t, r.resp.Properties, "deniers"); !slices.Contains(got, hook) {
			t.Errorf("gate %d: deniers %v, want %s (it waited on it)", i, got, hook)
		}
	}
	if got := wh.AnsweredIn("allow"); got < n {
		t.Errorf("%d admitted dry runs after the webhook answered, want one per gate (%d): an answer to one object proves no other", got, n)
	}
	if got := session.Waiting(hook); got != 0 {
		t.Errorf("%d gates still noted waiting on %s after every one passed", got, hook)
	}

	r := await(t, lone, 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "timed out") || !strings.Contains(r.err.Error(), otherHook) {
		t.Fatalf("the gate behind the webhook that still errors: want a timeout naming %s, got %v", otherHook, r.err)
	}
	if got := session.Waiting(otherHook); got != 0 {
		t.Errorf("a gate that timed out is still noted waiting on %s", otherHook)
	}
}

// BenchmarkAdmissionReadySharedWebhook is what gates waiting on one webhook cost the API server
// and how soon they pass: for each number of gates, that many AdmissionReady gates (one Widget
// each, `retried`, as autoGate sets it) wait on one webhook that answers 500 (the API server could
// not call it); reported are the dry runs it was sent per second over 2 s of their waiting (each
// in the hot window of a webhook that just changed, their fastest pace), and the time from its
// first admitting answer's possibility (its mode set to allow) until the last gate passed.
//
//	go test -tags cluster -run '^$' -bench AdmissionReadySharedWebhook -benchtime 3x ./provider
func BenchmarkAdmissionReadySharedWebhook(b *testing.B) {
	for _, n := range []int{session.SharedPollers, 16, 48} {
		b.Run(fmt.Sprint(n, "-gates"), func(b *testing.B) {
			group := uniqueGroup(b)
			testenv.Apply(b, testenv.CRD(group, "Widget", "widgets"))
			waitServed(b, group)
			wh := testenv.NewWebhook(b)
			hook := wh.RegisterAs(b, "ValidatingWebhookConfiguration", "bench-"+strings.Split(group, ".")[0], "Fail", group, "widgets")
			wh.Mode.Store("error")
			wh.Start(b)
			s := newServer(b)
			var passed time.Duration
			var perSecond float64
			for i := range b.N {
				wh.Mode.Store("error")
				var gates []<-chan gateResult
				for j := range n {
					gates = append(gates, createAsync(b, s, "AdmissionReady", props("objects",
						property.New([]property.Value{toProperty(testenv.Object(b, widgetIn(group, "default", fmt.Sprint("b", i, "-", j))).Object)}),
						"retried", property.New(true), "timeout", "60s")))
				}
				for session.Waiting(hook) < n {
					time.Sleep(5 * time.Millisecond)
				}
				c0, t0 := wh.Calls.Load(), time.Now()
				time.Sleep(2 * time.Second)
				perSecond += float64(wh.Calls.Load()-c0) / time.Since(t0).Seconds()
				allowed := time.Now()
				wh.Mode.Store("allow")
				for _, ch := range gates {
					if r := await(b, ch, 60*time.Second); r.err != nil {
						b.Fatal(r.err)
					}
				}
				passed += time.Since(allowed)
			}
			b.ReportMetric(perSecond/float64(b.N), "dryruns/s")
			b.ReportMetric(float64(passed.Milliseconds())/float64(b.N), "ms-to-all-passed")
			b.ReportMetric(0, "ns/op")
		})
	}
}
