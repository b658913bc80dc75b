// Package approval decides, purely, how a due reload is carried out: rolled (mode reload),
// only reported (notify), or held until someone approves the content it would roll (approve).
// It resolves the mode from the workload's annotation, its changed sources' annotations and
// the --mode flag, names the due content by a digest, and reads the approval annotation.
package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reloader-operator/reloader/internal/reload"
)

// Mode is how a due reload is carried out.
type Mode string

// Modes, from the least to the most cautious.
const (
	// Reload rolls the workload (the default).
	Reload Mode = "reload"
	// Notify reports what would reload (Event, alert, metric), writes nothing into the pod
	// template, and advances the workload's record: the content notified is never rolled
	// later by a switch back to reload.
	Notify Mode = "notify"
	// Approve holds the reload until the workload's ApprovedAnnotation names the digest of
	// the due changes.
	Approve Mode = "approve"
)

// Annotations. Both are user input; neither is ever a record of what reloader did.
const (
	// ModeAnnotation, on a workload, sets its mode; on a ConfigMap or Secret, the mode of the
	// reloads its changes cause, where the workload sets none.
	ModeAnnotation = "reloader.dev/mode"
	// ApprovedAnnotation on a workload names the digest of the content a user approves
	// (`kubectl reloader approve`). reloader removes it in the write of the reload it
	// approved; one that names another content is ignored.
	ApprovedAnnotation = "reloader.dev/approved"
	// PendingAnnotation on a workload is written by reloader while its reload waits for
	// approval: the digest of the due content, which `kubectl reloader approve` approves
	// without reading reloader's hash key. reloader removes it once nothing waits. It is not
	// trusted for a decision: whoever can write it can write ApprovedAnnotation as well, and
	// only an approval naming the digest reloader computes for the due content rolls.
	PendingAnnotation = "reloader.dev/approval-pending"
	// HoldReason is the reason of a reload held for approval (reload.Hold.Reason, the reason
	// label of reloader_reloads_held_total).
	HoldReason = reload.HoldApproval
)

// DigestLen is the length of a digest: 32 hex digits (128 bits of SHA-256).
const DigestLen = 32

// legacyDigestLen is the length of the digests of reloader before 128-bit digests (64 bits):
// an approval of one is refused with a message that says to approve again.
const legacyDigestLen = 16

// maxAnnotation bounds an annotation value read.
const maxAnnotation = 64

// ParseMode reads a mode, as the flag and the annotations write it.
func ParseMode(v string) (Mode, error) {
	switch m := Mode(strings.TrimSpace(v)); m {
	case Reload, Notify, Approve:
		return m, nil
	}
	return "", fmt.Errorf("%q is not a mode: want reload, notify or approve", clip(v))
}

// rank orders the modes by caution.
func rank(m Mode) int {
	switch m {
	case Approve:
		return 2
	case Reload:
		return 1
	}
	return 0
}

// Resolve is the mode of a reload of changes: the workload's annotation when valid; else each
// change's source annotation when valid, else dflt (the ReloaderConfig's or the flag's). Of
// several changes, approve wins over reload, and reload over notify: a roll for one source
// loads every source's new content, so it needs the approval any of them asks for, and a
// notify-only source's content is loaded anyway. Bad annotations are returned, each read as
// if it were absent. sourceAnn gives a change's source's annotations (nil: none).
func Resolve(workloadAnn map[string]string, changes []reload.Change, sourceAnn func(reload.Change) map[string]string, dflt Mode) (Mode, []error) {
	var errs []error
	if v, ok := workloadAnn[ModeAnnotation]; ok {
		m, err := ParseMode(v)
		if err == nil {
			return m, nil
		}
		errs = append(errs, fmt.Errorf("annotation %s on the workload: %w; using the sources' or the default mode", ModeAnnotation, err))
	}
	var out Mode
	for _, ch := range changes {
		m := dflt
		if v, ok := sourceAnn(ch)[ModeAnnotation]; ok {
			if sm, err := ParseMode(v); err != nil {
				errs = append(errs, fmt.Errorf("annotation %s on %s: %w; using %s", ModeAnnotation, ch.ID, err, dflt))
			} else {
				m = sm
			}
		}
		if out == "" || rank(m) > rank(out) {
			out = m
		}
	}
	if out == "" {
		out = dflt
	}
	return out, errs
}

