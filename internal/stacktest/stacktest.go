// Package stacktest holds the helpers of the end-to-end stack tests (tests/e2e and its
// packages): a Pulumi environment per test (internal/stack), stacks of inline programs on the
// shared control plane of internal/testenv, and what the tests read back from them. The tests
// are split into packages by subject so that `go test` runs them side by side, each package with
// its own control plane; these helpers are what they share.
package stacktest

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/fakes"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// Prepare makes the test's Pulumi environment in its temp folder.
func Prepare(t *testing.T) *stack.Env {
	t.Helper()
	env, err := stack.Prepare(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// NewStack selects a stack of the inline program on the local control plane, destroyed (and
// removed) when the test ends.
func NewStack(t *testing.T, env *stack.Env, project string, program pulumi.RunFunc) auto.Stack {
	t.Helper()
	s, err := env.Stack(context.Background(), project, "dev", string(testenv.CP.Kubeconfig), program)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = s.Destroy(context.Background(), optdestroy.Remove()) })
	return s
}

// Up runs `pulumi up`, failing the test with the engine's output if it fails; it returns the
// result and that output (the rows `pulumi up` showed).
func Up(t *testing.T, s auto.Stack) (auto.UpResult, string) {
	t.Helper()
	var out strings.Builder
	res, err := s.Up(context.Background(), optup.ProgressStreams(&out))
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out.String())
	}
	return res, out.String()
}

// UpOnceGated runs `pulumi up` as Up does, and calls then the moment the engine begins the step of
// the first resource of type gateType (a gate autoGate decided to add), aligned to the next whole
// second (SleepToSecond); it returns when then was called (zero if never). A test that makes a
// condition true only once the gate exists is deterministic: the decision cannot see the
// condition already true, however slowly the machine starts the program.
func UpOnceGated(t *testing.T, s auto.Stack, gateType string, then func()) (auto.UpResult, string, time.Time) {
	t.Helper()
	var out strings.Builder
	ch := make(chan events.EngineEvent)
	startedAt := make(chan time.Time, 1)
	go func() {
		fired := false
		for e := range ch {
			if !fired && e.ResourcePreEvent != nil && e.ResourcePreEvent.Metadata.Type == gateType {
				fired = true
				SleepToSecond(0)
				startedAt <- time.Now()
				then()
			}
		}
		if !fired {
			startedAt <- time.Time{}
		}
	}()
	res, err := s.Up(context.Background(), optup.ProgressStreams(&out), optup.EventStreams(ch))
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out.String())
	}
	return res, out.String(), <-startedAt
}

// UpErr runs `pulumi up` and returns its error with the engine's output.
func UpErr(s auto.Stack) (auto.UpResult, error) {
	var out strings.Builder
	res, err := s.Up(context.Background(), optup.ProgressStreams(&out))
	if err != nil {
		return res, fmt.Errorf("%w\n%s", err, out.String())
	}
	return res, nil
}

// Destroy runs `pulumi destroy`, failing the test with the engine's output if it fails.
func Destroy(t *testing.T, s auto.Stack) {
	t.Helper()
	var out strings.Builder
	if _, err := s.Destroy(context.Background(), optdestroy.ProgressStreams(&out)); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out.String())
	}
}

// RequireFailure checks that err is the report's error as pulumi-kubernetes reports it.
func RequireFailure(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("without the gate the stack must fail with %q; it succeeded", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("without the gate the stack must fail with %q; got:\n%v", w, err)
		}
	}
}

// ServeWhenAvailable plays a chart's webhook pod (fakes.ServeWhenAvailable); after < 0: it does
// not serve until stopped.
func ServeWhenAvailable(t *testing.T, wh *testenv.Webhook, ns, name string, after time.Duration) func() {
	if after < 0 {
		return func() {}
	}
	p := fakes.ServeWhenAvailable(testenv.CP.Client, wh.Webhook, ns, name, after, nil)
	return func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
	}
}

// SleepToSecond sleeps d, then to the next whole second: an event right after it can be
// compared with the API server's whole-second creationTimestamp with no second of slack.
func SleepToSecond(d time.Duration) {
	time.Sleep(d)
	now := time.Now()
	time.Sleep(now.Truncate(time.Second).Add(time.Second).Sub(now))
}

