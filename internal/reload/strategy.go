package reload

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/reloader-operator/reloader/internal/source"
)

// Change is one source whose new content a reload applies to a pod template.
type Change struct {
	ID source.ID
	// Hash is the new content hash; Absent when the source was deleted.
	Hash string
	// Containers are the containers that use the source; the env-vars strategy writes there.
	Containers []string
}

// Strategy writes changes into a pod template so that the workload rolls.
type Strategy interface {
	Apply(tpl *corev1.PodTemplateSpec, namespace string, changes []Change, now time.Time)
}

// Strategy names, as upstream's --reload-strategy spells them.
const (
	StrategyEnvVars     = "env-vars"
	StrategyAnnotations = "annotations"
)

// NewStrategy returns the strategy a --reload-strategy value names.
func NewStrategy(name string) (Strategy, error) {
	switch name {
	case StrategyEnvVars, "":
		return EnvVars{}, nil
	case StrategyAnnotations:
		return Annotations{}, nil
	}
	return nil, fmt.Errorf("unknown reload strategy %q: want %s or %s", name, StrategyEnvVars, StrategyAnnotations)
}

// TargetContainers are the containers that receive a source's env var: those that use it,
// or the first container when only init containers use it or it is only named.
func TargetContainers(ref *source.Ref, spec *corev1.PodSpec) []string {
	if ref != nil && len(ref.Containers) > 0 {
		return ref.Containers
	}
	if len(spec.Containers) > 0 {
		return []string{spec.Containers[0].Name}
	}
	return nil
}

// EnvVars sets STAKATER_<NAME>_<KIND>=<hash> on the containers that use each source, and
// removes it when the source was deleted.
type EnvVars struct{}

// Apply implements Strategy.
func (EnvVars) Apply(tpl *corev1.PodTemplateSpec, _ string, changes []Change, _ time.Time) {
	for _, ch := range changes {
		name := EnvVarName(ch.ID)
		for i := range tpl.Spec.Containers {
			c := &tpl.Spec.Containers[i]
			if !slices.Contains(ch.Containers, c.Name) {
				continue
			}
			if ch.Hash == Absent {
				c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
				continue
			}
			setEnv(c, name, ch.Hash)
		}
	}
}

func setEnv(c *corev1.Container, name, value string) {
	for i := range c.Env {
		if c.Env[i].Name == name {
			c.Env[i].Value = value
			c.Env[i].ValueFrom = nil
			return
		}
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
}

// Annotations writes reloader.stakater.com/last-reloaded-from on the pod template. It leaves
// containers untouched, which suits GitOps tools that diff them.
type Annotations struct{}

// LastReloaded is the value of the last-reloaded-from annotation.
type LastReloaded struct {
	Type          string   `json:"type"`
	Name          string   `json:"name"`
	Namespace     string   `json:"namespace"`
	Hash          string   `json:"hash"`
	ContainerRefs []string `json:"containerRefs"`
	ObservedAt    int64    `json:"observedAt"`
}

// Apply implements Strategy. With several changes in one reload the annotation names the
// last one; the template changes once either way. A deleted source is written with an empty
// hash, the delete marker.
func (Annotations) Apply(tpl *corev1.PodTemplateSpec, namespace string, changes []Change, now time.Time) {
	if len(changes) == 0 {
		return
	}
	ch := changes[len(changes)-1]
	v, _ := json.Marshal(LastReloaded{ // plain strings and ints always marshal
		Type:          ch.ID.Kind.EnvSuffix(),
		Name:          ch.ID.Name,
		Namespace:     namespace,
		Hash:          ch.Hash,
		ContainerRefs: ch.Containers,
		ObservedAt:    now.Unix(),
	})
	if tpl.Annotations == nil {
		tpl.Annotations = map[string]string{}
	}
	tpl.Annotations[LastReloadedFrom] = string(v)
}
