package autogate

import (
	"regexp"
	"strings"
)

var nonName = regexp.MustCompile(`[^a-z0-9.-]+`)

// slug makes s usable in a gate's Pulumi name (chart children are named "chart:ns/name").
func slug(s string) string {
	return strings.Trim(nonName.ReplaceAllString(strings.ToLower(s), "-"), "-")
}

func slugOr(s, empty string) string {
	if s == "" {
		return empty
	}
	return slug(s)
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func mapAt(m map[string]any, path ...string) (map[string]any, bool) {
	cur := m
	for _, p := range path {
		next, ok := cur[p].(map[string]any)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

func items(m map[string]any, path ...string) []map[string]any {
	parent, ok := mapAt(m, path[:len(path)-1]...)
	if !ok {
		return nil
	}
	list, _ := parent[path[len(path)-1]].([]any)
	var out []map[string]any
	for _, it := range list {
		if im, ok := it.(map[string]any); ok {
			out = append(out, im)
		}
	}
	return out
}

func stringMap(m map[string]any, path ...string) map[string]string {
	src, _ := mapAt(m, path...)
	out := map[string]string{}
	for k, v := range src {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}
