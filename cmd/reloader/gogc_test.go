package main

import (
	"runtime/debug"
	"testing"
)

func TestApplyGCPercent(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	if p, fromEnv := applyGCPercent(env(nil)); p != defaultGCPercent || fromEnv {
		t.Errorf("no GOGC: %d (from env %v), want %d", p, fromEnv, defaultGCPercent)
	}
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("runtime GC percent %d after Apply, want %d", got, defaultGCPercent)
	}

	// GOGC set: the runtime's reading of it (here 100, as set above) is kept, not replaced.
	if p, fromEnv := applyGCPercent(env(map[string]string{"GOGC": "100"})); p != 100 || !fromEnv {
		t.Errorf("GOGC=100: %d (from env %v), want 100 from env", p, fromEnv)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("runtime GC percent %d after Apply with GOGC set, want 100", got)
	}

	// A large GOGC is a number, off is -1.
	debug.SetGCPercent(5000000)
	if p, _ := applyGCPercent(env(map[string]string{"GOGC": "5000000"})); p != 5000000 {
		t.Errorf("GOGC=5000000 reads as %d", p)
	}
	debug.SetGCPercent(-1)
	if p, _ := applyGCPercent(env(map[string]string{"GOGC": "off"})); p != -1 {
		t.Errorf("GOGC=off reads as %d, want -1", p)
	}
}
