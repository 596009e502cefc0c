package floor

import (
	"slices"
	"testing"
	"time"
)

// A run of reports 000 and 001 in small: a Release and a Namespace (no prerequisites), an
// ExternalSecret after both (its webhook must admit it), a Certificate after the Release (its
// webhook) and a Deployment after the Certificate (its Secret issued).
var program = []Object{
	{Name: "release"},
	{Name: "ns"},
	{Name: "es", Deps: []string{"release", "ns"}, Ready: "es-admitted"},
	{Name: "cert", Deps: []string{"release"}, Ready: "cert-admitted"},
	{Name: "app", Deps: []string{"cert"}, Ready: "secret-issued"},
}

func TestSchedule(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	cases := []struct {
		name    string
		run     Run
		floor   time.Duration
		path    []string
		lags    map[string]time.Duration
		missing bool
	}{
		{name: "every object created as its prerequisites held: the floor is the run",
			run: Run{Began: t0,
				Created:  map[string]time.Time{"release": at(1000), "ns": at(1000), "es": at(30000), "cert": at(20000), "app": at(25000)},
				Finished: map[string]time.Time{"release": at(3000), "ns": at(1010), "es": at(30020), "cert": at(20020), "app": at(28000)},
				Held:     map[string]time.Time{"es-admitted": at(30000), "cert-admitted": at(20000), "secret-issued": at(25000)}},
			floor: 30020 * time.Millisecond, path: []string{"es"},
			lags: map[string]time.Duration{"es": 0, "cert": 0, "app": 0}},
		{name: "a way that waited 2 s too long for the release: lags of 2 s, the floor as before",
			run: Run{Began: t0,
				Created:  map[string]time.Time{"release": at(1000), "ns": at(1000), "es": at(32000), "cert": at(22000), "app": at(27000)},
				Finished: map[string]time.Time{"release": at(3000), "ns": at(1010), "es": at(32020), "cert": at(22020), "app": at(30000)},
				Held:     map[string]time.Time{"es-admitted": at(30000), "cert-admitted": at(20000), "secret-issued": at(27000)}},
			floor: 30020 * time.Millisecond, path: []string{"es"},
			lags: map[string]time.Duration{"es": 2000 * time.Millisecond, "cert": 2000 * time.Millisecond, "app": 0}},
		{name: "a dependency's await on the critical path: the Deployment's rollout after its Secret",
			run: Run{Began: t0,
				Created:  map[string]time.Time{"release": at(1000), "ns": at(1000), "es": at(10000), "cert": at(20000), "app": at(25000)},
				Finished: map[string]time.Time{"release": at(3000), "ns": at(1010), "es": at(10020), "cert": at(20020), "app": at(29000)},
				Held:     map[string]time.Time{"es-admitted": at(10000), "cert-admitted": at(5000), "secret-issued": at(25000)}},
			// The Certificate could have been created at 5 s (its lag: 15 s), but the Secret the run
			// saw came at 25 s: the floor takes the run's Secret.
			floor: 29000 * time.Millisecond, path: []string{"app"},
			lags: map[string]time.Duration{"es": 0, "cert": 15000 * time.Millisecond, "app": 0}},
		{name: "near miss: an object created before its prerequisite held has a negative lag",
			run: Run{Began: t0,
				Created:  map[string]time.Time{"release": at(1000), "ns": at(1000), "es": at(30000), "cert": at(20000), "app": at(21000)},
				Finished: map[string]time.Time{"release": at(3000), "ns": at(1010), "es": at(30020), "cert": at(20020), "app": at(40000)},
				Held:     map[string]time.Time{"es-admitted": at(30000), "cert-admitted": at(20000), "secret-issued": at(25000)}},
			floor: 44000 * time.Millisecond, path: []string{"app"},
			lags: map[string]time.Duration{"es": 0, "cert": 0, "app": -4000 * time.Millisecond}},
		{name: "the dependency's finish, not the condition, held last: the path goes through it",
			run: Run{Began: t0,
				Created:  map[string]time.Time{"release": at(1000), "ns": at(1000), "es": at(8000), "cert": at(2000), "app": at(9000)},
				Finished: map[string]time.Time{"release": at(8000), "ns": at(1010), "es": at(8020), "cert": at(9000), "app": at(9500)},
				Held:     map[string]time.Time{"es-admitted": at(2000), "cert-admitted": at(2000), "secret-issued": at(3000)}},
			// cert: ideal start = the release's finish (8 s), finish 15 s; app after it.
			floor: 15500 * time.Millisecond, path: []string{"release", "cert", "app"},
			lags: map[string]time.Duration{"es": 0, "cert": -6000 * time.Millisecond, "app": 0}},
		{name: "a condition never seen: no floor",
			run: Run{Began: t0,
				Created:  map[string]time.Time{"release": at(1000), "ns": at(1000), "es": at(30000), "cert": at(20000), "app": at(25000)},
				Finished: map[string]time.Time{"release": at(3000), "ns": at(1010), "es": at(30020), "cert": at(20020), "app": at(28000)},
				Held:     map[string]time.Time{"es-admitted": at(30000), "cert-admitted": at(20000)}},
			missing: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Schedule(program, c.run)
			if c.missing {
				if len(got.Missing) == 0 {
					t.Fatalf("Missing empty, want the unseen condition; got %s", got)
				}
				return
			}
			if len(got.Missing) > 0 {
				t.Fatalf("Missing %v", got.Missing)
			}
			if got.Floor != c.floor || !slices.Equal(got.Path, c.path) {
				t.Errorf("got %s, want floor %s through %v", got, c.floor, c.path)
			}
			for n, want := range c.lags {
				if got.Lags[n] != want {
					t.Errorf("lag of %s = %s, want %s", n, got.Lags[n], want)
				}
			}
		})
	}
}
