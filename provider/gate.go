package provider

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/property"

	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/inputdiff"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/wait"
)

// DefaultTimeout is how long a gate waits when neither its timeout input nor customTimeouts say.
const DefaultTimeout = 10 * time.Minute

// GateArgs are the inputs every gate takes.
type GateArgs struct {
	Timeout      *string `pulumi:"timeout,optional"`
	Triggers     []any   `pulumi:"triggers,optional" provider:"replaceOnChanges"`
	StableFor    *string `pulumi:"stableFor,optional"`
	FailureGrace *string `pulumi:"failureGrace,optional"`
	Purpose      *string `pulumi:"purpose,optional"`
}

func (g *GateArgs) Annotate(a infer.Annotator) {
	a.Describe(&g.Timeout, "How long to wait before failing, as a Go duration (`90s`, `10m`, `1h`). "+
		"Default `10m`. `customTimeouts.create` applies too; the shorter wins.")
	a.Describe(&g.Triggers, "Arbitrary values (a Helm release's revision, a chart version, an image tag). "+
		"When any of them changes the gate is replaced: it waits again and everything depending on it waits for it.")
	a.Describe(&g.StableFor, "How long the condition must hold without interruption before the gate passes, as a Go "+
		"duration (`10s`): for health that flaps right after a rollout. Any evaluation that is not ready restarts the window. "+
		"Watch-driven (a timer closes the window; probed gates re-probe within it). Default off. Must be shorter than `timeout`.")
	a.Describe(&g.FailureGrace, "How long a terminal state (kstatus Failed, a webhook's denial, a failed Job) must persist "+
		"before the gate fails, as a Go duration (`30s`): for controllers that report a failure for a moment while they retry. "+
		"Any evaluation that is not failing forgives it. Default off: a terminal state fails the gate at once. Must be shorter than `timeout`.")
	a.Describe(&g.Purpose, "Why the gate is there, for people: what waits for it and for what (`the app's Deployment mounts the TLS Secret`). "+
		"Quoted when the gate times out; autoGate sets it to the resource it added the gate for and its reason. Changing it updates the gate "+
		"in place, it never waits again for it.")
}

// windows are the stableFor and failureGrace durations (zero when unset); Check has validated them.
func (g GateArgs) windows() (stableFor, failureGrace time.Duration, err error) {
	if stableFor, err = optionalDuration(g.StableFor); err != nil {
		return 0, 0, fmt.Errorf("stableFor: %w", err)
	}
	if failureGrace, err = optionalDuration(g.FailureGrace); err != nil {
		return 0, 0, fmt.Errorf("failureGrace: %w", err)
	}
	return stableFor, failureGrace, nil
}

func optionalDuration(s *string) (time.Duration, error) {
	if s == nil || *s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(*s)
	if err != nil {
		return 0, durationError(*s, `"10s" or "1m"`)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q must be positive", *s)
	}
	return d, nil
}

func (g GateArgs) timeout() (time.Duration, error) {
	if g.Timeout == nil || *g.Timeout == "" {
		return DefaultTimeout, nil
	}
	d, err := time.ParseDuration(*g.Timeout)
	if err != nil {
		return 0, durationError(*g.Timeout, `"90s" or "10m"`)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q must be positive", *g.Timeout)
	}
	if d < MinTimeout {
		return 0, fmt.Errorf("%q is too short to reach the Kubernetes API and read anything: give at least %s", *g.Timeout, MinTimeout)
	}
	return d, nil
}

// MinTimeout is the shortest timeout a gate accepts: below it even a ready target fails, and the
// failure would blame the cluster ("cannot reach the Kubernetes API").
const MinTimeout = time.Second

// durationSyntax is Go's duration syntax; a string in it that ParseDuration refuses is too long.
var durationSyntax = regexp.MustCompile(`^[-+]?([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$`)

// durationError says why s is not a duration: not one at all, or over Go's limit (about 292 years).
func durationError(s, examples string) error {
	if durationSyntax.MatchString(s) {
		return fmt.Errorf("%q is too long: a duration is at most %s (about 292 years)", s, time.Duration(math.MaxInt64).Truncate(time.Hour))
	}
	return fmt.Errorf("%q is not a duration such as %s", s, examples)
}

// checkFailures validates the shared inputs; known reports whether an input is known at preview
// (an output of another resource is not, and must not be judged yet).
func (g GateArgs) checkFailures(inputs property.Map) []p.CheckFailure {
	var failures []p.CheckFailure
	timeout, timeoutErr := g.timeout()
	if isKnown(inputs, "timeout") && timeoutErr != nil {
		failures = append(failures, p.CheckFailure{Property: "timeout", Reason: timeoutErr.Error()})
	}
	for _, w := range []struct {
		key string
		val *string
	}{{"stableFor", g.StableFor}, {"failureGrace", g.FailureGrace}} {
		if !isKnown(inputs, w.key) {
			continue
		}
		d, err := optionalDuration(w.val)
		switch {
		case err != nil:
			failures = append(failures, p.CheckFailure{Property: w.key, Reason: err.Error()})
		case d > 0 && timeoutErr == nil && isKnown(inputs, "timeout") && d >= timeout:
			failures = append(failures, p.CheckFailure{Property: w.key, Reason: fmt.Sprintf(
				"%s must be shorter than the gate's timeout (%s), or the gate could never pass or fail on it", d, timeout)})
		}
	}
	return failures
}

