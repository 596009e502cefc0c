// Command fakewebhook serves fakes.Webhook for tests in other languages (the TypeScript stack
// tests): it reserves a port on 127.0.0.1, prints {"url": ..., "convertUrl": ..., "caBundle": ...} as one JSON line,
// then obeys one command per line on stdin, answering "ok" to each: `start`, `stop`,
// `mode <mode>` (see fakes.Webhook.Mode), `refuse-direct true|false`; to `calls` it answers the number of
// admission requests served so far instead. It exits when stdin closes.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/readiness-io/pulumi-readiness/internal/fakes"
)

func main() {
	wh, err := fakes.NewWebhook()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer wh.Close()
	line, _ := json.Marshal(map[string]string{"url": wh.URL(), "convertUrl": wh.ConvertURL(), "caBundle": wh.CABundle()})
	fmt.Println(string(line))
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(strings.TrimSpace(in.Text()), " ")
		switch cmd {
		case "start":
			err = wh.Start()
		case "stop":
			wh.Stop()
		case "mode":
			wh.Mode.Store(arg)
		case "refuse-direct":
			wh.RefuseDirect.Store(arg == "true")
		case "calls":
			fmt.Println(wh.Calls.Load())
			continue
		default:
			err = fmt.Errorf("unknown command %q", cmd)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("ok")
	}
}
