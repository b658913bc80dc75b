package writer

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
)

// A reload, or a first record, must not be written from a stale copy of the workload: it would
// roll a workload a second time, or record over a record it did not see. The resourceVersion
// in the patch said so, but every status write of the workload's own controller moves it
// (a Deployment's, several per rollout), so about one patch in fifty met a 409 that had
// nothing to do with what reloader decided, and a rollout in progress made it likelier.
//
// The choice here: a JSON patch whose first operations `test` what the decision read, the
// same request then writing the changes (one write per reload, as before):
//   - metadata.uid: the same object, not one re-created under the name;
//   - metadata.generation: the spec as read (the pod template, its references, the values a
//     reload writes into it, paused). Every kind bumps it on a spec change and no status
//     write does; a Deployment bumps it on a change of its annotations too (they are copied
//     to its ReplicaSets), though not on the revision annotation its controller writes
//     through the status;
//   - every annotation of the copy read, at its value (but the Deployment's revision), and
//     the absence of reloader's own annotations the copy did not have: the record
//     (reloader.dev/source-hashes) above all, and the rules (auto, reload, exclude, search,
//     pause, intervals, windows);
//   - every label of the copy read (ReloaderConfigs select by them), when the cache keeps them.
//
// Not a precondition on generation alone: the API server takes preconditions on uid and
// resourceVersion only, and generation does not move on annotation writes outside
// Deployments, where the record lives. Not the whole annotations map: the cache drops
// kubectl's last-applied copy, so the copy read never equals the stored map.
//
// A test that fails is answered 422 by the API server, with no details; write turns it into
// the 409 it stands for, so the reconcile plans again from the new copy (conflicts.go), as before. What is not
// guarded: an annotation other than reloader's added meanwhile to a kind other than
// Deployment (no decision reads one), and labels added where the copy read had none.

// RevisionAnnotation is written by the Deployment controller through the status as each
// rollout starts; no decision reads it, so it is not tested (a test would conflict with the
// rollout a reload has just started), and a change of it alone reconciles nothing.
const RevisionAnnotation = "deployment.kubernetes.io/revision"

// guardKeys are the annotations whose absence a decision reads: reloader's own and the rules.
func guardKeys(k reload.Keys) []string {
	keys := []string{reload.RecordAnnotation, reload.LastReloadAnnotation, reload.MinReloadIntervalAnnotation,
		reload.ReloadWindowAnnotation, reload.RunOnReloadAnnotation, reload.RecreateFinishedAnnotation,
		k.Auto, k.Search, k.PausePeriod, k.PausedAt, k.RolloutStrategy}
	for _, m := range []map[source.Kind]string{k.TypedAuto, k.Reload, k.Exclude} {
		keys = append(keys, slices.Collect(maps.Values(m))...)
	}
	slices.Sort(keys)
	return slices.Compact(slices.DeleteFunc(keys, func(s string) bool { return s == "" }))
}

// jsonOp is one JSON patch (RFC 6902) operation. Its value is written even when empty,
// false or null (a test of null matches a missing member in the API server's JSON patch);
// a remove has none.
type jsonOp struct {
	Op    string
	Path  string
	Value any
}

func (o jsonOp) MarshalJSON() ([]byte, error) {
	if o.Op == "remove" {
		return json.Marshal(struct {
			Op   string `json:"op"`
			Path string `json:"path"`
		}{o.Op, o.Path})
	}
	return json.Marshal(struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}{o.Op, o.Path, o.Value})
}

