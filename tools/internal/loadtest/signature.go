package loadtest

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
)

// Times a reload may write beside the content it carries: RFC 3339 timestamps
// (kubectl.kubernetes.io/restartedAt) and Unix times in seconds, milliseconds or nanoseconds
// (an "observedAt" in a JSON annotation). A hash has letters, or is longer.
var timeLike = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})|\b1\d{9}(\d{3}|\d{9})?\b`)

// TemplateSignature is what a pod template says of the content it was rolled for, whatever
// build wrote it: the template with every time-like value blanked, hashed. Two templates with
// one signature differ at most in when they were written, so a rollout from one to the other
// carried no new content. It needs no knowledge of how a build names or hashes content, so
// it judges upstream's templates and ours alike.
func TemplateSignature(template string) string {
	sum := sha256.Sum256([]byte(timeLike.ReplaceAllString(template, "<time>")))
	return hex.EncodeToString(sum[:12])
}
