package shard

import (
	"testing"
	"time"
)

func TestGate(t *testing.T) {
	tests := []struct {
		name  string
		ready func(string) (bool, bool)
		skip  bool
		wait  time.Duration
	}{
		{"no sharding", nil, false, 0},
		{"another replica's namespace", func(string) (bool, bool) { return false, false }, true, 0},
		{"taken, not listed yet", func(string) (bool, bool) { return true, false }, false, NotListedRetry},
		{"owned and listed", func(string) (bool, bool) { return true, true }, false, 0},
	}
	for _, tt := range tests {
		if skip, wait := Gate(tt.ready, "ns"); skip != tt.skip || wait != tt.wait {
			t.Errorf("%s: skip %v, wait %v; want %v, %v", tt.name, skip, wait, tt.skip, tt.wait)
		}
	}
}
