package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// FuzzDecodeManifests feeds plan's manifest decoder arbitrary bytes: it must reject or accept
// them without panicking, and what it accepts is only ConfigMaps and Secrets within the API
// server's data limit.
func FuzzDecodeManifests(f *testing.F) {
	for _, seed := range []string{
		"",
		"---\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {p: x}\ndata: {q: eA==}\n",
		`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}]}`,
		"apiVersion: apps/v1\nkind: Deployment\n",
		"apiVersion: v1\nkind: ConfigMap\nbinaryData: {k: AAEC}\n---\nkind: [\n",
		"- a\n- b\n",
		"apiVersion: v1\nkind: ConfigMap\ndata: {\"a b\": v}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := decodeManifests(data)
		if err != nil {
			return
		}
		for _, o := range objs {
			size := 0
			switch v := o.(type) {
			case *corev1.ConfigMap:
				for _, s := range v.Data {
					size += len(s)
				}
				for _, b := range v.BinaryData {
					size += len(b)
				}
			case *corev1.Secret:
				for _, b := range v.Data {
					size += len(b)
				}
				for _, s := range v.StringData {
					size += len(s)
				}
			default:
				t.Fatalf("accepted a %T", o)
			}
			if size > corev1.MaxSecretSize {
				t.Fatalf("accepted %d bytes of data", size)
			}
		}
	})
}
