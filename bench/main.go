// Command bench is `make bench`: it measures the gates on the local control plane against what
// people use today (kubectl wait, and the field reports' `until kubectl get ...; sleep 5` loop)
// and regenerates BENCHMARKS.md. Flags shrink it to a smoke run for CI.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
)

type config struct {
	trials, batch, webhookTrials, scale, stackGates int
	readyTrials, stackScale, autoGateObjects        int
	out, sections                                   string
	// realNodeSection, when set, is a file of the real-node figures (tests/e2e/realnode,
	// `make bench-realnode`) to put into out in place of its real-node section; nothing runs.
	realNodeSection string
	// faultsSection is the same for the faults' figures (`make bench-faults`).
	faultsSection string
}

// on reports whether a section is to run (-sections).
func (c config) on(section string) bool {
	if c.sections == "" || c.sections == "all" {
		return true
	}
	for _, s := range strings.Split(c.sections, ",") {
		if strings.TrimSpace(s) == section {
			return true
		}
	}
	return false
}

func main() {
	var c config
	flag.IntVar(&c.trials, "trials", 200, "detection-latency trials per gate")
	flag.IntVar(&c.batch, "batch", 10, "trials run concurrently (the sleep-5 loop makes sequential trials slow)")
	flag.IntVar(&c.webhookTrials, "webhook-trials", 20, "webhook serving-detection trials")
	flag.IntVar(&c.scale, "scale", 1000, "gates (and objects, in 10 namespaces) in the scale run")
	flag.IntVar(&c.stackGates, "stack-gates", 30, "gates in the Pulumi stack-overhead run")
	flag.IntVar(&c.readyTrials, "ready-trials", 50, "sequential trials per gate kind with the target already ready")
	flag.IntVar(&c.stackScale, "stack-scale", 1000, "gates in the Pulumi stack run with and without checkpoints (0: skip)")
	flag.IntVar(&c.autoGateObjects, "autogate-objects", 200, "ExternalSecrets in the autoGate stack run with no gate, a hand-placed gate and AutoGate (0: skip)")
	flag.StringVar(&c.sections, "sections", "all", "comma-separated sections to run, for partial runs (detection, webhook, admission, conversion, ready, scale, stack, engine, autogate); the others' figures stay empty")
	flag.StringVar(&c.out, "out", "BENCHMARKS.md", "results file (regenerated)")
	flag.StringVar(&c.realNodeSection, "realnode-section", "", "put this file's real-node figures into -out's real-node section, and run nothing")
	flag.StringVar(&c.faultsSection, "faults-section", "", "put this file's fault figures into -out's faults section, and run nothing")
	flag.Parse()
	if c.faultsSection != "" {
		if err := spliceFaults(c.out, c.faultsSection); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if c.realNodeSection != "" {
		if err := spliceRealNode(c.out, c.realNodeSection); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	ctx := context.Background()
	logf := func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
	cp, err := controlplane.Start(ctx, controlplane.Options{Logf: logf})
	if err != nil {
		return err
	}
	defer cp.Stop()
	logf("control plane up in %s", cp.StartTime.Round(time.Millisecond))
	b, err := newBench(ctx, cp)
	if err != nil {
		return err
	}
	defer b.close()

	var r report
	r.date = time.Now().UTC().Format("2006-01-02 15:04 MST")
	r.machine = machine()
	r.loadStart = loadAverage()
	r.config = c
	r.cpStart = cp.StartTime
	if c.on("detection") {
		logf("detection latency: ResourceReady (condition), %d trials", c.trials)
		if r.resource, err = b.detection(ctx, "resource", c.trials, c.batch); err != nil {
			return err
		}
		logf("detection latency: CertificateReady (condition + Secret), %d trials", c.trials)
		if r.certificate, err = b.detection(ctx, "certificate", c.trials, c.batch); err != nil {
			return err
		}
	}
	if c.on("webhook") {
		logf("webhook serving detection, %d trials", c.webhookTrials)
		if r.webhook, err = b.webhookDetection(ctx, c.webhookTrials); err != nil {
			return err
		}
		logf("webhook serving detection on a cluster event (caBundle injected), %d trials", c.webhookTrials)
		if r.webhookEvent, err = b.webhookEventDetection(ctx, c.webhookTrials); err != nil {
			return err
		}
	}
	if c.on("admission") {
		logf("AdmissionReady detection after a late webhook starts serving, %d trials", c.webhookTrials)
		if r.admission, err = b.admissionDetection(ctx, c.webhookTrials, false); err != nil {
			return err
		}
		logf("AdmissionReady detection on a cluster event (caBundle injected), %d trials", c.webhookTrials)
		if r.admissionEvent, err = b.admissionDetection(ctx, c.webhookTrials, true); err != nil {
			return err
		}
	}
	if c.on("conversion") {
		logf("CrdReady conversion webhook detection after it starts serving, %d trials", c.webhookTrials)
		if r.conversion, err = b.conversionDetection(ctx, c.webhookTrials); err != nil {
			return err
		}
	}
	if c.on("ready") {
		logf("target already ready: %d trials per gate kind", c.readyTrials)
		if r.ready, err = b.alreadyReady(ctx, c.readyTrials); err != nil {
			return err
		}
	}
	if c.on("scale") {
		logf("scale: %d gates", c.scale)
		if r.scale, err = b.scaleRun(ctx, c.scale); err != nil {
			return err
		}
	}
	if c.on("stack") {
		logf("stack overhead: %d gates through the Automation API", c.stackGates)
		if r.stack, err = b.stackOverhead(ctx, c.stackGates); err != nil {
			return err
		}
	}
	if c.stackScale > 0 && c.on("engine") {
		logf("stack at scale: %d gates, default checkpointing and PULUMI_SKIP_CHECKPOINTS=true", c.stackScale)
		if r.engine, err = b.engineScale(ctx, c.stackScale); err != nil {
			return err
		}
	}
	if c.autoGateObjects > 0 && c.on("autogate") {
		logf("autoGate: %d ExternalSecrets with no gate, a hand-placed gate and AutoGate", c.autoGateObjects)
		env, err := stack.Prepare(ctx, b.dir)
		if err != nil {
			return err
		}
		if r.autoGate, err = b.autoGateComparison(ctx, env, c.autoGateObjects); err != nil {
			return err
		}
	}
	r.loadEnd = loadAverage()
	text := r.markdown() + keptSections(c.out)
	fmt.Print(text)
	return os.WriteFile(c.out, []byte(text), 0o644)
}

// loadAverage is /proc/loadavg's first three fields ("" where there is none).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], ", ")
	}
	return ""
}

func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		mem = strings.TrimSpace(strings.SplitN(strings.SplitN(string(b), "\n", 2)[0], ":", 2)[1])
	}
	kubectl := "not found"
	if out, err := exec.Command("kubectl", "version", "--client").Output(); err == nil {
		kubectl = strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
	}
	return fmt.Sprintf("%d CPUs (%s), %s RAM, %s, %s/%s; kubectl: %s", runtime.NumCPU(), cpu, mem, runtime.Version(), runtime.GOOS, runtime.GOARCH, kubectl)
}
