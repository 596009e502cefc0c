package helmrelease

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// HelmReleaseReady gathers a release's newest record and the state of each of its objects;
// JudgeRevision and JudgeObjects decide over them.

// JudgeRevision says whether the newest revision rel of release namespace/name is the one whose
// objects are checked: only a deployed one is (ok). A failed one fails at once with Helm's own
// words; a pending one (Helm still installing, upgrading or rolling back) is waited for, never
// judged by the revision before it; anything else (uninstalling, uninstalled with kept history,
// superseded, unknown) has nothing deployed to check.
func JudgeRevision(rel *Release, namespace, name string) (ok bool, res verdict.Result) {
	quote := ""
	if rel.Description != "" {
		quote = ": " + strconv.Quote(rel.Description)
	}
	switch {
	case rel.Status == StatusDeployed:
		return true, verdict.Result{}
	case rel.Status == StatusFailed:
		return false, verdict.Result{Failed: fmt.Errorf("Helm release %s/%s: revision %d has Helm status %q%s (helm history %s -n %s)",
			namespace, name, rel.Revision, rel.Status, quote, name, namespace)}
	case IsPending(rel.Status):
		return false, verdict.Result{Message: fmt.Sprintf("revision %d is %s%s: Helm is still applying it", rel.Revision, rel.Status, quote),
			Hint: "is the helm command (or the Pulumi Release) still running? A release left pending by an interrupted helm needs `helm rollback` or a new upgrade"}
	}
	return false, verdict.Result{Message: fmt.Sprintf("the newest revision (%d) is %s%s, not deployed", rel.Revision, rel.Status, quote),
		Hint: "helm history " + name + " -n " + namespace}
}

// ObjectState is one object of the manifest as its gate judged it.
type ObjectState struct {
	Ref    ObjectRef
	Result verdict.Result
}

// Objects is what HelmReleaseReady gathered for a deployed revision (ChartReady for a Chart v4's
// objects): its number, how many objects its manifest holds, and the state of each checked so
// far (the gathering stops at a verdict).
type Objects struct {
	What     string // "Helm release ns/name", for errors
	Revision int    // 0: no revision (a Chart v4 keeps none)
	Total    int
	States   []ObjectState
}

// JudgeObjects decides a deployed revision: ready when every object is; failed at once when
// one failed. A result is a verdict only once every object's state is known: while any watch
// cache is still loading (Unsynced) or a webhook probe is confirming, and nothing is plainly not
// ready, the release is not judged yet (a refresh keeps evaluating). RetryIn is the soonest of
// the objects' own schedules (a webhook probe's).
func JudgeObjects(o Objects) verdict.Result {
	var pending []string
	poll, unsynced, confirming, notReady := false, false, false, false
	var retryIn time.Duration
	for _, s := range o.States {
		res := s.Result
		if res.Failed != nil {
			return verdict.Result{Failed: fmt.Errorf("%s: %s: %w", o.What, s.Ref, res.Failed)}
		}
		if res.Ready {
			continue
		}
		pending = append(pending, s.Ref.String()+": "+res.Message)
		poll = poll || res.Poll
		unsynced = unsynced || res.Unsynced
		confirming = confirming || res.Confirming
		notReady = notReady || !(res.Unsynced || res.Confirming)
		if res.RetryIn > 0 && (retryIn == 0 || res.RetryIn < retryIn) {
			retryIn = res.RetryIn
		}
	}
	if len(o.States) < o.Total {
		// Not every object was judged: never ready.
		pending = append(pending, fmt.Sprintf("%d objects not judged yet", o.Total-len(o.States)))
		notReady = true
	}
	if len(pending) > 0 {
		sort.Strings(pending)
		revision := ""
		if o.Revision > 0 {
			revision = fmt.Sprintf("revision %d: ", o.Revision)
		}
		return verdict.Result{Message: fmt.Sprintf("%s%d of %d objects pending: %s", revision, len(pending), o.Total,
			strings.Join(pending, "; ")), Poll: poll, RetryIn: retryIn, Unsynced: unsynced && !notReady, Confirming: confirming && !notReady && !unsynced}
	}
	return verdict.Result{Ready: true}
}
