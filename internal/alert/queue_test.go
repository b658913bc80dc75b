package alert

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/reloader-operator/reloader/internal/notify"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// One namespace's flood of alerts drops only its own: the alert of another namespace queued
// after it is kept, and sent at its turn, not after the backlog.
func TestFloodOfOneNamespaceKeepsAnothersAlert(t *testing.T) {
	url, ch := received(t, http.StatusOK)
	poster, err := notify.NewPoster(time.Second, 1, "")
	testutil.Must(t, err)
	a := New("raw", url, "", poster, logr.Discard())
	var mu sync.Mutex
	dropped := map[string]int{}
	a.Dropped = func(ns string) { mu.Lock(); dropped[ns]++; mu.Unlock() }
	flood := sample
	flood.Namespace = "tenant-a"
	for i := range 5000 {
		flood.Name = fmt.Sprint("api-", i)
		a.Queue(flood)
	}
	b := sample
	b.Namespace, b.Name = "tenant-b", "web"
	a.Queue(b)
	// tenant-a fills the queue, then drops its own newer alerts, then its oldest to make room
	// for tenant-b's.
	if want := 5000 - QueueSize + 1; dropped["tenant-a"] != want || dropped["tenant-b"] != 0 {
		t.Fatalf("dropped %v, want %d of tenant-a's and none of tenant-b's", dropped, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = a.Start(ctx) }()
	// Turns: tenant-a's first alert, then tenant-b's.
	for i := range 2 {
		body := await(t, ch)
		w, _ := body["workload"].(map[string]any)
		if i == 1 && (w["namespace"] != "tenant-b" || w["name"] != "web") {
			t.Errorf("second alert sent is of %v, want tenant-b's at its turn", w)
		}
	}
}

// A full queue: a namespace new to it takes the place of the oldest alert of the namespace
// holding the most, and one holding as many as any other drops its own.
func TestFullQueueTakesFromTheLargestNamespace(t *testing.T) {
	q := newQueue(4, 2)
	for _, ns := range []string{"a", "a", "b"} {
		if _, dropped := q.push(Reload{Namespace: ns}); dropped {
			t.Fatalf("dropped with room")
		}
	}
	if out, dropped := q.push(Reload{Namespace: "a", Name: "third"}); !dropped || out.Name != "third" {
		t.Errorf("a past its share: dropped %v %q, want its new alert", dropped, out.Name)
	}
	q.push(Reload{Namespace: "c"})
	if out, dropped := q.push(Reload{Namespace: "d", Name: "d"}); !dropped || out.Namespace != "a" {
		t.Errorf("full queue, d new: dropped %v of %q, want a's oldest", dropped, out.Namespace)
	}
	if out, dropped := q.push(Reload{Namespace: "b", Name: "b2"}); !dropped || out.Namespace != "b" {
		t.Errorf("full queue, b as large as any: dropped %v of %q, want b's own", dropped, out.Namespace)
	}
	var got []string
	for r, ok := q.pop(); ok; r, ok = q.pop() {
		got = append(got, r.Namespace)
	}
	if fmt.Sprint(got) != "[a b c d]" {
		t.Errorf("sent %v, want each namespace in turn", got)
	}
}

// A fan-out in one namespace, with no other waiting, keeps every alert the queue can hold.
func TestOneNamespacesFanOutKeepsItsAlerts(t *testing.T) {
	q := newQueue(QueueSize, NamespaceShare)
	for i := range 200 {
		if _, dropped := q.push(Reload{Namespace: "shop", Name: fmt.Sprint("web-", i)}); dropped {
			t.Fatalf("alert %d of a 200-workload fan-out dropped with room in the queue", i)
		}
	}
}
