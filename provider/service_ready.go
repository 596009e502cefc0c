package provider

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// ServiceReady waits until a Service has ready endpoints in its EndpointSlices: pods that
// passed their readiness probes and that kube-proxy routes to.
type ServiceReady struct {
	gate[ServiceReadyArgs, ServiceReadyState]
}

type ServiceReadyArgs struct {
	Name              string  `pulumi:"name" provider:"replaceOnChanges"`
	Namespace         *string `pulumi:"namespace,optional" provider:"replaceOnChanges"`
	MinReadyEndpoints *int    `pulumi:"minReadyEndpoints,optional" provider:"replaceOnChanges"`
	Port              *string `pulumi:"port,optional" provider:"replaceOnChanges"`
	GateArgs
}

type ServiceReadyState struct {
	ServiceReadyArgs
	ReadyEndpoints int      `pulumi:"readyEndpoints"`
	Ports          []string `pulumi:"ports"`
}

//go:embed descriptions/service_ready.md
var serviceReadyDoc string

func (g *ServiceReady) Annotate(a infer.Annotator) {
	a.Describe(g, markdown(serviceReadyDoc))
}

func (a *ServiceReadyArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Name, "The Service's name.")
	an.Describe(&a.Namespace, "The namespace; the provider's default namespace if unset.")
	an.Describe(&a.MinReadyEndpoints, "How many ready endpoints are needed (default 1).")
	an.Describe(&a.Port, "Count only endpoints serving this port (its name, or its target port number).")
}

func (s *ServiceReadyState) Annotate(a infer.Annotator) {
	a.Describe(&s.ReadyEndpoints, "Ready endpoint addresses seen when the gate passed.")
	a.Describe(&s.Ports, "Ports the EndpointSlices expose, as `name:port/protocol`.")
}

var (
	_ = (infer.CustomCheck[ServiceReadyArgs])((*ServiceReady)(nil))
	_ = (infer.CustomRead[ServiceReadyArgs, ServiceReadyState])((*ServiceReady)(nil))
)

func (*ServiceReady) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[ServiceReadyArgs], error) {
	return checkGate(ctx, req, func(args ServiceReadyArgs, failures []p.CheckFailure) []p.CheckFailure {
		failures = append(failures, nameFailures(req.NewInputs, "name", args.Name, "namespace", args.Namespace)...)
		if args.MinReadyEndpoints != nil && *args.MinReadyEndpoints < 1 {
			failures = append(failures, p.CheckFailure{Property: "minReadyEndpoints", Reason: "must be at least 1"})
		}
		if args.Port != nil && isKnown(req.NewInputs, "port") {
			if msg := portProblem(*args.Port); msg != "" {
				failures = append(failures, p.CheckFailure{Property: "port", Reason: msg})
			}
		}
		return failures
	})
}

func (g *ServiceReady) Create(ctx context.Context, req infer.CreateRequest[ServiceReadyArgs]) (infer.CreateResponse[ServiceReadyState], error) {
	return createGate(ctx, req.Name, req.DryRun, req.Inputs.GateArgs, ServiceReadyState{ServiceReadyArgs: req.Inputs}, "service", serviceBuilder(req.Inputs))
}

func (g *ServiceReady) Read(ctx context.Context, req infer.ReadRequest[ServiceReadyArgs, ServiceReadyState]) (infer.ReadResponse[ServiceReadyArgs, ServiceReadyState], error) {
	return readGate(ctx, req, serviceBuilder(req.Inputs))
}

func serviceBuilder(a ServiceReadyArgs) builder[ServiceReadyState] {
	return func(r *session.Run) (evaluation, func(*ServiceReadyState), error) {
		min := 1
		if a.MinReadyEndpoints != nil {
			min = *a.MinReadyEndpoints
		}
		e := &endpointsEval{r: r, namespace: r.DefaultNamespace(a.Namespace), name: a.Name, port: deref(a.Port), min: min}
		return e, func(s *ServiceReadyState) { s.ReadyEndpoints, s.Ports = e.ready, e.ports }, nil
	}
}

// endpointsEval counts a Service's ready endpoints; WebhookReady uses it too.
type endpointsEval struct {
	r               *session.Run
	namespace, name string
	port            string
	min             int
	ready           int
	ports           []string
}

var endpointSliceGVK = schema.GroupVersionKind{Group: "discovery.k8s.io", Version: "v1", Kind: "EndpointSlice"}

func (e *endpointsEval) what() string {
	return fmt.Sprintf("service %s/%s", e.namespace, e.name)
}

func (e *endpointsEval) check(context.Context) verdict.Result {
	svc, pending := e.r.Objects(session.Target{GVK: session.ServiceGVK, Namespace: e.namespace, Name: e.name})
	if pending != nil {
		return *pending
	}
	if len(svc) == 0 {
		return verdict.Result{Message: fmt.Sprintf("service %s/%s not found", e.namespace, e.name),
			Hint: "is the chart or manifest that creates the Service part of the stack?"}
	}
	sel := labels.SelectorFromSet(labels.Set{"kubernetes.io/service-name": e.name})
	slices, pending := e.r.Objects(session.Target{GVK: endpointSliceGVK, Namespace: e.namespace, Selector: sel})
	if pending != nil {
		return *pending
	}
	e.ready, e.ports = status.ReadyEndpoints(slices, e.port)
	if e.ports == nil {
		e.ports = []string{}
	}
	forPort := ""
	if e.port != "" {
		forPort = " for port " + e.port
	}
	msg := fmt.Sprintf("service %s/%s: %d/%d ready endpoints%s", e.namespace, e.name, e.ready, e.min, forPort)
	hint := "are the backing pods running and passing their readiness probes? (kubectl get pods,endpointslices -n " + e.namespace + ")"
	if ports, ok := servicePorts(svc[0]); e.port != "" && !ok(e.port) {
		hint = fmt.Sprintf("the Service has no port %s (its ports: %s): is `port` right?", e.port, strings.Join(ports, ", "))
	}
	return verdict.Result{Ready: e.ready >= e.min, Message: msg, Hint: hint}
}

// servicePorts lists a Service's ports (name:port->targetPort) and says whether a port given by
// name, port number or target port is one of them.
func servicePorts(svc *unstructured.Unstructured) ([]string, func(string) bool) {
	list, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	var desc []string
	known := map[string]bool{}
	for _, p := range list {
		m, _ := p.(map[string]any)
		name, _ := m["name"].(string)
		port, target := fmt.Sprint(m["port"]), fmt.Sprint(m["targetPort"])
		if m["targetPort"] == nil {
			target = port
		}
		desc = append(desc, fmt.Sprintf("%s:%s->%s", name, port, target))
		for _, k := range []string{name, port, target} {
			if k != "" {
				known[k] = true
			}
		}
	}
	return desc, func(p string) bool { return known[p] || len(list) == 0 }
}
