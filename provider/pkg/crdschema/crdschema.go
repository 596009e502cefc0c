// Package crdschema reads CustomResourceDefinition structural schemas: the smallest object a
// version's schema admits (a dry-run create that proves a conversion webhook needs one), and the
// skeleton of a schema that this needs, small enough for a watch cache to keep.
package crdschema

import (
	"fmt"
	"math"
	"strings"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/jsonvalue"
)

// MinimalObject returns the smallest content (the fields besides apiVersion, kind and metadata)
// that a CRD version's structural schema requires: every required property, recursively, with its
// default, its first enum value, or the least value of its type that meets minimum, minLength,
// minItems and minProperties, in the format a string declares. It cannot satisfy patterns or CEL
// rules: the API server's Invalid answer then says so. A nil schema gives an empty object.
func MinimalObject(schema map[string]any) map[string]any {
	out := map[string]any{}
	props, _ := schema["properties"].(map[string]any)
	for _, name := range jsonvalue.Strings(schema["required"]) {
		if name == "apiVersion" || name == "kind" || name == "metadata" {
			continue
		}
		ps, _ := props[name].(map[string]any)
		out[name] = minimalValue(ps, 0)
	}
	return out
}

// skeletonKeys are the schema keywords MinimalObject reads.
var skeletonKeys = []string{"type", "required", "default", "enum", "minimum", "maximum", "exclusiveMinimum",
	"minLength", "format", "minItems", "minProperties", "x-kubernetes-int-or-string"}

// RequiredSkeleton keeps of a structural schema only what MinimalObject reads: the keywords
// above, along the chain of required properties (and array items, and additionalProperties of
// objects with minProperties). MinimalObject(RequiredSkeleton(s)) equals MinimalObject(s); the
// skeleton is a small fraction of a real CRD's schema, so a cache can keep it.
func RequiredSkeleton(s map[string]any) map[string]any {
	return skeleton(s, 0)
}

func skeleton(s map[string]any, depth int) map[string]any {
	if s == nil || depth > 32 {
		return nil
	}
	out := map[string]any{}
	for _, k := range skeletonKeys {
		if v, ok := s[k]; ok {
			out[k] = v
		}
	}
	props, _ := s["properties"].(map[string]any)
	if req := jsonvalue.Strings(s["required"]); len(req) > 0 && props != nil {
		kept := map[string]any{}
		for _, name := range req {
			if ps, ok := props[name].(map[string]any); ok {
				kept[name] = skeleton(ps, depth+1)
			}
		}
		out["properties"] = kept
	}
	if items, ok := s["items"].(map[string]any); ok && jsonvalue.Int64(s["minItems"]) > 0 {
		out["items"] = skeleton(items, depth+1)
	}
	if add, ok := s["additionalProperties"].(map[string]any); ok && jsonvalue.Int64(s["minProperties"]) > 0 {
		out["additionalProperties"] = skeleton(add, depth+1)
	}
	return out
}

func minimalValue(s map[string]any, depth int) any {
	if d, ok := s["default"]; ok {
		return d
	}
	if enum, _ := s["enum"].([]any); len(enum) > 0 {
		return enum[0]
	}
	if depth > 32 {
		return nil
	}
	if b, _ := s["x-kubernetes-int-or-string"].(bool); b {
		return int64(0)
	}
	switch s["type"] {
	case "string":
		n := int(jsonvalue.Int64(s["minLength"]))
		// The formats the API server checks on a CRD's strings: the least value each accepts
		// (an empty string is not base64 "byte" there: cert-manager's CertificateRequest).
		switch s["format"] {
		case "date-time":
			return "1970-01-01T00:00:00Z"
		case "date":
			return "1970-01-01"
		case "duration":
			return "1s"
		case "byte":
			return strings.Repeat("AAAA", max(1, (n+3)/4))
		case "uuid", "uuid3", "uuid4", "uuid5":
			return "00000000-0000-4000-8000-000000000000"
		case "ipv4":
			return "0.0.0.0"
		case "ipv6":
			return "::"
		case "cidr":
			return "0.0.0.0/0"
		case "mac":
			return "00:00:00:00:00:00"
		case "hostname":
			return strings.Repeat("a", max(1, n))
		case "uri":
			return "http://a"
		case "email":
			return "a@a"
		}
		return strings.Repeat("a", n)
	case "integer":
		return int64(minNumber(s))
	case "number":
		return minNumber(s)
	case "boolean":
		return false
	case "array":
		items, _ := s["items"].(map[string]any)
		n := int(jsonvalue.Int64(s["minItems"]))
		out := make([]any, 0, n)
		for i := 0; i < n; i++ {
			v := minimalValue(items, depth+1)
			if str, ok := v.(string); ok && n > 1 {
				v = str + fmt.Sprint(i) // list-type set/map items must differ
			}
			out = append(out, v)
		}
		return out
	}
	// An object (or an untyped, preserve-unknown-fields value): its required properties.
	out := map[string]any{}
	props, _ := s["properties"].(map[string]any)
	for _, name := range jsonvalue.Strings(s["required"]) {
		ps, _ := props[name].(map[string]any)
		out[name] = minimalValue(ps, depth+1)
	}
	if add, ok := s["additionalProperties"].(map[string]any); ok {
		for i := len(out); i < int(jsonvalue.Int64(s["minProperties"])); i++ {
			out[fmt.Sprintf("k%d", i)] = minimalValue(add, depth+1)
		}
	}
	return out
}

func minNumber(s map[string]any) float64 {
	v := 0.0
	if m, ok := s["minimum"]; ok {
		v = jsonvalue.Float64(m)
		if ex, _ := s["exclusiveMinimum"].(bool); ex {
			v = math.Floor(v) + 1
		}
	}
	if m, ok := s["maximum"]; ok && jsonvalue.Float64(m) < v {
		v = jsonvalue.Float64(m)
	}
	if s["type"] == "integer" {
		v = math.Ceil(v)
	}
	return v
}
