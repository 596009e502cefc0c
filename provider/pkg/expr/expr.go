// Package expr compiles and evaluates the free-form readiness expressions users write:
// kubectl-style JSONPath and CEL over the object. Compile runs at preview (Check) so a bad
// expression fails before anything waits; evaluation is pure.
package expr

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"k8s.io/client-go/util/jsonpath"
)

// FieldError says which input of an expression is wrong, so Check can name it: "jsonPath",
// "value" or "regex".
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// ResultTypeError says an expression returned a value of the wrong type. Evaluating it again
// cannot change that, so a gate treats it as terminal.
type ResultTypeError struct {
	Src  string
	Want string
	Got  string // the value's type, such as "string"
	Val  string // the value, shortened
}

func (e *ResultTypeError) Error() string {
	return fmt.Sprintf("CEL %q returned %s (%s), not a %s", e.Src, e.Val, e.Got, e.Want)
}

// IsResultType reports whether err is (or wraps) a *ResultTypeError.
func IsResultType(err error) bool {
	var rt *ResultTypeError
	return errors.As(err, &rt)
}

// CostError says an expression exceeded the cost limit (or would build a value over the size
// limit). The object it ran on is bounded, so it will do so again: a gate treats it as terminal.
type CostError struct {
	Src string
	Err error
}

func (e *CostError) Error() string {
	return fmt.Sprintf("CEL %q is too expensive to evaluate (limit: %d steps, values of at most %d elements or characters): %v",
		e.Src, MaxCost, MaxValueSize, e.Err)
}

// IsTerminal reports whether err is an evaluation error that evaluating again cannot change:
// a result of the wrong type, or a cost overrun.
func IsTerminal(err error) bool {
	var ce *CostError
	return IsResultType(err) || errors.As(err, &ce)
}

// JSONPath is a compiled kubectl JSONPath with its expectation.
type JSONPath struct {
	expr  string
	jp    *jsonpath.JSONPath
	value *string
	regex *regexp.Regexp
}

// CompileJSONPath parses expr (`{.status.phase}` or `.status.phase`) and the expectation:
// value (equality), regex, or neither (the path must yield a non-empty result).
func CompileJSONPath(expr string, value, regex *string) (*JSONPath, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, fmt.Errorf("the JSONPath expression is empty")
	}
	e := strings.TrimSpace(expr)
	if !strings.HasPrefix(e, "{") {
		e = "{" + e + "}"
	}
	jp := jsonpath.New("gate").AllowMissingKeys(true)
	if err := jp.Parse(e); err != nil {
		return nil, fmt.Errorf("invalid JSONPath %q: %v", expr, err)
	}
	j := &JSONPath{expr: expr, jp: jp, value: value}
	if value != nil && regex != nil {
		return nil, &FieldError{Field: "regex", Err: fmt.Errorf("give either value or regex, not both")}
	}
	if regex != nil {
		re, err := regexp.Compile(*regex)
		if err != nil {
			return nil, &FieldError{Field: "regex", Err: fmt.Errorf("invalid regex %q: %v", *regex, err)}
		}
		j.regex = re
	}
	return j, nil
}

// Eval evaluates the path on obj and says whether the expectation holds, with what it found.
func (j *JSONPath) Eval(obj map[string]any) (ok bool, msg string, err error) {
	defer func() {
		if r := recover(); r != nil { // the JSONPath library panics on some inputs; never crash a gate
			ok, msg, err = false, "", fmt.Errorf("evaluating %s: %v", j.expr, r)
		}
	}()
	results, err := j.jp.FindResults(obj)
	if err != nil {
		return false, "", fmt.Errorf("evaluating %s: %v", j.expr, err)
	}
	var vals []string
	for _, rs := range results {
		for _, r := range rs {
			if !r.IsValid() {
				continue
			}
			var buf bytes.Buffer
			if err := j.jp.PrintResults(&buf, []reflect.Value{r}); err != nil {
				return false, "", err
			}
			vals = append(vals, buf.String())
		}
	}
	got := strings.Join(vals, " ")
	if len(vals) == 0 {
		return false, fmt.Sprintf("%s is not set", j.expr), nil
	}
	switch {
	case j.value != nil:
		return got == *j.value, fmt.Sprintf("%s = %q (want %q)", j.expr, got, *j.value), nil
	case j.regex != nil:
		return j.regex.MatchString(got), fmt.Sprintf("%s = %q (want a match for /%s/)", j.expr, got, j.regex), nil
	default:
		return got != "", fmt.Sprintf("%s = %q", j.expr, got), nil
	}
}

// CEL is a compiled boolean CEL expression over `object`.
type CEL struct {
	src string
	prg cel.Program
}

// celLibs are the CEL extensions expressions may use; boundedFunctions replaces the ones that
// could build a huge value from a small input before the cost limit sees it.
var celLibs = append([]cel.EnvOption{ext.Strings(), ext.Lists(), ext.Sets(), ext.Math(), ext.Encoders(), cel.OptionalTypes()},
	boundedFunctions...)