// Digest names the content a reload of changes would roll: a hash of each source's id and
// content hash, in any order. The same changes give the same digest on every replica and in
// `kubectl reloader approve`; a newer content of any of them gives another.
func Digest(changes []reload.Change) string {
	lines := make([]string, len(changes))
	for i, ch := range changes {
		lines[i] = ch.ID.String() + "=" + ch.Hash
	}
	slices.Sort(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:])[:DigestLen]
}

// ParseApproved reads the approval annotation: a digest, DigestLen lowercase hex digits. A
// 64-bit digest (16 hex digits) of an older `kubectl reloader approve` is refused, saying so:
// 64 bits are too few to name a content, and the approval is given again in a moment.
func ParseApproved(v string) (string, error) {
	return parseDigest(ApprovedAnnotation, v)
}

// ParsePending reads the pending annotation reloader writes: a digest, as ParseApproved.
func ParsePending(v string) (string, error) {
	return parseDigest(PendingAnnotation, v)
}

func parseDigest(annotation, v string) (string, error) {
	v = strings.TrimSpace(v)
	hex := strings.Trim(v, "0123456789abcdef") == ""
	switch {
	case len(v) == legacyDigestLen && hex:
		return "", fmt.Errorf("annotation %s: %q is a 64-bit digest of an older reloader; digests are now %d hex digits (128 bits): approve again with `kubectl reloader approve`", annotation, v, DigestLen)
	case len(v) != DigestLen || !hex:
		return "", fmt.Errorf("annotation %s: %q is not a digest of %d hex digits, as `kubectl reloader approve` writes", annotation, clip(v), DigestLen)
	}
	return v, nil
}

// Gate is what the mode makes of a due reload.
type Gate struct {
	Mode Mode
	// Digest names the due content.
	Digest string
	// Approved is true when the approval annotation names Digest: the reload goes, and the
	// annotation is spent in its write.
	Approved bool
	// Hold holds the reload for approval (mode approve, not approved); nil otherwise.
	Hold *reload.Hold
	// Invalid are the annotations that could not be read.
	Invalid []error
}

// Decide gates a reload of changes in mode m: approved names the workload's approval
// annotation (hasApproval false: none); since is when the due content appeared (the latest
// write of the changed sources; zero: unknown); approve is the command that approves it, for the
// hold's message (`kubectl reloader approve deployment/web -n shop` for a workload).
func Decide(m Mode, changes []reload.Change, approved string, hasApproval bool, since time.Time, approve string) Gate {
	g := Gate{Mode: m}
	if m != Approve || len(changes) == 0 {
		return g
	}
	g.Digest = Digest(changes)
	if hasApproval {
		d, err := ParseApproved(approved)
		switch {
		case err != nil:
			g.Invalid = append(g.Invalid, err)
		case d == g.Digest:
			g.Approved = true
			return g
		}
	}
	why := "waiting for approval of " + g.Digest
	if !since.IsZero() {
		why += " since " + since.UTC().Format(time.RFC3339)
	}
	why += "; approve: " + approve
	if hasApproval && len(g.Invalid) == 0 {
		why += fmt.Sprintf(" (the approval %s on it names another content, not rolled)", clip(strings.TrimSpace(approved)))
	}
	g.Hold = &reload.Hold{Reason: HoldReason, Why: why}
	return g
}

func clip(v string) string {
	if len(v) > maxAnnotation {
		return v[:maxAnnotation] + "..."
	}
	return v
}
