package helmrelease

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/internal/fixtures"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// Table tests over YAML fixtures in testdata/ (as kstatus's): what HelmReleaseReady gathered and
// what must be decided, the near misses beside the states that pass.

func TestJudgeRevisionFixtures(t *testing.T) {
	type tc struct {
		Name    string `json:"name"`
		Release struct {
			Revision            int
			Status, Description string
		} `json:"release"`
		Deployed bool   `json:"deployed"`
		Failed   string `json:"failed"`
		Message  string `json:"message"`
	}
	for _, c := range fixtures.Load[tc](t, "revisions.yaml") {
		t.Run(c.Name, func(t *testing.T) {
			rel := &Release{Name: "app", Namespace: "web", Revision: c.Release.Revision, Status: c.Release.Status, Description: c.Release.Description}
			ok, res := JudgeRevision(rel, "web", "app")
			failed := ""
			if res.Failed != nil {
				failed = res.Failed.Error()
			}
			if ok != c.Deployed || res.Ready || (c.Failed == "") != (failed == "") || !strings.Contains(failed, c.Failed) ||
				!strings.Contains(res.Message, c.Message) || (!ok && failed == "" && res.Message == "") {
				t.Errorf("JudgeRevision = %v, %+v; want deployed=%v failed %q saying %q", ok, res, c.Deployed, c.Failed, c.Message)
			}
		})
	}
}

func TestJudgeObjectsFixtures(t *testing.T) {
	type state struct {
		Ref, Message, Failed  string
		Ready, Poll, Unsynced bool
		Confirming            bool
		RetryInMs             int
	}
	type tc struct {
		Name       string  `json:"name"`
		Total      int     `json:"total"`
		States     []state `json:"states"`
		Ready      bool    `json:"ready"`
		Failed     string  `json:"failed"`
		Message    string  `json:"message"`
		Poll       bool    `json:"poll"`
		Unsynced   bool    `json:"unsynced"`
		Confirming bool    `json:"confirming"`
		RetryInMs  int     `json:"retryInMs"`
		Chart      bool    `json:"chart"` // a Chart v4's objects: no revision, none named
	}
	for _, c := range fixtures.Load[tc](t, "objects.yaml") {
		t.Run(c.Name, func(t *testing.T) {
			o := Objects{What: "Helm release web/app", Revision: 3, Total: c.Total}
			if c.Chart {
				o.What, o.Revision = "Chart objects", 0
			}
			if o.Total == 0 {
				o.Total = len(c.States)
			}
			for _, s := range c.States {
				kind, name, _ := strings.Cut(s.Ref, " ")
				ns := ""
				if a, b, ok := strings.Cut(name, "/"); ok {
					ns, name = a, b
				}
				r := verdict.Result{Ready: s.Ready, Message: s.Message, Poll: s.Poll, Unsynced: s.Unsynced, Confirming: s.Confirming,
					RetryIn: time.Duration(s.RetryInMs) * time.Millisecond}
				if s.Failed != "" {
					r.Failed = errors.New(s.Failed)
				}
				o.States = append(o.States, ObjectState{Ref: ObjectRef{Kind: kind, Namespace: ns, Name: name}, Result: r})
			}
			res := JudgeObjects(o)
			failed := ""
			if res.Failed != nil {
				failed = res.Failed.Error()
			}
			if res.Ready != c.Ready || (c.Failed == "") != (failed == "") || !strings.Contains(failed, c.Failed) || !strings.Contains(res.Message, c.Message) ||
				(c.Chart && strings.Contains(res.Message, "revision")) || res.Poll != c.Poll || res.Unsynced != c.Unsynced || res.Confirming != c.Confirming || res.RetryIn != time.Duration(c.RetryInMs)*time.Millisecond {
				t.Errorf("JudgeObjects = %+v; want %+v", res, c)
			}
		})
	}
}
