package release

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/reloader-operator/reloader/deployments/image"
)

// Artifact Hub annotations that describe one release, not the chart's source.
const (
	imagesAnnotation     = "artifacthub.io/images"
	prereleaseAnnotation = "artifacthub.io/prerelease"
)

// PackageChart packages the chart at dir into out and returns the package's path. As
// `helm package --version <version without v> --app-version <image tag>` it stamps the
// release: the appVersion is the tag `make image` gives the image of the same version, so the
// chart installs by default the image released with it. It also keeps the Artifact Hub
// annotations true of the release: the image they name (scanned there) carries that tag too,
// and a pre-release version is marked so.
func PackageChart(dir, out, version string) (string, error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return "", err
	}
	chartVersion := ChartVersion(version)
	sv, err := semver.StrictNewVersion(chartVersion)
	if err != nil {
		return "", fmt.Errorf("chart version %q: %w", chartVersion, err)
	}
	oldTag, newTag := ch.Metadata.AppVersion, image.Tag(version)
	ch.Metadata.Version = chartVersion
	ch.Metadata.AppVersion = newTag
	if a := ch.Metadata.Annotations; a != nil {
		if images, ok := a[imagesAnnotation]; ok && oldTag != "" {
			a[imagesAnnotation] = strings.ReplaceAll(images, ":"+oldTag+"\n", ":"+newTag+"\n")
		}
		if _, ok := a[prereleaseAnnotation]; ok {
			a[prereleaseAnnotation] = strconv.FormatBool(sv.Prerelease() != "")
		}
	}
	if len(ch.Metadata.Dependencies) > 0 {
		return "", fmt.Errorf("chart %s has dependencies, which PackageChart does not vendor", dir)
	}
	path, err := chartutil.Save(ch, out)
	if err != nil {
		return "", fmt.Errorf("package the chart %s as %s: %w", dir, chartVersion, err)
	}
	return path, nil
}

// ChartVersion is the chart's version for a release: the tag without its "v", as Helm
// wants a semantic version.
func ChartVersion(version string) string {
	return strings.TrimPrefix(version, "v")
}
