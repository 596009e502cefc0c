package planner

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/autogate"
)

// servesAll is a cluster that serves every kind and holds no webhook configuration.
type servesAll struct{}

func (servesAll) Serves(schema.GroupKind) (bool, bool) { return true, true }
func (servesAll) Resource(gvk schema.GroupVersionKind) (string, bool, bool) {
	return strings.ToLower(gvk.Kind) + "s", true, true
}
func (servesAll) DefaultNamespace() string                      { return "default" }
func (servesAll) Webhooks() ([]autogate.WebhookConfig, bool)    { return nil, true }
func (servesAll) Admits(string, map[string]any, []string) bool  { return true }
func rulesMatch(hook map[string]any, req autogate.Request) bool { return true }
func decide(in autogate.Input) autogate.Plan                    { return autogate.Decide(in, servesAll{}, rulesMatch) }
func urn(typ, name string) string                               { return "urn:pulumi:dev::p::" + typ + "::" + name }
func childURN(parent, typ, name string) string {
	return "urn:pulumi:dev::p::" + parent + "$" + typ + "::" + name
}

const (
	certType   = "kubernetes:cert-manager.io/v1:Certificate"
	esType     = "kubernetes:external-secrets.io/v1:ExternalSecret"
	deployType = "kubernetes:apps/v1:Deployment"
	vwcType    = "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration"
	cmType     = "kubernetes:core/v1:ConfigMap"
	chartType  = "kubernetes:helm.sh/v4:Chart"
)

func certificate(name, secret string) map[string]any {
	return map[string]any{"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
		"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": map[string]any{"secretName": secret}}
}

func mounting(secret string) map[string]any {
	return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "app", "namespace": "default"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "c", "image": "x"}},
			"volumes":    []any{map[string]any{"name": "tls", "secret": map[string]any{"secretName": secret}}}}}}}
}

func externalSecret(name string) map[string]any {
	return map[string]any{"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
		"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": map[string]any{}}
}

func webhook(name string) map[string]any {
	return map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
		"metadata": map[string]any{"name": name}, "webhooks": []any{map[string]any{"name": "v.es.io", "failurePolicy": "Fail",
			"clientConfig": map[string]any{"service": map[string]any{"name": "es-webhook", "namespace": "es"}},
			"rules": []any{map[string]any{"apiGroups": []any{"external-secrets.io"}, "apiVersions": []any{"*"},
				"resources": []any{"*"}, "operations": []any{"CREATE"}}}}}}
}

func gateTypes(a Answer) []string {
	var out []string
	for _, g := range a.Gates {
		out = append(out, g.Type)
	}
	return out
}

// registerLater registers r in the background; the answer arrives on the channel.
func registerLater(s *Session, r Registration) <-chan Answer {
	ch := make(chan Answer, 1)
	go func() { ch <- s.Register(r, decide) }()
	return ch
}

// arrived waits until s holds the registration id (it is then waiting, or decided).
func arrived(t *testing.T, s *Session, id string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		s.mu.Lock()
		_, ok := s.regs[id]
		s.mu.Unlock()
		if ok {
			return
		}
	}
	t.Fatalf("%s never arrived", id)
}

func TestProgramOrder(t *testing.T) {
	for _, tc := range []struct {
		name      string
		certOrder int
		want      []string
	}{
		{"a Certificate written above the Deployment that mounts its Secret holds it, whichever registers first", 0, []string{autogate.TypeCertificateReady}},
		{"near miss: one written below it does not (it may depend on the Deployment), and is not waited for", 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{Timeout: time.Minute})
			s.Announce([]Entry{{Order: tc.certOrder, Type: certType, Name: "tls"}, {Order: 1, Type: deployType, Name: "app"}})
			if tc.certOrder == 2 {
				s.Announce([]Entry{{Order: 0, Type: cmType, Name: "cm"}})
			}
			dep := registerLater(s, Registration{ID: urn(deployType, "app"), Type: deployType, Name: "app", Object: mounting("tls-secret"), Order: 1})
			arrived(t, s, urn(deployType, "app"))
			if tc.certOrder == 0 {
				select {
				case a := <-dep:
					t.Fatalf("decided before the Certificate written above it registered: %v", a)
				case <-time.After(50 * time.Millisecond):
				}
			}
			s.Register(Registration{ID: urn(certType, "tls"), Type: certType, Name: "tls", Object: certificate("tls", "tls-secret"), Order: tc.certOrder}, decide)
			a := <-dep
			if got := gateTypes(a); !slices.Equal(got, tc.want) {
				t.Fatalf("gates %v, want %v (warnings %v)", got, tc.want, a.Warnings)
			}
			for _, w := range a.Warnings {
				if strings.Contains(w, "decided without") {
					t.Fatalf("waited in vain: %s", w)
				}
			}
		})
	}
}

