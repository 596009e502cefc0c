package realnode

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/reportstack"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
)

// faultTarget is the object whose create the faults land in front of: the first of report
// 001's ExternalSecrets, right after its gates passed (stacktest.AfterGates).
const faultTarget = "ghcr-pull-secret-default"

// fault is one fault of issue 50, applied at faultTarget's point; it returns once the fault is
// in place (recovering, if at all, by the cluster's own doing), and a wait for whatever the test
// itself must restore before the round ends.
type fault struct {
	name, what string
	apply      func(ctx context.Context, t *testing.T) (restored func())
}

var faults = []fault{
	{"none", "no fault (the clean rounds the others are compared with)", nil},
	{"webhook-killed", "External Secrets' webhook container killed with SIGKILL (as the OOM killer does; the kubelet restarts it), not answering before the create",
		func(ctx context.Context, t *testing.T) func() {
			pods, err := testenv.CP.Client.CoreV1().Pods("external-secrets").List(ctx, metav1.ListOptions{LabelSelector: esWebhookPods})
			if err != nil || len(pods.Items) == 0 {
				t.Errorf("no webhook pod to kill: %v", err)
				return nil
			}
			for _, p := range pods.Items {
				for _, c := range p.Status.ContainerStatuses {
					if c.ContainerID != "" {
						if err := testenv.Node.KillContainer(ctx, c.ContainerID); err != nil {
							t.Error(err)
						}
					}
				}
			}
			waitRefused(ctx, t)
			return nil
		}},
	{"runtime-restarted", "containerd and the kubelet restarted (the containers keep running under their shims)",
		func(ctx context.Context, t *testing.T) func() {
			if err := testenv.Node.RestartRuntime(ctx); err != nil {
				t.Errorf("restarting the node's runtime: %v", err)
			}
			return nil
		}},
	{"apiserver-restarted", "kube-apiserver stopped, started again 2 s later (the create meets its closed port)",
		func(ctx context.Context, t *testing.T) func() {
			testenv.CP.StopProcess("kube-apiserver")
			done := make(chan struct{})
			go func() {
				defer close(done)
				time.Sleep(2 * time.Second)
				if err := testenv.CP.StartAPIServer(ctx); err != nil {
					t.Errorf("starting the API server again: %v", err)
				}
			}()
			return func() { <-done }
		}},
	{"cabundle-rotated", "the webhook configuration's caBundle replaced by another CA's (a rotation half done), until External Secrets' cert-controller puts its own back",
		func(ctx context.Context, t *testing.T) func() {
			patch := fmt.Sprintf(`[{"op":"replace","path":"/webhooks/0/clientConfig/caBundle","value":%q}]`, otherCA(t))
			vwcs := testenv.Dynamic(t).Resource(schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"})
			list, err := vwcs.List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Errorf("listing webhook configurations: %v", err)
				return nil
			}
			for _, v := range list.Items {
				if strings.Contains(v.GetName(), "externalsecret") || strings.HasPrefix(v.GetName(), "external-secrets") {
					hooks, _, _ := unstructured.NestedSlice(v.Object, "webhooks")
					for i := range hooks {
						p := strings.Replace(patch, "/webhooks/0/", fmt.Sprintf("/webhooks/%d/", i), 1)
						if _, err := vwcs.Patch(ctx, v.GetName(), types.JSONPatchType, []byte(p), metav1.PatchOptions{}); err != nil {
							t.Errorf("replacing %s's caBundle: %v", v.GetName(), err)
						}
					}
				}
			}
			return nil
		}},
}

const esWebhookPods = "app.kubernetes.io/name=external-secrets-webhook"

// waitRefused waits (up to 10 s) until a dry run of an ExternalSecret is no longer admitted: the
// fault is in place before the create it lands in front of.
func waitRefused(ctx context.Context, t *testing.T) {
	probe := admits(t, externalSecretsGVR, faultProbe)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !probe(ctx) {
			return
		}
	}
	t.Errorf("External Secrets' webhook still admits 10 s after the fault")
}

