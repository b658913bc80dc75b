package reload

import (
	"encoding/json"
	"fmt"
	"slices"

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

// Strategy writes changes into a pod template so that the workload rolls. What it writes is a
// function of the changes alone, never of the time: writing the same changes again, from a
// stale copy or a retry, leaves the template as it is and rolls nothing.
type Strategy interface {
	Apply(tpl *corev1.PodTemplateSpec, namespace string, changes []Change)
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
// removes it when the source was deleted. A container that never got the env var gets it with
// the value Deleted instead, so that the deletion still rolls its pods.
type EnvVars struct{}

// Deleted is the env var value that marks a deleted source on a container that had no env var
// for it to remove. No content hash is ever this word.
const Deleted = "deleted"

// Apply implements Strategy.
func (EnvVars) Apply(tpl *corev1.PodTemplateSpec, _ string, changes []Change) {
	for _, ch := range changes {
		name := EnvVarName(ch.ID)
		for i := range tpl.Spec.Containers {
			c := &tpl.Spec.Containers[i]
			if !slices.Contains(ch.Containers, c.Name) {
				continue
			}
			if ch.Hash == Absent {
				had := len(c.Env)
				c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
				if len(c.Env) == had {
					setEnv(c, name, Deleted)
				}
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
// containers untouched. (Both strategies leave GitOps tools in sync: docs/gitops.md.)
type Annotations struct{}

// LastReloaded is the value of the last-reloaded-from annotation.
type LastReloaded struct {
	Type          string   `json:"type"`
	Name          string   `json:"name"`
	Namespace     string   `json:"namespace"`
	Hash          string   `json:"hash"`
	ContainerRefs []string `json:"containerRefs"`
	// ObservedAt is upstream's time of the reload. Reloader leaves it out: a time in the
	// template would make a repeated write roll the pods again. The Reloaded Event says when.
	ObservedAt int64 `json:"observedAt,omitempty"`
}

// Apply implements Strategy. With several changes in one reload the annotation names the
// last one; the template changes once either way. A deleted source is written with an empty
// hash, the delete marker.
func (Annotations) Apply(tpl *corev1.PodTemplateSpec, namespace string, changes []Change) {
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
	})
	if tpl.Annotations == nil {
		tpl.Annotations = map[string]string{}
	}
	tpl.Annotations[LastReloadedFrom] = string(v)
}
