// Package planner is autoGate's one brain for a program run: the SDKs send it facts (each
// Kubernetes registration as the engine has it, the program's order, which registrations a
// component renders), and it answers each registration with its gates once every fact that
// decision needs is in. It owns what the three SDK overlays used to each keep: program order,
// a component's children settling, waiting for the children of a component rendered in the
// program's process, hand-gate detection, the installer filter, the cycle check and the
// warnings about a webhook configuration that comes after what it intercepts. The rules
// themselves are pkg/autogate's (Decide); the cluster comes in through the Decide func.
//
// A Session lives in the provider process for one update (one program run, named by the SDK).
// Every wait is bounded by Options.Timeout: past it the decision is made with what is known and a
// warning names what was missing, never a hang.
package planner

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/autogate"
)

// Registration is one Kubernetes registration, as the SDK's transform sees it.
type Registration struct {
	ID         string // its URN
	Type, Name string
	Object     map[string]any // its props as plain JSON, unknowns left out
	Parent     string         // the parent's URN ("" at the top level)
	ParentType string         // the parent's type token ("" at the top level)
	DependsOn  []string       // URNs it depends on, as the program wrote them
	Cluster    string         // "" for the default kubernetes provider, else its provider's URN
	// Order is its place in the program's order (Entry.Order); -1 for a component's child, whose
	// family settles instead.
	Order int
	// Awaits are URNs that must register first: the children of a component the SDK renders in
	// the program's process (Chart v3, ConfigFile/ConfigGroup v1) that it depends on; for a child
	// of such a component, every child of it (itself too), counted as the SDK constructed them.
	// A child that awaits its family is decided once all arrived, not after a pause (Settle) that
	// a loaded machine exceeds; one that awaits nothing (a Chart v4's, registered by the plugin)
	// settles.
	Awaits []string
	// Excluded: the program keeps autoGate off it (its Exclude option); it is recorded, never gated.
	Excluded bool
}

// Entry is a registration the program wrote, in program order, before it reaches the engine:
// the SDKs send registrations concurrently, each once its inputs resolve, so the order they
// arrive in is not the program's.
type Entry struct {
	Order   int
	Type    string
	Name    string
	Cluster string // as Registration.Cluster; "?" when the SDK could not tell yet (another cluster's)
}

// Options are one session's autoGate options.
type Options struct {
	Rules      autogate.Options
	Installers []string      // only these installers (Pulumi names) count; all if empty
	Settle     time.Duration // a component's children settle after this long without a new one
	Timeout    time.Duration // bounds every wait
}

// Decide is pkg/autogate's decision, bound to the cluster of the registration it is asked about.
type Decide func(in autogate.Input) autogate.Plan

// Answer is one registration's decision.
type Answer struct {
	Gates    []autogate.Gate
	Warnings []string
}

// Session is one program run's facts and decisions.
type Session struct {
	opts Options

	mu       sync.Mutex
	changed  *sync.Cond
	entries  map[int]Entry
	regs     map[string]*reg // by ID
	arrived  []*reg          // in arrival order
	byOrder  map[int]*reg
	last     map[string]time.Time // a component's last child's arrival, by parent URN
	clusters map[string]Cluster   // by ID
}

type reg struct {
	Registration
	installer map[string]any // set when it can block others
	final     bool           // its answer is made
	seen      map[string]bool
}