// admitsAnew is admits on connections that are dropped once they fail: a client's one HTTP/2
// connection, shared by all its requests, can be left waiting on an API server that stopped or
// is starting (seen here: the recovery observer's tries hung past the end of the up), and the
// observer must see the first request the API server admits, not the end of the shared one's
// wait. A connection that got an answer from the API server (admitted or not) is used again: a
// new one for every try made hundreds a second, through the node's forwarder.
func admitsAnew(t *testing.T, gvr schema.GroupVersionResource, doc string) func(context.Context) error {
	u, err := controlplane.Decode(doc)
	if err != nil {
		t.Fatal(err)
	}
	type conn struct {
		dyn dynamic.Interface
		hc  *http.Client
	}
	idle := make(chan conn, 8)
	t.Cleanup(func() {
		for {
			select {
			case c := <-idle:
				c.hc.CloseIdleConnections()
			default:
				return
			}
		}
	})
	return func(ctx context.Context) error {
		var c conn
		select {
		case c = <-idle:
		default:
			cfg := rest.CopyConfig(testenv.CP.Config)
			cfg.Proxy = http.ProxyFromEnvironment // a function: client-go then makes a transport of its own (no cache)
			// A starting API server's 503 says Retry-After: 1, and client-go would sleep on it
			// and ask again up to 10 times, past the moment it admits; the observer asks anew.
			cfg.Wrap(kube.NoRetryAfter)
			hc, err := rest.HTTPClientFor(cfg)
			if err != nil {
				return err
			}
			dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
			if err != nil {
				return err
			}
			c = conn{dyn, hc}
		}
		err := dryRunCreate(ctx, c.dyn, gvr, u)
		var status apierrors.APIStatus
		if err == nil || errors.As(err, &status) {
			select {
			case idle <- c: // the API server answered on it
				return err
			default:
			}
		}
		c.hc.CloseIdleConnections()
		return err
	}
}

// faultProbe is an ExternalSecret no program creates, for the observer's dry runs.
var faultProbe = strings.Replace(reportstack.ExternalSecret001("default"), "name: ghcr-pull-secret,", "name: fault-probe,", 1)

// TestFaultsRealFieldReports (READINESS_FAULTS=N rounds per fault; `make bench-faults` writes
// its table into BENCHMARKS.md): field reports 000-002 as one autoGate program on a real node,
// each round from nothing, with one fault landing right after the gates of the first
// ExternalSecret passed and before its create (issue 50): its webhook's container killed,
// containerd and the kubelet restarted, the API server restarted, the webhook's caBundle replaced
// (its cert-controller puts its own back). A round
// passes when `up` succeeds; it reports the retries the error hook made, what each fault cost over
// the clean rounds, and how long the cluster itself took to admit an ExternalSecret again.
func TestFaultsRealFieldReports(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("READINESS_FAULTS"))
	if rounds <= 0 {
		t.Skip("READINESS_FAULTS=N runs N rounds per fault (make bench-faults)")
	}
	ctx := context.Background()
	// The provider's trace: a round whose target was created more than 300 ms after the cluster
	// recovered logs what the proof of its retry did meanwhile.
	c, env, tracePath := prepareReports(ctx, t)
	kinds := faults
	if only := os.Getenv("READINESS_FAULTS_KINDS"); only != "" {
		kinds = nil
		for _, f := range faults {
			if f.name == "none" || strings.Contains(","+only+",", ","+f.name+",") {
				kinds = append(kinds, f)
			}
		}
	}
	// READINESS_FAULTS_CLEAN=M: the clean rounds (the others' baseline) only in the first M rounds.
	clean := rounds
	if m, err := strconv.Atoi(os.Getenv("READINESS_FAULTS_CLEAN")); err == nil && m > 0 {
		clean = min(m, rounds)
	}
	loadStart := loadAverage()
	results := map[string][]faultRound{}
	for round := 1; round <= rounds; round++ {
		for _, f := range kinds {
			if f.apply == nil && round > clean {
				continue
			}
			_ = os.Remove(tracePath)
			r := runFault(ctx, t, env, f, c, tracePath)
			t.Logf("round %d, %s: %s", round, f.name, r)
			results[f.name] = append(results[f.name], r)
			if out := os.Getenv("READINESS_FAULTS_OUT"); out != "" {
				// After every round: a run stopped early still leaves its table.
				_ = os.WriteFile(out, []byte(faultsTable(kinds, results, loadStart)), 0o644)
			}
		}
	}
	table := faultsTable(kinds, results, loadStart)
	t.Log("\n" + table)
	if out := os.Getenv("READINESS_FAULTS_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range kinds {
		for i, r := range results[f.name] {
			if r.err != nil {
				t.Errorf("%s, round %d failed: %v", f.name, i+1, r.err)
			}
			if r.denialsRetried > 0 {
				t.Errorf("%s, round %d retried a denial", f.name, i+1)
			}
		}
	}
}

// faultRound is one round: its up, its error, the retries the engine made on the error hook's
// say, denials retried, and how long after the fault an ExternalSecret was admitted again.
type faultRound struct {
	up, recovered  time.Duration
	applied        time.Duration // the test's own time applying the fault, left out of up
	after          time.Duration // the target's create done, after the cluster admitted again
	retries        int
	denialsRetried int
	err            error
}