func TestNoWaitForItsOwnKindNorAnotherCluster(t *testing.T) {
	s := New(Options{Timeout: time.Minute})
	s.Announce([]Entry{{Order: 0, Type: esType, Name: "es0"}, {Order: 1, Type: certType, Name: "other", Cluster: "urn:other"},
		{Order: 2, Type: esType, Name: "es2"}})
	// es0 and the other cluster's Certificate never register: es2 must not wait for them.
	done := registerLater(s, Registration{ID: urn(esType, "es2"), Type: esType, Name: "es2", Object: externalSecret("es2"), Order: 2})
	select {
	case a := <-done:
		if len(a.Warnings) > 0 {
			t.Fatalf("warnings %v", a.Warnings)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an ExternalSecret waited for another of its kind, or for another cluster's Certificate")
	}
}

func TestWaitsForUnannouncedPlaces(t *testing.T) {
	s := New(Options{Timeout: time.Minute})
	s.Announce([]Entry{{Order: 1, Type: deployType, Name: "app"}})
	dep := registerLater(s, Registration{ID: urn(deployType, "app"), Type: deployType, Name: "app", Object: mounting("tls-secret"), Order: 1})
	arrived(t, s, urn(deployType, "app"))
	// Place 0 arrives with another call (the SDK sends each place once, with whichever call is next).
	s.Announce([]Entry{{Order: 0, Type: certType, Name: "tls"}})
	s.Register(Registration{ID: urn(certType, "tls"), Type: certType, Name: "tls", Object: certificate("tls", "tls-secret"), Order: 0}, decide)
	if got := gateTypes(<-dep); !slices.Equal(got, []string{autogate.TypeCertificateReady}) {
		t.Fatalf("gates %v", got)
	}
}

func TestTimeoutWarnsAndDecides(t *testing.T) {
	s := New(Options{Timeout: 100 * time.Millisecond})
	s.Announce([]Entry{{Order: 0, Type: certType, Name: "tls"}, {Order: 1, Type: deployType, Name: "app"}})
	a := s.Register(Registration{ID: urn(deployType, "app"), Type: deployType, Name: "app", Object: mounting("tls-secret"), Order: 1}, decide)
	if len(a.Warnings) != 1 || !strings.Contains(a.Warnings[0], "decided without "+certType+" tls, written above it") {
		t.Fatalf("warnings %v", a.Warnings)
	}
}

func TestComponentChildrenSettle(t *testing.T) {
	chart := urn(chartType, "es")
	s := New(Options{Timeout: time.Minute, Settle: 300 * time.Millisecond})
	es := registerLater(s, Registration{ID: childURN(chartType, esType, "es:default/db"), Type: esType, Name: "es:default/db",
		Object: externalSecret("db"), Parent: chart, ParentType: chartType, Order: -1})
	arrived(t, s, childURN(chartType, esType, "es:default/db"))
	// Its sibling webhook configuration registers after it, within the settle time.
	hook := s.Register(Registration{ID: childURN(chartType, vwcType, "es:hook"), Type: vwcType, Name: "es:hook", Object: webhook("hook"),
		Parent: chart, ParentType: chartType, Order: -1}, decide)
	a := <-es
	if !slices.Contains(gateTypes(a), autogate.TypeAdmissionReady) {
		t.Fatalf("the chart's ExternalSecret is not held by its sibling webhook: %v %v", gateTypes(a), a.Warnings)
	}
	if len(hook.Warnings)+len(a.Warnings) > 0 {
		t.Fatalf("warnings %v %v", hook.Warnings, a.Warnings)
	}
}

// A child of a component the SDK renders in-process (ConfigGroup v1) awaits its whole family, as
// the SDK constructed it: its sibling webhook configuration counts however late it registers
// (past the settle time here), and the family is decided once it is all there, with no pause.
// Near miss: the same child awaiting nothing only settles, and misses the late configuration.
func TestInProcessChildrenAwaitTheirFamily(t *testing.T) {
	group := urn("kubernetes:yaml:ConfigGroup", "widgets")
	const groupType = "kubernetes:yaml:ConfigGroup"
	esID, hookID := childURN(groupType, esType, "db"), childURN(groupType, vwcType, "hook")
	for _, tc := range []struct {
		name   string
		family []string
		held   bool
	}{
		{"it awaits its family: held by the late sibling", []string{esID, hookID}, true},
		{"it awaits nothing: it settles and misses the late sibling", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{Timeout: time.Minute, Settle: time.Millisecond})
			es := registerLater(s, Registration{ID: esID, Type: esType, Name: "db", Object: externalSecret("db"),
				Parent: group, ParentType: groupType, Order: -1, Awaits: tc.family})
			arrived(t, s, esID)
			var a Answer
			if !tc.held {
				a = <-es // decided alone, before its sibling arrives
			}
			s.Register(Registration{ID: hookID, Type: vwcType, Name: "hook", Object: webhook("hook"),
				Parent: group, ParentType: groupType, Order: -1, Awaits: tc.family}, decide)
			if tc.held {
				a = <-es
			}
			if got := slices.Contains(gateTypes(a), autogate.TypeAdmissionReady); got != tc.held {
				t.Fatalf("held by its sibling webhook: %v, want %v (%v %v)", got, tc.held, gateTypes(a), a.Warnings)
			}
		})
	}
	t.Run("a whole family is decided without the settle pause", func(t *testing.T) {
		s := New(Options{Timeout: time.Hour, Settle: time.Hour})
		family := []string{esID, hookID}
		hook := registerLater(s, Registration{ID: hookID, Type: vwcType, Name: "hook", Object: webhook("hook"),
			Parent: group, ParentType: groupType, Order: -1, Awaits: family})
		es := registerLater(s, Registration{ID: esID, Type: esType, Name: "db", Object: externalSecret("db"),
			Parent: group, ParentType: groupType, Order: -1, Awaits: family})
		for _, ch := range []<-chan Answer{hook, es} {
			select {
			case <-ch:
			case <-time.After(30 * time.Second):
				t.Fatal("a child whose whole family arrived still waited for the settle time")
			}
		}
	})
}

