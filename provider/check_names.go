package provider

import (
	"fmt"
	"strconv"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
)

// nameFailures validates a gate's name and optional namespace inputs at Check.
func nameFailures(inputs property.Map, nameKey, name, nsKey string, ns *string) []p.CheckFailure {
	var out []p.CheckFailure
	if isKnown(inputs, nameKey) {
		if msg := admission.NameProblem(name); msg != "" {
			out = append(out, p.CheckFailure{Property: nameKey, Reason: msg})
		}
	}
	if ns != nil && *ns != "" && isKnown(inputs, nsKey) {
		if msg := admission.NamespaceProblem(*ns); msg != "" {
			out = append(out, p.CheckFailure{Property: nsKey, Reason: msg})
		}
	}
	return out
}

// keyFailures validates Secret key names (letters, digits, '-', '_', '.').
func keyFailures(inputs property.Map, field string, keys []string) []p.CheckFailure {
	if !isKnown(inputs, field) {
		return nil
	}
	var out []p.CheckFailure
	for i, k := range keys {
		if errs := validation.IsConfigMapKey(k); len(errs) > 0 {
			out = append(out, p.CheckFailure{Property: fmt.Sprintf("%s[%d]", field, i),
				Reason: fmt.Sprintf("%q is not a valid Secret key: %s", k, strings.Join(errs, "; "))})
		}
	}
	return out
}

// portProblem says what is wrong with a Service port given by name or number, or "".
func portProblem(port string) string {
	if port == "" {
		return ""
	}
	if n, err := strconv.Atoi(port); err == nil {
		if errs := validation.IsValidPortNum(n); len(errs) > 0 {
			return fmt.Sprintf("%d is not a port number: %s", n, strings.Join(errs, "; "))
		}
		return ""
	}
	if errs := validation.IsValidPortName(port); len(errs) > 0 {
		return fmt.Sprintf("%q is neither a port number nor a port name: %s", port, strings.Join(errs, "; "))
	}
	return ""
}
