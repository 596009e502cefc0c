package fakes

import (
	"context"
	"encoding/base64"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Players of what no process runs on the local control plane, beside the stacks that use
// pulumi-kubernetes: a chart's webhook pod that serves late, cert-manager issuing a
// Certificate, and the kubelet mounting a pod's Secret volumes. The harness polls (it plays
// processes that would watch or loop themselves); the gates under test never do.

const harnessTick = 100 * time.Millisecond

// Player is a running player; Stop ends it and returns its error, if any.
type Player struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func play(f func(ctx context.Context) error) *Player {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Player{cancel: cancel, done: make(chan struct{})}
	go func() { defer close(p.done); p.err = f(ctx) }()
	return p
}

// Stop ends the player and returns its error.
func (p *Player) Stop() error { p.cancel(); <-p.done; return p.err }

// Wait waits for the player to finish by itself (or ctx) and returns its error.
func (p *Player) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return p.Stop()
	}
}

// ServeWhenAvailable plays a chart's webhook pod: the webhook starts serving `after` the
// Deployment ns/name first has an available replica (pod Ready is not webhook serving: field
// report 002 measured 7-10 s between them). onStart, if set, is told when it started.
func ServeWhenAvailable(client kubernetes.Interface, wh *Webhook, ns, name string, after time.Duration, onStart func()) *Player {
	return play(func(ctx context.Context) error {
		for {
			d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil && d.Status.AvailableReplicas > 0 && d.DeletionTimestamp == nil {
				break
			}
			if !sleep(ctx, harnessTick) {
				return nil
			}
		}
		if !sleep(ctx, after) {
			return nil
		}
		if err := wh.Start(); err != nil {
			return err
		}
		if onStart != nil {
			onStart()
		}
		return nil
	})
}

// IssueWhenCreated plays cert-manager: `after` the Certificate ns/name appears, it writes its TLS
// Secret, a certificate for the names its spec asks for, and marks it Ready for its generation
// (field report 000: the Secret came at T+12s).
func IssueWhenCreated(dyn dynamic.Interface, ns, name, secret string, after time.Duration, onIssued func()) *Player {
	certs := dyn.Resource(schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}).Namespace(ns)
	return play(func(ctx context.Context) error {
		var cur *unstructured.Unstructured
		for {
			var err error
			if cur, err = certs.Get(ctx, name, metav1.GetOptions{}); err == nil {
				break
			}
			if !sleep(ctx, harnessTick) {
				return nil
			}
		}
		if !sleep(ctx, after) {
			return nil
		}
		// What cert-manager issues: a certificate for exactly the spec's names (CertificateReady
		// checks them), in a Secret annotated with the Certificate and its issuer.
		str := func(f ...string) string { v, _, _ := unstructured.NestedString(cur.Object, f...); return v }
		strs := func(f string) []string { v, _, _ := unstructured.NestedStringSlice(cur.Object, "spec", f); return v }
		c, err := Issue(Names{CommonName: str("spec", "commonName"), DNSNames: strs("dnsNames"), IPAddresses: strs("ipAddresses"),
			URIs: strs("uris"), EmailAddresses: strs("emailAddresses")}, 90*24*time.Hour)
		if err != nil {
			return err
		}
		sec := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
			"metadata": map[string]any{"name": secret, "namespace": ns, "annotations": map[string]any{
				"cert-manager.io/certificate-name": name, "cert-manager.io/issuer-name": str("spec", "issuerRef", "name"),
				"cert-manager.io/issuer-kind": str("spec", "issuerRef", "kind"), "cert-manager.io/issuer-group": str("spec", "issuerRef", "group")}},
			"data": map[string]any{"tls.crt": base64.StdEncoding.EncodeToString(c.CertPEM),
				"tls.key": base64.StdEncoding.EncodeToString(c.KeyPEM), "ca.crt": base64.StdEncoding.EncodeToString(c.CAPEM)}}}
		if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace(ns).
			Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			return err
		}
		cur.Object["status"] = map[string]any{"revision": int64(1), "notAfter": c.NotAfter.UTC().Format(time.RFC3339),
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready",
				"message": "Certificate is up to date and has not expired", "observedGeneration": cur.GetGeneration(),
				"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}
		if _, err := certs.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return err
		}
		if onIssued != nil {
			onIssued()
		}
		return nil
	})
}