func TestLateWebhookWarnsOnce(t *testing.T) {
	for _, hookFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "object decided first", true: "configuration registered first"}[hookFirst], func(t *testing.T) {
			s := New(Options{Timeout: time.Minute})
			s.Announce([]Entry{{Order: 0, Type: esType, Name: "db"}, {Order: 1, Type: vwcType, Name: "hook"}})
			es := Registration{ID: urn(esType, "db"), Type: esType, Name: "db", Object: externalSecret("db"), Order: 0}
			hook := Registration{ID: urn(vwcType, "hook"), Type: vwcType, Name: "hook", Object: webhook("hook"), Order: 1}
			var answers []Answer
			if hookFirst {
				// The configuration arrives first, and waits for the ExternalSecret written above it.
				h := registerLater(s, hook)
				arrived(t, s, hook.ID)
				answers = append(answers, s.Register(es, decide), <-h)
			} else {
				answers = append(answers, s.Register(es, decide), s.Register(hook, decide))
			}
			var warned []string
			for _, a := range answers {
				if len(a.Gates) > 0 {
					t.Fatalf("gated by a webhook written below it: %v", gateTypes(a))
				}
				warned = append(warned, a.Warnings...)
			}
			if len(warned) != 1 || !strings.Contains(warned[0], "was registered before "+vwcType+" hook, which intercepts it") {
				t.Fatalf("warnings %q, want one", warned)
			}
		})
	}
}

