// A user's Go program, built outside the repository against the released SDK module
// (go get github.com/readiness-io/pulumi-readiness/sdk@vX.Y.Z): an inline Pulumi program run through
// the Automation API with one gate. No plugin is installed beforehand; the engine downloads it
// from the SDK's plugin download URL (rewritten by PULUMI_PLUGIN_DOWNLOAD_URL_OVERRIDES).
//
// Usage: app <work dir> <kubeconfig file>. Prints {"readyNodes": N} on success.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

func main() {
	if err := run(context.Background(), os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "app:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, workDir, kubeconfigFile string) error {
	kubeconfig, err := os.ReadFile(kubeconfigFile)
	if err != nil {
		return err
	}
	program := func(ctx *pulumi.Context) error {
		nodes, err := readiness.NewNodesReady(ctx, "nodes", &readiness.NodesReadyArgs{
			MinCount: pulumi.IntPtr(1),
			Timeout:  pulumi.String("2m"),
		})
		if err != nil {
			return err
		}
		ctx.Export("readyNodes", nodes.ReadyNodes)
		return nil
	}
	s, err := auto.UpsertStackInlineSource(ctx, "dev", "install-go", program, auto.WorkDir(workDir))
	if err != nil {
		return err
	}
	if err := s.SetConfig(ctx, "readiness:kubeconfig", auto.ConfigValue{Value: string(kubeconfig), Secret: true}); err != nil {
		return err
	}
	up, upErr := s.Up(ctx, optup.ProgressStreams(os.Stderr))
	if upErr == nil {
		out, _ := json.Marshal(map[string]any{"readyNodes": up.Outputs["readyNodes"].Value})
		fmt.Println(string(out))
	}
	if _, err := s.Destroy(ctx, optdestroy.Remove()); err != nil && upErr == nil {
		return err
	}
	return upErr
}
