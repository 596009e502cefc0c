// Package jsonvalue reads numbers and string lists out of decoded JSON values: the fields of
// unstructured Kubernetes objects, CRD schemas and Pulumi map inputs. One set of rules for every
// caller:
//   - a number is a Go int, int32, int64, float32 or float64, which is what encoding/json,
//     apimachinery's unstructured decoding, Pulumi property maps and Go literals produce; a string
//     is never a number ("1" is not 1), nor is a bool or nil;
//   - as an integer, a float is truncated toward zero; an integer is kept exact (no float64 round
//     trip, which loses precision above 2^53);
//   - a string list is a []any whose non-empty string items are kept in order; other items
//     (numbers, nil, nested values) are skipped, never printed into strings.
package jsonvalue

// Number is v as a float64, and whether v is a number.
func Number(v any) (float64, bool) {
	i, f, isInt, ok := split(v)
	if isInt {
		return float64(i), ok
	}
	return f, ok
}

// Int64 is v as an integer, or 0 when v is not a number.
func Int64(v any) int64 {
	i, f, isInt, _ := split(v)
	if isInt {
		return i
	}
	return int64(f)
}

// Float64 is v as a float64, or 0 when v is not a number.
func Float64(v any) float64 {
	f, _ := Number(v)
	return f
}

// Strings is the non-empty strings of the list v, in order; empty (not nil) when v is not a list.
func Strings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}

// split classifies v: an exact integer (isInt), a float, or not a number (ok false, zeros).
func split(v any) (i int64, f float64, isInt, ok bool) {
	switch n := v.(type) {
	case int:
		return int64(n), 0, true, true
	case int32:
		return int64(n), 0, true, true
	case int64:
		return n, 0, true, true
	case float32:
		return 0, float64(n), false, true
	case float64:
		return 0, n, false, true
	}
	return 0, 0, false, false
}
