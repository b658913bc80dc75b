package explain

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/workload"
)

// A changed workload that pacing holds: explain says held, by what, and when it reloads.
func TestExplainSaysWhenAHeldReloadHappens(t *testing.T) {
	ns := "paced"
	namespace(t, ns)
	before := configMap(ns, "cfg", "v1")
	create(t, configMap(ns, "cfg", "v2"))
	lastReload := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Second)
	rec := reload.Record{"configmap/cfg": hash.ConfigMap(before)}
	create(t,
		deployment(ns, "spaced", withRecord(map[string]string{
			"reloader.stakater.com/auto":       "true",
			reload.MinReloadIntervalAnnotation: "1h",
			reload.LastReloadAnnotation:        lastReload.Format(time.RFC3339),
		}, rec), podSpec([]string{"cfg"}, nil)),
		deployment(ns, "windowed", withRecord(map[string]string{
			"reloader.stakater.com/auto":  "true",
			reload.ReloadWindowAnnotation: "Mon-Sun 00:00-00:01 UTC",
		}, rec), podSpec([]string{"cfg"}, nil)),
	)
	e := explainer(t, testConf(t), ns, "nowhere")
	ctx := context.Background()

	w, err := e.Workload(ctx, workload.Deployment(), "spaced")
	testutil.Must(t, err)
	if n := w.Next; n.Action != ActionHeld || n.HeldBy != reload.HoldMinInterval || n.HeldUntil == nil || !n.HeldUntil.Equal(lastReload.Add(time.Hour)) {
		t.Errorf("next %+v, want held by min-interval until %v", n, lastReload.Add(time.Hour))
	}
	var buf bytes.Buffer
	testutil.Must(t, w.WriteText(&buf))
	t.Logf("explain deploy/spaced:\n%s", buf.String())
	want := "held: minimum interval 1h0m0s since the last reload at " + lastReload.Format(time.RFC3339) + ", reloads at " + lastReload.Add(time.Hour).Format(time.RFC3339)
	if !strings.Contains(buf.String(), want) || !strings.Contains(buf.String(), "Next reconcile: held configmap/cfg until") {
		t.Errorf("text output says neither %q nor the held line:\n%s", want, buf.String())
	}

	w, err = e.Workload(ctx, workload.Deployment(), "windowed")
	testutil.Must(t, err)
	if n := w.Next; time.Now().UTC().Format("15:04") != "00:00" &&
		(n.Action != ActionHeld || n.HeldBy != reload.HoldReloadWindow || n.HeldUntil == nil || n.HeldUntil.UTC().Format("15:04:05") != "00:00:00" ||
			time.Until(*n.HeldUntil) > 24*time.Hour || !strings.Contains(n.Why, "reload window Mon-Sun 00:00-00:01 UTC")) {
		t.Errorf("next %+v, want held by the window until the next midnight UTC", n)
	}
}
