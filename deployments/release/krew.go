package release

import (
	"bytes"
	"fmt"
	"regexp"
	"text/template"
)

// KrewTemplate is the krew plugin manifest, a template, in the repository; KrewManifest
// the name Build renders it to.
const (
	KrewTemplate = "deployments/krew/reloader.yaml"
	KrewManifest = "reloader.yaml"
)

// DefaultGitHubRepo is where releases are published.
const DefaultGitHubRepo = "reloader-operator/reloader"

// KrewData fills the template.
type KrewData struct {
	// TagName is the release's tag, such as v1.2.3.
	TagName string
	// GitHubRepo is owner/name; empty means DefaultGitHubRepo.
	GitHubRepo string
}

// Homepage is the repository's page.
func (d KrewData) Homepage() string {
	repo := d.GitHubRepo
	if repo == "" {
		repo = DefaultGitHubRepo
	}
	return "https://github.com/" + repo
}

// DownloadURL is where the release's files are, by name.
func (d KrewData) DownloadURL() string {
	return d.Homepage() + "/releases/download/" + d.TagName
}

// releaseTag is what krew accepts as spec.version: "v" and a semantic version.
var releaseTag = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// IsReleaseTag reports whether version can be a krew plugin's version.
func IsReleaseTag(version string) bool { return releaseTag.MatchString(version) }

// RenderKrew fills the manifest template: {{ .TagName }}, {{ .DownloadURL }}, {{ .Homepage }},
// {{ archive "<os>" "<arch>" }} (the plugin archive's name) and {{ sha256 <name> }}, which
// fails for a file the release does not have, so the manifest never names an archive that
// wasn't built.
func RenderKrew(tmpl string, data KrewData, sums map[string]string) ([]byte, error) {
	if !IsReleaseTag(data.TagName) {
		return nil, fmt.Errorf("krew manifest: version %q is not a v-prefixed semantic version", data.TagName)
	}
	t, err := template.New(KrewTemplate).Option("missingkey=error").Funcs(template.FuncMap{
		"archive": func(os, arch string) string {
			return ArchiveName(PluginBin, data.TagName, Platform{os, arch})
		},
		"sha256": func(name string) (string, error) {
			sum, ok := sums[name]
			if !ok {
				return "", fmt.Errorf("no file %s in the release", name)
			}
			return sum, nil
		},
	}).Parse(tmpl)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
