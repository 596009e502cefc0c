// Package objectrule compiles a ResourceReady's inputs into the rule it applies to each object
// (a condition, a JSONPath, a CEL expression, existence, deletion, or kstatus), or into the
// CheckFailures that name what is wrong with them. It never touches a cluster, so every rule form
// and every refused input is table-tested on YAML fixtures (testdata/); the gate in the provider
// root only converts its inputs and calls Compile (at Check, and again at Create).
package objectrule

import (
	"errors"
	"fmt"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/expr"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
)

// Args are ResourceReady's inputs that say what to wait for (the gate's own, such as timeout,
// are not here). Nil is unset.
type Args struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Namespace  *string    `json:"namespace"`
	Name       *string    `json:"name"`
	Selector   *string    `json:"selector"`
	MinCount   *int       `json:"minCount"`
	Condition  *Condition `json:"condition"`
	JSONPath   *string    `json:"jsonPath"`
	Value      *string    `json:"value"`
	Regex      *string    `json:"regex"`
	Cel        *string    `json:"cel"`
	FailedCel  *string    `json:"failedCel"`
	Exists     *bool      `json:"exists"`
	Deleted    *bool      `json:"deleted"`
	StrictPVC  *bool      `json:"strictPvc"`
}

// Condition is the condition input: a type, and the status it must have (nil: True).
type Condition struct {
	Type   string  `json:"type"`
	Status *string `json:"status"`
}

// Rule is a compiled ResourceReady decision over one object.
type Rule struct {
	// Mode names the rule form: condition, jsonPath, cel, exists, deleted or kstatus.
	Mode string
	// Eval judges one object; nil for deleted, and when the form did not compile.
	Eval      func(*unstructured.Unstructured) status.Result
	FailedCel *expr.CEL
	Deleted   bool
	StrictPVC bool
}