func TestHandGatedCycleAwaitsAndFilters(t *testing.T) {
	t.Run("a registration that depends on a readiness gate is left as it is", func(t *testing.T) {
		s := New(Options{Timeout: time.Minute})
		s.Register(Registration{ID: urn(certType, "tls"), Type: certType, Name: "tls", Object: certificate("tls", "s"), Order: -1}, decide)
		a := s.Register(Registration{ID: urn(deployType, "app"), Type: deployType, Name: "app", Object: mounting("s"), Order: -1,
			DependsOn: []string{"urn:pulumi:dev::p::my:index:Comp$readiness:index:SecretReady::s"}}, decide)
		if len(a.Gates) != 0 {
			t.Fatalf("gates %v", gateTypes(a))
		}
	})
	t.Run("an installer that depends on the registration does not hold it (a cycle), with a warning", func(t *testing.T) {
		s := New(Options{Timeout: time.Minute})
		s.Register(Registration{ID: urn(certType, "tls"), Type: certType, Name: "tls", Object: certificate("tls", "s"), Order: -1,
			DependsOn: []string{urn(deployType, "app")}}, decide)
		a := s.Register(Registration{ID: urn(deployType, "app"), Type: deployType, Name: "app", Object: mounting("s"), Order: -1}, decide)
		if len(a.Gates) != 0 || len(a.Warnings) != 1 || !strings.Contains(a.Warnings[0], "depends on it") {
			t.Fatalf("gates %v warnings %v", gateTypes(a), a.Warnings)
		}
	})
	t.Run("awaited children register first", func(t *testing.T) {
		s := New(Options{Timeout: time.Minute})
		cert := childURN("kubernetes:helm.sh/v3:Chart", certType, "tls")
		dep := registerLater(s, Registration{ID: urn(deployType, "app"), Type: deployType, Name: "app", Object: mounting("s"), Order: -1, Awaits: []string{cert}})
		arrived(t, s, urn(deployType, "app"))
		s.Register(Registration{ID: cert, Type: certType, Name: "tls", Object: certificate("tls", "s"), Order: -1,
			Parent: urn("kubernetes:helm.sh/v3:Chart", "c"), ParentType: "kubernetes:helm.sh/v3:Chart"}, decide)
		if got := gateTypes(<-dep); !slices.Equal(got, []string{autogate.TypeCertificateReady}) {
			t.Fatalf("gates %v", got)
		}
	})
	t.Run("only the installers the options name count", func(t *testing.T) {
		s := New(Options{Timeout: time.Minute, Installers: []string{"other"}})
		s.Register(Registration{ID: urn(certType, "tls"), Type: certType, Name: "tls", Object: certificate("tls", "s"), Order: -1}, decide)
		if a := s.Register(Registration{ID: urn(deployType, "app"), Type: deployType, Name: "app", Object: mounting("s"), Order: -1}, decide); len(a.Gates) != 0 {
			t.Fatalf("gates %v", gateTypes(a))
		}
	})
	t.Run("another cluster's installer does not count", func(t *testing.T) {
		s := New(Options{Timeout: time.Minute})
		s.Register(Registration{ID: urn(certType, "tls"), Type: certType, Name: "tls", Object: certificate("tls", "s"), Order: -1, Cluster: "urn:other"}, decide)
		if a := s.Register(Registration{ID: urn(deployType, "app"), Type: deployType, Name: "app", Object: mounting("s"), Order: -1}, decide); len(a.Gates) != 0 {
			t.Fatalf("gates %v", gateTypes(a))
		}
	})
}

// Many registrations at once: each decided once, none waits for the whole run.
func TestConcurrentRegistrations(t *testing.T) {
	s := New(Options{Timeout: time.Minute})
	const n = 200
	var entries []Entry
	entries = append(entries, Entry{Order: 0, Type: certType, Name: "tls"})
	for i := 1; i <= n; i++ {
		entries = append(entries, Entry{Order: i, Type: deployType, Name: "app"})
	}
	s.Announce(entries)
	var wg sync.WaitGroup
	gated := make(chan int, n)
	for i := n; i >= 1; i-- {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			name := "app" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
			a := s.Register(Registration{ID: urn(deployType, name), Type: deployType, Name: name, Object: mounting("tls-secret"), Order: i}, decide)
			gated <- len(a.Gates)
		}(i)
	}
	s.Register(Registration{ID: urn(certType, "tls"), Type: certType, Name: "tls", Object: certificate("tls", "tls-secret"), Order: 0}, decide)
	wg.Wait()
	close(gated)
	for g := range gated {
		if g != 1 {
			t.Fatalf("a Deployment got %d gates", g)
		}
	}
}

// An object nothing written above it can gate is not held by them: a ConfigMap written below an
// ExternalSecret that waits for its Release to be created (and so registers late) is decided at
// once; a Deployment written below it waits for it (its pods may use the Secret).
func TestWaitsOnlyForWhatMayGateIt(t *testing.T) {
	s := New(Options{Timeout: time.Minute})
	s.Announce([]Entry{{Order: 0, Type: esType, Name: "db"}, {Order: 1, Type: cmType, Name: "settings"}, {Order: 2, Type: deployType, Name: "app"}})
	cm := registerLater(s, Registration{ID: urn(cmType, "settings"), Type: cmType, Name: "settings", Order: 1,
		Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "settings", "namespace": "default"}}})
	select {
	case a := <-cm:
		if len(a.Gates)+len(a.Warnings) > 0 {
			t.Fatalf("gates %v warnings %v", gateTypes(a), a.Warnings)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the ConfigMap waited for the ExternalSecret written above it")
	}
	dep := registerLater(s, Registration{ID: urn(deployType, "app"), Type: deployType, Name: "app", Object: mounting("db"), Order: 2})
	arrived(t, s, urn(deployType, "app"))
	select {
	case a := <-dep:
		t.Fatalf("the Deployment did not wait for the ExternalSecret written above it: %v", gateTypes(a))
	case <-time.After(50 * time.Millisecond):
	}
	s.Register(Registration{ID: urn(esType, "db"), Type: esType, Name: "db", Order: 0,
		Object: map[string]any{"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
			"metadata": map[string]any{"name": "db", "namespace": "default"}, "spec": map[string]any{"target": map[string]any{"name": "db"}}}}, decide)
	if got := gateTypes(<-dep); !slices.Equal(got, []string{autogate.TypeExternalSecretReady}) {
		t.Fatalf("gates %v", got)
	}
}

