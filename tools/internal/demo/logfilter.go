package demo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// decisionLines is the writer reloader's output goes through when the demo is not verbose.
// reloader runs with --log-format=json; a line is shown when reloader logged it while
// reconciling an object (controller-runtime adds a reconcileID to that logger: "reloaded",
// "reload held", "rollout complete", ...), when it is an error, or when it starts with
// WARNING. The manager's start and stop lines (sources, workers, caches, leader election)
// carry none of these and are left out. A line that is not JSON (a panic, a klog line) is
// shown as it is.
type decisionLines struct {
	out    io.Writer
	prefix string

	mu      sync.Mutex
	partial []byte
}

func (w *decisionLines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.partial[:i])
		w.partial = w.partial[i+1:]
		if s, ok := decision(line); ok {
			fmt.Fprintf(w.out, "%s%s\n", w.prefix, s)
		}
	}
}

// quiet are the keys a decision line leaves out: controller-runtime's bookkeeping, and the
// object's own key, which the line starts with.
var quiet = []string{"ts", "level", "logger", "caller", "msg", "controller", "controllerGroup",
	"controllerKind", "reconcileID", "name", "namespace", "stacktrace"}

// decision returns the line to show for one line of reloader's output, and whether to show it.
func decision(line string) (string, bool) {
	fields, ok := jsonFields(line)
	if !ok {
		return line, strings.TrimSpace(line) != ""
	}
	get := func(k string) json.RawMessage {
		for _, f := range fields {
			if f.key == k {
				return f.value
			}
		}
		return nil
	}
	var msg, level, kind string
	_ = json.Unmarshal(get("msg"), &msg)
	_ = json.Unmarshal(get("level"), &level)
	_ = json.Unmarshal(get("controllerKind"), &kind)
	if get("reconcileID") == nil && level != "error" && !strings.HasPrefix(msg, "WARNING") {
		return "", false
	}
	var b strings.Builder
	var ref struct{ Namespace, Name string }
	if kind != "" && json.Unmarshal(get(kind), &ref) == nil && ref.Name != "" {
		fmt.Fprintf(&b, "%s %s/%s: ", strings.ToLower(kind), ref.Namespace, ref.Name)
	}
	b.WriteString(msg)
	for _, f := range fields {
		if slices.Contains(quiet, f.key) || f.key == kind {
			continue
		}
		var s string
		if f.key == "hash" && json.Unmarshal(f.value, &s) == nil {
			fmt.Fprintf(&b, " hash=%s", short(s))
		} else if json.Unmarshal(f.value, &s) == nil && s != "" && !strings.ContainsAny(s, " \"=") {
			fmt.Fprintf(&b, " %s=%s", f.key, s)
		} else {
			fmt.Fprintf(&b, " %s=%s", f.key, f.value)
		}
	}
	return b.String(), true
}

type field struct {
	key   string
	value json.RawMessage
}

// jsonFields reads a JSON object's fields in the order they were written, which is the order
// reloader logged them in; ok is false for a line that is not a JSON object.
func jsonFields(line string) (fields []field, ok bool) {
	dec := json.NewDecoder(strings.NewReader(line))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		fields = append(fields, field{key, v})
	}
	return fields, true
}
