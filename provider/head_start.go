package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/readiness-io/pulumi-readiness/provider/internal/probe"
	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/autogate"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/wait"
)

// A head start is an AdmissionReady's first rounds, begun in the background the moment autoGate
// decides the gate rather than once the engine has registered it, checked it and called its
// Create: on a loaded machine those hops take as long as the dry run itself, so a gate born
// ready (its webhook already answering) returns about one dry run sooner. Only gates autogate
// marks Ahead get one (every installer they wait for was created before the registration was
// sent: the state a head start judges is the state the Create would judge), and the Create
// adopts only a pass, begun at most probe.ProofReuse before the Create itself (the age any proof
// a composite gate reuses may have); anything else, and the Create waits on its own as before.

// updating is set by the first gate Create of this process that is not a preview: an update.
// A preview creates no gate, so it begins no head start (the decision's own reads aside, a
// preview does not call the cluster).
var updating atomic.Bool

type headStart struct {
	began   time.Time
	clients *kube.Clients
	done    chan struct{}
	// Set before done closes, when the rounds passed.
	passed time.Time
	what   string
	state  AdmissionReadyState
}

var headStarts = struct {
	sync.Mutex
	byJudged map[string]*headStart
	// begun: session and gate key of every head start: a batch gate's later registrations
	// (which depend on the gate made for the first) begin none.
	begun map[string]bool
}{byJudged: map[string]*headStart{}, begun: map[string]bool{}}

// admissionJudged is what an AdmissionReady's verdict depends on (not its timeout, nor the
// purpose autoGate writes), the same from the decision's args and from the Create's inputs.
type admissionJudged struct {
	Objects     []map[string]any `json:"objects"`
	Expect      *string          `json:"expect,omitempty"`
	Consecutive *int             `json:"consecutive,omitempty"`
	Retried     *bool            `json:"retried,omitempty"`
}

// judgedOf is what a's verdict depends on.
func judgedOf(a AdmissionReadyArgs) admissionJudged {
	return admissionJudged{Objects: a.Objects, Expect: a.Expect, Consecutive: a.Consecutive, Retried: a.Retried}
}

// digest names it without keeping its objects (a Secret's data) as a map key.
func (j admissionJudged) digest() string {
	b, _ := json.Marshal(j)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// beginHeadStart begins g's head start on clients, for autoGate's session. Only an update's
// AdmissionReady marked Ahead, made by this provider (see gateTarget.provider), gets one.
func beginHeadStart(sessionID string, g autogate.Gate, clients *kube.Clients) {
	if !g.Ahead || g.Type != autogate.TypeAdmissionReady || !updating.Load() {
		return
	}
	raw, err := json.Marshal(g.Args)
	var a AdmissionReadyArgs // the inputs the SDK will send for g (see autogate.Gate.Args)
	if err != nil || json.Unmarshal(raw, &a) != nil || len(a.Objects) == 0 {
		return
	}
	key := judgedOf(a).digest()
	h := &headStart{began: time.Now(), clients: clients, done: make(chan struct{})}
	headStarts.Lock()
	if headStarts.begun[sessionID+"\x00"+g.Key] {
		headStarts.Unlock()
		return
	}
	headStarts.begun[sessionID+"\x00"+g.Key] = true
	headStarts.byJudged[key] = h
	headStarts.Unlock()
	go h.run(a)
	time.AfterFunc(2*probe.ProofReuse, func() { // a gate the engine never created (a cycle, a failed registration)
		headStarts.Lock()
		if headStarts.byJudged[key] == h {
			delete(headStarts.byJudged, key)
		}
		headStarts.Unlock()
	})
}

// run is the gate's own wait, for probe.ProofReuse at most, on the provider's shared clients.
func (h *headStart) run(a AdmissionReadyArgs) {
	defer close(h.done)
	ctx, cancel := context.WithTimeout(context.Background(), probe.ProofReuse)
	defer cancel()
	r := session.New(ctx, h.clients)
	defer r.Close()
	e, fill, err := admissionBuilder(a)(r)
	if err != nil {
		return
	}
	if _, err := r.Quietly(ctx, wait.Spec{What: e.what(), Timeout: probe.ProofReuse, Check: e.check, MaxBackoff: maxBackoffOf(e)}); err != nil {
		return
	}
	h.state = AdmissionReadyState{}
	fill(&h.state)
	h.what, h.passed = e.what(), time.Now()
}

// adoptHeadStart is the head start a Create of a with this provider's clients may pass on: one
// that passed, begun at most probe.ProofReuse before now; nil otherwise (taken either way).
func adoptHeadStart(ctx context.Context, a AdmissionReadyArgs) *headStart {
	updating.Store(true)
	if a.StableFor != nil && *a.StableFor != "" {
		return nil
	}
	key := judgedOf(a).digest()
	headStarts.Lock()
	h := headStarts.byJudged[key]
	delete(headStarts.byJudged, key)
	headStarts.Unlock()
	if h == nil || time.Since(h.began) > probe.ProofReuse {
		return nil
	}
	if clients, err := infer.GetConfig[Config](ctx).Clients(); err != nil || clients != h.clients {
		return nil
	}
	select {
	case <-h.done:
	case <-ctx.Done():
		return nil
	}
	if h.passed.IsZero() {
		return nil
	}
	return h
}
