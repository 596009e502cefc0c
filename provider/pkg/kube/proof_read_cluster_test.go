//go:build cluster

package kube

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// TestConsistentReadsAreSharedAndDropped, against the API server: a hundred subscriptions
// joining one watch at once are served the current state by a handful of consistent reads,
// not one each, and drop their copies once the informer has caught up.
func TestConsistentReadsAreSharedAndDropped(t *testing.T) {
	ns := testenv.Namespace(t, "share")
	cms := testenv.CP.Client.CoreV1().ConfigMaps(ns)
	const n = 100
	for i := 0; i < n; i++ {
		if _, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("c", i)},
			Data: map[string]string{"v": "0"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := clients(t)
	key := WatchKey{Resource: configMaps, Namespace: ns}
	wake := make(chan struct{}, 1)
	holder := c.Watches.Subscribe(key, wake)
	defer holder.Close()
	waitSynced(t, holder, wake)
	// Written after the watch synced, before the gates start: each must see its own write.
	for i := 0; i < n; i++ {
		cm, err := cms.Get(context.Background(), fmt.Sprint("c", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["v"] = "1"
		if _, err := cms.Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	g := &holder.entry.reads
	started0 := g.now()
	subs := make([]*Subscription, n)
	for i := range subs {
		subs[i] = c.Watches.Subscribe(key, make(chan struct{}, 1))
		defer subs[i].Close()
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := s.Read(context.Background(), fmt.Sprint("c", i))
			if err != nil {
				errs <- err
			} else if o == nil || o.Object["data"].(map[string]any)["v"] != "1" {
				errs <- fmt.Errorf("c%d: judged a state older than the write made before the read", i)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if reads := g.now() - started0; reads > 10 {
		t.Errorf("%d consistent reads for %d subscriptions joining at once: they are not shared", reads, n)
	}
	// Once the informer holds every write, each subscription drops the read it was served.
	for deadline := time.Now().Add(30 * time.Second); ; {
		o := holder.Get(fmt.Sprint("c", n-1))
		if o != nil && o.Object["data"].(map[string]any)["v"] == "1" && holder.Get("c0").Object["data"].(map[string]any)["v"] == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the informer never caught up")
		}
		<-wake
	}
	for i, s := range subs {
		if _, err := s.Read(context.Background(), fmt.Sprint("c", i)); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		kept := len(s.reads) > 0
		s.mu.Unlock()
		if kept {
			t.Errorf("c%d: the read's copies are kept after the informer caught up", i)
		}
	}
}