// isKnown reports whether the input key is set to a fully known value, or is absent.
func isKnown(inputs property.Map, key string) bool {
	v, ok := inputs.GetOk(key)
	if !ok {
		return true
	}
	return !v.HasComputed()
}

// gateID is the ID a created gate gets: stable for its inputs' target, unique per creation.
func gateID(kind, target string) string {
	return fmt.Sprintf("%s/%s/%d", kind, target, time.Now().UnixNano())
}

// maxBackoffOf is the evaluation's own probe backoff cap, if it has one.
func maxBackoffOf(e evaluation) time.Duration {
	if f, ok := e.(interface{ maxBackoff() time.Duration }); ok {
		return f.maxBackoff()
	}
	return 0
}

// evaluation is one gate's decision logic over the cluster.
type evaluation interface {
	what() string
	check(ctx context.Context) verdict.Result
}

// eventSubject is implemented by gates that wait on one named object: a timeout then quotes
// that object's most recent Warning events (FailedMount, FailedScheduling, BackOff, ...).
type eventSubject interface {
	subject() (namespace, name string)
}

// newRun is a session on the provider's shared clients. It does not call the cluster (see
// session.Run.Reach).
func newRun(ctx context.Context) (*session.Run, error) {
	clients, err := infer.GetConfig[Config](ctx).Clients()
	if err != nil {
		return nil, err
	}
	return session.New(ctx, clients), nil
}

// builder makes a gate's evaluation for one run, and the function that writes its outputs.
type builder[O any] func(r *session.Run) (evaluation, func(*O), error)

// createGate is Create for every gate (name: the resource's): preview returns at once with
// unknown outputs; otherwise wait until ready, then fill the outputs.
func createGate[O any](ctx context.Context, name string, dryRun bool, args GateArgs, state O, idKind string, build builder[O]) (infer.CreateResponse[O], error) {
	if dryRun {
		return infer.CreateResponse[O]{Output: state}, nil
	}
	updating.Store(true) // an update: autoGate's head starts may begin (head_start.go)
	began := time.Now()
	timeout, err := args.timeout()
	if err != nil {
		return infer.CreateResponse[O]{}, fmt.Errorf("timeout: %w", err)
	}
	stableFor, failureGrace, err := args.windows()
	if err != nil {
		return infer.CreateResponse[O]{}, err
	}
	r, err := newRun(ctx)
	if err != nil {
		return infer.CreateResponse[O]{}, err
	}
	defer r.Close()
	e, fill, err := build(r)
	if err != nil {
		return infer.CreateResponse[O]{}, err
	}
	took, err := r.Reach(ctx, e.what(), timeout)
	if err != nil {
		return infer.CreateResponse[O]{}, err
	}
	session.Trace(e.what(), "create of %s began %dus ago (reaching the cluster %dus)", name, time.Since(began).Microseconds(), took.Microseconds())
	spec := wait.Spec{What: e.what(), Timeout: max(timeout-took, time.Millisecond), Check: e.check, MaxBackoff: maxBackoffOf(e),
		StableFor: stableFor, FailureGrace: failureGrace, Recheck: maxBackoffOf(e)}
	if _, err := r.Wait(ctx, spec); err != nil {
		var te *wait.TimeoutError
		if errors.As(err, &te) {
			te.Waited += took // the gate's timeout covers reaching the cluster too: say the whole wait
			if args.Purpose != nil && *args.Purpose != "" {
				te.Context = append(te.Context, "this gate is there because: "+*args.Purpose)
			}
			if es, ok := e.(eventSubject); ok {
				ns, name := es.subject()
				if warnings := r.RecentWarnings(ctx, ns, name, 3); len(warnings) > 0 {
					te.Context = append(te.Context, "recent Warning events: "+strings.Join(warnings, " | "))
				}
			}
		}
		return infer.CreateResponse[O]{}, err
	}
	fill(&state)
	session.Trace(e.what(), "created %s", name)
	target := e.what()
	if t, ok := e.(interface{ idTarget() string }); ok {
		target = t.idTarget()
	}
	return infer.CreateResponse[O]{ID: gateID(idKind, target), Output: state}, nil
}

