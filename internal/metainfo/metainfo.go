// Package metainfo publishes what a running reloader is, in the ConfigMap upstream's tooling
// reads: under upstream's name, label and keys (buildInfo, reloaderOptions, deploymentInfo),
// each in upstream's layout, with reloader's own keys (reloaderFlags, instanceInfo) beside
// them.
package metainfo

import (
	"context"
	"encoding/json"
	"maps"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/version"
)

// Name, LabelKey and LabelValue identify the ConfigMap, as upstream names it.
const (
	Name       = "reloader-meta-info"
	LabelKey   = "reloader.stakater.com/meta-info"
	LabelValue = "reloader"
)

// The ConfigMap's keys: upstream's three, then reloader's own.
const (
	KeyBuild      = "buildInfo"
	KeyOptions    = "reloaderOptions"
	KeyDeployment = "deploymentInfo"
	// KeyFlags holds every flag's value in force, by flag name (URLs left out).
	KeyFlags = "reloaderFlags"
	// KeyInstance holds the writing pod and its start time.
	KeyInstance = "instanceInfo"
)

// Build describes the binary, in upstream's buildInfo layout (Modified is reloader's).
type Build struct {
	GoVersion      string `json:"goVersion"`
	ReleaseVersion string `json:"releaseVersion"`
	CommitHash     string `json:"commitHash"`
	// CommitTime is RFC 3339, the zero time when unknown: upstream's readers decode it
	// into a time.Time, which an empty string would fail.
	CommitTime time.Time `json:"commitTime"`
	Edition    string    `json:"edition"`
	Modified   bool      `json:"modified,omitempty"`
}

// Edition is buildInfo's edition: upstream's open-source one is "oss"; reloader is open source.
const Edition = "oss"

// ReadBuild describes this binary as `reloader --version` does.
func ReadBuild() Build {
	v := version.Get()
	b := Build{GoVersion: v.GoVersion, ReleaseVersion: v.Version, CommitHash: v.Commit, Edition: Edition, Modified: v.Modified}
	if t, err := time.Parse(time.RFC3339, v.CommitTime); err == nil {
		b.CommitTime = t.UTC()
	}
	return b
}

// Deployment names the reloader installation and this replica.
type Deployment struct {
	Name      string
	Namespace string
	Pod       string
	StartedAt string
}

// Instance is the instanceInfo key: the replica that wrote the ConfigMap.
type Instance struct {
	Pod       string `json:"pod,omitempty"`
	StartedAt string `json:"startedAt"`
}

// Publisher writes the ConfigMap once it runs (as leader, with --enable-ha).
type Publisher struct {
	Client     client.Client
	Namespace  string
	Deployment Deployment
	// Options are the options in upstream's reloaderOptions layout (see OptionsOf).
	Options ReloaderOptions
	// Flags are every flag's value in force, by flag name.
	Flags map[string]string
	Log   logr.Logger
	// FieldOwner is the field manager of the server-side apply.
	FieldOwner string
}

// Start applies the ConfigMap. A failure (say, no RBAC to write ConfigMaps there) is logged
// and never stops reloading. It implements manager.Runnable.
func (p *Publisher) Start(ctx context.Context) error {
	if p.Namespace == "" {
		p.Log.Info("meta-info ConfigMap not written: set RELOADER_NAMESPACE (or POD_NAMESPACE) to reloader's namespace")
		return nil
	}
	data, err := p.Data()
	if err != nil {
		p.Log.Error(err, "meta-info ConfigMap not written")
		return nil
	}
	cm := corev1ac.ConfigMap(Name, p.Namespace).WithLabels(map[string]string{LabelKey: LabelValue}).WithData(data)
	err = p.Client.Apply(ctx, cm, client.FieldOwner(p.FieldOwner), client.ForceOwnership)
	if apierrors.IsForbidden(err) {
		// Upstream's chart grants get, create and update on ConfigMaps in its namespace, not
		// patch: an image swapped in under it writes the ConfigMap as upstream does.
		err = p.createOrUpdate(ctx, data)
	}
	if err != nil {
		p.Log.Error(err, "meta-info ConfigMap not written", "namespace", p.Namespace)
		return nil
	}
	p.Log.Info("meta-info ConfigMap written", "namespace", p.Namespace, "name", Name)
	return nil
}

// createOrUpdate writes the ConfigMap with create, or get and update: our keys and label
// over what is there, other keys kept, as the apply would.
func (p *Publisher) createOrUpdate(ctx context.Context, data map[string]string) error {
	key := client.ObjectKey{Namespace: p.Namespace, Name: Name}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		err := p.Client.Get(ctx, key, cm)
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: Name,
				Labels: map[string]string{LabelKey: LabelValue}}, Data: data}
			return p.Client.Create(ctx, cm, client.FieldOwner(p.FieldOwner))
		}
		if err != nil {
			return err
		}
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		cm.Labels[LabelKey] = LabelValue
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		maps.Copy(cm.Data, data)
		return p.Client.Update(ctx, cm, client.FieldOwner(p.FieldOwner))
	})
}

// Data is the ConfigMap's content: one JSON document per key.
func (p *Publisher) Data() (map[string]string, error) {
	d := p.Deployment
	if d.StartedAt == "" {
		d.StartedAt = time.Now().UTC().Format(time.RFC3339)
	}
	flags := p.Flags
	if flags == nil {
		flags = map[string]string{}
	}
	out := map[string]string{}
	for key, v := range map[string]any{
		KeyBuild:   ReadBuild(),
		KeyOptions: p.Options,
		// Upstream writes the Deployment's name and namespace as an ObjectMeta.
		KeyDeployment: metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace},
		KeyFlags:      flags,
		KeyInstance:   Instance{Pod: d.Pod, StartedAt: d.StartedAt},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		out[key] = string(b)
	}
	return out, nil
}

// NeedLeaderElection is true: one replica writes, the one that reloads.
func (p *Publisher) NeedLeaderElection() bool { return true }
