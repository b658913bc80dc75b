package source

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// KeyUse is how a pod spec reads one ConfigMap or Secret: whole, or some of its keys.
type KeyUse struct {
	// Whole is true when some use reads every key: envFrom, or a volume without items.
	Whole bool
	// Keys are the keys read one by one, sorted; with Whole they are read anyway.
	Keys []string
}

// UsedKeys returns, for each ConfigMap and Secret the pod spec reads, the keys it reads:
// valueFrom key references in containers and init containers, and the items of ConfigMap,
// Secret and projected volumes. Like Refs, it counts a volume that no container mounts.
func UsedKeys(spec *corev1.PodSpec) map[ID]KeyUse {
	out := map[ID]KeyUse{}
	read := func(id ID, keys ...string) {
		if id.Name == "" {
			return
		}
		u := out[id]
		u.Keys = append(u.Keys, keys...)
		out[id] = u
	}
	whole := func(id ID) {
		if id.Name == "" {
			return
		}
		u := out[id]
		u.Whole = true
		out[id] = u
	}
	items := func(id ID, items []corev1.KeyToPath) {
		if len(items) == 0 {
			whole(id) // without items, every key becomes a file
			return
		}
		for _, it := range items {
			read(id, it.Key)
		}
	}

	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		for _, e := range c.Env {
			switch {
			case e.ValueFrom == nil:
			case e.ValueFrom.ConfigMapKeyRef != nil:
				read(ID{ConfigMap, e.ValueFrom.ConfigMapKeyRef.Name}, e.ValueFrom.ConfigMapKeyRef.Key)
			case e.ValueFrom.SecretKeyRef != nil:
				read(ID{Secret, e.ValueFrom.SecretKeyRef.Name}, e.ValueFrom.SecretKeyRef.Key)
			}
		}
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				whole(ID{ConfigMap, e.ConfigMapRef.Name})
			}
			if e.SecretRef != nil {
				whole(ID{Secret, e.SecretRef.Name})
			}
		}
	}
	for _, v := range spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			items(ID{ConfigMap, v.ConfigMap.Name}, v.ConfigMap.Items)
		case v.Secret != nil:
			items(ID{Secret, v.Secret.SecretName}, v.Secret.Items)
		case v.Projected != nil:
			for _, p := range v.Projected.Sources {
				if p.ConfigMap != nil {
					items(ID{ConfigMap, p.ConfigMap.Name}, p.ConfigMap.Items)
				}
				if p.Secret != nil {
					items(ID{Secret, p.Secret.Name}, p.Secret.Items)
				}
			}
		}
	}
	for id, u := range out {
		slices.Sort(u.Keys)
		u.Keys = slices.Compact(u.Keys)
		out[id] = u
	}
	return out
}
