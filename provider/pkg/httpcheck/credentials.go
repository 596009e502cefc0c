package httpcheck

import "net/url"

// URLCarriesCredentials reports whether a URL may carry a credential in its text: a user part
// (`http://admin:PASSWORD@host/`), a query (`?token=...`, or a bare `?KEY`) or a fragment
// (`#access_token=...`). Such a URL is kept secret in the state; the same parts are what
// RedactURL hides in messages. Text that does not parse counts as carrying one: nothing can be
// said of it, so it is treated as the worst case.
func URLCarriesCredentials(s string) bool {
	u, err := url.Parse(s)
	if err != nil {
		return true
	}
	return u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.RawFragment != ""
}
