package coreevents_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/reloader-operator/reloader/internal/coreevents"
)

// slowCore is a core/v1 Events client whose creates take delay, as on a loaded API server.
type slowCore struct {
	delay   time.Duration
	created *atomic.Int64
}

func (c slowCore) Events(string) corev1client.EventInterface { return slowEvents{slowCore: c} }

// slowEvents serves Create; the rest of the interface is nil (never called).
type slowEvents struct {
	corev1client.EventInterface
	slowCore
}

func (e slowEvents) Create(ctx context.Context, ev *corev1.Event, _ metav1.CreateOptions) (*corev1.Event, error) {
	time.Sleep(e.delay)
	e.created.Add(1)
	return ev, nil
}

// TestSettledWritesHoldTheEventsRecordedBeforeTheStop: the recorder and the broadcaster each
// hand an Event on from a goroutine of their own, after Eventf returned; Events recorded just
// before a stop are not written yet, and a broadcaster shut down then drops them (0 of 20
// written). Writes.Settle, before the Shutdown, waits for them.
func TestSettledWritesHoldTheEventsRecordedBeforeTheStop(t *testing.T) {
	var created atomic.Int64
	b, writes := coreevents.NewTrackedBroadcaster(slowCore{delay: 300 * time.Millisecond, created: &created})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	rec := writes.Stamping(coreevents.NewRecorder(b, clientgoscheme.Scheme))
	const n = 20
	for i := range n {
		d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d", UID: types.UID("uid-" + string(rune('a'+i)))}}
		rec.Eventf(d, nil, corev1.EventTypeNormal, "Reloaded", "Reload", "Reloaded Deployment d (%d)", i)
	}
	if early := created.Load(); early == n {
		t.Fatalf("all %d Events written as they were recorded: the writes are not slow enough to tell", n)
	}
	settle, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if !writes.Settle(settle, 500*time.Millisecond) {
		t.Fatal("the writes did not settle within 10 s")
	}
	b.Shutdown()
	if got := created.Load(); got != n {
		t.Errorf("%d Events written once settled, want %d", got, n)
	}
}
