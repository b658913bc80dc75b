package ledger_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reloader-operator/reloader/internal/ledger"
)

const own = "reloader"

// fakeCore is the fake's core client, saying as the fake clientset does that it streams no
// lists.
type fakeCore struct{ corev1client.ConfigMapsGetter }

func (fakeCore) IsWatchListSemanticsUnSupported() bool { return true }

// started runs a ledger over cs until the test ends, and waits for its first list.
func started(t *testing.T, cs *fake.Clientset) *ledger.Ledger {
	t.Helper()
	l := ledger.New(fakeCore{cs.CoreV1()}, own, logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = l.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(10 * time.Second)
	for !l.Synced() && !l.Off() {
		if time.Now().After(deadline) {
			t.Fatal("the ledger did not list its ConfigMaps")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return l
}

func stored(t *testing.T, cs *fake.Clientset, ns string) *corev1.ConfigMap {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps(own).Get(context.Background(), ledger.Name(ns), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func TestARecordKeptIsReadAtOnceWrittenWithTheFlushAndReadAgainAfterARestart(t *testing.T) {
	cs := fake.NewClientset()
	l := started(t, cs)
	if _, ok, err := l.Record("Deployment", "team", "web", "uid-1"); ok || err != nil {
		t.Fatalf("an empty ledger holds a record: ok %v, err %v", ok, err)
	}
	if !l.Put("Deployment", "team", "web", "uid-1", "configmap/cfg=abc") {
		t.Fatal("the ledger refused a record with room for it")
	}
	if rec, ok, _ := l.Record("Deployment", "team", "web", "uid-1"); !ok || rec != "configmap/cfg=abc" {
		t.Fatalf("the record kept is not read back before the flush: %q, %v", rec, ok)
	}
	if stored(t, cs, "team") != nil {
		t.Fatal("the ledger wrote before its flush")
	}
	l.Flush(context.Background())
	cm := stored(t, cs, "team")
	if cm == nil || cm.Data["Deployment.web"] != "uid-1 configmap/cfg=abc" || cm.Labels[ledger.Label] != "team" {
		t.Fatalf("the flush did not write the entry: %+v", cm)
	}

	again := started(t, cs) // a restart
	if rec, ok, err := again.Record("Deployment", "team", "web", "uid-1"); !ok || err != nil || rec != "configmap/cfg=abc" {
		t.Fatalf("a restarted ledger does not read the record written: %q, %v, %v", rec, ok, err)
	}
	if _, ok, _ := again.Record("Deployment", "team", "web", "uid-2"); ok {
		t.Fatal("a workload of the same name and another UID (re-created) takes the old one's record")
	}
	if _, ok, _ := again.Record("StatefulSet", "team", "web", "uid-1"); ok {
		t.Fatal("a workload of another kind takes the record")
	}
}

func TestOneWritePerNamespacePerFlushEachWithinTheBudget(t *testing.T) {
	cs := fake.NewClientset()
	l := started(t, cs)
	budget := 0
	l.Budget = func(context.Context) error { budget++; return nil }
	for i := range 50 {
		for _, ns := range []string{"a", "b"} {
			l.Put("Deployment", ns, "w"+strings.Repeat("x", i), "u", "r")
		}
	}
	cs.ClearActions()
	l.Flush(context.Background())
	writes := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "create" || a.GetVerb() == "update" {
			writes++
		}
	}
	if writes != 2 || budget != 2 {
		t.Fatalf("100 records in 2 namespaces took %d writes and %d budget slots; want 2 and 2", writes, budget)
	}
	if n := len(stored(t, cs, "a").Data); n != 50 {
		t.Fatalf("namespace a's ConfigMap holds %d entries, want 50", n)
	}
}

func TestADroppedEntryLeavesWithTheNamespacesNextWrite(t *testing.T) {
	cs := fake.NewClientset()
	l := started(t, cs)
	l.Put("Deployment", "team", "web", "u", "r")
	l.Put("Deployment", "team", "api", "u", "r")
	l.Flush(context.Background())
	waitStored(t, l, "team", "Deployment", "api")
	l.Drop("Deployment", "team", "web")
	cs.ClearActions()
	l.Flush(context.Background())
	if n := len(cs.Actions()); n != 0 {
		t.Fatalf("a drop alone wrote the ledger (%d requests): a reload would cost a write", n)
	}
	l.Put("Deployment", "team", "db", "u", "r")
	l.Flush(context.Background())
	cm := stored(t, cs, "team")
	if _, ok := cm.Data["Deployment.web"]; ok || cm.Data["Deployment.api"] == "" || cm.Data["Deployment.db"] == "" {
		t.Fatalf("after the namespace's next write the ConfigMap holds %v; want api and db", cm.Data)
	}
}

// TestAnEntryIsReadUntilTheInformerHoldsIt: the entries a flush writes are read from memory
// while the flush waits for its budget slot and until the informer's ConfigMap holds them (a
// watch that brings nothing until the test says so); in neither place, a reconcile asking
// then would take the workload for one never seen and record the live content as its
// baseline. An entry dropped then costs no write of its own and leaves with the namespace's
// next write; once the informer holds the write, the flush after forgets what it wrote.
func TestAnEntryIsReadUntilTheInformerHoldsIt(t *testing.T) {
	cs := fake.NewClientset()
	echo := watch.NewFake()
	cs.PrependWatchReactor("configmaps", func(k8stesting.Action) (bool, watch.Interface, error) { return true, echo, nil })
	l := started(t, cs)
	var (
		mu     sync.Mutex
		slots  int
		during []string
	)
	l.Budget = func(context.Context) error { // the ticker's flush may be the one taking them
		rec, ok, err := l.Record("Deployment", "team", "web", "u")
		mu.Lock()
		defer mu.Unlock()
		slots++
		if !ok || err != nil || rec != "configmap/cfg=abc" {
			during = append(during, fmt.Sprintf("%q, %v, %v", rec, ok, err))
		}
		return nil
	}
	l.Put("Deployment", "team", "web", "u", "configmap/cfg=abc")
	l.Put("Deployment", "team", "api", "u", "configmap/cfg=abc")
	l.Flush(context.Background())
	cm := eventually(t, "the entries written", func() *corev1.ConfigMap {
		if cm := stored(t, cs, "team"); cm != nil && len(cm.Data) == 2 {
			return cm
		}
		return nil
	})
	mu.Lock()
	if slots == 0 || during != nil {
		t.Fatalf("the flushes took %d budget slots, want some; while they waited, the entry read as %v (want the record)", slots, during)
	}
	mu.Unlock()
	if !l.Unechoed("team") {
		t.Fatal("the informer holds a write its watch never brought")
	}
	if rec, ok, err := l.Record("Deployment", "team", "web", "u"); !ok || err != nil || rec != "configmap/cfg=abc" {
		t.Fatalf("written, before the informer holds it, the entry reads as %q, %v, %v; want the record", rec, ok, err)
	}

	l.Drop("Deployment", "team", "web")
	cs.ClearActions()
	l.Flush(context.Background())
	if writes := writesOf(cs); writes != 0 {
		t.Fatalf("a drop alone wrote the ledger (%d writes)", writes)
	}
	if rec, ok, _ := l.Record("Deployment", "team", "api", "u"); !ok || rec != "configmap/cfg=abc" {
		t.Fatalf("a flush later, still not in the informer, the entry reads as %q, %v; want the record", rec, ok)
	}
	echo.Add(cm)
	eventually(t, "the informer's echo", func() *corev1.ConfigMap {
		if l.Unechoed("team") {
			return nil
		}
		return cm
	})
	if rec, ok, _ := l.Record("Deployment", "team", "api", "u"); !ok || rec != "configmap/cfg=abc" {
		t.Fatalf("echoed, the entry reads as %q, %v; want the record", rec, ok)
	}
	l.Put("Deployment", "team", "db", "u", "r")
	l.Flush(context.Background())
	eventually(t, "the namespace's next write: api and db, not web", func() *corev1.ConfigMap {
		got := stored(t, cs, "team")
		if _, ok := got.Data["Deployment.web"]; ok || got.Data["Deployment.api"] == "" || got.Data["Deployment.db"] == "" {
			return nil
		}
		return got
	})
}

// TestANamespaceEmptiedBeforeItsConfigMapIsEchoedLosesIt: the last entry of a namespace
// dropped while the write that created its ConfigMap is not in the informer yet (a short-lived
// namespace deleted within a second of its workloads' first sight) still takes the
// ConfigMap with it, once the informer holds it.
func TestANamespaceEmptiedBeforeItsConfigMapIsEchoedLosesIt(t *testing.T) {
	cs := fake.NewClientset()
	echo := watch.NewFake()
	cs.PrependWatchReactor("configmaps", func(k8stesting.Action) (bool, watch.Interface, error) { return true, echo, nil })
	l := started(t, cs)
	l.Put("Deployment", "ci-123", "web", "u", "r")
	l.Flush(context.Background())
	cm := eventually(t, "the entry written", func() *corev1.ConfigMap { return stored(t, cs, "ci-123") })
	l.Drop("Deployment", "ci-123", "web")
	l.Flush(context.Background())
	if stored(t, cs, "ci-123") == nil {
		t.Fatal("deleted before the informer held the ConfigMap")
	}
	echo.Add(cm)
	eventually(t, "the ConfigMap deleted once the informer holds it", func() *corev1.ConfigMap {
		l.Flush(context.Background())
		if stored(t, cs, "ci-123") == nil {
			return cm
		}
		return nil
	})
}

// eventually polls f until it returns non-nil.
func eventually[T any](t *testing.T, what string, f func() *T) *T {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if v := f(); v != nil {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// writesOf counts the creates, updates and deletes cs was asked for.
func writesOf(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		switch a.GetVerb() {
		case "create", "update", "delete":
			n++
		}
	}
	return n
}

// waitStored waits until the ledger's informer has the entry (its own write's echo).
func waitStored(t *testing.T, l *ledger.Ledger, ns, kind, name string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.Flush(context.Background()) // nothing pending: writes nothing
		if _, ok, _ := l.Record(kind, ns, name, "u"); ok && !l.Unechoed(ns) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the informer did not bring the ledger's write")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestANamespaceAtItsCapHasNoRoom(t *testing.T) {
	cs := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ledger.Name("big"), Namespace: own, Labels: map[string]string{ledger.Label: "big"}},
		Data:       map[string]string{"Deployment.huge": "u " + strings.Repeat("h", ledger.MaxBytes)},
	})
	l := started(t, cs)
	if l.Room("Deployment", "big", "web") || l.Put("Deployment", "big", "web", "u", "r") {
		t.Fatal("a namespace whose ConfigMap is at the cap takes another record")
	}
	if !l.Room("Deployment", "small", "web") {
		t.Fatal("another namespace has no room because one is full")
	}
	if l.Room("Deployment", "small", strings.Repeat("n", 250)) || l.Room("Deployment", "small", "bad:name") {
		t.Fatal("a key a ConfigMap cannot hold has room")
	}
}

func TestAConfigMapNotLabelledForTheNamespaceIsNotRead(t *testing.T) {
	cs := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ledger.Name("team"), Namespace: own, Labels: map[string]string{ledger.Label: "other"}},
		Data:       map[string]string{"Deployment.web": "u r"},
	})
	l := started(t, cs)
	if _, ok, _ := l.Record("Deployment", "team", "web", "u"); ok {
		t.Fatal("a ConfigMap labelled for another namespace is read as this one's ledger")
	}
}

