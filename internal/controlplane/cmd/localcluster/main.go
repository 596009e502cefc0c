// Command localcluster builds the pinned tools (`localcluster tools`, printing their folder) or
// runs the local control plane until interrupted (`localcluster up`, printing its kubeconfig path;
// `up-real-node` with a real node instead of kwok's).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
)

func main() {
	logf := func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := "tools"
	if len(os.Args) > 1 {
		cmd = os.Args[1]
	}
	switch cmd {
	case "tools":
		// Where a real node can run, its tools and the controllers' images are built now too,
		// beside the others, rather than inside the first test that needs them.
		realNode := controlplane.NodeRequirements() == ""
		ensure := controlplane.EnsureTools
		if realNode {
			ensure = controlplane.EnsureNodeTools
		}
		dir, err := ensure(ctx, logf)
		if err != nil {
			logf("%v", err)
			os.Exit(1)
		}
		if realNode {
			if err := charts.BuildImages(ctx, logf, charts.ExternalSecretsChart, charts.CertManagerChart); err != nil {
				logf("%v", err)
				os.Exit(1)
			}
		}
		// Fetch the modules whose CRDs the tests install, so no test fetches anything.
		for _, m := range [][2]string{{controlplane.CertManagerModule, "deploy/crds"}, {controlplane.ExternalSecretsModule, "deploy/crds"}} {
			if _, err := controlplane.ModuleCRDs(ctx, m[0], m[1]); err != nil {
				logf("%v", err)
				os.Exit(1)
			}
		}
		fmt.Println(dir)
	case "up", "up-real-node":
		opts := controlplane.Options{Nodes: 2, Logf: logf}
		if cmd == "up-real-node" {
			// A real node (containerd, kubelet, kube-proxy) and no kwok node.
			opts = controlplane.Options{RealNode: true, Logf: logf}
		}
		cp, err := controlplane.Start(ctx, opts)
		if err != nil {
			logf("%v", err)
			os.Exit(1)
		}
		defer cp.Stop()
		logf("control plane up in %s at %s", cp.StartTime.Round(1e6), cp.Host)
		fmt.Println(cp.KubeconfigPath)
		<-ctx.Done()
	default:
		logf("usage: localcluster [tools|up|up-real-node]")
		os.Exit(2)
	}
}
