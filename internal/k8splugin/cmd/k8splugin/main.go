// Command k8splugin installs the pinned pulumi-kubernetes plugin into $PULUMI_HOME (`make
// k8s-plugin`; the demo and the tests run it too) and prints the plugin's folder.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/readiness-io/pulumi-readiness/internal/k8splugin"
	"github.com/readiness-io/pulumi-readiness/internal/tools"
)

func main() {
	logf := func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
	ctx := context.Background()
	bin, err := tools.EnsureTools(ctx, logf)
	if err == nil {
		err = k8splugin.Install(ctx, filepath.Join(bin, "pulumi"), k8splugin.ProjectHome(), logf)
	}
	if err != nil {
		logf("%v", err)
		os.Exit(1)
	}
	fmt.Println(k8splugin.PluginDir(k8splugin.ProjectHome()))
}