// KubeletMountAnnotation goes on the pod template of a workload whose Secret volumes the
// Kubelet player mounts: kwok's readiness delay keeps kwok from making its pods ready itself.
const KubeletMountAnnotation = "pod-ready.stage.kwok.x-k8s.io/delay"

// Kubelet plays the kubelet's Secret volume mounts (kwok mounts nothing) for the pods of ns
// matching selector: a pod whose Secret is missing gets the kubelet's Warning event FailedMount
// (`MountVolume.SetUp failed for volume "tls" : secret "..." not found`) and is retried with
// the kubelet's exponential backoff (0.5 s doubling, capped at 2m2s); once the Secret exists
// the next retry mounts it and the pod becomes Running and Ready.
type Kubelet struct {
	*Player
	mu     sync.Mutex
	failed []string
	onFail func(pod, msg string)
}

// PlayKubelet starts a Kubelet; onFail, if set, is told of each FailedMount.
func PlayKubelet(client kubernetes.Interface, ns, selector string, onFail func(pod, msg string)) *Kubelet {
	k := &Kubelet{onFail: onFail}
	type retry struct {
		at      time.Time
		backoff time.Duration
	}
	retries := map[string]*retry{}
	k.Player = play(func(ctx context.Context) error {
		for sleep(ctx, harnessTick) {
			pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				continue
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodRunning || p.DeletionTimestamp != nil {
					continue
				}
				r := retries[p.Name]
				if r != nil && time.Now().Before(r.at) {
					continue
				}
				if msg := missingSecret(ctx, client, p); msg != "" {
					if r == nil {
						r = &retry{backoff: 500 * time.Millisecond}
						retries[p.Name] = r
					} else if r.backoff < 2*time.Minute {
						r.backoff *= 2
					}
					r.at = time.Now().Add(r.backoff)
					k.failedMount(ctx, client, p, msg)
					continue
				}
				markReady(ctx, client, p)
			}
		}
		return nil
	})
	return k
}

// FailedMounts are the FailedMount messages so far, in order.
func (k *Kubelet) FailedMounts() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.failed...)
}

func missingSecret(ctx context.Context, client kubernetes.Interface, p *corev1.Pod) string {
	for _, v := range p.Spec.Volumes {
		if v.Secret == nil {
			continue
		}
		if _, err := client.CoreV1().Secrets(p.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return fmt.Sprintf("MountVolume.SetUp failed for volume %q : secret %q not found", v.Name, v.Secret.SecretName)
		}
	}
	return ""
}

func (k *Kubelet) failedMount(ctx context.Context, client kubernetes.Interface, p *corev1.Pod, msg string) {
	k.mu.Lock()
	k.failed = append(k.failed, msg)
	k.mu.Unlock()
	if k.onFail != nil {
		k.onFail(p.Name, msg)
	}
	now := metav1.Now()
	_, _ = client.CoreV1().Events(p.Namespace).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: p.Name + ".", Namespace: p.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID, APIVersion: "v1"},
		Reason:         "FailedMount", Message: msg, Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "kubelet", Host: p.Spec.NodeName},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}, metav1.CreateOptions{})
}

func markReady(ctx context.Context, client kubernetes.Interface, p *corev1.Pod) {
	now := metav1.Now()
	started := true
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &now
	p.Status.HostIP, p.Status.PodIP = "10.244.0.1", "10.244.0.200"
	p.Status.Conditions = nil
	for _, c := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			Ready: true, Started: &started, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
	}
	_, _ = client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
