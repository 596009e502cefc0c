// Command localchart writes a rendered real chart as a local Helm chart whose webhooks go to a
// test webhook server (see package charts), for the TypeScript tests and the examples' runs:
//
//	localchart <fixture> <dir> <webhook url> <caBundle>
//
// It prints the chart's path. Fixture `linkerd` is charts.LinkerdShaped: it prints the folder
// holding Linkerd's two charts; fixture `apisix` is charts.APISIXShaped (the umbrella chart).
package main

import (
	"context"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/internal/charts"
)

type webhook struct{ url, ca string }

func (w webhook) URL() string      { return w.url }
func (w webhook) CABundle() string { return w.ca }

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: localchart <fixture> <dir> <webhook url> <caBundle>")
		os.Exit(2)
	}
	shaped := map[string]func(string, charts.Webhook) (string, error){"linkerd": charts.LinkerdShaped, "apisix": charts.APISIXShaped}
	if write, ok := shaped[os.Args[1]]; ok {
		path, err := write(os.Args[2], webhook{os.Args[3], os.Args[4]})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(path)
		return
	}
	// External Secrets' CRDs come with the release (`installCRDs: true`), as in the Go runs.
	var crds []*unstructured.Unstructured
	if os.Args[1] == "external-secrets" {
		var err error
		if crds, err = charts.ExternalSecretsCRDs(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	path, err := charts.Local(os.Args[2], os.Args[1], webhook{os.Args[3], os.Args[4]}, crds...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(path)
}
