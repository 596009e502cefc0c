package admission

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/expr"
)

// Expect is a compiled `expect` (WebhookReady, AdmissionReady): a CEL expression over a
// dry-run result, `object`, that must hold for the gate to pass. It is also the evidence that a
// mutating webhook ran (see CreditsMutation): the only proof there is for a failurePolicy Ignore
// injector, which the API server skips without a word while it is down.
type Expect struct {
	src string
	cel *expr.CEL
}

// Source is expect as written.
func (x *Expect) Source() string { return x.src }

// CompileExpect compiles src with the cost limits of ResourceReady's `cel`; nil for no expect.
func CompileExpect(src *string) (*Expect, error) {
	if src == nil {
		return nil, nil
	}
	c, err := expr.CompileCEL(*src)
	if err != nil {
		return nil, err
	}
	return &Expect{src: *src, cel: c}, nil
}

// HoldsOn says whether expect already holds on obj as the program gives it. A missing field or
// an evaluation error counts as not holding.
func (x *Expect) HoldsOn(obj map[string]any) bool {
	ok, _, err := x.cel.Eval(obj)
	return err == nil && ok
}

// ExpectVerdict is expect judged on one dry-run result.
type ExpectVerdict struct {
	// Held: expect returned true. Why says why not yet (false, or a runtime error such as no
	// such key); Terminal that it can never hold (it returned something other than a bool).
	Held          bool
	Why, Terminal string
	Hint          string
}

// Judge evaluates expect on out, the dry-run result of in. Nothing of a Secret is ever quoted:
// neither the result's content nor CEL's message (which may name a key or a value).
func (x *Expect) Judge(in, out *unstructured.Unstructured) ExpectVerdict {
	ok, msg, err := x.cel.Eval(out.Object)
	secret := IsSecret(in)
	hint := "is the mutating webhook that `expect` looks for serving? With failurePolicy Ignore the API server admits the object unmutated while it is down"
	switch {
	case expr.IsResultType(err) && secret:
		return ExpectVerdict{Terminal: fmt.Sprintf("expect %q did not return a bool (the value, of a Secret, is not shown)", x.src)}
	case expr.IsTerminal(err): // a wrong result type, or a cost overrun (whose message quotes only expect)
		return ExpectVerdict{Terminal: "expect: " + err.Error()}
	case err != nil && secret:
		return ExpectVerdict{Why: fmt.Sprintf("expect %q could not be evaluated on the Secret's dry-run result (details hidden: they may quote its data)", x.src), Hint: hint}
	case err != nil:
		return ExpectVerdict{Why: fmt.Sprintf("expect could not be evaluated on the dry-run result (%s): %v", dryRunExcerpt(out), err), Hint: hint}
	case !ok && secret:
		return ExpectVerdict{Why: fmt.Sprintf("the dry-run result did not satisfy expect %q (a Secret: its content is not shown)", x.src), Hint: hint}
	case !ok:
		why := fmt.Sprintf("the dry-run result did not satisfy expect %q", x.src)
		if strings.Contains(msg, "no such key") {
			why += " (" + strings.TrimPrefix(msg, x.src+": ") + ")"
		}
		return ExpectVerdict{Why: why + "; the result has " + dryRunExcerpt(out), Hint: hint}
	}
	return ExpectVerdict{Held: true}
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

// CreditsMutation decides whether expect, holding on the dry-run result of in, proves that the
// mutating webhook h served. A mutation shows that some mutating webhook answered; it is h's
// only when nothing else can have made it: expect does not hold on in as given (the program's
// own object, or the API server's defaulting of it, cannot satisfy it), and h is the only
// mutating webhook in the cluster that may intercept the request (candidates: every mutating
// webhook not provably skipped for it, whatever its failurePolicy; one with matchConditions is
// taken as intercepting). It returns "" when it does, else why not.
func CreditsMutation(x *Expect, in *unstructured.Unstructured, h *Hook, candidates []*Hook) string {
	if x == nil {
		return "no expect"
	}
	if x.HoldsOn(in.Object) {
		return fmt.Sprintf("expect %q already holds on the object as given, so it does not show a mutation", x.src)
	}
	var others []string
	for _, c := range candidates {
		if c.Mutating && (c.Config != h.Config || c.Name != h.Name) {
			others = append(others, c.Name)
		}
	}
	if len(others) > 0 {
		sort.Strings(others)
		return fmt.Sprintf("other mutating webhooks intercept it too (%s), so the mutation expect sees may be theirs", shortList(others))
	}
	return ""
}
