package provider

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/expr"
)

// mutationExpect is a compiled `expect` (WebhookReady, AdmissionReady): a CEL expression over a
// dry-run result, `object`, that must hold for the gate to pass. It is also the evidence that a
// mutating webhook ran (see creditsMutation): the only proof there is for a failurePolicy Ignore
// injector, which the API server skips without a word while it is down.
type mutationExpect struct {
	src string
	cel *expr.CEL
}

// compileExpect compiles src with the cost limits of ResourceReady's `cel`; nil for no expect.
func compileExpect(src *string) (*mutationExpect, error) {
	if src == nil {
		return nil, nil
	}
	c, err := expr.CompileCEL(*src)
	if err != nil {
		return nil, err
	}
	return &mutationExpect{src: *src, cel: c}, nil
}

// holdsOn says whether expect already holds on obj as the program gives it. A missing field or
// an evaluation error counts as not holding.
func (x *mutationExpect) holdsOn(obj map[string]any) bool {
	ok, _, err := x.cel.Eval(obj)
	return err == nil && ok
}

// expectVerdict is expect judged on one dry-run result.
type expectVerdict struct {
	// held: expect returned true. why says why not yet (false, or a runtime error such as no
	// such key); terminal that it can never hold (it returned something other than a bool).
	held          bool
	why, terminal string
	hint          string
}

// judge evaluates expect on out, the dry-run result of in. Nothing of a Secret is ever quoted:
// neither the result's content nor CEL's message (which may name a key or a value).
func (x *mutationExpect) judge(in, out *unstructured.Unstructured) expectVerdict {
	ok, msg, err := x.cel.Eval(out.Object)
	secret := isSecret(in)
	hint := "is the mutating webhook that `expect` looks for serving? With failurePolicy Ignore the API server admits the object unmutated while it is down"
	switch {
	case expr.IsResultType(err) && secret:
		return expectVerdict{terminal: fmt.Sprintf("expect %q did not return a bool (the value, of a Secret, is not shown)", x.src)}
	case expr.IsTerminal(err): // a wrong result type, or a cost overrun (whose message quotes only expect)
		return expectVerdict{terminal: "expect: " + err.Error()}
	case err != nil && secret:
		return expectVerdict{why: fmt.Sprintf("expect %q could not be evaluated on the Secret's dry-run result (details hidden: they may quote its data)", x.src), hint: hint}
	case err != nil:
		return expectVerdict{why: fmt.Sprintf("expect could not be evaluated on the dry-run result (%s): %v", dryRunExcerpt(out), err), hint: hint}
	case !ok && secret:
		return expectVerdict{why: fmt.Sprintf("the dry-run result did not satisfy expect %q (a Secret: its content is not shown)", x.src), hint: hint}
	case !ok:
		why := fmt.Sprintf("the dry-run result did not satisfy expect %q", x.src)
		if strings.Contains(msg, "no such key") {
			why += " (" + strings.TrimPrefix(msg, x.src+": ") + ")"
		}
		return expectVerdict{why: why + "; the result has " + dryRunExcerpt(out), hint: hint}
	}
	return expectVerdict{held: true}
}

// dryRunExcerpt is a short, non-secret summary of a dry-run result, for "did not satisfy expect"
// messages: what an injector changes (container names, label and annotation keys), never a
// value. Never call it on a Secret.
func dryRunExcerpt(out *unstructured.Unstructured) string {
	var parts []string
	for _, path := range [][]string{{"spec"}, {"spec", "template", "spec"}, {"spec", "jobTemplate", "spec", "template", "spec"}} {
		for _, field := range []string{"initContainers", "containers"} {
			list, found, _ := unstructured.NestedSlice(out.Object, append(append([]string{}, path...), field)...)
			if !found {
				continue
			}
			var names []string
			for _, c := range list {
				if n, _ := c.(map[string]any)["name"].(string); n != "" {
					names = append(names, n)
				}
			}
			parts = append(parts, fmt.Sprintf("%s.%s [%s]", strings.Join(path, "."), field, shortList(names)))
		}
	}
	for _, field := range []string{"labels", "annotations"} {
		m, _, _ := unstructured.NestedMap(out.Object, "metadata", field)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts = append(parts, fmt.Sprintf("%s keys [%s]", field, shortList(keys)))
	}
	return strings.Join(parts, ", ")
}

func shortList(s []string) string {
	if len(s) > 8 {
		return strings.Join(s[:8], ", ") + fmt.Sprintf(", and %d more", len(s)-8)
	}
	return strings.Join(s, ", ")
}

// creditsMutation decides whether expect, holding on the dry-run result of in, proves that the
// mutating webhook h served. A mutation shows that some mutating webhook answered; it is h's
// only when nothing else can have made it: expect does not hold on in as given (the program's
// own object, or the API server's defaulting of it, cannot satisfy it), and h is the only
// mutating webhook in the cluster that may intercept the request (candidates: every mutating
// webhook not provably skipped for it, whatever its failurePolicy; one with matchConditions is
// taken as intercepting). It returns "" when it does, else why not.
func creditsMutation(x *mutationExpect, in *unstructured.Unstructured, h *admissionHook, candidates []*admissionHook) string {
	if x == nil {
		return "no expect"
	}
	if x.holdsOn(in.Object) {
		return fmt.Sprintf("expect %q already holds on the object as given, so it does not show a mutation", x.src)
	}
	var others []string
	for _, c := range candidates {
		if c.mutating && (c.config != h.config || c.name != h.name) {
			others = append(others, c.name)
		}
	}
	if len(others) > 0 {
		sort.Strings(others)
		return fmt.Sprintf("other mutating webhooks intercept it too (%s), so the mutation expect sees may be theirs", shortList(others))
	}
	return ""
}
