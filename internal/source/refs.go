package source

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Ref is one source a pod template refers to, and the containers that use it.
type Ref struct {
	ID
	// Containers are the names of regular containers that read the source through env,
	// envFrom or a mounted volume.
	Containers []string
	// InitContainers are the init containers that do.
	InitContainers []string
}

// Refs lists the ConfigMaps, Secrets and SecretProviderClasses a pod spec refers to,
// sorted by ID. A volume that no container mounts still counts as a reference.
func Refs(spec *corev1.PodSpec) []Ref {
	found := map[ID]*Ref{}
	use := func(id ID) *Ref {
		if id.Name == "" {
			return nil
		}
		r, ok := found[id]
		if !ok {
			r = &Ref{ID: id}
			found[id] = r
		}
		return r
	}

	volumeSources := map[string][]ID{}
	for i := range spec.Volumes {
		ids := volumeRefs(&spec.Volumes[i])
		volumeSources[spec.Volumes[i].Name] = ids
		for _, id := range ids {
			use(id)
		}
	}

	visit := func(c *corev1.Container, init bool) {
		add := func(id ID) {
			r := use(id)
			switch {
			case r == nil:
			case init:
				r.InitContainers = appendOnce(r.InitContainers, c.Name)
			default:
				r.Containers = appendOnce(r.Containers, c.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if ref := e.ValueFrom.ConfigMapKeyRef; ref != nil {
				add(ID{ConfigMap, ref.Name})
			}
			if ref := e.ValueFrom.SecretKeyRef; ref != nil {
				add(ID{Secret, ref.Name})
			}
		}
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				add(ID{ConfigMap, e.ConfigMapRef.Name})
			}
			if e.SecretRef != nil {
				add(ID{Secret, e.SecretRef.Name})
			}
		}
		for _, m := range c.VolumeMounts {
			for _, id := range volumeSources[m.Name] {
				add(id)
			}
		}
	}
	for i := range spec.InitContainers {
		visit(&spec.InitContainers[i], true)
	}
	for i := range spec.Containers {
		visit(&spec.Containers[i], false)
	}

	refs := make([]Ref, 0, len(found))
	for _, r := range found {
		refs = append(refs, *r)
	}
	slices.SortFunc(refs, func(a, b Ref) int { return CompareIDs(a.ID, b.ID) })
	return refs
}

// volumeRefs returns the sources one volume reads.
func volumeRefs(v *corev1.Volume) []ID {
	switch {
	case v.ConfigMap != nil:
		return []ID{{ConfigMap, v.ConfigMap.Name}}
	case v.Secret != nil:
		return []ID{{Secret, v.Secret.SecretName}}
	case v.CSI != nil:
		if spc := v.CSI.VolumeAttributes["secretProviderClass"]; spc != "" {
			return []ID{{SecretProviderClass, spc}}
		}
	case v.Projected != nil:
		var ids []ID
		for _, p := range v.Projected.Sources {
			if p.ConfigMap != nil {
				ids = append(ids, ID{ConfigMap, p.ConfigMap.Name})
			}
			if p.Secret != nil {
				ids = append(ids, ID{Secret, p.Secret.Name})
			}
		}
		return ids
	}
	return nil
}

// CompareIDs orders IDs by kind, then name.
func CompareIDs(a, b ID) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
}

func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