func TestAWriteMeetingAnotherWritersVersionKeepsBothEntries(t *testing.T) {
	cs := fake.NewClientset()
	l := started(t, cs)
	l.Put("Deployment", "team", "web", "u", "r1")
	l.Flush(context.Background())
	waitStored(t, l, "team", "Deployment", "web")
	// Another replica (the namespace's shard holder before) writes meanwhile, straight into
	// the store; this ledger's update of the version it read then meets a conflict.
	cm := stored(t, cs, "team")
	cm.Data["Deployment.api"] = "u r2"
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	if err := cs.Tracker().Update(gvr, cm, own); err != nil {
		t.Fatal(err)
	}
	conflicts := 0
	cs.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			conflicts++
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, cm.Name, nil)
		}
		return false, nil, nil
	})
	l.Put("Deployment", "team", "db", "u", "r3")
	l.Flush(context.Background())
	got := stored(t, cs, "team").Data
	if conflicts != 1 || got["Deployment.web"] == "" || got["Deployment.api"] == "" || got["Deployment.db"] == "" {
		t.Fatalf("after a conflict (%d met) the ConfigMap holds %v; want web, api and db", conflicts, got)
	}
}

func TestARefusedLedgerTurnsOffAndKeepsNothing(t *testing.T) {
	cs := fake.NewClientset()
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", nil)
	l := started(t, cs)
	told := 0
	l.Refused = func(error) { told++ }
	cs.PrependReactor("create", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, forbidden })
	if !l.Put("Deployment", "team", "web", "u", "r") {
		t.Fatal("refused before any write")
	}
	l.Flush(context.Background())
	if !l.Off() || told != 1 {
		t.Fatalf("a refused write leaves the ledger on (off %v, told %d)", l.Off(), told)
	}
	if _, ok, _ := l.Record("Deployment", "team", "web", "u"); ok {
		t.Fatal("a record never written is still read after the refusal: it would never be written")
	}
	cs.ReactionChain = cs.ReactionChain[1:]
	if _, err := cs.CoreV1().ConfigMaps(own).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ledger.Name("old"), Namespace: own, Labels: map[string]string{ledger.Label: "old"}},
		Data:       map[string]string{"Deployment.kept": "u r"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok, _ := l.Record("Deployment", "old", "kept", "u"); ok {
			break // written before the refusal: still read, while the ledger may be listed
		}
		if time.Now().After(deadline) {
			t.Fatal("a record written in the ledger is not read once its writes are refused")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if l.Put("Deployment", "team", "api", "u", "r") {
		t.Fatal("a ledger that is off takes records")
	}

	// Refused at start (the dry create): off before anything is kept.
	cs2 := fake.NewClientset()
	cs2.PrependReactor("create", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, forbidden })
	if l2 := started(t, cs2); !l2.Off() || l2.Room("Deployment", "team", "web") {
		t.Fatal("a ledger refused at start takes records")
	}
}

