package installtest

import (
	"testing"
)

func TestExposition(t *testing.T) {
	text := `# HELP reloader_reload_executed_total Reloads.
# TYPE reloader_reload_executed_total counter
reloader_reload_executed_total{success="false"} 1
reloader_reload_executed_total{success="true"} 5
go_goroutines 42
x_bucket{le="+Inf"} 3
`
	if got := sample(text, "reloader_reload_executed_total", `success="true"`); got != 5 {
		t.Errorf("success=true: %v", got)
	}
	if got := sample(text, "reloader_reload_executed_total"); got != 6 {
		t.Errorf("all: %v", got)
	}
	names := exposedNames(text)
	for _, n := range []string{"reloader_reload_executed_total", "go_goroutines", "x_bucket"} {
		if !names[n] {
			t.Errorf("%s not found", n)
		}
	}
	if len(names) != 3 {
		t.Errorf("names %v", names)
	}
}
