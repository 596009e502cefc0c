package expr

import (
	"errors"
	"strings"
	"testing"
)

func ptr(s string) *string { return &s }

var pod = map[string]any{
	"metadata": map[string]any{"name": "p", "generation": int64(2)},
	"status": map[string]any{
		"phase":      "Running",
		"conditions": []any{map[string]any{"type": "Ready", "status": "True"}},
	},
}

func TestJSONPath(t *testing.T) {
	tests := []struct {
		name, expr   string
		value, regex *string
		want         bool
		compileErr   string
	}{
		{"equal", "{.status.phase}", ptr("Running"), nil, true, ""},
		{"without braces", ".status.phase", ptr("Running"), nil, true, ""},
		{"not equal", "{.status.phase}", ptr("Pending"), nil, false, ""},
		{"regex", "{.status.phase}", nil, ptr("^Run"), true, ""},
		{"filter", `{.status.conditions[?(@.type=="Ready")].status}`, ptr("True"), nil, true, ""},
		{"missing field", "{.status.podIP}", ptr("1.2.3.4"), nil, false, ""},
		{"present", "{.status.phase}", nil, nil, true, ""},
		{"bad syntax", "{.status[", nil, nil, false, "invalid JSONPath"},
		{"empty", " ", nil, nil, false, "empty"},
		{"bad regex", "{.a}", nil, ptr("("), false, "invalid regex"},
		{"both", "{.a}", ptr("x"), ptr("x"), false, "either value or regex"},
	}
	// Errors name the input they are about, so Check reports them against it.
	for _, tc := range []struct {
		value, regex *string
		field        string
	}{{nil, ptr("("), "regex"}, {ptr("x"), ptr("x"), "regex"}} {
		_, err := CompileJSONPath("{.a}", tc.value, tc.regex)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("CompileJSONPath error %v: want a FieldError on %s", err, tc.field)
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, err := CompileJSONPath(tc.expr, tc.value, tc.regex)
			if tc.compileErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.compileErr) {
					t.Fatalf("compile error = %v, want %q", err, tc.compileErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, msg, err := j.Eval(pod)
			if err != nil || got != tc.want {
				t.Errorf("Eval = %v (%s, %v), want %v", got, msg, err, tc.want)
			}
		})
	}
}

func TestCEL(t *testing.T) {
	tests := []struct {
		src        string
		want       bool
		compileErr string
	}{
		{`object.status.phase == "Running"`, true, ""},
		{`object.status.conditions.exists(c, c.type == "Ready" && c.status == "True")`, true, ""},
		{`object.metadata.generation > 1`, true, ""},
		{`object.status.replicas == 3`, false, ""}, // missing field: false, not an error
		{`has(object.status.podIP)`, false, ""},
		{`object.status.phase ==`, false, "invalid CEL"},
		{`"a string"`, false, "must return bool"},
		{`1 + 1`, false, "must return bool"},
		// Fields every object has are typed at compile time: returning one is caught at preview.
		{`object.metadata.name`, false, "returns string; it must return bool"},
		{`object.kind`, false, "returns string; it must return bool"},
		{`object.metadata.labels["app"]`, false, "returns string; it must return bool"},
		{`object.metadata.generation`, false, "returns int; it must return bool"},
		{`object.metadata.name == "p"`, true, ""},
		{`object.metadata.labels.exists(k, k == "app")`, false, ""},
		{`size(object.metadata.name) > 0`, true, ""},
		{`has(object.metadata.deletionTimestamp)`, false, ""}, // a field the typed check does not know
		{``, false, "empty"},
	}
	for _, tc := range tests {
		t.Run(tc.src, func(t *testing.T) {
			c, err := CompileCEL(tc.src)
			if tc.compileErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.compileErr) {
					t.Fatalf("compile error = %v, want %q", err, tc.compileErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, msg, err := c.Eval(pod)
			if err != nil || got != tc.want {
				t.Errorf("Eval = %v (%s, %v), want %v", got, msg, err, tc.want)
			}
		})
	}
	// Dynamic fields cannot be typed at preview: a wrong result type is a *ResultTypeError when
	// evaluated, which gates treat as terminal.
	for _, src := range []string{`object.status.phase`, `object.status.conditions`, `object.status.conditions[0].status`} {
		c, err := CompileCEL(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		_, _, err = c.Eval(pod)
		if !IsResultType(err) || !strings.Contains(err.Error(), "not a bool") {
			t.Errorf("%s: Eval error = %v, want a ResultTypeError", src, err)
		}
	}
	if c, _ := CompileCEL(`object.status.phase`); c != nil {
		if _, _, err := c.Eval(pod); err == nil || !strings.Contains(err.Error(), `returned "Running" (string)`) {
			t.Errorf("error should quote the value and its type: %v", err)
		}
	}
}

func FuzzJSONPath(f *testing.F) {
	for _, s := range []string{"{.status.phase}", `{.items[?(@.a=="b")].c}`, "{range .x[*]}{.y}{end}", "{.a[", "{{}}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		j, err := CompileJSONPath(s, nil, nil)
		if err != nil {
			return
		}
		_, _, _ = j.Eval(pod) // must not panic
	})
}

func FuzzCEL(f *testing.F) {
	for _, s := range []string{`object.status.phase == "Running"`, `object.a.b.c`, `size(object) > 0`, `[1,2].all(x, x > 0)`, `(`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := CompileCEL(s)
		if err != nil {
			return
		}
		_, _, _ = c.Eval(pod) // must not panic
	})
}

