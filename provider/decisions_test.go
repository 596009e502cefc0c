package provider

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/helmrelease"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/issuance"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/wait"
)

// TestDecisionResultsCarry: each field of wait.Result survives the round trip through a decider's
// Result, except those its Result lacks on purpose (see decisions.go), and its Result has no
// other field. A field added to wait.Result fails here until every conversion carries it or the
// list says why it need not.
func TestDecisionResultsCarry(t *testing.T) {
	waitType := reflect.TypeOf(wait.Result{})
	for _, c := range []struct {
		pkg   string
		typ   reflect.Type
		trip  func(wait.Result) wait.Result
		lacks []string
	}{
		{"admission", reflect.TypeOf(admission.Result{}), func(w wait.Result) wait.Result { return fromAdmission(toAdmission(w)) },
			[]string{"RetryIn"}},
		{"helmrelease", reflect.TypeOf(helmrelease.Result{}), func(w wait.Result) wait.Result { return fromHelmRelease(toHelmRelease(w)) },
			nil},
		{"issuance", reflect.TypeOf(issuance.Result{}), func(w wait.Result) wait.Result { return fromIssuance(toIssuance(w)) },
			[]string{"Confirming"}},
	} {
		var want []string
		for i := range waitType.NumField() {
			f := waitType.Field(i)
			var w wait.Result
			v := reflect.ValueOf(&w).Elem().Field(i)
			switch f.Type.Kind() {
			case reflect.Bool:
				v.SetBool(true)
			case reflect.String:
				v.SetString("x")
			case reflect.Int64:
				v.SetInt(7)
			case reflect.Interface:
				v.Set(reflect.ValueOf(errors.New("x")))
			default:
				t.Fatalf("wait.Result.%s: set it here", f.Name)
			}
			lacked := slices.Contains(c.lacks, f.Name)
			if carried := reflect.DeepEqual(c.trip(w), w); carried == lacked {
				t.Errorf("%s: wait.Result.%s carried %v, want %v", c.pkg, f.Name, carried, !lacked)
			}
			if !lacked {
				want = append(want, f.Name)
			}
		}
		var got []string
		for i := range c.typ.NumField() {
			got = append(got, c.typ.Field(i).Name)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s.Result has fields %v, want %v", c.pkg, got, want)
		}
	}
}