// Rules the Python SDK's unit tests covered while it kept them itself (test_autogate_unit.py,
// before the one brain): an awaited child that never registers holds no longer than the timeout;
// an excluded registration is recorded, never gated, and still an installer (exclude keeps
// autoGate off the object, not off what it makes; the installers option chooses installers).
func TestAwaitTimeoutAndExcluded(t *testing.T) {
	chart3 := "kubernetes:helm.sh/v3:Chart"
	for _, tc := range []struct {
		name         string
		cert         *Registration // registered first, when set
		reg          Registration
		wantGates    []string
		wantWarnings []string
	}{
		{
			name: "an awaited child that never registers: decided after the timeout, with a warning naming it",
			reg: Registration{ID: urn(deployType, "app"), Type: deployType, Name: "app", Object: mounting("s"), Order: -1,
				Awaits: []string{childURN(chart3, certType, "never")}},
			wantWarnings: []string{"was decided without every child of the components it depends on (" + childURN(chart3, certType, "never")},
		},
		{
			name: "an excluded registration is not gated",
			cert: &Registration{ID: urn(certType, "tls"), Type: certType, Name: "tls", Object: certificate("tls", "s"), Order: -1},
			reg:  Registration{ID: urn(deployType, "app"), Type: deployType, Name: "app", Object: mounting("s"), Order: -1, Excluded: true},
		},
		{
			name:      "an excluded Certificate still holds what mounts its Secret",
			cert:      &Registration{ID: urn(certType, "tls"), Type: certType, Name: "tls", Object: certificate("tls", "s"), Order: -1, Excluded: true},
			reg:       Registration{ID: urn(deployType, "app"), Type: deployType, Name: "app", Object: mounting("s"), Order: -1},
			wantGates: []string{autogate.TypeCertificateReady},
		},
		{
			name:      "the same Certificate, not excluded, holds it",
			cert:      &Registration{ID: urn(certType, "tls"), Type: certType, Name: "tls", Object: certificate("tls", "s"), Order: -1},
			reg:       Registration{ID: urn(deployType, "app"), Type: deployType, Name: "app", Object: mounting("s"), Order: -1},
			wantGates: []string{autogate.TypeCertificateReady},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{Timeout: 100 * time.Millisecond})
			if tc.cert != nil {
				s.Register(*tc.cert, decide)
			}
			a := s.Register(tc.reg, decide)
			if got := gateTypes(a); !slices.Equal(got, tc.wantGates) {
				t.Fatalf("gates %v, want %v", got, tc.wantGates)
			}
			if len(a.Warnings) != len(tc.wantWarnings) {
				t.Fatalf("warnings %q, want %q", a.Warnings, tc.wantWarnings)
			}
			for i, w := range tc.wantWarnings {
				if !strings.Contains(a.Warnings[i], w) {
					t.Fatalf("warning %q, want it to say %q", a.Warnings[i], w)
				}
			}
		})
	}
	t.Run("a top-level registration sees an excluded installer written above it", func(t *testing.T) {
		s := New(Options{Timeout: time.Minute})
		s.Announce([]Entry{{Order: 0, Type: certType, Name: "tls"}, {Order: 1, Type: deployType, Name: "app"}})
		s.Register(Registration{ID: urn(certType, "tls"), Type: certType, Name: "tls", Object: certificate("tls", "s"), Order: 0, Excluded: true}, decide)
		done := registerLater(s, Registration{ID: urn(deployType, "app"), Type: deployType, Name: "app", Object: mounting("s"), Order: 1})
		select {
		case a := <-done:
			if got := gateTypes(a); !slices.Equal(got, []string{autogate.TypeCertificateReady}) || len(a.Warnings) != 0 {
				t.Fatalf("gates %v warnings %v", got, a.Warnings)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("waited for a registration that came")
		}
	})
}
