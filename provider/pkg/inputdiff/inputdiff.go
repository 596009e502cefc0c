// Package inputdiff plans a gate's diff from its inputs: which top-level inputs changed, and
// whether each change replaces the gate (so it waits again) or updates it in place.
package inputdiff

import (
	"reflect"
	"slices"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
)

// Replace diffs two values of a gate's input struct by top-level input (its `pulumi:"name"`
// fields, an embedded struct's fields included): a change of any input replaces, except of those
// named inPlace (how to wait, not what for), which update in place. Unset and empty (nil, [] or
// {}) are the same input; a nested change (`triggers[0]`, `probe.metadata.namespace`) is a change
// of its top-level input.
func Replace[I any](olds, news I, inPlace ...string) p.DiffResponse {
	detailed := map[string]p.PropertyDiff{}
	for key, pair := range inputFields(reflect.ValueOf(olds), reflect.ValueOf(news)) {
		o, n := pair[0], pair[1]
		if equalInput(o, n) {
			continue
		}
		kind := p.UpdateReplace
		switch {
		case isEmptyInput(o):
			kind = p.AddReplace
		case isEmptyInput(n):
			kind = p.DeleteReplace
		}
		if slices.Contains(inPlace, key) { // how to wait, not what for: a gate that already passed has nothing to wait for
			kind = map[p.DiffKind]p.DiffKind{p.UpdateReplace: p.Update, p.AddReplace: p.Add, p.DeleteReplace: p.Delete}[kind]
		}
		detailed[key] = p.PropertyDiff{Kind: kind, InputDiff: true}
	}
	return p.DiffResponse{HasChanges: len(detailed) > 0, DetailedDiff: detailed}
}

// inputFields pairs the old and new value of every input, keyed by its Pulumi name; embedded
// structs (GateArgs) contribute their fields.
func inputFields(o, n reflect.Value) map[string][2]reflect.Value {
	out := map[string][2]reflect.Value{}
	t := o.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			for k, v := range inputFields(o.Field(i), n.Field(i)) {
				out[k] = v
			}
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("pulumi"), ",")
		if name == "" || !f.IsExported() {
			continue
		}
		out[name] = [2]reflect.Value{o.Field(i), n.Field(i)}
	}
	return out
}

// equalInput compares two input values; unset and empty (nil vs [] or {}) are the same input.
func equalInput(a, b reflect.Value) bool {
	if isEmptyInput(a) || isEmptyInput(b) {
		return isEmptyInput(a) && isEmptyInput(b)
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

func isEmptyInput(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	case reflect.Slice, reflect.Map:
		return v.Len() == 0
	}
	return false
}
