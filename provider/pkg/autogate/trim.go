package autogate

// TrimInstaller is the part of an installer's object the rules read, which is all the SDKs need
// to remember and send back with every later decision. A chart's CRDs carry hundreds of KB of
// schema and 200 ExternalSecrets are 200 installers: sent whole with every call, the calls grew
// with the square of the stack. Anything not an installer comes back as it is.
func TrimInstaller(typ string, obj map[string]any) map[string]any {
	k := kindOf(typ, obj)
	if k == notInstaller || obj == nil {
		return obj
	}
	if k == releaseInstaller {
		return pick(obj, "name", "namespace", "chart", "version")
	}
	out := pick(obj, "apiVersion", "kind")
	if md, ok := mapAt(obj, "metadata"); ok {
		out["metadata"] = pick(md, "name", "namespace")
	}
	spec, _ := mapAt(obj, "spec")
	switch k {
	case crdInstaller:
		s := pick(spec, "group", "scope", "names")
		if versions := items(spec, "versions"); versions != nil {
			vs := make([]any, 0, len(versions))
			for _, v := range versions {
				vs = append(vs, pick(v, "name", "served"))
			}
			s["versions"] = vs
		}
		out["spec"] = s
	case webhookInstaller:
		if hooks, ok := obj["webhooks"].([]any); ok {
			hs := make([]any, 0, len(hooks))
			for _, h := range hooks {
				hm, ok := h.(map[string]any)
				if !ok {
					continue
				}
				t := pick(hm, "name", "rules", "matchPolicy", "failurePolicy", "namespaceSelector", "objectSelector", "matchConditions")
				if cc, ok := mapAt(hm, "clientConfig"); ok {
					c := pick(cc, "url", "service")
					t["clientConfig"] = c // without caBundle: no rule reads a certificate
				}
				hs = append(hs, t)
			}
			out["webhooks"] = hs
		}
	case certificateInstaller:
		out["spec"] = pick(spec, "secretName")
	case externalSecretInstaller:
		s := map[string]any{}
		if target, ok := mapAt(spec, "target"); ok {
			s["target"] = pick(target, "name", "creationPolicy")
		}
		out["spec"] = s
	case serviceAccountInstaller:
		out["imagePullSecrets"] = obj["imagePullSecrets"]
	}
	return out
}

// pick is a shallow copy of m's keys that are set.
func pick(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		if v, ok := m[k]; ok && v != nil {
			out[k] = v
		}
	}
	return out
}
