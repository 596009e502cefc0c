package realnode

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// ListenInNamespace listens on addr inside the real node's network namespace, for a server of
// the test process that the node's own components must reach: a registry served on
// 127.0.0.1:PORT on the host and, through this listener, at the same address inside the
// namespace, so one image reference is good for a gate on the host and for containerd.
//
// A socket stays in the namespace it was made in, whatever thread accepts on it later; only
// the thread that makes it must be switched in, and it is switched back afterwards. It must
// not be left to die locked (as forward.go's dialer does at Close): the node's components
// are started with Pdeathsig, which the kernel sends when the *thread* that forked them
// exits, and any thread may have forked the kubelet. Seen here: a thread retired by a first
// version of this function took the kubelet and kube-proxy with it.
func (n *Node) ListenInNamespace(network, addr string) (net.Listener, error) {
	ns := n.NetnsPath()
	if ns == "" {
		return nil, errors.New("ListenInNamespace: the node is stopped")
	}
	type result struct {
		ln  net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		ln, back, err := listenIn(ns, network, addr)
		done <- result{ln, err}
		if !back {
			// A thread left in the node's namespace must never serve other goroutines, nor
			// exit (Pdeathsig): it stays parked with this goroutine.
			select {}
		}
		runtime.UnlockOSThread()
	}()
	r := <-done
	return r.ln, r.err
}

// listenIn runs on a locked thread: it switches the thread into the network namespace ns,
// listens and switches back. back reports whether the thread is in its own namespace again.
func listenIn(ns, network, addr string) (ln net.Listener, back bool, err error) {
	own, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		return nil, true, err
	}
	defer own.Close()
	target, err := os.Open(ns)
	if err != nil {
		return nil, true, err
	}
	err = unix.Setns(int(target.Fd()), unix.CLONE_NEWNET)
	target.Close()
	if err != nil {
		return nil, true, err
	}
	ln, err = net.Listen(network, addr)
	if rerr := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); rerr != nil {
		if ln != nil {
			ln.Close()
		}
		return nil, false, fmt.Errorf("switching back from the node's namespace: %w", rerr)
	}
	return ln, true, err
}
