// Package metainfo publishes what a running reloader is, in the ConfigMap upstream's tooling
// reads: build, effective options and deployment, under the same name and label.
package metainfo

import (
	"context"
	"encoding/json"
	"time"

	"github.com/go-logr/logr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/version"
)

// Name, LabelKey and LabelValue identify the ConfigMap, as upstream names it.
const (
	Name       = "reloader-meta-info"
	LabelKey   = "reloader.stakater.com/meta-info"
	LabelValue = "reloader"
)

// Build describes the binary.
type Build struct {
	GoVersion      string `json:"goVersion"`
	ReleaseVersion string `json:"releaseVersion"`
	CommitHash     string `json:"commitHash"`
	CommitTime     string `json:"commitTime"`
	Modified       bool   `json:"modified,omitempty"`
}

// ReadBuild describes this binary as `reloader --version` does.
func ReadBuild() Build {
	v := version.Get()
	return Build{GoVersion: v.GoVersion, ReleaseVersion: v.Version, CommitHash: v.Commit, CommitTime: v.CommitTime, Modified: v.Modified}
}

// Deployment names the reloader installation.
type Deployment struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod,omitempty"`
	StartedAt string `json:"startedAt"`
}

// Publisher writes the ConfigMap once it runs (as leader, with --enable-ha).
type Publisher struct {
	Client     client.Client
	Namespace  string
	Deployment Deployment
	// Options are the effective options, rendered as JSON.
	Options any
	Log     logr.Logger
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
	if err := p.Client.Apply(ctx, cm, client.FieldOwner(p.FieldOwner), client.ForceOwnership); err != nil {
		p.Log.Error(err, "meta-info ConfigMap not written", "namespace", p.Namespace)
		return nil
	}
	p.Log.Info("meta-info ConfigMap written", "namespace", p.Namespace, "name", Name)
	return nil
}

// Data is the ConfigMap's content: one JSON document per key.
func (p *Publisher) Data() (map[string]string, error) {
	d := p.Deployment
	if d.StartedAt == "" {
		d.StartedAt = time.Now().UTC().Format(time.RFC3339)
	}
	out := map[string]string{}
	for key, v := range map[string]any{"buildInfo": ReadBuild(), "reloaderOptions": p.Options, "deploymentInfo": d} {
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
