// Command pause is the real node's sandbox image ("pause" container): it holds a pod's
// namespaces and waits for its end, as registry.k8s.io/pause does, which cannot be pulled here.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}
