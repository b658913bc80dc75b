package metainfo

import (
	"net/url"
	"slices"

	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/source"
)

// ReloaderOptions is upstream's reloaderOptions document: its field names and types, so
// that tools decoding upstream's ConfigMap decode reloader's.
type ReloaderOptions struct {
	AutoReloadAll                                bool     `json:"autoReloadAll"`
	ConfigmapUpdateOnChangeAnnotation            string   `json:"configmapUpdateOnChangeAnnotation"`
	SecretUpdateOnChangeAnnotation               string   `json:"secretUpdateOnChangeAnnotation"`
	SecretProviderClassUpdateOnChangeAnnotation  string   `json:"secretProviderClassUpdateOnChangeAnnotation"`
	ReloaderAutoAnnotation                       string   `json:"reloaderAutoAnnotation"`
	IgnoreResourceAnnotation                     string   `json:"ignoreResourceAnnotation"`
	ConfigmapReloaderAutoAnnotation              string   `json:"configmapReloaderAutoAnnotation"`
	SecretReloaderAutoAnnotation                 string   `json:"secretReloaderAutoAnnotation"`
	SecretProviderClassReloaderAutoAnnotation    string   `json:"secretProviderClassReloaderAutoAnnotation"`
	ConfigmapExcludeReloaderAnnotation           string   `json:"configmapExcludeReloaderAnnotation"`
	SecretExcludeReloaderAnnotation              string   `json:"secretExcludeReloaderAnnotation"`
	SecretProviderClassExcludeReloaderAnnotation string   `json:"secretProviderClassExcludeReloaderAnnotation"`
	AutoSearchAnnotation                         string   `json:"autoSearchAnnotation"`
	SearchMatchAnnotation                        string   `json:"searchMatchAnnotation"`
	RolloutStrategyAnnotation                    string   `json:"rolloutStrategyAnnotation"`
	PauseDeploymentAnnotation                    string   `json:"pauseDeploymentAnnotation"`
	PauseDeploymentTimeAnnotation                string   `json:"pauseDeploymentTimeAnnotation"`
	LogFormat                                    string   `json:"logFormat"`
	LogLevel                                     string   `json:"logLevel"`
	IsArgoRollouts                               bool     `json:"isArgoRollouts"`
	ReloadStrategy                               string   `json:"reloadStrategy"`
	ReloadOnCreate                               bool     `json:"reloadOnCreate"`
	ReloadOnDelete                               bool     `json:"reloadOnDelete"`
	SyncAfterRestart                             bool     `json:"syncAfterRestart"`
	EnableHA                                     bool     `json:"enableHA"`
	EnableCSIIntegration                         bool     `json:"enableCSIIntegration"`
	WebhookURL                                   string   `json:"webhookUrl"`
	ResourcesToIgnore                            []string `json:"resourcesToIgnore"`
	WorkloadTypesToIgnore                        []string `json:"workloadTypesToIgnore"`
	NamespaceSelectors                           []string `json:"namespaceSelectors"`
	ResourceSelectors                            []string `json:"resourceSelectors"`
	NamespacesToIgnore                           []string `json:"namespacesToIgnore"`
	EnablePProf                                  bool     `json:"enablePProf"`
	PProfAddr                                    string   `json:"pprofAddr"`
}

// OptionsOf fills upstream's document from reloader's options. The webhook URL is cut to
// its scheme and host: its path is a token, and the ConfigMap is readable more widely than
// reloader's Deployment.
func OptionsOf(o options.Options) ReloaderOptions {
	k := o.Keys
	return ReloaderOptions{
		AutoReloadAll:                                o.AutoReloadAll,
		ConfigmapUpdateOnChangeAnnotation:            k.Reload[source.ConfigMap],
		SecretUpdateOnChangeAnnotation:               k.Reload[source.Secret],
		SecretProviderClassUpdateOnChangeAnnotation:  k.Reload[source.SecretProviderClass],
		ReloaderAutoAnnotation:                       k.Auto,
		IgnoreResourceAnnotation:                     k.Ignore,
		ConfigmapReloaderAutoAnnotation:              k.TypedAuto[source.ConfigMap],
		SecretReloaderAutoAnnotation:                 k.TypedAuto[source.Secret],
		SecretProviderClassReloaderAutoAnnotation:    k.TypedAuto[source.SecretProviderClass],
		ConfigmapExcludeReloaderAnnotation:           k.Exclude[source.ConfigMap],
		SecretExcludeReloaderAnnotation:              k.Exclude[source.Secret],
		SecretProviderClassExcludeReloaderAnnotation: k.Exclude[source.SecretProviderClass],
		AutoSearchAnnotation:                         k.Search,
		SearchMatchAnnotation:                        k.Match,
		RolloutStrategyAnnotation:                    k.RolloutStrategy,
		PauseDeploymentAnnotation:                    k.PausePeriod,
		PauseDeploymentTimeAnnotation:                k.PausedAt,
		LogFormat:                                    o.LogFormat,
		LogLevel:                                     o.LogLevel,
		IsArgoRollouts:                               o.IsArgoRollouts,
		ReloadStrategy:                               o.ReloadStrategy,
		ReloadOnCreate:                               o.ReloadOnCreate,
		ReloadOnDelete:                               o.ReloadOnDelete,
		SyncAfterRestart:                             o.SyncAfterRestart,
		EnableHA:                                     o.EnableHA,
		EnableCSIIntegration:                         o.EnableCSIIntegration,
		WebhookURL:                                   schemeAndHost(o.WebhookURL),
		ResourcesToIgnore:                            list(o.ResourcesToIgnore),
		WorkloadTypesToIgnore:                        list(o.IgnoredWorkloadTypes),
		NamespaceSelectors:                           one(o.NamespaceSelector),
		ResourceSelectors:                            one(o.ResourceLabelSelector),
		NamespacesToIgnore:                           list(o.NamespacesToIgnore),
		EnablePProf:                                  o.EnablePprof,
		PProfAddr:                                    o.PprofAddr,
	}
}

// list is l, never nil: upstream writes [] for a flag not given.
func list(l []string) []string {
	if l == nil {
		return []string{}
	}
	return slices.Clone(l)
}

// one is the selector as a list of one, or none.
func one(s string) []string {
	if s == "" {
		return []string{}
	}
	return []string{s}
}

// schemeAndHost is u without its path, query and credentials ("" stays "").
func schemeAndHost(u string) string {
	if u == "" {
		return ""
	}
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return "(set)"
	}
	return p.Scheme + "://" + p.Host
}
