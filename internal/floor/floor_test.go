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

func TestHops(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	run := Run{Began: t0,
		Created: map[string]time.Time{"release": at(1000), "ns": at(1000), "es": at(30060), "cert": at(20030), "app": at(25200),
			"gate-es": at(2000), "gate-cert": at(2000), "gate-app": at(20100)},
		Finished: map[string]time.Time{"release": at(3000), "ns": at(1010), "es": at(30080), "cert": at(20100), "app": at(28000),
			"gate-es": at(30010), "gate-cert": at(20000), "gate-app": at(25150)}}
	got := Hops(program, run)
	want := map[string]time.Duration{
		"es":   50 * time.Millisecond, // after its gate, not after the Namespace or the release long done
		"cert": 30 * time.Millisecond,
		// gate-app finished after cert: it let app go. An object's finish (es at 30080) never
		// counts for another object: es is not app's dependency.
		"app": 50 * time.Millisecond,
	}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("hop of %s = %s, want %s", n, got[n], w)
		}
	}
	// Near misses: the Release and the Namespace had nothing finished before them; a gate that
	// finished after an object's create step did not let it go.
	for _, n := range []string{"release", "ns"} {
		if h, ok := got[n]; ok {
			t.Errorf("%s has a hop %s, want none (nothing finished before it)", n, h)
		}
	}
	// Near miss: an object that is not a dependency (the Namespace, for app) finishing between
	// app's gate and app's create step did not let it go.
	run.Finished["ns"] = at(25180)
	if got := Hops(program, run)["app"]; got != 50*time.Millisecond {
		t.Errorf("hop of app with the Namespace finishing just before it = %s, want 50ms (from its gate)", got)
	}
	// Near miss: a gate that finished after an object's create step did not let it go; the last
	// step before it (gate-app's finish) did.
	run.Finished["ns"], run.Finished["gate-es"] = at(1010), at(30070)
	if got := Hops(program, run)["es"]; got != 30060*time.Millisecond-25150*time.Millisecond {
		t.Errorf("hop of es with its gate finishing after its create step = %s, want from gate-app's finish", got)
	}
}