var celEnv = newEnv(cel.Variable("object", cel.DynType))

func newEnv(opts ...cel.EnvOption) *cel.Env {
	env, err := cel.NewEnv(append(append([]cel.EnvOption{}, celLibs...), opts...)...)
	if err != nil {
		panic(err)
	}
	return env
}

// CompileCEL compiles src; it must type-check and return bool (or dyn, checked when evaluated).
// `object` is dynamic, so most expressions type as dyn; to catch the common mistake of returning
// a field instead of a test (`object.metadata.name`), src is also checked against the fields
// every Kubernetes object has (see kubeObject): when that check succeeds and says the result is
// not bool, src is rejected here, at preview.
func CompileCEL(src string) (*CEL, error) {
	if strings.TrimSpace(src) == "" {
		return nil, fmt.Errorf("the CEL expression is empty")
	}
	ast, iss := celEnv.Compile(src)
	if iss.Err() != nil {
		return nil, fmt.Errorf("invalid CEL %q: %v", src, iss.Err())
	}
	if t := ast.OutputType(); t != cel.BoolType && t != cel.DynType {
		return nil, notBool(src, t)
	}
	if typed, iss := typedEnv.Compile(src); iss.Err() == nil {
		if t := typed.OutputType(); t != cel.BoolType && t != cel.DynType {
			return nil, notBool(src, t)
		}
	}
	// cel-go's estimate saturates at MaxUint64 where a size depends on the object (lists.range(object.n)):
	// that is not a known minimum, and the run-time bounds catch it.
	if est, err := celEnv.EstimateCost(ast, unknownSizes{}); err == nil && est.Min > MaxCost && est.Min != math.MaxUint64 {
		return nil, fmt.Errorf("CEL %q costs at least %d steps whatever the object, over the limit of %d: it could never finish", src, est.Min, MaxCost)
	}
	prg, err := celEnv.Program(ast, cel.CostLimit(MaxCost), cel.CostTracking(chargeForSize{}), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, fmt.Errorf("invalid CEL %q: %v", src, err)
	}
	return &CEL{src: src, prg: prg}, nil
}

// kubeObject declares, for type inference at compile time only, the fields every Kubernetes
// object has and their types; spec and status stay dynamic. An expression using any other field
// does not compile against it and is then judged by the dynamic environment alone.
type kubeObject struct {
	APIVersion string         `cel:"apiVersion"`
	Kind       string         `cel:"kind"`
	Metadata   kubeMeta       `cel:"metadata"`
	Spec       map[string]any `cel:"spec"`
	Status     map[string]any `cel:"status"`
}

type kubeMeta struct {
	Name            string            `cel:"name"`
	Namespace       string            `cel:"namespace"`
	GenerateName    string            `cel:"generateName"`
	UID             string            `cel:"uid"`
	ResourceVersion string            `cel:"resourceVersion"`
	Generation      int64             `cel:"generation"`
	Labels          map[string]string `cel:"labels"`
	Annotations     map[string]string `cel:"annotations"`
	Finalizers      []string          `cel:"finalizers"`
}

var typedEnv = newEnv(
	ext.NativeTypes(ext.ParseStructTags(true), reflect.TypeOf(&kubeObject{})),
	cel.Variable("object", cel.ObjectType("expr.kubeObject")),
)

// notBool is the one message for an expression typed as something other than bool, whichever
// environment found it.
func notBool(src string, t *cel.Type) error {
	return fmt.Errorf("CEL %q returns %s; it must return bool (a test such as a comparison, not a value)", src, celTypeName(t))
}

func celTypeName(t *cel.Type) string {
	if t == nil {
		return "?"
	}
	return t.String()
}

// Eval runs the expression on obj. A missing field (no such key) counts as false, not as an
// error: the object is simply not there yet. A result that is not a bool is a *ResultTypeError.
func (c *CEL) Eval(obj map[string]any) (bool, string, error) {
	out, _, err := c.prg.Eval(map[string]any{"object": obj})
	if err != nil {
		if strings.Contains(err.Error(), "no such key") || strings.Contains(err.Error(), "no such attribute") {
			return false, fmt.Sprintf("%s: %v", c.src, err), nil
		}
		if isCostOverrun(err) {
			return false, "", &CostError{Src: c.src, Err: err}
		}
		return false, "", fmt.Errorf("evaluating CEL %q: %v", c.src, err)
	}
	b, ok := out.(types.Bool)
	if !ok {
		v := fmt.Sprint(out.Value())
		if len(v) > 60 {
			v = v[:60] + "..."
		}
		return false, "", &ResultTypeError{Src: c.src, Want: "bool", Got: fmt.Sprint(out.Type()), Val: fmt.Sprintf("%q", v)}
	}
	return bool(b), fmt.Sprintf("%s is %v", c.src, bool(b)), nil
}
