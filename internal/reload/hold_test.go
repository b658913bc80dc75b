package reload

import (
	"testing"
	"time"
)

// HoldStateOf: the annotations win; a ReloaderConfig's interval and window apply where they set
// none; --min-reload-interval otherwise.
func TestHoldStateOf(t *testing.T) {
	ten, hour := 10*time.Minute, time.Hour
	ann := map[string]string{LastReloadAnnotation: "2026-11-28T00:00:00Z", MinReloadIntervalAnnotation: "5m"}
	s := HoldStateOf(ann, hour, &ten, "Mon-Fri 02:00-04:00 UTC", nil)
	if !s.HasLastReload || s.LastReload != ann[LastReloadAnnotation] || s.MinInterval != "5m" || s.DefaultMinInterval != ten ||
		!s.HasWindow || s.Window != "Mon-Fri 02:00-04:00 UTC" {
		t.Errorf("with a config's settings: %+v", s)
	}
	ann[ReloadWindowAnnotation] = "Sat 00:00-06:00 UTC"
	if s := HoldStateOf(ann, hour, nil, "Mon-Fri 02:00-04:00 UTC", nil); s.Window != "Sat 00:00-06:00 UTC" || s.DefaultMinInterval != hour {
		t.Errorf("the annotation's window and the flag's interval: %+v", s)
	}
	if s := HoldStateOf(nil, hour, nil, "", nil); s.HasWindow || s.HasLastReload || s.HasMinInterval || s.DefaultMinInterval != hour {
		t.Errorf("nothing set: %+v", s)
	}
}
