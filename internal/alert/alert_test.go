package alert

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/reloader-operator/reloader/internal/notify"
	"github.com/reloader-operator/reloader/internal/testutil"
)

var sample = Reload{Kind: "Deployment", Namespace: "team-a", Name: "api",
	Sources: []Source{{Kind: "ConfigMap", Name: "app-config", Hash: "h1"}, {Kind: "Secret", Name: "creds", Deleted: true}},
	Time:    time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}

// received starts a sink that hands each request body to the returned channel.
func received(t *testing.T, status int) (string, <-chan map[string]any) {
	t.Helper()
	ch := make(chan map[string]any, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Error(err)
		}
		ch <- body
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, ch
}

func start(t *testing.T, sink, url string, delivered func(string, bool)) *Alerter {
	t.Helper()
	poster, err := notify.NewPoster(time.Second, 1, "")
	testutil.Must(t, err)
	a := New(sink, url, "cluster prod-eu", poster, logr.Discard())
	a.Delivered = delivered
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = a.Start(ctx) }()
	return a
}

func await(t *testing.T, ch <-chan map[string]any) map[string]any {
	t.Helper()
	select {
	case b := <-ch:
		return b
	case <-time.After(5 * time.Second):
		t.Fatal("no alert arrived")
		return nil
	}
}

func TestEachSinkGetsItsFormat(t *testing.T) {
	want := "Reloader reloaded Deployment team-a/api after a change of ConfigMap app-config, Secret creds (deleted)\ncluster prod-eu"
	for _, sink := range []string{"slack", "gchat", "teams", "raw"} {
		t.Run(sink, func(t *testing.T) {
			url, ch := received(t, http.StatusOK)
			start(t, sink, url, nil).Queue(sample)
			body := await(t, ch)
			var text any
			switch sink {
			case "slack":
				text = body["text"]
			case "gchat":
				card := body["cardsV2"].([]any)[0].(map[string]any)["card"].(map[string]any)
				widget := card["sections"].([]any)[0].(map[string]any)["widgets"].([]any)[0].(map[string]any)
				text = strings.ReplaceAll(widget["textParagraph"].(map[string]any)["text"].(string), "<br>", "\n")
			case "teams":
				att := body["attachments"].([]any)[0].(map[string]any)
				if att["contentType"] != "application/vnd.microsoft.card.adaptive" {
					t.Errorf("attachment %v", att)
				}
				text = att["content"].(map[string]any)["body"].([]any)[0].(map[string]any)["text"]
			case "raw":
				text = body["message"]
				w := body["workload"].(map[string]any)
				if body["event"] != "reload" || w["name"] != "api" || w["namespace"] != "team-a" ||
					len(body["sources"].([]any)) != 2 || body["additionalInfo"] != "cluster prod-eu" {
					t.Errorf("raw alert %v", body)
				}
			}
			if text != want {
				t.Errorf("text %q, want %q", text, want)
			}
		})
	}
}

func TestFailingSinkNeverBlocks(t *testing.T) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	defer srv.Close()
	defer close(hang)
	var failed atomic.Int32
	a := start(t, "slack", srv.URL, func(_ string, ok bool) {
		if !ok {
			failed.Add(1)
		}
	})
	begin := time.Now()
	for range QueueSize + 50 {
		a.Queue(sample)
	}
	if took := time.Since(begin); took > time.Second {
		t.Errorf("queueing took %v", took)
	}
	if failed.Load() < 49 {
		t.Errorf("%d alerts counted as failed; the overflow should be dropped and counted", failed.Load())
	}
	var nilAlerter *Alerter
	nilAlerter.Queue(sample) // alerts off: no panic
}

func TestErrorAnswerIsCountedAndNextAlertStillSent(t *testing.T) {
	url, ch := received(t, http.StatusInternalServerError)
	results := make(chan bool, 4)
	a := start(t, "raw", url, func(_ string, ok bool) { results <- ok })
	a.Queue(sample)
	a.Queue(sample)
	for range 2 {
		await(t, ch)
		if ok := <-results; ok {
			t.Error("a 500 answer counted as delivered")
		}
	}
	if !strings.Contains(sample.Text(""), "ConfigMap app-config") {
		t.Error(sample.Text(""))
	}
}

// TestFailedAlertLogShowsNoToken: the log line of an alert that could not be sent names the
// host only; the webhook's token, in its path and query, stays out.
func TestFailedAlertLogShowsNoToken(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, prefix+" "+args)
	}, funcr.Options{})
	poster, err := notify.NewPoster(time.Second, 1, "")
	testutil.Must(t, err)
	a := New("slack", "http://127.0.0.1:1/services/T0/B0/PATHTOKEN?token=QUERYTOKEN", "", poster, logger)
	delivered := make(chan bool, 1)
	a.Delivered = func(_ string, ok bool) { delivered <- ok }
	a.send(context.Background(), sample)
	if <-delivered {
		t.Fatal("an unreachable sink counted as delivered")
	}
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(lines, "\n")
	if !strings.Contains(all, "127.0.0.1:1") {
		t.Errorf("the log does not say which host failed: %s", all)
	}
	for _, secret := range []string{"PATHTOKEN", "QUERYTOKEN", "/services"} {
		if strings.Contains(all, secret) {
			t.Errorf("the log shows %s: %s", secret, all)
		}
	}
}

func TestHeldAlertSaysHeld(t *testing.T) {
	r := Reload{Kind: "Deployment", Namespace: "shop", Name: "web", Sources: []Source{{Kind: "Secret", Name: "creds"}},
		Held: "Secret creds quarantined by the flap breaker since 2026-11-27T00:00:00Z (written alternately by a, b)"}
	if got := r.Text(""); !strings.HasPrefix(got, "Reloader holds reloads of Deployment shop/web after changes of Secret creds: Secret creds quarantined") {
		t.Errorf("Text = %q", got)
	}
	body, err := Body("raw", r, "")
	if err != nil || !strings.Contains(string(body), `"event":"quarantine"`) {
		t.Errorf("raw body %s, %v: want event quarantine", body, err)
	}
}

func TestNotifyAndApprovalAlertsSaySo(t *testing.T) {
	src := []Source{{Kind: "ConfigMap", Name: "app"}}
	notify := Reload{Kind: "Deployment", Namespace: "shop", Name: "web", Sources: src, Mode: ModeNotify}
	pending := Reload{Kind: "Deployment", Namespace: "shop", Name: "web", Sources: src, Mode: ModeApprove,
		Held: "waiting for approval of 0123456789abcdef since 2026-11-27T00:00:00Z"}
	for _, tt := range []struct {
		r           Reload
		text, event string
	}{
		{notify, "Reloader would reload Deployment shop/web after a change of ConfigMap app (mode notify: nothing restarted)", `"event":"would-reload"`},
		{pending, "Reloader waits for approval to reload Deployment shop/web after a change of ConfigMap app: waiting for approval of 0123456789abcdef since", `"event":"approval-pending"`},
	} {
		if got := tt.r.Text(""); !strings.HasPrefix(got, tt.text) {
			t.Errorf("Text = %q; want it to begin %q", got, tt.text)
		}
		body, err := Body("raw", tt.r, "")
		if err != nil || !strings.Contains(string(body), tt.event) {
			t.Errorf("raw body %s, %v: want %s", body, err, tt.event)
		}
	}
}
