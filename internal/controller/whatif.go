package controller

import (
	"context"

	"github.com/reloader-operator/reloader/internal/source"
)

// AssumedChange marks, in Explain's input, the hash of a source that is taken as changed
// since the workload's record although its hash can't be computed: the recorded hash with
// this suffix, so that it differs from the record and keeps its key set (hash.KeySet). It
// only ever lives in an explanation; nothing is written.
const AssumedChange = "~changed"

type assumedKey struct{}

// AssumeChanged returns ctx in which Explain takes the sources ids, of a kind whose hashes it
// can't compute (unknownHash), as changed since the workload's record instead of unchanged.
// `reloader plan` uses it for a Secret whose proposed content it compared with the live one
// itself, without reloader's hash key.
func AssumeChanged(ctx context.Context, ids ...source.ID) context.Context {
	set := make(map[source.ID]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	return context.WithValue(ctx, assumedKey{}, set)
}

// assumedChanged reports whether ctx carries id as assumed changed (AssumeChanged).
func assumedChanged(ctx context.Context, id source.ID) bool {
	set, _ := ctx.Value(assumedKey{}).(map[source.ID]bool)
	return set[id]
}