func (r faultRound) String() string {
	if r.err != nil {
		return fmt.Sprintf("FAILED after %s: %s", r.up.Round(time.Millisecond), firstLine(r.err.Error(), "error"))
	}
	return fmt.Sprintf("up %s (fault applied in %s, left out), %d retries, admitted again %s after the fault, %s created %s after that",
		r.up.Round(time.Millisecond), r.applied.Round(time.Millisecond), r.retries, r.recovered.Round(time.Millisecond), faultTarget, r.after.Round(time.Millisecond))
}

func runFault(ctx context.Context, t *testing.T, env *stack.Env, f fault, c reportCharts, tracePath string) faultRound {
	var faultAt time.Time
	var applied time.Duration
	var restored func()
	inPlace := make(chan struct{}) // closed once the fault is applied (faultAt, applied set)
	probe := admitsAnew(t, externalSecretsGVR, faultProbe)
	then := func(ctx *pulumi.Context) error {
		return ctx.RegisterResourceTransform(stacktest.AfterGates(t, ctx, faultTarget, func() {
			faultAt = time.Now()
			if f.apply != nil {
				restored = f.apply(context.Background(), t)
			}
			applied = time.Since(faultAt)
			close(inPlace)
		}))
	}
	s := stacktest.NewStack(t, env, "faults", reportsProgram("autogate", "all", c, then))
	var out strings.Builder
	began := time.Now()
	// When the cluster admits an ExternalSecret again once the fault is in place, as an observer
	// outside the product sees it: a dry run every 10 ms, none on a connection that failed (one
	// sent while the API server starts can hang until it is ready, and must not hide the first
	// that answers), at most 4 in flight, each for at most 2 s. More at once made a storm of TLS
	// handshakes: hundreds of connections queued while the API server started, and no try
	// answered before the up ended.
	recovered := make(chan time.Duration, 1)
	stopProbe := make(chan struct{})
	var refusedMu sync.Mutex
	refused := map[string]int{} // the observer's failures, by their first line, for a round it never saw recover
	go func() {
		select {
		case <-inPlace:
		case <-stopProbe:
			close(recovered)
			return
		}
		var once sync.Once
		slots := make(chan struct{}, 4)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopProbe:
				once.Do(func() { close(recovered) })
				return
			case <-tick.C:
			}
			select {
			case slots <- struct{}{}:
			default:
				continue
			}
			go func() {
				defer func() { <-slots }()
				pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				err := probe(pctx)
				if err == nil {
					at := time.Since(faultAt)
					once.Do(func() { recovered <- at; close(recovered) })
					return
				}
				refusedMu.Lock()
				refused[trimTo(firstLine(err.Error(), ""), 200)]++
				refusedMu.Unlock()
			}()
		}
	}()
	st := &steps{created: map[string]time.Time{}, finished: map[string]time.Time{}}
	evs, evsDone := st.collect()
	_, err := s.Up(ctx, optup.ProgressStreams(&out), optup.EventStreams(evs))
	<-evsDone
	// The test's own time applying the fault (it holds the registration meanwhile) is not the
	// product's: it is left out of the round's up.
	r := faultRound{up: time.Since(began) - applied, applied: applied}
	close(stopProbe)
	r.recovered = <-recovered
	if r.recovered == 0 && f.apply != nil {
		refusedMu.Lock()
		t.Logf("%s: the observer never saw an ExternalSecret admitted again during the up; its tries failed with: %v", f.name, refused)
		refusedMu.Unlock()
	}
	if done := st.finished[faultTarget]; !done.IsZero() && !faultAt.IsZero() && r.recovered > 0 {
		// What the product added after the cluster recovered: the target's create done, from
		// the moment the cluster admitted an ExternalSecret again.
		r.after = done.Sub(faultAt.Add(r.recovered))
		if r.after > 300*time.Millisecond {
			back := faultAt.Add(r.recovered)
			var b strings.Builder
			for _, l := range readTrace(t, tracePath) {
				if l.at.After(faultAt) && l.at.Before(done) && strings.Contains(l.gate+l.text, "default/ghcr-pull-secret") {
					fmt.Fprintf(&b, "  %+dms %s: %s\n", l.at.Sub(back).Milliseconds(), l.gate, l.text)
				}
			}
			t.Logf("%s: %s created %s after the cluster admitted again; its proof meanwhile (ms from then):\n%s", f.name, faultTarget, r.after.Round(time.Millisecond), b.String())
		}
	}
	if restored != nil {
		restored()
	}
	if err != nil {
		r.err = fmt.Errorf("%w\n%s", err, out.String())
	}
	r.retries = st.retries
	for _, line := range st.hooked {
		t.Logf("%s: %s", f.name, line)
		if strings.Contains(line, "denied") && !strings.Contains(line, "not retried") {
			r.denialsRetried++
		}
	}
	select {
	case <-inPlace:
	default:
		faultAt = time.Time{}
	}
	if faultAt.IsZero() && r.err == nil {
		r.err = fmt.Errorf("the fault never ran: %s did not wait for a gate", faultTarget)
	}
	testenv.CRDCachesReady(t, "external-secrets.io")
	testenv.CRDCachesReady(t, "cert-manager.io")
	// A fault can outlast the up (External Secrets' webhook validates deletes too): destroy
	// again while it recovers.
	for attempt := 1; ; attempt++ {
		var dout strings.Builder
		_, derr := s.Destroy(ctx, optdestroy.ProgressStreams(&dout))
		if derr == nil {
			break
		}
		if attempt == 5 {
			t.Fatalf("destroy: %v\n%s", derr, dout.String())
		}
		t.Logf("%s: destroy failed (try %d), again in 5 s: %s", f.name, attempt, firstLine(dout.String(), "error"))
		time.Sleep(5 * time.Second)
	}
	dropLeases(ctx, t, "kube-system", "cert-manager")
	for _, ns := range []string{"external-secrets", "cert-manager", "ingress-nginx", "ai-ops"} {
		testenv.PodsGone(t, ns)
	}
	return r
}

