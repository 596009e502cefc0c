package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/reportstack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// TestSoakRealFieldReport001 (READINESS_SOAK=N rounds; `make soak` runs 20 beside another
// test package for load): field report 001's stack with autoGate's line, on real External
// Secrets pods, brought up and destroyed N times in a row. Every round must pass, and each
// gate must return within 100 ms of its condition turning true (or of its Create's start in the
// provider, for a gate the engine starts after that), as an observer outside the product sees it: for
// AdmissionReady, the first dry-run of an ExternalSecret the real webhook admits (the observer
// tries one every 10 ms); for HelmReleaseReady, that, the other webhook configuration
// answering a SecretStore, and the release's Deployments all available. A gate that times out says what it last saw.
func TestSoakRealFieldReport001(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("READINESS_SOAK"))
	if rounds <= 0 {
		t.Skip("READINESS_SOAK=N runs N rounds (make soak)")
	}
	ctx := context.Background()
	chart := installable(ctx, t, charts.ExternalSecretsChart)
	env := stacktest.Prepare(t)
	program := func(ctx *pulumi.Context) error {
		if err := readiness.AutoGate(ctx, &readiness.AutoGateOptions{Timeout: "4m"}); err != nil {
			return err
		}
		release, err := reportstack.ExternalSecretsRelease(ctx, chart)
		if err != nil {
			return err
		}
		return reportstack.ExternalSecrets001(ctx, release)
	}
	// The provider's trace (provider/trace.go) splits each gate's lag: its watch's delivery,
	// its check and proof, and the engine's report of its return.
	tracePath := filepath.Join(t.TempDir(), "trace")
	t.Setenv("READINESS_TRACE", tracePath)
	s := stacktest.NewStack(t, env, "soak001", program)
	var parts [4][]time.Duration // per gate: event, woken, checked, reported (see splitLag)
	var lags, ups, engine []time.Duration
	failures := 0
	for round := 1; round <= rounds; round++ {
		lingering := terminatingPods(ctx, "external-secrets")
		obs := observe(ctx, map[string]func(context.Context) bool{
			"admitted":  admits(t, externalSecretsGVR, reportstack.ExternalSecret001("default")),
			"stores":    answers(t, secretStoresGVR, secretStore),
			"available": deploymentsAvailable("external-secrets", 3),
		})
		gates, started := map[string]time.Time{}, map[string]time.Time{}
		said := map[string][]progress{} // each gate's progress messages, to explain a late one
		evs := make(chan events.EngineEvent)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ev := range evs {
				if o := ev.ResourcePreEvent; o != nil && strings.HasPrefix(o.Metadata.Type, "readiness:index:") {
					started[gateKey(o.Metadata.Type, o.Metadata.URN)] = time.Now()
				}
				if o := ev.ResOutputsEvent; o != nil && strings.HasPrefix(o.Metadata.Type, "readiness:index:") {
					gates[gateKey(o.Metadata.Type, o.Metadata.URN)] = time.Now()
				}
				if d := ev.DiagnosticEvent; d != nil && strings.Contains(d.URN, "readiness:index:") {
					typ := d.URN[strings.Index(d.URN, "readiness:index:"):]
					typ = typ[:strings.Index(typ, "::")]
					k := gateKey(typ, d.URN)
					said[k] = append(said[k], progress{time.Now(), strings.Join(strings.Fields(d.Message), " ")})
				}
			}
		}()
		began := time.Now()
		var out strings.Builder
		_, err := s.Up(ctx, optup.EventStreams(evs), optup.ProgressStreams(&out))
		took := time.Since(began)
		<-done
		first := obs.stop()
		admitted, available := first["admitted"], first["available"]
		if first["stores"].After(available) {
			available = first["stores"] // HelmReleaseReady proves both webhook configurations
		}
		if err != nil {
			failures++
			t.Errorf("round %d failed after %s: %v\n%s\nthe observer saw: %s\nExternal Secrets' state:\n%s", round, took.Round(time.Millisecond), err, out.String(),
				observed(first, began), externalSecretsState(ctx, "external-secrets"))
		} else {
			ups = append(ups, took)
		}
		var line []string
		lines := readTrace(t, tracePath) // the round's trace, read once for all its gates
		for name, at := range gates {
			cond := admitted
			if strings.HasPrefix(name, "readiness:index:HelmReleaseReady") && available.After(cond) {
				cond = available
			}
			if cond.IsZero() {
				t.Errorf("round %d: %s returned, but the observer never saw its condition hold", round, name)
				continue
			}
			resource := name[strings.LastIndex(name, " ")+1:]
			where := ""
			if st := started[name]; st.After(cond) {
				// A gate the engine started after its condition held: from the moment its Create
				// began in the provider. The engine's time before it (its step, the gate's Check)
				// is not the gate's, and is said apart.
				cond = st
				if cb, ok := createBegan(lines, at, resource); ok && cb.After(st) {
					cond = cb
					engine = append(engine, cb.Sub(st))
					where = fmt.Sprintf(" (engine before Create %dms)", cb.Sub(st).Milliseconds())
				}
			}
			lag := at.Sub(cond)
			lags = append(lags, lag)
			split, ok := splitLag(lines, at, cond, resource)
			if ok {
				for i, d := range split {
					parts[i] = append(parts[i], d)
				}
				where += fmt.Sprintf(" (%s)", split)
			}
			line = append(line, fmt.Sprintf("%s %+dms%s", strings.TrimPrefix(name, "readiness:index:"), lag.Milliseconds(), where))
			if lag > 100*time.Millisecond {
				t.Errorf("round %d: %s returned %s after its condition held; what it said, from the condition:\n%s"+
					"the provider's trace, from the condition:\n%s",
					round, name, lag.Round(time.Millisecond), progressSince(said[name], cond), traceSince(lines, cond, at))
			}
		}
		sort.Strings(line)
		t.Logf("round %d (%d pods of the last still terminating): up %s; webhook admitted at +%s, release available at +%s; gates: %s", round, lingering,
			took.Round(time.Millisecond), admitted.Sub(began).Round(time.Millisecond), available.Sub(began).Round(time.Millisecond), strings.Join(line, ", "))
		testenv.CRDCachesReady(t, "external-secrets.io")
		stacktest.Destroy(t, s)
		testenv.CRDsGone(t, "external-secrets.io") // as a rebuilt cluster starts
		testenv.PodsGone(t, "external-secrets")
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	sort.Slice(ups, func(i, j int) bool { return ups[i] < ups[j] })
	if len(lags) > 0 && len(ups) > 0 {
		t.Logf("soak: %d rounds, %d failed; up p50 %s, max %s; gate lag after its condition (%d gates): p50 %s, p95 %s, max %s",
			rounds, failures, ups[len(ups)/2].Round(time.Millisecond), ups[len(ups)-1].Round(time.Millisecond), len(lags),
			lags[len(lags)/2].Round(time.Millisecond), lags[len(lags)*95/100].Round(time.Millisecond), lags[len(lags)-1].Round(time.Millisecond))
	}
	if len(engine) > 0 {
		sort.Slice(engine, func(i, j int) bool { return engine[i] < engine[j] })
		t.Logf("soak: %d gates started after their condition held; the engine's time from their step to their Create: p50 %s, max %s (not in the lag)",
			len(engine), engine[len(engine)/2].Round(time.Millisecond), engine[len(engine)-1].Round(time.Millisecond))
	}
	for i, what := range (lagSplit{}).names() {
		ds := parts[i]
		if len(ds) == 0 {
			continue
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		t.Logf("soak: of the lag, %s: p50 %s, p95 %s, max %s", what, ds[len(ds)/2].Round(time.Millisecond),
			ds[len(ds)*95/100].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
	}
}

// progress is one message a gate sent while it waited.
type progress struct {
	at  time.Time
	msg string
}

// progressSince lists a gate's messages from a second before cond, stamped relative to it.
func progressSince(ps []progress, cond time.Time) string {
	var b strings.Builder
	for _, p := range ps {
		if p.at.Before(cond.Add(-time.Second)) {
			continue
		}
		fmt.Fprintf(&b, "  %+6dms %s\n", p.at.Sub(cond).Milliseconds(), p.msg)
	}
	if b.Len() == 0 {
		return "  (nothing in that time)\n"
	}
	return b.String()
}

// gateKey names a gate by its type and Pulumi name.
func gateKey(typ, urn string) string { return typ + " " + urn[strings.LastIndex(urn, "::")+2:] }

// traceLine is one line of the provider's trace (provider/trace.go).
type traceLine struct {
	at         time.Time
	gate, text string
}

func readTrace(t *testing.T, path string) []traceLine {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []traceLine
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(l, "\t", 3)
		if len(f) != 3 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		out = append(out, traceLine{time.Unix(0, ns), f[1], f[2]})
	}
	return out
}

