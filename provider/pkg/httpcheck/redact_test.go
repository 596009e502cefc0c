package httpcheck

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

func TestExcerptRedacts(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"login failed: password=hunter2 user=bob", `: "login failed: password=[redacted] user=bob"`},
		{`{"error":"bad","token":"abc123xyz"}`, `: "{\"error\":\"bad\",\"token\":\"[redacted]\"}"`},
		{"Authorization: Bearer eyJhbGciOi", `: "Authorization: Bearer [redacted]"`},
		{"see http://bob:pw1234@db.local/x", `: "see http://[redacted]@db.local/x"`},
		{`{"apiVersion":"v1","kind":"Secret","data":{"p":"aHVudGVy"}}`, " (the body is not shown: it looks like it holds secret data)"},
		{"-----BEGIN RSA PRIVATE KEY-----\nMIIE", " (the body is not shown: it looks like it holds secret data)"},
		{`{"data":{"status":"down"}}`, `: "{\"data\":{\"status\":\"down\"}}"`},
		{"no endpoints available for service \"web\"", `: "no endpoints available for service \"web\""`},
	} {
		if got := Excerpt([]byte(tc.body)); got != tc.want {
			t.Errorf("Excerpt(%q) = %s, want %s", tc.body, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"http://alice:pw@h:8080/p?token=t&x=1#frag", "http://REDACTED@h:8080/p?token=REDACTED&x=REDACTED"},
		{"https://h/healthz", "https://h/healthz"},
		{"http://alice@h/", "http://REDACTED@h/"},
		{"https://h/x?tok3nvalue", "https://h/x?REDACTED=REDACTED"},
		{"https://h/x?a=1&tok3nvalue", "https://h/x?REDACTED=REDACTED&a=REDACTED"},
		{"https://h/cb#access_token=tok3n", "https://h/cb"},
	} {
		if got := RedactURLString(tc.in); got != tc.want {
			t.Errorf("RedactURLString(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestRedactedError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&url.Error{Op: "Get", URL: "http://alice:pw@h/p?token=t", Err: errors.New("connection refused")},
			`Get "http://REDACTED@h/p?token=REDACTED": connection refused`},
		{fmt.Errorf("wrapped: %w", &url.Error{Op: "Get", URL: "https://h/?k=v", Err: errors.New("EOF")}), `Get "https://h/?k=REDACTED": EOF`},
		{&url.Error{Op: "Get", URL: "http://[::1:bad", Err: errors.New("x")}, `Get "(a URL that does not parse)": x`},
		{errors.New("plain"), "plain"},
	} {
		if got := RedactedError(tc.err); got != tc.want {
			t.Errorf("RedactedError(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

func TestExcerptShape(t *testing.T) {
	long := strings.Repeat("é", 200)
	for _, tc := range []struct{ body, want string }{
		{"", ""},
		{"   \n\n", ""},
		{"first line\nsecond line", `: "first line"`},
		{"bell\a and nul\x00 gone", `: "bell and nul gone"`},
		{long, ": " + strconv.Quote(strings.Repeat("é", 160)+"...")},
	} {
		if got := Excerpt([]byte(tc.body)); got != tc.want {
			t.Errorf("Excerpt(%q) = %s, want %s", tc.body, got, tc.want)
		}
	}
}
