// Command localcluster builds the pinned tools (`localcluster tools`, printing their folder) or
// runs the local control plane until interrupted (`localcluster up`, printing its kubeconfig path;
// `up-real-node` with a real node instead of kwok's).
//
// `up-real-node -charts DIR` also loads the images of External Secrets', cert-manager's and
// ingress-nginx's charts (internal/charts) into the node and writes the charts to
// DIR/external-secrets, DIR/cert-manager and DIR/ingress-nginx before it prints the kubeconfig path, so the
// first line means everything is ready. `localcluster node-requirements` prints what this
// machine lacks to run a real node (realnode.Requirements; empty when nothing).
// `localcluster images` builds the real charts' images into the tools cache.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/realnode"
	"github.com/readiness-io/pulumi-readiness/internal/tools"
)

func logf(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := "tools"
	if len(os.Args) > 1 {
		cmd = os.Args[1]
	}
	switch cmd {
	case "tools":
		// Where a real node can run, its kubelet and kube-proxy are built now too, with the
		// other Kubernetes binaries of their module. The controllers' images are not: the
		// real-node tests build them (tests/e2e/realnode's TestMain) while the other test
		// packages mostly wait on their clusters, rather than before any test starts
		// (`localcluster images` builds them by hand).
		ensure := tools.EnsureTools
		if realnode.Requirements() == "" {
			ensure = tools.EnsureNodeTools
		}
		dir, err := ensure(ctx, logf)
		if err != nil {
			logf("%v", err)
			os.Exit(1)
		}
		// Fetch the modules whose CRDs the tests install, so no test fetches anything.
		for _, m := range [][2]string{{tools.CertManagerModule, "deploy/crds"}, {tools.ExternalSecretsModule, "deploy/crds"}} {
			if _, err := tools.ModuleCRDs(ctx, m[0], m[1]); err != nil {
				logf("%v", err)
				os.Exit(1)
			}
		}
		fmt.Println(dir)
	case "up":
		cp, err := controlplane.Start(ctx, controlplane.Options{Nodes: 2, Logf: logf})
		if err != nil {
			logf("%v", err)
			os.Exit(1)
		}
		defer cp.Stop()
		up(ctx, cp)
	case "up-real-node":
		// A real node (containerd, kubelet, kube-proxy) and no kwok node.
		chartsDir := ""
		fs := flag.NewFlagSet(cmd, flag.ExitOnError)
		fs.StringVar(&chartsDir, "charts", "", "write the real charts (External Secrets, cert-manager, ingress-nginx) under this folder, their images loaded into the node")
		_ = fs.Parse(os.Args[2:])
		node, err := realnode.Start(ctx, controlplane.Options{Logf: logf})
		if err != nil {
			logf("%v", err)
			os.Exit(1)
		}
		defer node.Stop()
		if chartsDir != "" {
			began := time.Now()
			for _, c := range charts.RealNodeCharts {
				if _, err := charts.Install(ctx, node, c, chartsDir, logf); err != nil {
					logf("%v", err)
					node.Stop() // os.Exit skips the deferred Stop; the node must give the host back
					os.Exit(1)
				}
			}
			logf("charts written under %s, their images loaded, in %s", chartsDir, time.Since(began).Round(time.Millisecond))
		}
		up(ctx, node.ControlPlane)
	case "images":
		if err := charts.BuildImages(ctx, logf, charts.RealNodeCharts...); err != nil {
			logf("%v", err)
			os.Exit(1)
		}
	case "node-requirements":
		// What TypeScript tests need to skip (or fail under CI) with the reason.
		fmt.Println(realnode.Requirements())
	default:
		logf("usage: localcluster [tools|images|up|up-real-node [-charts DIR]|node-requirements]")
		os.Exit(2)
	}
}

// up says the control plane is up, prints its kubeconfig path and waits for the end.
func up(ctx context.Context, cp *controlplane.ControlPlane) {
	logf("control plane up in %s at %s", cp.StartTime.Round(1e6), cp.Host)
	fmt.Println(cp.KubeconfigPath)
	<-ctx.Done()
}