// TestCELCostBounds: an expression whose cost is fixed by itself and over the limit is refused
// at compile time (preview); one whose size comes from the object is refused at run time before it
// allocates, as a terminal *CostError; ordinary uses of the same functions keep working.
func TestCELCostBounds(t *testing.T) {
	atPreview := []string{
		`lists.range(100000000).size() > 0`,
		`lists.range(2000000).size() > 0`,
		`lists.range(100000).map(x, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx").join("").size() > 0`,
	}
	for _, src := range atPreview {
		if _, err := CompileCEL(src); err == nil || !strings.Contains(err.Error(), "over the limit") {
			t.Errorf("%s: compile error = %v, want the estimated cost over the limit", src, err)
		}
	}
	big := map[string]any{"spec": map[string]any{"n": int64(100000000), "s": "ab", "big": strings.Repeat("x", 1<<20)}}
	rep := `object.spec.s` + strings.Repeat(`.replace("", "xxxxxxxxxx")`, 9) + `.size() > 0`
	atRunTime := []string{
		`lists.range(object.spec.n).size() > 0`,
		rep,
		`lists.range(object.spec.n / 1000).map(x, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx").join("").size() > 0`,
		// Each call copies a 1 MiB string: 300 MiB in all for a few hundred steps, unless a copy costs its size.
		`lists.range(300).map(x, object.spec.big.lowerAscii()).size() > 0`,
		`lists.range(300).map(x, object.spec.big + "y").size() > 0`,
		`lists.range(300).map(x, object.spec.big.split("")).size() > 0`,
	}
	for _, src := range atRunTime {
		c, err := CompileCEL(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		_, _, err = c.Eval(big)
		var ce *CostError
		if !errors.As(err, &ce) || !IsTerminal(err) {
			t.Errorf("%.60s: Eval error = %v, want a terminal *CostError", src, err)
		}
	}
	ok := []string{`lists.range(5).size() == 5`, `"a-b".replace("-", "_") == "a_b"`, `"aaa".replace("a", "b", 2) == "bba"`,
		`["a", "b"].join(",") == "a,b"`, `["a", "b"].join() == "ab"`, `"ab".replace("", "_") == "_a_b_"`}
	for _, src := range ok {
		c, err := CompileCEL(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got, msg, err := c.Eval(pod); err != nil || !got {
			t.Errorf("%s = %v (%s, %v), want true", src, got, msg, err)
		}
	}
}

// TestCELQuadraticBounds: distinct and the sets functions take time quadratic in their inputs
// before cel-go charges for it; over the limit they are refused first, terminal; small uses work.
func TestCELQuadraticBounds(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{"n": int64(900000)}}
	for _, src := range []string{
		`lists.range(object.spec.n).distinct().size() > 0`,
		`sets.contains(lists.range(object.spec.n / 2), lists.range(object.spec.n / 2))`,
		`sets.intersects(lists.range(object.spec.n / 2), [-1, -2, -3])`,
	} {
		c, err := CompileCEL(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if _, _, err := c.Eval(obj); !IsTerminal(err) {
			t.Errorf("%s: Eval error = %v, want terminal", src, err)
		}
	}
	for _, src := range []string{`[1, 2, 2].distinct() == [1, 2]`, `sets.contains([1, 2, 3], [2])`, `sets.equivalent([1, 2], [2, 1])`,
		`sets.intersects([1], [1, 2])`, `!sets.intersects([1], [2])`, `!sets.contains([1], [2])`, `["a", "b", "a"].distinct().size() == 2`} {
		c, err := CompileCEL(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got, msg, err := c.Eval(pod); err != nil || !got {
			t.Errorf("%s = %v (%s, %v), want true", src, got, msg, err)
		}
	}
}
