package realnode

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// forwarder makes the API server of a real node's namespace reachable from the host, on
// 127.0.0.1: each connection it accepts is dialed again from inside the namespace, where the
// API server listens. Test programs, the Pulumi engine and its plugins use the host address;
// the node's own components and pods use the namespace's.
//
// Written by hand (about 80 lines): a dial must be made from an OS thread switched into the
// namespace, which no proxy library does.
type forwarder struct {
	ln     net.Listener
	target string
	dials  chan dialReq
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

type dialReq struct {
	reply chan dialRes
}

type dialRes struct {
	c   net.Conn
	err error
}

// newForwarder listens on 127.0.0.1 (any port) and forwards to target inside the namespace
// nsPath (a /proc/PID/ns/net path).
func newForwarder(nsPath, target string) (*forwarder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &forwarder{ln: ln, target: target, dials: make(chan dialReq), conns: map[net.Conn]struct{}{}}
	started := make(chan error, dialers)
	for range dialers {
		go f.dialer(nsPath, started)
	}
	for range dialers {
		if err := <-started; err != nil {
			ln.Close()
			close(f.dials)
			return nil, err
		}
	}
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

// Addr is the host address ("127.0.0.1:PORT").
func (f *forwarder) Addr() string { return f.ln.Addr().String() }

// dialers is how many connections are dialed at once, and dialTimeout bounds each: a dial that
// hangs (an API server that is starting and not accepting) must not hold every other connection,
// the Pulumi engine's and the plugins' included.
const (
	dialers     = 4
	dialTimeout = 5 * time.Second
)

// dialer owns one OS thread switched into the namespace and dials from it. The thread stays
// locked until the goroutine ends, and Go then retires it instead of reusing it elsewhere.
func (f *forwarder) dialer(nsPath string, started chan<- error) {
	runtime.LockOSThread()
	fd, err := os.Open(nsPath)
	if err == nil {
		err = unix.Setns(int(fd.Fd()), unix.CLONE_NEWNET)
		fd.Close()
	}
	started <- err
	if err != nil {
		return
	}
	for req := range f.dials {
		c, err := net.DialTimeout("tcp", f.target, dialTimeout)
		req.reply <- dialRes{c, err}
	}
}

func (f *forwarder) accept() {
	defer f.wg.Done()
	for {
		in, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go f.forward(in)
	}
}

// forward dials the target for one accepted connection and pipes the two together.
func (f *forwarder) forward(in net.Conn) {
	defer f.wg.Done()
	reply := make(chan dialRes, 1)
	f.dials <- dialReq{reply}
	r := <-reply
	if r.err != nil {
		in.Close()
		return
	}
	if !f.track(in, r.c) {
		in.Close() // the forwarder closed while this one dialed
		r.c.Close()
		return
	}
	f.wg.Add(2)
	go f.pipe(in, r.c)
	go f.pipe(r.c, in)
}

// pipe copies src to dst; when either side ends, both connections close.
func (f *forwarder) pipe(dst, src net.Conn) {
	defer f.wg.Done()
	_, _ = io.Copy(dst, src)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range []net.Conn{dst, src} {
		if _, ok := f.conns[c]; ok {
			delete(f.conns, c)
			c.Close()
		}
	}
}

// track keeps cs to be cut by Close; false once Close has cut them (cs are not kept).
func (f *forwarder) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	for _, c := range cs {
		f.conns[c] = struct{}{}
	}
	return true
}

// Close stops accepting and cuts every forwarded connection.
func (f *forwarder) Close() {
	if err := f.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return
	}
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	close(f.dials)
}
