package release

import (
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/action"

	"github.com/reloader-operator/reloader/deployments/image"
)

// PackageChart packages the chart at dir into out, as `helm package --version
// <version without v> --app-version <image tag>` does, and returns the package's path. The
// appVersion is the tag `make image` gives the image of the same version, so the chart
// installs by default the image released with it.
func PackageChart(dir, out, version string) (string, error) {
	p := action.NewPackage()
	p.Version = ChartVersion(version)
	p.AppVersion = image.Tag(version)
	p.Destination = out
	path, err := p.Run(dir, nil)
	if err != nil {
		return "", fmt.Errorf("package the chart %s as %s: %w", dir, p.Version, err)
	}
	return path, nil
}

// ChartVersion is the chart's version for a release: the tag without its "v", as Helm
// wants a semantic version.
func ChartVersion(version string) string {
	return strings.TrimPrefix(version, "v")
}
