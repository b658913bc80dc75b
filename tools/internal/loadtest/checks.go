package loadtest

import (
	"context"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Checks a scenario reads from the cluster after the load; each gives figures that must stay
// at or under a limit (Check.Max) on both sides.
const (
	// CheckLastReloadedFrom: every workload that reloaded carries
	// reloader.stakater.com/last-reloaded-from on its pod template (S11).
	CheckLastReloadedFrom = "last-reloaded-from"
	// CheckPauseCut: a pause-period cuts the rollouts; each Deployment whose template changed
	// at least twice rolled out (created ReplicaSets) fewer times than its template changed,
	// and none is left paused (S12).
	CheckPauseCut = "pause-cut"
)

// CheckFigure is one figure of a check.
type CheckFigure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	// Max and Min are the gate; both nil for a figure only shown.
	Max *float64 `json:"max,omitempty"`
	Min *float64 `json:"min,omitempty"`
	// Summary puts the figure on the report's first screen, each side's beside the other's
	// (the guardrail scenarios' rollouts and failure spread).
	Summary bool `json:"summary,omitempty"`
}

// checkInput is what the checks read besides the cluster.
type checkInput struct {
	// tracked are the workloads still present, specs their shapes, changes their template
	// changes as the observer saw them.
	tracked map[string]bool
	specs   map[string]Workload
	changes map[string][]time.Time
	// marks are the times of the scenario's phases (Driver.Mark).
	marks map[string]time.Time
	// samples are the controller's /proc and /metrics samples.
	samples []Sample
}

func limit(v float64) *float64 { return &v }

// runChecks reads the workloads of the checks and returns their figures.
func runChecks(ctx context.Context, cl client.Client, checks []string, in checkInput) ([]CheckFigure, error) {
	tracked, specs, changes := in.tracked, in.specs, in.changes
	var out []CheckFigure
	for _, check := range checks {
		switch check {
		case CheckLastReloadedFrom:
			missing, reloaded := 0, 0
			for key := range tracked {
				if len(changes[key]) == 0 {
					continue
				}
				reloaded++
				u, err := getWorkload(ctx, cl, specs[key])
				if err != nil {
					return nil, err
				}
				ann, _, _ := unstructured.NestedStringMap(u.Object, append(TemplatePath(specs[key].Kind), "metadata", "annotations")...)
				if ann["reloader.stakater.com/last-reloaded-from"] == "" {
					missing++
				}
			}
			out = append(out, CheckFigure{Name: "reloaded workloads without last-reloaded-from", Value: float64(missing), Max: limit(0)},
				CheckFigure{Name: "reloaded workloads checked", Value: float64(reloaded)})
		case CheckPauseCut:
			notCut, paused, rollouts, templates := 0, 0, 0, 0
			for key := range tracked {
				w := specs[key]
				if w.Kind != Deployment {
					continue
				}
				u, err := getWorkload(ctx, cl, w)
				if err != nil {
					return nil, err
				}
				// The deployment controller counts its ReplicaSets in the revision annotation;
				// the first is the one created with the Deployment.
				rev, _ := strconv.Atoi(u.GetAnnotations()["deployment.kubernetes.io/revision"])
				n := len(changes[key])
				rollouts += max(rev-1, 0)
				templates += n
				if n >= 2 && rev-1 >= n {
					notCut++
				}
				if p, _, _ := unstructured.NestedBool(u.Object, "spec", "paused"); p {
					paused++
				}
			}
			out = append(out, CheckFigure{Name: "Deployments whose every template change rolled out (pause cut none)", Value: float64(notCut), Max: limit(0)},
				CheckFigure{Name: "Deployments left paused", Value: float64(paused), Max: limit(0)},
				CheckFigure{Name: "rollouts (new ReplicaSets)", Value: float64(rollouts)},
				CheckFigure{Name: "template changes", Value: float64(templates)})
		case CheckFlap:
			figures, err := flapFigures(ctx, cl, in)
			if err != nil {
				return nil, err
			}
			out = append(out, figures...)
		case CheckSpread:
			figures, err := spreadFigures(ctx, cl, in)
			if err != nil {
				return nil, err
			}
			out = append(out, figures...)
		}
	}
	return out, nil
}

func getWorkload(ctx context.Context, cl client.Client, w Workload) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(workloadGVKs[w.Kind])
	return u, cl.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: w.Name}, u)
}
