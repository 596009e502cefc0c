package httpcheck

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Excerpt quotes the start of an unwanted answer's body ("no endpoints available for service",
// "upstream connect error", ...): it is what tells a person why the endpoint is not ready. A body
// can hold anything (a password in an error page): the quote is one line, at most 160 characters,
// with credential-like values blanked, and nothing at all of a body that looks like a Secret or a key.
func Excerpt(body []byte) string {
	if secretLikeBody(string(body)) {
		return " (the body is not shown: it looks like it holds secret data)"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	line = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return -1
	}, line)
	if line == "" {
		return ""
	}
	if r := []rune(line); len(r) > 160 {
		line = string(r[:160]) + "..."
	}
	return ": " + strconv.Quote(redactBodyLine(line))
}

// RedactURL hides what a URL may carry as credentials: its userinfo, every query value (and a
// key given without a value) and its fragment.
// The result is for messages, IDs and logs; the request uses the URL as given.
func RedactURL(u *url.URL) string {
	c := *u
	if c.User != nil {
		c.User = url.User("REDACTED")
	}
	if c.RawQuery != "" {
		q := url.Values{}
		for k, vs := range c.Query() {
			if strings.Join(vs, "") == "" {
				k = "REDACTED" // a bare key (`?TOKEN`) is the value itself
			}
			q[k] = []string{"REDACTED"}
		}
		c.RawQuery = strings.NewReplacer("%5B", "[", "%5D", "]").Replace(q.Encode())
	}
	c.Fragment, c.RawFragment = "", ""
	return c.String()
}

// RedactURLString is redactURL for a URL as text; text that does not parse is not shown.
func RedactURLString(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return RedactURL(u)
}

// RedactedError is err's message with the URL of a failed request redacted (net/http quotes the
// whole URL, query and user name included, in its errors).
func RedactedError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Sprintf("%s %q: %v", ue.Op, RedactURLString(ue.URL), ue.Err)
	}
	return err.Error()
}

// credentialRE finds `password=...`, `"token": "..."`, `Authorization: Bearer ...` and the like
// in a response body, to blank their values before a line of it is quoted.
var credentialRE = regexp.MustCompile(`(?i)((?:pass(?:word|wd)?|pwd|secret|token|api[-_]?key|access[-_]?key|auth(?:orization)?|credentials?|session|cookie|bearer|private[-_]?key)["']?\s*[:=]?\s*["']?(?:bearer\s+|basic\s+)?)[^\s"',;&<>]+`)

// userinfoRE finds the userinfo of a URL quoted in a body.
var userinfoRE = regexp.MustCompile(`(//)[^/\s@"']+@`)

// secretKindRE finds a Kubernetes Secret (or a list of them) in a JSON or YAML body.
var secretKindRE = regexp.MustCompile(`"kind"\s*:\s*"Secret(List)?"|(?m)^kind:\s*Secret\s*$|"stringData"\s*:`)

// secretLikeBody reports whether a body looks like it holds secret material as a whole (a
// Kubernetes Secret, a PEM key or certificate): such a body is never quoted, not even in part.
func secretLikeBody(body string) bool {
	return strings.Contains(body, "-----BEGIN") || secretKindRE.MatchString(body)
}

// redactBodyLine blanks credential-like values in one line of a body.
func redactBodyLine(line string) string {
	line = credentialRE.ReplaceAllString(line, "${1}[redacted]")
	return userinfoRE.ReplaceAllString(line, "${1}[redacted]@")
}