// guardedPatch returns the patch that writes updated over obj, the copy it was planned from,
// guarded as said above; ok is false when it cannot be guarded so (the copy read has no
// annotations: the stored object may still have kubectl's, dropped from the cache, and an
// add of the map would replace them), and the caller keeps the resourceVersion.
func guardedPatch(obj, updated client.Object, absent []string) (client.Patch, bool, error) {
	if len(obj.GetAnnotations()) == 0 {
		return nil, false, nil
	}
	ops := append([]jsonOp(nil), jsonOp{Op: "test", Path: "/metadata/uid", Value: string(obj.GetUID())},
		jsonOp{Op: "test", Path: "/metadata/generation", Value: obj.GetGeneration()})
	ann := obj.GetAnnotations()
	for _, k := range slices.Sorted(maps.Keys(ann)) {
		if k == RevisionAnnotation {
			continue
		}
		ops = append(ops, jsonOp{Op: "test", Path: "/metadata/annotations/" + pointerEscape(k), Value: ann[k]})
	}
	for _, k := range absent {
		if _, ok := ann[k]; !ok {
			ops = append(ops, jsonOp{Op: "test", Path: "/metadata/annotations/" + pointerEscape(k)})
		}
	}
	labels := obj.GetLabels()
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		ops = append(ops, jsonOp{Op: "test", Path: "/metadata/labels/" + pointerEscape(k), Value: labels[k]})
	}
	before, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, false, err
	}
	after, err := runtime.DefaultUnstructuredConverter.ToUnstructured(updated)
	if err != nil {
		return nil, false, err
	}
	ops = append(ops, diffJSON("", before, after)...)
	data, err := json.Marshal(ops)
	if err != nil {
		return nil, false, err
	}
	return client.RawPatch(types.JSONPatchType, data), true, nil
}

// GuardedOr is the guarded patch of updated over obj, or locked, the patch carrying obj's
// resourceVersion, where it cannot be guarded; keys name the rule annotations.
func GuardedOr(obj, updated client.Object, locked client.Patch, keys reload.Keys) (client.Patch, error) {
	patch, ok, err := guardedPatch(obj, updated, guardKeys(keys))
	if err != nil {
		return nil, fmt.Errorf("build the patch of %s: %w", obj.GetName(), err)
	}
	if !ok {
		return locked, nil
	}
	return patch, nil
}

// diffJSON returns the operations that turn a into b: maps member by member, lists of the
// same length element by element, anything else replaced whole. Lists are addressed by index:
// sound only because the generation test holds the spec as read. A list whose length
// changes is replaced whole; the cache keeps whole every list a reload changes (env, envFrom,
// volumes), never those it slims (containers keep their names and env only, and their
// number never changes).
func diffJSON(path string, a, b any) []jsonOp {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var ops []jsonOp
		for _, k := range slices.Sorted(maps.Keys(am)) {
			if _, ok := bm[k]; !ok {
				ops = append(ops, jsonOp{Op: "remove", Path: path + "/" + pointerEscape(k)})
			}
		}
		for _, k := range slices.Sorted(maps.Keys(bm)) {
			p := path + "/" + pointerEscape(k)
			if av, ok := am[k]; ok {
				ops = append(ops, diffJSON(p, av, bm[k])...)
			} else {
				ops = append(ops, jsonOp{Op: "add", Path: p, Value: bm[k]})
			}
		}
		return ops
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		var ops []jsonOp
		for i := range al {
			ops = append(ops, diffJSON(path+"/"+strconv.Itoa(i), al[i], bl[i])...)
		}
		return ops
	}
	if reflect.DeepEqual(a, b) {
		return nil
	}
	if b == nil {
		return []jsonOp{{Op: "remove", Path: path}}
	}
	return []jsonOp{{Op: "replace", Path: path, Value: b}}
}

// pointerEscape escapes a member name for a JSON pointer (RFC 6901).
func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// GuardFailed turns the API server's answer to a patch that did not apply to the stored
// object (a test failed: 422 with no details, where a validation error names the object and
// its causes) into the conflict it stands for; any other error is returned as it is.
func GuardFailed(err error, gr schema.GroupResource, name string) error {
	var st apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &st) {
		return err
	}
	if d := st.Status().Details; d != nil && (d.Name != "" || len(d.Causes) > 0) {
		return err
	}
	return apierrors.NewConflict(gr, name, fmt.Errorf("changed since it was read (%w)", err))
}
