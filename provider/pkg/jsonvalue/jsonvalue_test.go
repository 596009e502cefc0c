package jsonvalue

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestNumbers(t *testing.T) {
	for name, tc := range map[string]struct {
		in     any
		number float64
		ok     bool
		int64  int64
	}{
		"int":                {3, 3, true, 3},
		"int32":              {int32(-7), -7, true, -7},
		"int64":              {int64(443), 443, true, 443},
		"float64":            {30.0, 30, true, 30},
		"float32":            {float32(2.5), 2.5, true, 2},
		"fraction truncated": {-2.9, -2.9, true, -2},
		"int64 beyond 2^53":  {int64(math.MaxInt64), float64(math.MaxInt64), true, math.MaxInt64},
		// Near misses: look like numbers, are not.
		"numeric string": {"443", 0, false, 0},
		"empty string":   {"", 0, false, 0},
		"bool":           {true, 0, false, 0},
		"nil":            {nil, 0, false, 0},
		"list":           {[]any{1}, 0, false, 0},
		"json.Number":    {json.Number("1"), 0, false, 0},
		"uint":           {uint(1), 0, false, 0},
	} {
		t.Run(name, func(t *testing.T) {
			n, ok := Number(tc.in)
			if n != tc.number || ok != tc.ok {
				t.Errorf("Number(%#v) = %v, %v; want %v, %v", tc.in, n, ok, tc.number, tc.ok)
			}
			if got := Float64(tc.in); got != tc.number {
				t.Errorf("Float64(%#v) = %v, want %v", tc.in, got, tc.number)
			}
			if got := Int64(tc.in); got != tc.int64 {
				t.Errorf("Int64(%#v) = %v, want %v", tc.in, got, tc.int64)
			}
		})
	}
}

// What the API server's JSON becomes in an unstructured object: integers int64, the rest float64.
func TestNumbersOfUnstructuredJSON(t *testing.T) {
	var u unstructured.Unstructured
	if err := u.UnmarshalJSON([]byte(`{"apiVersion":"v1","kind":"X","spec":{"port":8443,"ratio":0.5,"big":9007199254740993}}`)); err != nil {
		t.Fatal(err)
	}
	spec := u.Object["spec"].(map[string]any)
	if Int64(spec["port"]) != 8443 || Float64(spec["ratio"]) != 0.5 || Int64(spec["big"]) != 9007199254740993 {
		t.Errorf("port %v ratio %v big %v", Int64(spec["port"]), Float64(spec["ratio"]), Int64(spec["big"]))
	}
}

func TestStrings(t *testing.T) {
	for name, tc := range map[string]struct {
		in   any
		want []string
	}{
		"strings in order":      {[]any{"v1", "v1beta1"}, []string{"v1", "v1beta1"}},
		"empty skipped":         {[]any{"", "a", ""}, []string{"a"}},
		"non-strings skipped":   {[]any{1, "a", nil, true, []any{"b"}, map[string]any{"c": "d"}}, []string{"a"}},
		"empty list":            {[]any{}, []string{}},
		"nil":                   {nil, []string{}},
		"[]string is not []any": {[]string{"a"}, []string{}},
		"a string":              {"a", []string{}},
	} {
		t.Run(name, func(t *testing.T) {
			got := Strings(tc.in)
			if got == nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Strings(%#v) = %#v, want %#v", tc.in, got, tc.want)
			}
		})
	}
}
