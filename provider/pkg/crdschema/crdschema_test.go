package crdschema

import (
	"reflect"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// fromYAML decodes a schema through JSON, as the API server's objects arrive: integers as int64.
func fromYAML(t testing.TB, doc string) map[string]any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	m := map[string]any{}
	if err := utiljson.Unmarshal(j, &m); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return m
}

func TestMinimalObject(t *testing.T) {
	cases := map[string]struct {
		schema string
		want   map[string]any
	}{
		"no schema":        {``, map[string]any{}},
		"nothing required": {`{type: object, properties: {spec: {type: object, required: [a], properties: {a: {type: string}}}}}`, map[string]any{}},
		"required chain with minimum": {`{type: object, required: [spec], properties: {spec: {type: object, required: [count],
			properties: {count: {type: integer, minimum: 1}, other: {type: string}}}}}`,
			map[string]any{"spec": map[string]any{"count": int64(1)}}},
		"default, enum, minLength, boolean, number": {`{type: object, required: [spec], properties: {spec: {type: object,
			required: [mode, kind, name, enabled, ratio], properties: {mode: {type: string, default: fast}, kind: {type: string, enum: [A, B]},
			name: {type: string, minLength: 3}, enabled: {type: boolean}, ratio: {type: number, minimum: 0.5}}}}}`,
			map[string]any{"spec": map[string]any{"mode": "fast", "kind": "A", "name": "aaa", "enabled": false, "ratio": 0.5}}},
		"exclusive minimum, maximum": {`{type: object, required: [spec], properties: {spec: {type: object, required: [a, b],
			properties: {a: {type: integer, minimum: 0, exclusiveMinimum: true}, b: {type: integer, minimum: 5, maximum: 3}}}}}`,
			map[string]any{"spec": map[string]any{"a": int64(1), "b": int64(3)}}},
		"arrays and maps": {`{type: object, required: [spec], properties: {spec: {type: object, required: [hosts, refs, labels],
			properties: {hosts: {type: array, minItems: 2, items: {type: string, minLength: 1}},
			refs: {type: array, items: {type: object}},
			labels: {type: object, minProperties: 1, additionalProperties: {type: string}}}}}}`,
			map[string]any{"spec": map[string]any{"hosts": []any{"a0", "a1"}, "refs": []any{}, "labels": map[string]any{"k0": ""}}}},
		"int-or-string, date-time": {`{type: object, required: [spec], properties: {spec: {type: object, required: [port, at],
			properties: {port: {x-kubernetes-int-or-string: true}, at: {type: string, format: date-time}}}}}`,
			map[string]any{"spec": map[string]any{"port": int64(0), "at": "1970-01-01T00:00:00Z"}}},
		"formats the API server checks": {`{type: object, required: [spec], properties: {spec: {type: object,
			required: [csr, key, id, ip, net, host, site],
			properties: {csr: {type: string, format: byte}, key: {type: string, format: byte, minLength: 6}, id: {type: string, format: uuid},
			ip: {type: string, format: ipv4}, net: {type: string, format: cidr}, host: {type: string, format: hostname},
			site: {type: string, format: uri}}}}}`,
			map[string]any{"spec": map[string]any{"csr": "AAAA", "key": "AAAAAAAA", "id": "00000000-0000-4000-8000-000000000000",
				"ip": "0.0.0.0", "net": "0.0.0.0/0", "host": "a", "site": "http://a"}}},
		"metadata and apiVersion are not the schema's to fill": {`{type: object, required: [apiVersion, metadata], properties: {apiVersion: {type: string}}}`,
			map[string]any{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var s map[string]any
			if tc.schema != "" {
				s = fromYAML(t, tc.schema)
			}
			if got := MinimalObject(s); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("MinimalObject = %#v, want %#v", got, tc.want)
			}
			if got := MinimalObject(RequiredSkeleton(s)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("MinimalObject(RequiredSkeleton) = %#v, want %#v", got, tc.want)
			}
		})
	}
}
