package testenv

import (
	"testing"
	"time"
)

// A control plane gets 90 s to start unless envtest's variable says otherwise (0: envtest
// reads the variable itself).
func TestStartTimeout(t *testing.T) {
	if got := startTimeout(func(string) string { return "" }); got != 90*time.Second {
		t.Errorf("unset: %v, want 90s", got)
	}
	if got := startTimeout(func(k string) string {
		if k == "KUBEBUILDER_CONTROLPLANE_START_TIMEOUT" {
			return "30s"
		}
		return ""
	}); got != 0 {
		t.Errorf("set: %v, want 0 (envtest's own reading)", got)
	}
}
