package reload

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Annotations of the evict restart strategy (docs/annotations.md: Restarting workloads an
// operator owns).
const (
	// RestartStrategyAnnotation on a workload: "evict" restarts its pods through the Eviction
	// API instead of changing its pod template; "rollout" (or none) changes the template.
	RestartStrategyAnnotation = "reloader.dev/restart-strategy"
	// EvictingAnnotation is written by reloader beside the record when an evict restart
	// starts, and removed when it is over: which pods are still to go (those created before
	// Since) and for which record. It is what lets a restarted reloader carry on.
	EvictingAnnotation = "reloader.dev/evicting"
)

// Restart strategy values.
const (
	RestartRollout = "rollout"
	RestartEvict   = "evict"
)

// ParseRestartStrategy reads RestartStrategyAnnotation: evict is true for "evict". An unknown
// value is an error; the template change stays the strategy then.
func ParseRestartStrategy(v string) (evict bool, err error) {
	switch s := strings.TrimSpace(v); s {
	case "", RestartRollout:
		return false, nil
	case RestartEvict:
		return true, nil
	default:
		if len(s) > 64 {
			s = s[:64] + "..."
		}
		return false, fmt.Errorf("annotation %s: %q is neither %s nor %s; changing the pod template", RestartStrategyAnnotation, s, RestartRollout, RestartEvict)
	}
}

// Evicting is the state of an evict restart, kept on the workload's metadata.
type Evicting struct {
	// Since: the pods created before it are restarted. Set a little after the reload (the
	// next whole second), so that a replacement pod is never created before it.
	Since time.Time `json:"since"`
	// Record is RecordDigest of the record written with the reload: a restart that belongs to
	// an older record, or to none, is not acted on.
	Record string `json:"record"`
}

// Limits of EvictingAnnotation as input: anyone who may write the workload may write it.
const (
	maxEvictingBytes = 256
	// MaxEvictLead is how far past the present Since may lie; a later one could keep
	// evicting the replacements.
	MaxEvictLead = 5 * time.Second
)

var digestPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)

// StartEvicting returns the state of an evict restart that starts now for record next.
func StartEvicting(now time.Time, next Record) Evicting {
	return Evicting{Since: now.UTC().Truncate(time.Second).Add(time.Second), Record: RecordDigest(next.Encode())}
}

// RecordDigest is a short digest of a RecordAnnotation value.
func RecordDigest(encoded string) string {
	sum := sha256.Sum256([]byte(encoded))
	return hex.EncodeToString(sum[:8])
}

// Encode returns the annotation value.
func (e Evicting) Encode() string {
	b, _ := json.Marshal(struct {
		Since  string `json:"since"`
		Record string `json:"record"`
	}{e.Since.UTC().Format(time.RFC3339), e.Record}) // plain strings always marshal
	return string(b)
}

// ParseEvicting reads EvictingAnnotation, bounded and validated: at most 256 bytes, a time
// no later than MaxEvictLead after now, a digest of 16 hex digits.
func ParseEvicting(v string, now time.Time) (Evicting, error) {
	if len(v) > maxEvictingBytes {
		return Evicting{}, fmt.Errorf("annotation %s is %d bytes, more than %d", EvictingAnnotation, len(v), maxEvictingBytes)
	}
	var raw struct {
		Since  string `json:"since"`
		Record string `json:"record"`
	}
	if err := json.Unmarshal([]byte(v), &raw); err != nil {
		return Evicting{}, fmt.Errorf("annotation %s is not reloader's: %w", EvictingAnnotation, err)
	}
	since, err := time.Parse(time.RFC3339, raw.Since)
	if err != nil {
		return Evicting{}, fmt.Errorf("annotation %s: since: %w", EvictingAnnotation, err)
	}
	if since.After(now.Add(MaxEvictLead)) {
		return Evicting{}, fmt.Errorf("annotation %s: since %s lies in the future", EvictingAnnotation, raw.Since)
	}
	if !digestPattern.MatchString(raw.Record) {
		return Evicting{}, fmt.Errorf("annotation %s: record is not a digest", EvictingAnnotation)
	}
	return Evicting{Since: since, Record: raw.Record}, nil
}

// EvictPod is one pod of the workload as an eviction step sees it.
type EvictPod struct {
	Name        string
	Created     time.Time
	Ready       bool
	Terminating bool
}

// EvictStep is what one step of an evict restart does: evict one pod, wait, or end.
type EvictStep struct {
	// Evict names the pod to evict now, if any.
	Evict string
	// Wait, when positive, means: come back after it.
	Wait time.Duration
	// Done: no pod created before Since is left; the restart is over.
	Done bool
	// Left counts the pods created before Since still running (Evict included).
	Left int
	// Why says what a wait waits for.
	Why string
}

// EvictPoll is how often a restart waiting for a replacement looks again: pods are read,
// not watched, and only while a workload restarts.
const EvictPoll = 2 * time.Second

// PlanEviction decides the next step of an evict restart from the workload's pods now and
// the number of pods it should run. One pod goes at a time: the next only once no pod is
// terminating and at least desired pods are Ready. The oldest pod goes first.
func PlanEviction(e Evicting, pods []EvictPod, desired int32, now time.Time) EvictStep {
	var old []EvictPod
	ready, terminating := int32(0), ""
	for _, p := range pods {
		switch {
		case p.Terminating:
			terminating = p.Name
		case p.Created.Before(e.Since):
			old = append(old, p)
			fallthrough
		default:
			if p.Ready {
				ready++
			}
		}
	}
	if len(old) == 0 {
		return EvictStep{Done: true}
	}
	slices.SortFunc(old, func(a, b EvictPod) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	step := EvictStep{Left: len(old)}
	switch {
	case now.Before(e.Since):
		step.Wait, step.Why = e.Since.Sub(now), "the restart starts at "+e.Since.Format(time.RFC3339)
	case terminating != "":
		step.Wait, step.Why = EvictPoll, "pod "+terminating+" is terminating"
	case ready < desired:
		step.Wait, step.Why = EvictPoll, fmt.Sprintf("%d of %d pods ready", ready, desired)
	default:
		step.Evict = old[0].Name
	}
	return step
}