// A namespace whose entries are all dropped (its workloads reloaded, or gone with it) loses
// its ConfigMap with the next flush: one delete; a partial drop still writes nothing. Where
// delete is refused (upstream's chart grants none), the ConfigMap is emptied instead and the
// ledger stays on.
func TestANamespaceWhoseEntriesAreAllDroppedLosesItsConfigMap(t *testing.T) {
	cs := fake.NewClientset()
	l := started(t, cs)
	for _, ns := range []string{"gone", "kept"} {
		l.Put("Deployment", ns, "web", "u", "r")
		l.Put("Deployment", ns, "api", "u", "r")
	}
	l.Flush(context.Background())
	for _, ns := range []string{"gone", "kept"} {
		waitStored(t, l, ns, "Deployment", "web")
		waitStored(t, l, ns, "Deployment", "api")
	}
	l.Drop("Deployment", "gone", "web")
	cs.ClearActions()
	l.Flush(context.Background())
	if n := len(cs.Actions()); n != 0 {
		t.Fatalf("a partial drop wrote the ledger (%d requests)", n)
	}
	l.Drop("Deployment", "gone", "api")
	l.Flush(context.Background())
	var verbs []string
	for _, a := range cs.Actions() {
		verbs = append(verbs, a.GetVerb())
	}
	if len(verbs) != 1 || verbs[0] != "delete" || stored(t, cs, "gone") != nil {
		t.Fatalf("the last drop of a namespace made %v, ConfigMap %v; want one delete and none left", verbs, stored(t, cs, "gone"))
	}
	if l.Off() {
		t.Fatal("the ledger turned off")
	}

	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", nil)
	cs.PrependReactor("delete", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, forbidden })
	l.Drop("Deployment", "kept", "web")
	l.Drop("Deployment", "kept", "api")
	l.Flush(context.Background())
	if cm := stored(t, cs, "kept"); cm == nil || len(cm.Data) != 0 || l.Off() {
		t.Fatalf("with delete refused: ConfigMap %v, ledger off %v; want it kept empty and the ledger on", cm, l.Off())
	}
	if !l.Put("Deployment", "kept", "db", "u", "r") {
		t.Fatal("the ledger takes no record after a refused delete")
	}
}
