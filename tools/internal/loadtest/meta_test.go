package loadtest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/reloader-operator/reloader/internal/testenv/audit"
)

// writeScript makes an executable shell script that prints out and exits with code.
func writeScript(t *testing.T, out string, code int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bin")
	body := "#!/bin/sh\ncat <<'EOF'\n" + out + "\nEOF\nexit " + string(rune('0'+code)) + "\n"
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDetectMetricsAddrFlag(t *testing.T) {
	for _, c := range []struct {
		name, help string
		code       int
		want       string
	}{
		{"this project's help", "Flags:\n      --metrics-addr string   address of /metrics (default \":9090\")\n      --version   print", 0, "--metrics-addr"},
		// Upstream's binary builds its client before parsing flags and exits without a cluster.
		{"upstream without a cluster", `time="..." level=fatal msg="Unable to create Kubernetes client error = unable to load in-cluster configuration"`, 1, ""},
		{"a flag with a longer name", "      --metrics-addr-extra string", 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := DetectMetricsAddrFlag(writeScript(t, c.help, c.code)); got != c.want {
				t.Errorf("DetectMetricsAddrFlag = %q, want %q", got, c.want)
			}
		})
	}
}

// A scenario's flags of this project's build reach a binary whose --help lists them, and are
// left out for one that does not (upstream's, which exits on an unknown flag).
func TestOwnArgs(t *testing.T) {
	ours := writeScript(t, "Flags:\n      --flap-max-changes int   flap breaker (default 8)\n      --flap-quiet duration", 0)
	upstream := writeScript(t, `level=fatal msg="Unable to create Kubernetes client"`, 1)
	args := []string{"--flap-max-changes=8", "--flap-window=10m"}
	given, left := OwnArgs(ours, args)
	if strings.Join(given, " ") != "--flap-max-changes=8" || strings.Join(left, " ") != "--flap-window=10m" {
		t.Errorf("ours: given %v, left %v", given, left)
	}
	if given, left := OwnArgs(upstream, args); len(given) != 0 || len(left) != 2 {
		t.Errorf("upstream: given %v, left %v", given, left)
	}
}

func TestDescribeFallsBackToBuildInfo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	// Exits non-zero for --version, as upstream's binary does.
	prog := "package main\n\nimport \"os\"\n\nvar Version = \"dev\"\n\nfunc main() { os.Exit(1) }\n"
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/upstreamlike\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "upstreamlike")
	cmd := exec.Command("go", "build", "-ldflags=-X main.Version=v1.4.21", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	b := describe(bin)
	if !strings.HasPrefix(b.Version, "example.com/upstreamlike v1.4.21 (build info, go") {
		t.Errorf("Version = %q, want the module and the -ldflags version from the build info", b.Version)
	}
	if len(b.SHA256) != 64 {
		t.Errorf("SHA256 = %q", b.SHA256)
	}

	// A binary that answers --version is described by its answer.
	if v := describe(writeScript(t, "reloader v9 (commit abc)\nmore", 0)).Version; v != "reloader v9 (commit abc)" {
		t.Errorf("Version = %q, want the first line of --version", v)
	}
}

func TestPortFree(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := portFree(addr); err == nil {
		t.Errorf("portFree(%s) = nil while something listens there", addr)
	}
	l.Close()
	if err := portFree(addr); err != nil {
		t.Errorf("portFree(%s) after close: %v", addr, err)
	}
}

func TestStartupRequestsAreShownApart(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	ev := func(verb string, sec int) audit.Event {
		var e audit.Event
		e.Verb, e.Received = verb, t0.Add(time.Duration(sec)*time.Second)
		return e
	}
	events := []audit.Event{ev("list", 0), ev("patch", 1), ev("patch", 2), ev("patch", 10), ev("get", 11)}
	startup, load := splitAt(events, t0.Add(10*time.Second))
	if len(startup) != 3 || len(load) != 2 {
		t.Fatalf("split at 10 s: %d before, %d from it on; want 3 and 2", len(startup), len(load))
	}
	// The gates judge the load; the start-up requests get rows of their own, not judged.
	api, start := CountAPI(load), CountAPI(startup)
	old := &Result{Scenario: "S4", Side: "old", API: &API{ByVerb: map[string]int{}}, APIStartup: &API{ByVerb: map[string]int{}}}
	nu := &Result{Scenario: "S4", Side: "new", API: &api, APIStartup: &start}
	var startupRow *Row
	for _, r := range rows(old, nu, DefaultGates()) {
		if r.Metric == "API requests at start-up (before the load)" {
			startupRow = &r
		}
		if r.Metric == RowAPIRequests && (r.New == nil || *r.New != 2) {
			t.Errorf("API requests row: new %v, want the 2 of the load", r.New)
		}
	}
	if startupRow == nil || startupRow.New == nil || *startupRow.New != 3 || startupRow.NewVerdict != "" {
		t.Errorf("start-up row %+v, want 3 requests, not judged", startupRow)
	}
}

func TestManualJobCountsForItsCronJob(t *testing.T) {
	job := func(annotations map[string]string, ownerKind string, controller bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAnnotations(annotations)
		if ownerKind != "" {
			u.SetOwnerReferences([]metav1.OwnerReference{{Kind: ownerKind, Name: "nightly", Controller: &controller}})
		}
		return u
	}
	manual := map[string]string{"cronjob.kubernetes.io/instantiate": "manual"}
	for _, c := range []struct {
		name string
		job  *unstructured.Unstructured
		want string
	}{
		{"made by hand from a CronJob (upstream's reload)", job(manual, CronJob, true), "nightly"},
		{"made on the CronJob's schedule", job(nil, CronJob, true), ""},
		{"a Job of its own", job(manual, "", false), ""},
		{"owned but not controlled", job(manual, CronJob, false), ""},
	} {
		if got := manualJobOf(c.job); got != c.want {
			t.Errorf("%s: manualJobOf = %q, want %q", c.name, got, c.want)
		}
	}
}
