// Command testregistry runs a real OCI registry on 127.0.0.1 (internal/testregistry) for tests
// in other languages, and pushes random images to it on request.
//
//	testregistry [-tls] [-user name:password]
//
// It prints one JSON line, {"host": "127.0.0.1:<port>", "ca": "<PEM, with -tls>"}, then reads
// commands from stdin, one a line, answering each with one JSON line, {"digest": "sha256:..."}
// or {"error": "..."}:
//
//	image <repo:tag> <os/arch>            push a random single-platform image
//	index <repo:tag> <os/arch> <os/arch>  push an index of random images
//
// It exits when stdin closes.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/readiness-io/pulumi-readiness/internal/testregistry"
)

func main() {
	useTLS := flag.Bool("tls", false, "serve HTTPS with a certificate from a fresh CA")
	user := flag.String("user", "", "name:password: require HTTP basic auth (htpasswd)")
	flag.Parse()
	opts := testregistry.Options{TLS: *useTLS}
	if *user != "" {
		name, pass, ok := strings.Cut(*user, ":")
		if !ok {
			fmt.Fprintln(os.Stderr, "-user wants name:password")
			os.Exit(2)
		}
		opts.Users = map[string]string{name: pass}
	}
	reg, err := testregistry.Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer reg.Close()
	out := json.NewEncoder(os.Stdout)
	_ = out.Encode(map[string]string{"host": reg.Host, "ca": string(reg.CAPEM)})

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		var digest string
		switch {
		case len(f) == 3 && f[0] == "image":
			digest, err = reg.PushImage(f[1], f[2])
		case len(f) >= 3 && f[0] == "index":
			digest, err = reg.PushIndex(f[1], f[2:]...)
		default:
			err = fmt.Errorf("unknown command %q (want: image <repo:tag> <os/arch> | index <repo:tag> <os/arch>...)", in.Text())
		}
		if err != nil {
			_ = out.Encode(map[string]string{"error": err.Error()})
			continue
		}
		_ = out.Encode(map[string]string{"digest": digest})
	}
}