// lagSplit is where a gate's lag after its condition went: until its watch delivered the newest
// event before its passing check (event), until that check began (woken), until Create
// returned (checked: the check and its proof), until the engine reported it (reported).
type lagSplit [4]time.Duration

func (lagSplit) names() []string {
	return []string{"until the watch event", "until the check began", "the check and its proof", "until the engine reported it"}
}

func (l lagSplit) String() string {
	return fmt.Sprintf("event %+dms, woken %+dms, checked %+dms, reported %+dms",
		l[0].Milliseconds(), l[1].Milliseconds(), l[2].Milliseconds(), l[3].Milliseconds())
}

var createLine = regexp.MustCompile(`^create of (\S+) began (\d+)us ago`)

// createBegan is when the Create of resource that returned at at began in the provider (its
// last "create of" line before at, less the time since the Create began that the line gives).
func createBegan(lines []traceLine, at time.Time, resource string) (time.Time, bool) {
	var began time.Time
	for _, l := range lines {
		m := createLine.FindStringSubmatch(l.text)
		if m == nil || m[1] != resource || l.at.After(at) {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		began = l.at.Add(-time.Duration(n) * time.Microsecond)
	}
	return began, !began.IsZero()
}

var checkLine = regexp.MustCompile(`^check began \((?:newest watch event (-?\d+)us before|no watch event yet)\); check (\d+)us, proof (\d+)us: ready`)

// splitLag finds the gate resource that returned at at in the trace (its last "created" line
// before at) and its passing check, and splits at-cond (each part's own share, so they add up).
func splitLag(lines []traceLine, at, cond time.Time, resource string) (lagSplit, bool) {
	created := -1
	for i, l := range lines {
		if l.text == "created "+resource && !l.at.After(at) && (created < 0 || l.at.After(lines[created].at)) {
			created = i
		}
	}
	if created < 0 {
		return lagSplit{}, false
	}
	for i := created - 1; i >= 0; i-- {
		l := lines[i]
		m := checkLine.FindStringSubmatch(l.text)
		if l.gate != lines[created].gate || m == nil {
			continue
		}
		us := func(s string) time.Duration { n, _ := strconv.Atoi(s); return time.Duration(n) * time.Microsecond }
		began := l.at.Add(-us(m[2]) - us(m[3]))
		event := began
		if m[1] != "" {
			event = began.Add(-us(m[1]))
		}
		if event.Before(cond) {
			event = cond // an event before the condition (the condition came with it, or with a read)
		}
		return lagSplit{event.Sub(cond), began.Sub(event), lines[created].at.Sub(began), at.Sub(lines[created].at)}, true
	}
	return lagSplit{}, false
}

// traceSince lists the trace's lines from a second before cond to at, stamped relative to cond.
func traceSince(lines []traceLine, cond, at time.Time) string {
	var b strings.Builder
	for _, l := range lines {
		if l.at.Before(cond.Add(-time.Second)) || l.at.After(at) {
			continue
		}
		fmt.Fprintf(&b, "  %+6dms %s: %s\n", l.at.Sub(cond).Milliseconds(), l.gate, l.text)
	}
	if b.Len() == 0 {
		return "  (nothing in that time)\n"
	}
	return b.String()
}
