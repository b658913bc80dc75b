package demo

import (
	"bytes"
	"testing"
)

func TestDecisionLines(t *testing.T) {
	tests := []struct {
		name, line string
		want       string // "" when the line is left out
	}{
		{"a reload, keys in the order logged, hash shortened",
			`{"level":"info","ts":1795828161.159297,"msg":"reloaded","controller":"deployment","controllerGroup":"apps","controllerKind":"Deployment","Deployment":{"name":"demo","namespace":"demo"},"namespace":"demo","name":"demo","reconcileID":"14aa94de-f6fe-40d1-b5f2-3add42917135","source":"configmap/demo-config","hash":"1b683101fc3d40f549cb1942b4aecdfa597f60e948b366b051838f02f8e58726","containers":["app"],"keys":"keys changed: GREETING","changedBy":"kubectl-edit (Update) at 2026-11-28T01:09:20Z"}`,
			`deployment demo/demo: reloaded source=configmap/demo-config hash=1b683101fc3d... containers=["app"] keys="keys changed: GREETING" changedBy="kubectl-edit (Update) at 2026-11-28T01:09:20Z"`},
		{"the manager starting a controller's sources",
			`{"level":"info","ts":1795828160.6317518,"msg":"Starting EventSource","controller":"deployment","controllerGroup":"apps","controllerKind":"Deployment","source":"func source: 0x1843180"}`,
			""},
		{"the metrics server",
			`{"level":"info","ts":1795828160.4219303,"logger":"controller-runtime.metrics","msg":"Starting metrics server"}`,
			""},
		{"a warning outside any reconcile",
			`{"level":"info","ts":1795828160.1,"msg":"WARNING: something to fix","flag":"--x"}`,
			`WARNING: something to fix flag=--x`},
		{"an error outside any reconcile",
			`{"level":"error","ts":1795828160.1,"logger":"hash-key","msg":"cannot load","error":"forbidden"}`,
			`cannot load error=forbidden`},
		{"a line that is not JSON", `panic: boom`, `panic: boom`},
		{"an empty line", ``, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			w := &decisionLines{out: &out, prefix: "| "}
			// In two writes, split inside the line: a line is judged once it is whole.
			half := len(tt.line) / 2
			_, _ = w.Write([]byte(tt.line[:half]))
			if out.Len() != 0 {
				t.Fatalf("wrote %q before the line ended", out.String())
			}
			_, _ = w.Write([]byte(tt.line[half:] + "\n"))
			want := ""
			if tt.want != "" {
				want = "| " + tt.want + "\n"
			}
			if out.String() != want {
				t.Errorf("got  %q\nwant %q", out.String(), want)
			}
		})
	}
}
