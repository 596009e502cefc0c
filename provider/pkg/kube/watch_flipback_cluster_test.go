//go:build cluster

package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/wait"
)

// TestAFlipBackBeforeTheGateLooksDoesNotPass: against the real API server, an object turns ready
// and then not ready again while the gate is busy; when the gate finally evaluates (woken by the
// event that made it ready) it judges what the watch cache holds now, so it keeps waiting.
func TestAFlipBackBeforeTheGateLooksDoesNotPass(t *testing.T) {
	c := clients(t)
	ns := testenv.Namespace(t, "flip")
	cms := testenv.CP.Client.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Data: map[string]string{"state": "pending"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	events := make(chan struct{}, 1)
	sub := c.Watches.Subscribe(WatchKey{Resource: configMaps, Namespace: ns}, events)
	defer sub.Close()
	waitSynced(t, sub, events)

	state := func() string {
		if o := sub.Get("app"); o != nil {
			s, _, _ := unstructured.NestedString(o.Object, "data", "state")
			return s
		}
		return ""
	}
	gateWake := make(chan struct{}, 1) // the gate is busy: its wake-ups are held back here
	done := make(chan error, 1)
	go func() {
		_, err := wait.Until(context.Background(), wait.Spec{What: "ConfigMap " + ns + "/app", Timeout: 3 * time.Second,
			Wake: gateWake, Check: func(context.Context) verdict.Result {
				s := state()
				return verdict.Result{Ready: s == "ready", Message: "state=" + s}
			}})
		done <- err
	}()

	// Ready, then not ready again, both through the API server and the shared watch.
	last, err := cms.Get(context.Background(), "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"ready", "pending"} {
		last.Data["state"] = s
		if last, err = cms.Update(context.Background(), last, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if o := sub.Get("app"); o != nil && o.GetResourceVersion() == last.GetResourceVersion() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watch cache never saw the last write")
		}
		select {
		case <-events:
		case <-time.After(100 * time.Millisecond):
		}
	}
	gateWake <- struct{}{} // the gate looks now, woken by the events that announced "ready"

	err = <-done
	var te *wait.TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("a gate passed on a state that was no longer current (err = %v)", err)
	}
	if !strings.Contains(te.Last, "state=pending") {
		t.Errorf("the timeout should quote the current state, got %q", te.Last)
	}
}