// readGate is Read for every gate: run the gate's proof to a verdict, without waiting for
// readiness (see judge). A gate whose target is no longer ready is reported gone, so the next
// `up` creates it again, which waits again.
func readGate[I, O any](ctx context.Context, req infer.ReadRequest[I, O], build builder[O]) (infer.ReadResponse[I, O], error) {
	if reflect.ValueOf(req.Inputs).IsZero() && reflect.ValueOf(req.State).IsZero() {
		return infer.ReadResponse[I, O]{}, importRefused(req.ID)
	}
	r, err := newRun(ctx)
	if err != nil {
		return infer.ReadResponse[I, O]{}, err
	}
	defer r.Close()
	e, fill, err := build(r)
	if err != nil {
		return infer.ReadResponse[I, O]{}, err
	}
	if _, err := r.Reach(ctx, e.what(), session.RefreshBound); err != nil {
		return infer.ReadResponse[I, O]{}, err
	}
	res, err := r.Judge(ctx, e.what(), e.check, maxBackoffOf(e))
	if err != nil {
		return infer.ReadResponse[I, O]{}, err
	}
	if !res.Ready {
		r.Log.Warningf("%s is no longer ready (%s); the next update waits for it again", e.what(), res.Message)
		return infer.ReadResponse[I, O]{}, nil
	}
	state := req.State
	fill(&state)
	return infer.ReadResponse[I, O]{ID: req.ID, Inputs: req.Inputs, State: state}, nil
}

// importRefused is the answer to `pulumi import` (a Read with neither inputs nor state). A gate
// owns nothing in the cluster that could be adopted, and guessing its target from an ID would
// record a gate that never checked anything; declaring it costs one check instead.
func importRefused(id string) error {
	return fmt.Errorf("readiness gates cannot be imported (id %q): a gate owns no object in the cluster, it only waits "+
		"for one. Declare the gate in your program instead: `pulumi up` creates it, which checks its target once and "+
		"returns at once when the target is already ready", id)
}

// diffGate decides replacement by top-level input, in the provider, so every client behaves
// alike. infer's default diff asks the schema's replaceOnChanges about each changed *path*
// (`triggers[0]`, `probe.metadata.namespace`), finds none for nested paths and plans an in-place
// update: the gate would never wait again. A client's own replaceOnChanges (the SDKs') hides
// that, raw registrations (Pulumi YAML, a component's children) do not. Here any change of any
// input but `timeout`, `stableFor`, `failureGrace` and `purpose` (words for people) replaces the
// gate, so it waits again.
func diffGate[I any](olds, news I) p.DiffResponse {
	return inputdiff.Replace(olds, news, "timeout", "stableFor", "failureGrace", "purpose")
}

// gate is embedded in a gate resource for the lifecycle methods that depend only on its input
// and state types: Diff and Update. Its state type must embed its input type, as every
// <Kind>ReadyState embeds <Kind>ReadyArgs.
type gate[I, O any] struct{}

// Diff replaces the gate on any change of what it waits for (see diffGate).
func (gate[I, O]) Diff(_ context.Context, r infer.DiffRequest[I, O]) (infer.DiffResponse, error) {
	return diffGate(*embeddedInputs[I](&r.State), r.Inputs), nil
}

// Update takes the new inputs and returns at once: only the inputs that say how long to wait
// update in place (see diffGate), and a gate that already passed has nothing to wait for.
func (gate[I, O]) Update(_ context.Context, r infer.UpdateRequest[I, O]) (infer.UpdateResponse[O], error) {
	return updateGate(r, func(s *O, in I) { *embeddedInputs[I](s) = in })
}

// embeddedInputs points at the inputs a gate's state embeds.
func embeddedInputs[I, O any](state *O) *I {
	v := reflect.ValueOf(state).Elem()
	for i := range v.NumField() {
		if f := v.Type().Field(i); f.Anonymous && f.Type == reflect.TypeFor[I]() {
			return v.Field(i).Addr().Interface().(*I)
		}
	}
	panic(fmt.Sprintf("%s does not embed %s", v.Type(), reflect.TypeFor[I]()))
}

// updateGate is Update for every gate: the new inputs into the state, without waiting again.
func updateGate[I, O any](req infer.UpdateRequest[I, O], setInputs func(*O, I)) (infer.UpdateResponse[O], error) {
	state := req.State
	setInputs(&state, req.Inputs)
	return infer.UpdateResponse[O]{Output: state}, nil
}

// gateArgs lets checkGate reach the shared inputs of any gate's arguments.
func (g GateArgs) gateArgs() GateArgs { return g }

// checkGate is Check for every gate: decode with infer's defaults, validate the shared inputs,
// then the gate's own (validate appends to failures and returns them; it sees req via closure).
func checkGate[A interface{ gateArgs() GateArgs }](ctx context.Context, req infer.CheckRequest,
	validate func(args A, failures []p.CheckFailure) []p.CheckFailure) (infer.CheckResponse[A], error) {
	session.Trace(req.Name, "inputs checked")
	args, failures, err := infer.DefaultCheck[A](ctx, req.NewInputs)
	if err != nil || len(failures) > 0 {
		return infer.CheckResponse[A]{Inputs: args, Failures: hideValues(req.NewInputs, typeFailures(failures))}, err
	}
	if failures = wholeNumberFailures[A](req.NewInputs); len(failures) > 0 {
		return infer.CheckResponse[A]{Inputs: args, Failures: hideValues(req.NewInputs, failures)}, nil
	}
	failures = append(failures, args.gateArgs().checkFailures(req.NewInputs)...)
	return infer.CheckResponse[A]{Inputs: args, Failures: hideValues(req.NewInputs, validate(args, failures))}, nil
}
