package demo

import (
	"context"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// reasonSourceQuarantined is the reason of the Warning Event reloader puts on a workload whose
// source the flap breaker quarantined (docs/operations.md): the demo reads it as a user would,
// and links none of the controller.
const reasonSourceQuarantined = "SourceQuarantined"

// flapping makes two writers fight over the ConfigMap, as two controllers that each own it
// would: the pipeline writes GREETING=hello back, the editor writes "hello, reloaded" again,
// twice each. The content returns to an earlier one three times and the writer changes four
// times in a row, and the flap breaker (internal/flap) takes either for a fight with its
// default limits: it quarantines the ConfigMap and holds the Deployment's reloads. flapping
// returns the note of the Warning Event reloader puts on the Deployment, which names both
// writers.
func flapping(ctx context.Context, cl client.Client, say func(string, ...any)) (string, error) {
	say("now %s and %s fight over %s: 4 writes, GREETING flipping back and forth", pipeline, editor, configMap)
	for i := range 4 {
		manager, value := pipeline, "hello"
		if i%2 == 1 {
			manager, value = editor, "hello, reloaded"
		}
		// managedFields record a write's time to the second, and reloader takes the newest
		// entry for the writer of a change: each write in a second of its own, so that each
		// is told apart.
		if err := nextSecond(ctx); err != nil {
			return "", err
		}
		if err := setGreeting(ctx, cl, manager, value); err != nil {
			return "", err
		}
	}
	var note string
	err := poll(ctx, "the "+reasonSourceQuarantined+" Event", func() (bool, error) {
		var events eventsv1.EventList
		if err := cl.List(ctx, &events, client.InNamespace(namespace)); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Regarding.Kind == "Deployment" && e.Regarding.Name == name && e.Reason == reasonSourceQuarantined {
				note = e.Note
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return "", err
	}
	say("the flap breaker quarantined %s: the Deployment keeps its pods until %s is quiet or released", configMap, configMap)
	return note, nil
}

// nextSecond returns at the start of the next second of the clock.
func nextSecond(ctx context.Context) error {
	now := time.Now()
	t := time.NewTimer(now.Truncate(time.Second).Add(time.Second).Sub(now))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
