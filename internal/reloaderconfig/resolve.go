package reloaderconfig

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/reloader-operator/reloader/internal/reload"
)

// Merged is what the configs targeting one workload add to its decision.
type Merged struct {
	// Rules are the source rules of every config, in the configs' name order.
	Rules     []reload.ConfigRule
	Overrides reload.Overrides
	// Conflicts say which settings two configs give different values; the config first by
	// name wins.
	Conflicts []Conflict
}

// Conflict is one setting two configs disagree on.
type Conflict struct {
	Setting, Winner, Loser string
}

func (c Conflict) String() string {
	return fmt.Sprintf("%s is set differently by ReloaderConfigs %s and %s; %s applies", c.Setting, c.Winner, c.Loser, c.Winner)
}

// Merge combines the configs that target one workload. Their source rules add up; a setting
// two configs give different values is taken from the config first in name order, so the
// outcome never depends on the order the cache lists them in, and the conflict is reported.
func Merge(configs []*Compiled) Merged {
	sorted := slices.Clone(configs)
	slices.SortFunc(sorted, func(a, b *Compiled) int { return strings.Compare(a.Name, b.Name) })
	var m Merged
	type owner struct{ config, value string }
	owners := map[string]owner{}
	take := func(config, setting, value string, apply func()) {
		if first, ok := owners[setting]; ok {
			if first.value != value {
				m.Conflicts = append(m.Conflicts, Conflict{Setting: setting, Winner: first.config, Loser: config})
			}
			return
		}
		owners[setting] = owner{config, value}
		apply()
	}
	for _, c := range sorted {
		m.Rules = append(m.Rules, c.Rules...)
		o := c.Overrides
		if o.Strategy != nil {
			take(c.Name, "strategy", c.strategy, func() { m.Overrides.Strategy = o.Strategy })
		}
		if d := o.PausePeriod; d != nil {
			take(c.Name, "pausePeriod", d.String(), func() { m.Overrides.PausePeriod = d })
		}
		if d := o.CoalesceWindow; d != nil {
			take(c.Name, "coalesceWindow", d.String(), func() { m.Overrides.CoalesceWindow = d })
		}
		if d := o.MinReloadInterval; d != nil {
			take(c.Name, "minReloadInterval", d.String(), func() { m.Overrides.MinReloadInterval = d })
		}
		if w := o.ReloadWindow; w != "" {
			take(c.Name, "reloadWindow", w, func() { m.Overrides.ReloadWindow = w })
		}
		if v := o.Mode; v != "" {
			take(c.Name, "mode", v, func() { m.Overrides.Mode = v })
		}
		if b := o.Waves; b != nil {
			take(c.Name, "waves", strconv.FormatBool(*b), func() { m.Overrides.Waves = b })
		}
		if b := o.RunCronJobs; b != nil {
			take(c.Name, "runCronJobsOnReload", strconv.FormatBool(*b), func() { m.Overrides.RunCronJobs = b })
		}
		if b := o.RecreateFinishedJobs; b != nil {
			take(c.Name, "recreateFinishedJobs", strconv.FormatBool(*b), func() { m.Overrides.RecreateFinishedJobs = b })
		}
	}
	if len(sorted) > 0 {
		m.Overrides.Config = sorted[0].Name
	}
	return m
}
