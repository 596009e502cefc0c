package main

import (
	"fmt"
	"os"
	"strings"
)

// The real-node figures (field reports 000 and 001 on real pods, four ways against the floor)
// come from tests/e2e/realnode (`make bench-realnode`): they need a real node, root and
// minutes per round, so `make bench` keeps them as they are, between these markers.
// The measurements log (figures measured by hand: whole `make test` runs, builds, the soak, each
// with its date and commit) is written by hand, so `make bench` keeps it too.
const (
	realNodeBegin = "<!-- real-node figures: make bench-realnode -->"
	realNodeEnd   = "<!-- end of real-node figures -->"
	faultsBegin   = "<!-- real-node faults: make bench-faults -->"
	faultsEnd     = "<!-- end of real-node faults -->"
	logBegin      = "<!-- measurements log: by hand -->"
	logEnd        = "<!-- end of measurements log -->"
)

// keptSections are the real-node section and the measurements log of the results file at path,
// in that order ("" for one it does not have).
func keptSections(path string) string {
	return kept(path, realNodeBegin, realNodeEnd) + kept(path, faultsBegin, faultsEnd) + kept(path, logBegin, logEnd)
}

// kept is the section of the results file at path between begin and end, markers included
// ("" when it has none).
func kept(path, begin, end string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return ""
	}
	return "\n" + s[i:j+len(end)] + "\n"
}

// spliceRealNode puts the figures in section (a markdown file) into the results file at path,
// replacing its real-node section or adding one at the end.
func spliceRealNode(path, section string) error {
	return splice(path, section, realNodeBegin, realNodeEnd)
}

// spliceFaults is spliceRealNode for the faults' section (tests/e2e/realnode/faults_test.go).
func spliceFaults(path, section string) error {
	return splice(path, section, faultsBegin, faultsEnd)
}

func splice(path, section, realNodeBegin, realNodeEnd string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	fig, err := os.ReadFile(section)
	if err != nil {
		return err
	}
	block := realNodeBegin + "\n" + strings.TrimSpace(string(fig)) + "\n" + realNodeEnd
	s := string(b)
	if i, j := strings.Index(s, realNodeBegin), strings.Index(s, realNodeEnd); i >= 0 && j > i {
		s = s[:i] + block + s[j+len(realNodeEnd):]
	} else {
		s = strings.TrimRight(s, "\n") + "\n\n" + block + "\n"
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		return err
	}
	fmt.Printf("figures from %s written into %s\n", section, path)
	return nil
}
