// Command pulumi-resource-kubetest runs the test-only stand-in for pulumi-kubernetes.
package main

import (
	"context"
	"fmt"
	"os"

	p "github.com/pulumi/pulumi-go-provider"

	"github.com/readiness-io/pulumi-readiness/internal/standin"
)

func main() {
	prov, err := standin.New()
	if err == nil {
		err = p.RunProvider(context.Background(), "kubetest", "0.1.0", prov)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
