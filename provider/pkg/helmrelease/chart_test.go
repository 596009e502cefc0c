package helmrelease

import (
	"strings"
	"testing"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/internal/fixtures"
)

func TestChartObjectFixtures(t *testing.T) {
	type tc struct {
		Name  string `json:"name"`
		Type  string `json:"type"`
		ID    string `json:"id"`
		Want  string `json:"want"`
		Error string `json:"error"`
	}
	for _, c := range fixtures.Load[tc](t, "chartobjects.yaml") {
		t.Run(c.Name, func(t *testing.T) {
			ref, err := ChartObject(c.Type, c.ID)
			if c.Error != "" {
				if err == nil || !strings.Contains(err.Error(), c.Error) {
					t.Fatalf("ChartObject(%q, %q) = %+v, %v; want an error saying %q", c.Type, c.ID, ref, err, c.Error)
				}
				return
			}
			if err != nil {
				t.Fatalf("ChartObject(%q, %q): %v", c.Type, c.ID, err)
			}
			if got := ref.APIVersion + " " + ref.String(); got != c.Want {
				t.Errorf("ChartObject(%q, %q) = %q; want %q", c.Type, c.ID, got, c.Want)
			}
		})
	}
}

func TestParseObjectRefFixtures(t *testing.T) {
	type tc struct {
		Name       string  `json:"name"`
		APIVersion string  `json:"apiVersion"`
		Kind       string  `json:"kind"`
		Namespace  string  `json:"namespace"`
		ObjName    string  `json:"objName"`
		Want       string  `json:"want"`
		Error      *string `json:"error"`
	}
	for _, c := range fixtures.Load[tc](t, "objectrefs.yaml") {
		t.Run(c.Name, func(t *testing.T) {
			ref, err := ParseObjectRef(c.APIVersion, c.Kind, c.Namespace, c.ObjName)
			if c.Error != nil {
				if err == nil || !strings.Contains(err.Error(), *c.Error) {
					t.Fatalf("ParseObjectRef = %+v, %v; want an error saying %q", ref, err, *c.Error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ref.APIVersion + " " + ref.String(); got != c.Want {
				t.Errorf("ParseObjectRef = %q; want %q", got, c.Want)
			}
		})
	}
}