// Compile validates the arguments (Check) and builds the rule (Create). Problems are returned
// per field so preview can name them; known says whether an input's value is known yet (an
// unknown one is not judged).
func Compile(a Args, known func(string) bool) (*Rule, []p.CheckFailure) {
	var fails []p.CheckFailure
	fail := func(field, format string, args ...any) {
		fails = append(fails, p.CheckFailure{Property: field, Reason: fmt.Sprintf(format, args...)})
	}
	if known("apiVersion") {
		if _, err := schema.ParseGroupVersion(a.APIVersion); err != nil || a.APIVersion == "" {
			fail("apiVersion", "%q is not an apiVersion such as v1, apps/v1 or cert-manager.io/v1", a.APIVersion)
		}
	}
	if known("kind") && (a.Kind == "" || strings.ContainsAny(a.Kind, " /.")) {
		fail("kind", "%q is not a kind such as Deployment", a.Kind)
	}
	hasName, hasSel := a.Name != nil && known("name"), a.Selector != nil && known("selector")
	switch {
	case a.Name != nil && a.Selector != nil:
		fail("selector", "give name or selector, not both")
	case a.Name == nil && a.Selector == nil:
		fail("name", "give the object's name or a label selector")
	}
	if hasName {
		if msg := kindNameProblem(a.APIVersion, known("apiVersion"), *a.Name); msg != "" {
			fail("name", "%s", msg)
		}
	}
	if hasSel {
		if strings.TrimSpace(*a.Selector) == "" {
			// A blank selector parses (as "everything"): not what a gate on "some objects" means.
			fail("selector", "the label selector is blank: give one (app=web) or a name")
		} else if _, err := labels.Parse(*a.Selector); err != nil {
			fail("selector", "invalid label selector %q: %v", *a.Selector, err)
		}
	}
	if a.Namespace != nil && known("namespace") && *a.Namespace != "" {
		if msg := admission.NamespaceProblem(*a.Namespace); msg != "" {
			fail("namespace", "%s", msg)
		}
	}
	if a.MinCount != nil && *a.MinCount < 1 {
		fail("minCount", "must be at least 1 (the gate passes only on objects it found)")
	}
	if a.MinCount != nil && a.Selector == nil {
		fail("minCount", "minCount only applies with selector")
	}

	d := &Rule{StrictPVC: a.StrictPVC != nil && *a.StrictPVC}
	var modes []string
	if a.Condition != nil {
		modes = append(modes, "condition")
		want := "True"
		if a.Condition.Status != nil {
			want = *a.Condition.Status
		}
		if a.Condition.Type == "" {
			fail("condition.type", "the condition type must not be empty")
		}
		if !strings.EqualFold(want, "True") && !strings.EqualFold(want, "False") && !strings.EqualFold(want, "Unknown") {
			fail("condition.status", "%q is not True, False or Unknown", want)
		}
		ct := a.Condition.Type
		d.Eval = func(o *unstructured.Unstructured) status.Result {
			ok, msg := status.ConditionHolds(o, ct, want)
			return status.Result{Ready: ok, Message: msg}
		}
	}
	if a.JSONPath != nil && (a.Value != nil || a.Regex != nil) && known("jsonPath") && secretDataPath(a.APIVersion, a.Kind, *a.JSONPath) {
		field := "value"
		if a.Value == nil {
			field = "regex"
		}
		fail(field, "a Secret's values are never kept by the gate (only its key names, whether each is empty, and public "+
			"certificates), so %s cannot be compared with them: test that the key is set with jsonPath alone, or use SecretReady "+
			"(requiredKeys); a check on metadata (.metadata.labels...) may have a value", field)
	}
	if a.JSONPath != nil {
		modes = append(modes, "jsonPath")
		if known("jsonPath") && known("value") && known("regex") {
			jp, err := expr.CompileJSONPath(*a.JSONPath, a.Value, a.Regex)
			var fe *expr.FieldError
			switch {
			case errors.As(err, &fe):
				fail(fe.Field, "%v", err)
			case err != nil:
				fail("jsonPath", "%v", err)
			default:
				d.Eval = func(o *unstructured.Unstructured) status.Result {
					ok, msg, err := jp.Eval(o.Object)
					if err != nil {
						return status.Result{Message: err.Error()}
					}
					return status.Result{Ready: ok, Message: msg}
				}
			}
		}
	} else if a.Value != nil || a.Regex != nil {
		fail("value", "value and regex only apply with jsonPath")
	}
	if a.Cel != nil {
		modes = append(modes, "cel")
		if known("cel") {
			c, err := expr.CompileCEL(*a.Cel)
			if err != nil {
				fail("cel", "%v", err)
			} else {
				d.Eval = func(o *unstructured.Unstructured) status.Result {
					ok, msg, err := c.Eval(o.Object)
					if err != nil {
						// A result of the wrong type will not change by waiting.
						return status.Result{Message: err.Error(), Failed: expr.IsTerminal(err)}
					}
					return status.Result{Ready: ok, Message: msg}
				}
			}
		}
	}
	if a.FailedCel != nil && known("failedCel") {
		c, err := expr.CompileCEL(*a.FailedCel)
		if err != nil {
			fail("failedCel", "%v", err)
		}
		d.FailedCel = c
	}
	if a.Exists != nil && *a.Exists {
		modes = append(modes, "exists")
		d.Eval = func(*unstructured.Unstructured) status.Result { return status.Result{Ready: true, Message: "exists"} }
	}
	if a.Deleted != nil && *a.Deleted {
		modes = append(modes, "deleted")
		d.Deleted = true
	}
	if len(modes) > 1 {
		fail(modes[1], "give exactly one of condition, jsonPath, cel, exists, deleted (got %s)", strings.Join(modes, " and "))
	}
	if len(modes) == 0 {
		modes = []string{"kstatus"}
		d.Eval = status.Generic
	}
	d.Mode = modes[0]
	return d, fails
}

// secretDataPath reports whether jsonPath on a core Secret may read its values: anything but
// metadata, type and immutable (a recursive descent or a wildcard may reach data).
func secretDataPath(apiVersion, kind, jsonPath string) bool {
	if apiVersion != "v1" || kind != "Secret" {
		return false
	}
	p := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(jsonPath), "{"), "}"))
	if strings.Contains(p, "..") || strings.Contains(p, "*") || strings.Contains(p, "{") {
		return true
	}
	switch {
	case p == ".type" || p == ".immutable" || p == ".kind" || p == ".apiVersion":
		return false
	case strings.HasPrefix(p, ".metadata.") || strings.HasPrefix(p, ".metadata["):
		return false
	}
	return true
}

// pathSegmentNamed are the groups whose kinds take any name that is a URL path segment (the
// API server validates them with path.ValidatePathSegmentName): RBAC's `system:metrics-server`.
var pathSegmentNamed = map[string]bool{"rbac.authorization.k8s.io": true}

// kindNameProblem validates an object name by its kind's rules: a path segment (no "/" or "%",
// not "." or "..") for every kind, the name of a URL; a DNS-1123 subdomain as well for all but
// the kinds that allow more. When the apiVersion is not known yet only the path-segment rule
// applies: the API server has the last word.
func kindNameProblem(apiVersion string, apiVersionKnown bool, n string) string {
	if n == "" {
		return "must not be empty"
	}
	if errs := path.IsValidPathSegmentName(n); len(errs) > 0 {
		return fmt.Sprintf("%q is not a valid object name: %s", n, strings.Join(errs, "; "))
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if !apiVersionKnown || err != nil || pathSegmentNamed[gv.Group] {
		return ""
	}
	return admission.NameProblem(n)
}