func trimTo(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// otherCA is a PEM CA certificate no server here presents, base64 as a caBundle holds it.
func otherCA(t *testing.T) string {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rotated-ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// faultsTable is BENCHMARKS.md's faults section.
func faultsTable(kinds []fault, results map[string][]faultRound, loadStart string) string {
	var clean []time.Duration
	for _, r := range results["none"] {
		if r.err == nil {
			clean = append(clean, r.up)
		}
	}
	cleanP50 := median(clean)
	var unseenBy []string
	var b strings.Builder
	fmt.Fprintf(&b, `## Faults during a rebuild on a real node

Regenerated by `+"`make bench-faults`"+` (tests/e2e/realnode/faults_test.go); `+"`make bench`"+` keeps this section as it is.

- **Commit:** %s. **Date:** %s; load average (1, 5, 15 min) at the start %s, at the end %s.
- **Stack:** field reports 000, 001 and 002 as one autoGate program on the real node (as in the section above), each round
  from nothing. Each fault lands at one point the test chooses: right after the gates of the first ExternalSecret
  passed, before its create (the program's stack transform holds that registration until then).
- **Extra time** is the round's `+"`up`"+` (less the test's own time applying the fault, during which it holds the
  registration) minus the clean rounds' median (%s). **Cluster's recovery** is from the fault's start (the test's own
  time applying it included) to the first dry run of an ExternalSecret the API server admits again, as an observer outside the product sees it
  every 10 ms. **Created after recovery** is from that moment to the end of the first ExternalSecret's create step (its
  retry, when its create failed): what the product added to the cluster's own recovery (the goal: at most 1 s).
  **Retries** are the engine's "retrying create due to on-error hook request" lines.

| fault | rounds | failed | retries (total) | extra time, p50 | extra time, max | cluster's recovery, p50 | recovery, max | created after recovery, p50 | after recovery, max |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
`, commit(), time.Now().UTC().Format("2006-01-02 15:04 MST"), loadStart, loadAverage(), seconds(cleanP50))
	for _, f := range kinds {
		rs := results[f.name]
		failed, retries, unseen := 0, 0, 0
		var extra, rec, after []time.Duration
		for _, r := range rs {
			retries += r.retries
			if r.err != nil {
				failed++
				continue
			}
			extra = append(extra, r.up-cleanP50)
			switch {
			case f.apply == nil:
			case r.recovered > 0:
				rec = append(rec, r.recovered)
				after = append(after, r.after)
			default:
				unseen++ // the observer saw no admitted dry run before the up ended: not a figure
			}
		}
		if unseen > 0 {
			unseenBy = append(unseenBy, fmt.Sprintf("%s in %d of %d rounds", f.name, unseen, len(rs)))
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %s | %s | %s | %s | %s | %s |\n", f.name, len(rs), failed, retries,
			p50(extra, seconds), top(extra, seconds), p50(rec, seconds), top(rec, seconds), p50(after, millis), top(after, millis))
	}
	b.WriteString("\n")
	if len(unseenBy) > 0 {
		fmt.Fprintf(&b, "- **Recovery not seen** by the observer before the round's `up` ended (left out of the recovery columns): %s.\n", strings.Join(unseenBy, ", "))
	}
	for _, f := range kinds {
		fmt.Fprintf(&b, "- **%s:** %s.\n", f.name, f.what)
	}
	return b.String()
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}
