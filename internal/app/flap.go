package app

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/reloader-operator/reloader/internal/flap"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/options"
)

// quarantineGaugeEvery is how often reloader_quarantined_sources is brought up to date: a
// quarantine ends when its source has been quiet long enough, with no event to tell.
const quarantineGaugeEvery = 5 * time.Second

// newFlaps returns the flap breaker's table (nil when --flap-max-changes=0 turns it off), and
// keeps reloader_quarantined_sources up to date from it.
func newFlaps(mgr manager.Manager, conf options.Config, m *metrics.Metrics) (*flap.Table, error) {
	if conf.Flap.MaxChanges == 0 {
		return nil, nil
	}
	t := flap.NewTable(conf.Flap, 0)
	err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		tick := time.NewTicker(quarantineGaugeEvery)
		defer tick.Stop()
		for {
			m.Quarantined.Set(float64(t.Quarantined(time.Now())))
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
		}
	}))
	return t, err
}
