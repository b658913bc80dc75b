package explain

import (
	"context"
	"fmt"
	"slices"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/workload"
)

// reloadReasons are the reasons of the Events that tell a workload's reloads.
var reloadReasons = []string{"Reloaded", "ReloadFail", "ReloadSkipped", "Resumed", "RolloutComplete", "RolloutStalled",
	"EvictingPods", "EvictionBlocked", "Restarted", "EvictStrategyDisabled", "ReloadNotified", "ApprovalPending"}

// maxEvents is how many of the newest reload Events are shown.
const maxEvents = 5

// events returns the newest reload Events about a workload, newest first.
func (e *Explainer) events(ctx context.Context, kind workload.Kind, name string) ([]Event, error) {
	var list eventsv1.EventList
	err := e.client.List(ctx, &list, client.InNamespace(e.namespace),
		client.MatchingFields{"regarding.kind": kind.Name(), "regarding.name": name})
	if err != nil {
		return nil, fmt.Errorf("last reloads unknown: list events: %w", err)
	}
	out := []Event{}
	for _, ev := range list.Items {
		if !slices.Contains(reloadReasons, ev.Reason) {
			continue
		}
		out = append(out, Event{Time: eventTime(ev).UTC(), Type: ev.Type, Reason: ev.Reason, Message: ev.Note, Count: eventCount(ev)})
	}
	slices.SortStableFunc(out, func(a, b Event) int { return b.Time.Compare(a.Time) })
	return out[:min(len(out), maxEvents)], nil
}

// eventTime is when an Event last happened, whichever API wrote it.
func eventTime(ev eventsv1.Event) time.Time {
	switch {
	case ev.Series != nil:
		return ev.Series.LastObservedTime.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	case !ev.DeprecatedLastTimestamp.IsZero():
		return ev.DeprecatedLastTimestamp.Time
	}
	return ev.CreationTimestamp.Time
}

func eventCount(ev eventsv1.Event) int32 {
	switch {
	case ev.Series != nil:
		return ev.Series.Count
	case ev.DeprecatedCount > 0:
		return ev.DeprecatedCount
	}
	return 1
}