// New is an empty session.
func New(opts Options) *Session {
	if opts.Settle <= 0 {
		opts.Settle = 200 * time.Millisecond
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	s := &Session{opts: opts, entries: map[int]Entry{}, regs: map[string]*reg{}, byOrder: map[int]*reg{}, last: map[string]time.Time{}, clusters: map[string]Cluster{}}
	s.changed = sync.NewCond(&s.mu)
	return s
}

// Announce records program-order entries (idempotent).
func (s *Session) Announce(entries []Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range entries {
		s.entries[e.Order] = e
	}
	s.changed.Broadcast()
}

// Register records r and, once every fact its decision needs is in, decides it. decide is the
// rule for r's cluster; it is also asked about earlier registrations a webhook configuration
// among them may have missed (same cluster).
func (s *Session) Register(r Registration, decide Decide) Answer {
	s.mu.Lock()
	me := s.arrive(r)
	s.mu.Unlock()
	if r.Excluded {
		return Answer{}
	}
	var warnings []string
	deadline := time.Now().Add(s.opts.Timeout)
	wake := time.AfterFunc(s.opts.Timeout, func() { s.mu.Lock(); s.changed.Broadcast(); s.mu.Unlock() })
	defer wake.Stop()

	s.mu.Lock()
	if missing := s.waitFor(deadline, func() string { return s.firstUnregistered(r.Awaits) }); missing != "" {
		of := "every child of the components it depends on"
		if me.child() {
			of = "every sibling"
		}
		warnings = append(warnings, fmt.Sprintf("%s %s was decided without %s (%s had not "+
			"registered after %s): a webhook configuration or CRD among them does not count", r.Type, r.Name, of, missing, s.opts.Timeout))
	}
	if me.child() && len(r.Awaits) == 0 {
		s.settle(r.Parent, deadline)
	} else if r.Order >= 0 {
		if missing := s.waitFor(deadline, func() string { return s.earlierUnregistered(me) }); missing != "" {
			warnings = append(warnings, fmt.Sprintf("%s %s was decided without %s, written above it, whose registration had not come after %s",
				r.Type, r.Name, missing, s.opts.Timeout))
		}
	}
	installers, seen := s.visible(me)
	s.mu.Unlock()

	plan := decide(autogate.Input{Resource: resourceOf(r), Installers: installers, DependsOn: r.DependsOn, Options: s.opts.Rules})
	warnings = append(warnings, plan.Warnings...)
	gates := plan.Gates
	if handGated(r) {
		gates = nil
	}

	s.mu.Lock()
	var kept []autogate.Gate
	left := map[string]bool{}
	for _, g := range gates {
		if why := s.cycle(g, r.ID, left); why != "" {
			left[g.Key] = true
			warnings = append(warnings, fmt.Sprintf("%s %s is not held by %s: %s", r.Type, r.Name, g.Name, why))
			continue
		}
		kept = append(kept, g)
	}
	me.final, me.seen = true, seen
	// Each (decision, webhook configuration) pair that missed each other is warned about once,
	// whichever comes second: configurations known now that this decision did not see (written
	// below it, or registered after its component settled); and, for a configuration, decisions
	// already final that did not see it.
	var late []*reg
	for _, h := range s.arrived {
		if h != me && isWebhook(h) && h.Cluster == r.Cluster && !me.seen[h.ID] {
			late = append(late, h)
			me.seen[h.ID] = true
		}
	}
	var before []*reg
	if isWebhook(me) {
		for _, f := range s.arrived {
			if f != me && f.final && f.Cluster == r.Cluster && !f.seen[me.ID] {
				before = append(before, f)
				f.seen[me.ID] = true
			}
		}
	}
	s.mu.Unlock()
	for _, h := range late {
		warnings = append(warnings, missedWarnings(decide, me, h)...)
	}
	for _, f := range before {
		warnings = append(warnings, missedWarnings(decide, f, me)...)
	}
	return Answer{Gates: kept, Warnings: warnings}
}

// arrive records r (s.mu held) and returns its record.
func (s *Session) arrive(r Registration) *reg {
	me := &reg{Registration: r}
	// Excluded or not: exclude keeps autoGate off the object, not off what it makes.
	if len(s.opts.Installers) == 0 || slices.Contains(s.opts.Installers, r.Name) {
		me.installer, _ = autogate.InstallerOf(r.Type, r.Object)
	}
	if old, ok := s.regs[r.ID]; ok {
		*old = *me // the same URN again (a retried call): the newer facts
		me = old
	} else {
		s.regs[r.ID] = me
		s.arrived = append(s.arrived, me)
	}
	if r.Order >= 0 {
		s.byOrder[r.Order] = me
	}
	if me.child() {
		s.last[r.Parent] = time.Now()
	}
	s.changed.Broadcast()
	return me
}

// missedWarnings warns that f was not held by the webhook configuration h, if h intercepts it.
func missedWarnings(decide Decide, f, h *reg) []string {
	plan := decide(autogate.Input{Resource: resourceOf(f.Registration), Installers: []autogate.Installer{installerOf(h)}})
	for _, g := range plan.Gates {
		if g.Type == autogate.TypeAdmissionReady && slices.Contains(g.After, h.ID) {
			return []string{fmt.Sprintf("%s %s was registered before %s %s, which intercepts it: it was not held for that webhook. "+
				"Register the webhook configuration (or what installs it) first, or give it a dependsOn on a readiness.AdmissionReady of it by hand",
				f.Type, f.Name, h.Type, h.Name)}
		}
	}
	return nil
}

func (r *reg) child() bool { return strings.HasPrefix(r.ParentType, "kubernetes:") }

func isWebhook(r *reg) bool {
	return r.installer != nil && strings.HasSuffix(r.Type, "WebhookConfiguration")
}

// waitFor waits (s.mu held) until missing returns "" or the deadline passes; it returns what was
// still missing then.
func (s *Session) waitFor(deadline time.Time, missing func() string) string {
	for {
		m := missing()
		if m == "" || !time.Now().Before(deadline) {
			return m
		}
		s.changed.Wait()
	}
}

func (s *Session) firstUnregistered(ids []string) string {
	for _, id := range ids {
		if s.regs[id] == nil {
			return id
		}
	}
	return ""
}

// earlierUnregistered names an entry written above me that some rule may let gate it and has
// not registered ("" when none): every place above it must be announced first. Only entries of
// its cluster whose type may gate its type (autogate.MayGate) are waited for: a ConfigMap does not
// wait for an ExternalSecret that waits for its Release, and 200 ExternalSecrets do not each wait
// for all before them.
func (s *Session) earlierUnregistered(me *reg) string {
	for i := 0; i < me.Order; i++ {
		e, ok := s.entries[i]
		if !ok {
			return fmt.Sprintf("the registration written at place %d", i)
		}
		if e.Cluster != me.Cluster || !autogate.MayGate(e.Type, me.Type) {
			continue
		}
		if s.byOrder[i] == nil {
			return e.Type + " " + e.Name
		}
	}
	return ""
}

// settle waits (s.mu held) until the family of parent had no new child for the settle time.
func (s *Session) settle(parent string, deadline time.Time) {
	for {
		quiet := s.last[parent].Add(s.opts.Settle)
		now := time.Now()
		if !now.Before(quiet) || !now.Before(deadline) {
			return
		}
		t := time.AfterFunc(quiet.Sub(now), func() { s.mu.Lock(); s.changed.Broadcast(); s.mu.Unlock() })
		s.changed.Wait()
		t.Stop()
	}
}

// visible are the installers me's decision sees (s.mu held), in arrival order: of its cluster;
// for a top-level registration, those written above it and every component's child so far (one
// written below may depend on it: a cycle); for a component's child, all so far.
func (s *Session) visible(me *reg) ([]autogate.Installer, map[string]bool) {
	var out []autogate.Installer
	seen := map[string]bool{}
	for _, i := range s.arrived {
		if i == me || i.installer == nil || i.Cluster != me.Cluster {
			continue
		}
		if !me.child() && me.Order >= 0 && i.Order >= me.Order {
			continue
		}
		out = append(out, installerOf(i))
		seen[i.ID] = true
	}
	return out, seen
}

func installerOf(i *reg) autogate.Installer {
	return autogate.Installer{ID: i.ID, Type: i.Type, Name: i.Name, Object: i.installer, Cluster: i.Cluster, Parent: i.Parent}
}

func resourceOf(r Registration) autogate.Resource {
	return autogate.Resource{Type: r.Type, Name: r.Name, ParentType: r.ParentType, Parent: r.Parent, Object: r.Object, Cluster: r.Cluster}
}

// handGated: the program already made it depend on a readiness gate; it is left as it is.
func handGated(r Registration) bool {
	for _, d := range r.DependsOn {
		if strings.HasPrefix(urnType(d), "readiness:") {
			return true
		}
	}
	return false
}

// urnType is the type token of a URN (urn:pulumi:stack::project::parent$type::name), without
// its parents' types.
func urnType(urn string) string {
	parts := strings.Split(urn, "::")
	if len(parts) < 4 {
		return ""
	}
	qualified := parts[2]
	if i := strings.LastIndex(qualified, "$"); i >= 0 {
		return qualified[i+1:]
	}
	return qualified
}

// cycle says why a gate would wait for the registration it guards ("" when it would not): an
// installer it comes after depends on it (through dependsOn or parents), or a gate it comes after
// was left out for that reason (s.mu held).
func (s *Session) cycle(g autogate.Gate, self string, left map[string]bool) string {
	for _, k := range g.AfterGates {
		if left[k] {
			return "the gate it comes after was left out"
		}
	}
	for _, id := range g.After {
		if id == self || s.reaches(id, self, map[string]bool{}) {
			return fmt.Sprintf("%s depends on it", id)
		}
	}
	return ""
}

func (s *Session) reaches(from, to string, seen map[string]bool) bool {
	if seen[from] {
		return false
	}
	seen[from] = true
	r := s.regs[from]
	if r == nil {
		return false
	}
	for _, next := range append(slices.Clone(r.DependsOn), r.Parent) {
		if next == to || (next != "" && s.reaches(next, to, seen)) {
			return true
		}
	}
	return false
}
