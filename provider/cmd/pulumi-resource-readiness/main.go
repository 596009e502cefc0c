// Command pulumi-resource-readiness runs the readiness provider as a Pulumi plugin.
package main

import (
	"context"
	"fmt"
	"os"

	p "github.com/pulumi/pulumi-go-provider"

	"github.com/readiness-io/pulumi-readiness/provider"
)

func main() {
	// `pulumi-resource-readiness --version` prints the stamped version (the engine never passes it).
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "-version") {
		fmt.Println(provider.Version)
		return
	}
	prov, err := provider.New()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building the provider: %v\n", err)
		os.Exit(1)
	}
	if err := p.RunProvider(context.Background(), provider.Name, provider.Version, prov); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
}
