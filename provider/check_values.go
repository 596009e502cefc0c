package provider

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

// The engine prints a Check failure on a top-level input as
// `property <key> value <the input's value> has a problem: <reason>`, secret or not (pkg/v3
// resource/deploy/step_generator.go, issueCheckFailures). A failure on a nested path
// (`objects[0]`, `service.path`) or on no property prints no value.

// sensitiveKeys are inputs that may hold secret data even when not marked secret: a URL's
// userinfo or token, request headers, manifests that may be Secrets (`probe`, `objects`). (An
// image reference pasted with a user part is refused by ImageReady's Check on no property.)
var sensitiveKeys = map[string]bool{"url": true, "headers": true, "probe": true, "objects": true}

// hideValues rewrites failures so that no message the engine prints holds an input's value that
// may be secret: a failure on a top-level input that is marked secret, or is one of sensitiveKeys
// and holds any text, moves to no property, its reason naming the field; and every input value
// marked secret is replaced by [secret] in every reason.
func hideValues(inputs property.Map, failures []p.CheckFailure) []p.CheckFailure {
	secrets := secretStrings(inputs)
	out := make([]p.CheckFailure, 0, len(failures))
	for _, f := range failures {
		field := f.Property
		if v, ok := inputs.GetOk(f.Property); ok && f.Property != "" && mayHoldSecrets(f.Property, v) {
			if !strings.HasPrefix(f.Reason, f.Property) {
				f.Reason = f.Property + ": " + f.Reason
			}
			f.Property = ""
		}
		f.Reason = redactStrings(f.Reason, secrets)
		if quotesPart(f.Reason, secrets) {
			// A parser's message quotes a piece of the input (CEL's caret line, a regex's rest).
			if field == "" {
				field = "an input"
			}
			f.Reason = field + ": is not valid; the reason is not shown because it would quote a secret value " +
				"(check the value without marking it secret to see why)"
		}
		out = append(out, f)
	}
	return out
}

// partLen is the shortest piece of a secret that counts as quoting it.
const partLen = 6

// quotesPart reports whether s holds any partLen-long piece of one of secrets (linear in the
// secrets' length: a message is short, a secret may not be).
func quotesPart(s string, secrets []string) bool {
	pieces := map[string]bool{}
	for i := 0; i+partLen <= len(s); i++ {
		pieces[s[i:i+partLen]] = true
	}
	for _, sec := range secrets {
		for i := 0; i+partLen <= len(sec); i++ {
			if pieces[sec[i:i+partLen]] {
				return true
			}
		}
	}
	return false
}

func mayHoldSecrets(key string, v property.Value) bool {
	return v.Secret() || v.HasSecrets() || (sensitiveKeys[key] && holdsText(v))
}

// holdsText reports whether v is or contains a non-empty string or a number.
func holdsText(v property.Value) bool {
	switch {
	case v.IsString():
		return v.AsString() != ""
	case v.IsNumber():
		return true
	case v.IsArray():
		for _, e := range v.AsArray().All {
			if holdsText(e) {
				return true
			}
		}
	case v.IsMap():
		for _, e := range v.AsMap().All {
			if holdsText(e) {
				return true
			}
		}
	}
	return false
}

// minSecretLen: shorter secret values are not searched for in messages (a one-letter "secret"
// would blank every such letter); no real credential is that short.
const minSecretLen = 4

// secretStrings is every string (and number, as text) inside a value marked secret, longest first.
func secretStrings(inputs property.Map) []string {
	var out []string
	var walk func(v property.Value, secret bool)
	walk = func(v property.Value, secret bool) {
		secret = secret || v.Secret()
		switch {
		case v.IsString() && secret:
			out = append(out, v.AsString())
		case v.IsNumber() && secret:
			out = append(out, strconv.FormatFloat(v.AsNumber(), 'f', -1, 64))
		case v.IsArray():
			for _, e := range v.AsArray().All {
				walk(e, secret)
			}
		case v.IsMap():
			for _, e := range v.AsMap().All { // keys are names (a Secret's data keys are not secret)
				walk(e, secret)
			}
		}
	}
	for _, v := range inputs.All {
		walk(v, false)
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// redactStrings replaces each of secrets (as given and as Go or JSON would quote it) in s.
func redactStrings(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) < minSecretLen {
			continue
		}
		s = strings.ReplaceAll(s, sec, "[secret]")
		if q := strconv.Quote(sec); q[1:len(q)-1] != sec {
			s = strings.ReplaceAll(s, q[1:len(q)-1], "[secret]")
		}
	}
	return s
}

