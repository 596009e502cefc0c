// Command player runs one of internal/fakes' controller players against a cluster, for the
// TypeScript tests (which have no Go harness in their process). It prints "done" when the player
// finished (or its error, exiting 1); closing stdin stops it.
//
//	player <kubeconfig> issue <namespace> <certificate> <secret> <after>
//	player <kubeconfig> sync-externalsecrets <name> <after> <namespace>...
//	player <kubeconfig> kubelet <namespace> <selector>
//
// The kubelet runs until stopped; it then prints each FailedMount it reported, one line each
// ("failed-mount: <message>"), before "done".
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/readiness-io/pulumi-readiness/internal/fakes"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("done")
}

func run(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("usage: player <kubeconfig> issue|sync-externalsecrets|kubelet ...")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", args[0])
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var p *fakes.Player
	var kubelet *fakes.Kubelet
	switch a := args[1:]; {
	case a[0] == "issue" && len(a) == 5:
		after, err := time.ParseDuration(a[4])
		if err != nil {
			return err
		}
		p = fakes.IssueWhenCreated(dyn, a[1], a[2], a[3], after, nil)
	case a[0] == "sync-externalsecrets" && len(a) >= 4:
		after, err := time.ParseDuration(a[2])
		if err != nil {
			return err
		}
		p = fakes.SyncExternalSecrets(dyn, a[1], a[3:], after)
	case a[0] == "kubelet" && len(a) == 3:
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		kubelet = fakes.PlayKubelet(client, a[1], a[2], nil)
		p = kubelet.Player
	default:
		return fmt.Errorf("unknown player %q", a)
	}
	if kubelet != nil {
		defer func() {
			for _, m := range kubelet.FailedMounts() {
				fmt.Println("failed-mount:", m)
			}
		}()
	}
	done := make(chan error, 1)
	go func() { done <- p.Wait(context.Background()) }()
	stdin := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stdin) }()
	select {
	case err := <-done:
		return err
	case <-stdin:
		return p.Stop()
	}
}