// CreatedBefore reports whether an object whose creationTimestamp (whole seconds) is created was
// created before at, an instant just after a whole second (SleepToSecond).
func CreatedBefore(created, at time.Time) bool {
	return created.Before(at.Truncate(time.Second))
}

// OutputTime reads a stack output holding an RFC 3339 time (an object's creationTimestamp).
func OutputTime(t *testing.T, res auto.UpResult, key string) time.Time {
	t.Helper()
	v, _ := res.Outputs[key].Value.(string)
	at, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		t.Fatalf("output %s: %v", key, err)
	}
	return at
}

// CreatedAt is the object's creationTimestamp (whole seconds).
func CreatedAt(t *testing.T, doc string) time.Time {
	t.Helper()
	u := testenv.Object(t, doc)
	got, err := testenv.Resource(t, u).Get(context.Background(), u.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return got.GetCreationTimestamp().Time
}

// NotBefore fails when an object created at created (whole seconds) was created before proof
// (at most one second earlier is the timestamp's truncation).
func NotBefore(t *testing.T, what string, created, proof time.Time) {
	t.Helper()
	if created.Add(time.Second).Before(proof) {
		t.Errorf("%s was created at %s, before its proof at %s", what, created.Format(time.RFC3339Nano), proof.Format(time.RFC3339Nano))
	}
}

// StateResource is one resource of a stack's exported state.
type StateResource struct {
	URN          string         `json:"urn"`
	Type         string         `json:"type"`
	Dependencies []string       `json:"dependencies"`
	Inputs       map[string]any `json:"inputs"`
}

// StateOf is the stack's resources as its exported state holds them.
func StateOf(t *testing.T, s auto.Stack) []StateResource {
	t.Helper()
	dep, err := s.Export(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Resources []StateResource `json:"resources"`
	}
	if err := json.Unmarshal(dep.Deployment, &d); err != nil {
		t.Fatal(err)
	}
	return d.Resources
}

// GatesOf lists the stack's readiness resources as "Type name".
func GatesOf(t *testing.T, s auto.Stack) []string {
	t.Helper()
	var out []string
	for _, r := range StateOf(t, s) {
		if strings.HasPrefix(r.Type, "readiness:index:") {
			out = append(out, strings.TrimPrefix(r.Type, "readiness:index:")+" "+resource.URN(r.URN).Name())
		}
	}
	sort.Strings(out)
	return out
}

// UnretriedAdmissions lists the stack's AdmissionReady gates without `retried`: autoGate sets it
// on every one in front of an object's own create when the program's error hook is wired.
func UnretriedAdmissions(t *testing.T, s auto.Stack) []string {
	t.Helper()
	var out []string
	for _, r := range StateOf(t, s) {
		if r.Type == "readiness:index:AdmissionReady" && r.Inputs["retried"] != true {
			out = append(out, resource.URN(r.URN).Name())
		}
	}
	sort.Strings(out)
	return out
}

// DependenciesOf is the state's dependencies of the stack's one resource of type typ.
func DependenciesOf(t *testing.T, s auto.Stack, typ string) []string {
	t.Helper()
	for _, r := range StateOf(t, s) {
		if r.Type == typ {
			return r.Dependencies
		}
	}
	t.Fatalf("no %s in the stack", typ)
	return nil
}

// ExportAsStored is `pulumi stack export` without `--show-secrets`: the state as the backend
// keeps it, secrets encrypted (the Automation API's Export decrypts them).
func ExportAsStored(ctx context.Context, s auto.Stack) (string, error) {
	ws := s.Workspace()
	var env []string
	for k, v := range ws.GetEnvVars() {
		env = append(env, k+"="+v)
	}
	out, errOut, code, err := ws.PulumiCommand().Run(ctx, ws.WorkDir(), nil, nil, nil, env, "stack", "export", "--stack", s.Name())
	if err != nil || code != 0 {
		return "", fmt.Errorf("pulumi stack export: exit %d: %v\n%s", code, err, errOut)
	}
	return out, nil
}
