package autogate

import "slices"

// startsAhead says whether a gate's first rounds may begin while its registration is decided,
// before the engine has registered the gate, checked it and called its Create (tens of
// milliseconds of engine hops under load, as long as the dry run itself): only when nothing the
// gate waits for can still change because of the program. That holds when every installer it
// comes after is one the registration already depended on when the SDK sent it, and is a custom
// resource: the SDKs send a registration only once the URNs of its dependencies resolved, which
// for a custom resource is once its create finished (a component's URN resolves at once, its
// children later). A gate chain (AfterGates), inputs read from an installer's outputs (ArgsFrom)
// and a stable window (stableFor, which one early pass cannot cover) never start ahead. Only
// AdmissionReady gains: its dry runs are the slow part of a gate born ready; the watch-driven
// gates pass from their caches.
func startsAhead(in Input, g Gate) bool {
	if g.Type != TypeAdmissionReady || len(g.AfterGates) > 0 || len(g.ArgsFrom) > 0 || in.Options.StableFor != "" {
		return false
	}
	for _, id := range g.After {
		if !slices.Contains(in.DependsOn, id) {
			return false
		}
		i := slices.IndexFunc(in.Installers, func(i Installer) bool { return i.ID == id })
		if i < 0 || componentTypes[in.Installers[i].Type] || in.Installers[i].Type == "" {
			return false
		}
	}
	return true
}
