package provider

import (
	"context"
	"fmt"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// eventSubject is implemented by gates that wait on one named object: a timeout then quotes
// that object's most recent Warning events (FailedMount, FailedScheduling, BackOff, ...).
type eventSubject interface {
	subject() (namespace, name string)
}

// recentWarnings lists the newest Warning events about name in namespace, newest last. It is
// called once, when a wait has already timed out, so a plain list (not a watch) is right.
func (r *run) recentWarnings(ctx context.Context, namespace, name string, max int) []string {
	if name == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	sel := fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.name", name),
		fields.OneTermEqualSelector("type", "Warning")).String()
	list, err := r.clients.Typed.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil || len(list.Items) == 0 {
		return nil
	}
	items := list.Items
	last := func(i int) time.Time {
		e := items[i]
		switch {
		case !e.LastTimestamp.IsZero():
			return e.LastTimestamp.Time
		case !e.EventTime.IsZero():
			return e.EventTime.Time
		}
		return e.CreationTimestamp.Time
	}
	sort.Slice(items, func(i, j int) bool { return last(i).Before(last(j)) })
	if len(items) > max {
		items = items[len(items)-max:]
	}
	out := make([]string, 0, len(items))
	for _, e := range items {
		out = append(out, fmt.Sprintf("%s %s: %s", e.InvolvedObject.Kind, e.Reason, e.Message))
	}
	return out
}