// wrongTypeRE is the mapper's wrong-type reason, which names Go types
// ("Field 'objects' on 'provider.AdmissionReadyArgs' must be a '[]map[string]interface {}'; got 'string' instead").
var wrongTypeRE = regexp.MustCompile(`^Field '([^']*)' on '[^']*' must be a '([^']*)'; got '([^']*)' instead$`)

// missingRE is the mapper's missing-field reason ("Missing required field 'name' on 'provider.HelmReleaseReadyArgs'").
var missingRE = regexp.MustCompile(`^Missing required field '([^']*)' on '[^']*'$`)

// typeFailures says the input decoder's failures in the schema's words, not Go's.
func typeFailures(failures []p.CheckFailure) []p.CheckFailure {
	for i, f := range failures {
		if m := wrongTypeRE.FindStringSubmatch(f.Reason); m != nil {
			failures[i].Reason = fmt.Sprintf("%s must be %s, not %s", m[1], typeWords(m[2]), typeWords(m[3]))
		} else if m := missingRE.FindStringSubmatch(f.Reason); m != nil {
			failures[i].Reason = fmt.Sprintf("%s is required", m[1])
		}
	}
	return failures
}

func typeWords(goType string) string {
	t := strings.TrimPrefix(goType, "*")
	switch {
	case t == "string":
		return "a string"
	case t == "bool":
		return "a boolean"
	case t == "float64" || t == "float32":
		return "a number"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "a whole number"
	case t == "[]string":
		return "a list of strings"
	case strings.HasPrefix(t, "[]map[") || t == "[][]interface {}":
		return "a list of objects (manifests as maps)"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["), strings.Contains(t, "."):
		return "an object (a map)"
	}
	return "a value of another type"
}

// wholeNumberFailures rejects a fraction given for an integer input (`minCount: 1.5`), which the
// decoder would silently truncate.
func wholeNumberFailures[A any](inputs property.Map) []p.CheckFailure {
	var out []p.CheckFailure
	for key, kind := range intFields(reflect.TypeFor[A](), "") {
		v, ok := lookup(inputs, key)
		if !ok || !v.IsNumber() {
			continue
		}
		n := v.AsNumber()
		if n != math.Trunc(n) || math.IsInf(n, 0) || math.Abs(n) > 1<<53 || (kind == reflect.Uint && n < 0) {
			out = append(out, p.CheckFailure{Property: key, Reason: fmt.Sprintf("%s must be a whole number", key)})
		}
	}
	return out
}

// lookup finds the input at a dotted path ("service.port").
func lookup(inputs property.Map, path string) (property.Value, bool) {
	key, rest, nested := strings.Cut(path, ".")
	v, ok := inputs.GetOk(key)
	if !ok || !nested {
		return v, ok
	}
	if !v.IsMap() {
		return property.Value{}, false
	}
	return lookup(v.AsMap(), rest)
}

// intFields maps the dotted pulumi paths of t's integer fields (embedded and nested structs
// included) to their kind.
func intFields(t reflect.Type, prefix string) map[string]reflect.Kind {
	out := map[string]reflect.Kind{}
	for i := range t.NumField() {
		f := t.Field(i)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && ft.Kind() == reflect.Struct {
			maps.Copy(out, intFields(ft, prefix))
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("pulumi"), ",")
		if name == "" {
			continue
		}
		name = prefix + name
		switch ft.Kind() {
		case reflect.Struct:
			maps.Copy(out, intFields(ft, name+"."))
		case reflect.Int, reflect.Int32, reflect.Int64:
			out[name] = reflect.Int
		case reflect.Uint, reflect.Uint32, reflect.Uint64:
			out[name] = reflect.Uint
		}
	}
	return out
}
