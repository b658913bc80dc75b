package installtest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// reloaderConfigCRD is the CustomResourceDefinition of the ReloaderConfig API.
const reloaderConfigCRD = "reloaderconfigs.reloader.dev"

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// versionLabels carry the version of the chart or of the app installed: any upgrade changes
// their values. `version` is one of upstream's default reloader.deployment.labels.
var versionLabels = []string{"helm.sh/chart", "chart", "app.kubernetes.io/version", "version"}

// upstreamRelease is what the upgrade starts from: the objects upstream's chart rendered
// (namespaces filled in), the UID of each, and its Deployment as the API server holds it.
type upstreamRelease struct {
	objects []*unstructured.Unstructured
	uids    map[string]types.UID
	deploy  *appsv1.Deployment
}

func describeObject(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s", o.GetKind(), client.ObjectKeyFromObject(o))
}

func recordUpstream(t *testing.T, ctx context.Context, manifest, namespace string) *upstreamRelease {
	t.Helper()
	objs, err := render.Decode(manifest)
	testutil.Must(t, err)
	uids := map[string]types.UID{}
	for _, o := range objs {
		testutil.Must(t, defaultNamespace(o, namespace))
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GroupVersionKind())
		if err := admin.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
			t.Fatalf("%s, created by upstream's chart: %v", describeObject(o), err)
		}
		uids[describeObject(o)] = live.GetUID()
	}
	deployments := render.OfKind(objs, "Deployment")
	if len(deployments) != 1 {
		t.Fatalf("upstream's chart rendered %d Deployments, want 1", len(deployments))
	}
	var d appsv1.Deployment
	testutil.Must(t, admin.Get(ctx, client.ObjectKeyFromObject(deployments[0]), &d))
	return &upstreamRelease{objects: objs, uids: uids, deploy: &d}
}

// checkKept checks that every object upstream's chart created is still there, the same
// object (a ServiceAccount created anew would void the tokens of running pods; a Deployment
// the pods), that the Deployment keeps its selector, and that the pod template keeps every
// label upstream's gave, with its value (but for versionLabels).
func (u *upstreamRelease) checkKept(t *testing.T, ctx context.Context, when string) {
	t.Helper()
	var gone, replaced []string
	for _, o := range u.objects {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GroupVersionKind())
		err := admin.Get(ctx, client.ObjectKeyFromObject(o), live)
		switch {
		case apierrors.IsNotFound(err):
			gone = append(gone, describeObject(o))
		case err != nil:
			t.Fatal(err)
		case live.GetUID() != u.uids[describeObject(o)]:
			replaced = append(replaced, describeObject(o))
		}
	}
	if len(gone) > 0 {
		t.Errorf("%s, %d of the %d objects of upstream's release are gone (renamed, or not rendered by the chart now installed): %s",
			when, len(gone), len(u.objects), strings.Join(gone, ", "))
	}
	if len(replaced) > 0 {
		t.Errorf("%s, these objects of upstream's release were deleted and created again (another UID): %s", when, strings.Join(replaced, ", "))
	}
	var d appsv1.Deployment
	if err := admin.Get(ctx, client.ObjectKeyFromObject(u.deploy), &d); err != nil {
		t.Errorf("%s, upstream's Deployment %s: %v", when, u.deploy.Name, err)
		return
	}
	if !equality.Semantic.DeepEqual(d.Spec.Selector, u.deploy.Spec.Selector) {
		t.Errorf("%s, the selector of Deployment %s is %v, was %v", when, d.Name, d.Spec.Selector, u.deploy.Spec.Selector)
	}
	if lost := lostLabels(u.deploy.Spec.Template.Labels, d.Spec.Template.Labels); len(lost) > 0 {
		t.Errorf("%s, the pod template of Deployment %s drops or changes upstream's labels: %s", when, d.Name, strings.Join(lost, "; "))
	}
}

// lostLabels lists the labels of want that got lacks, or gives another value, save the
// values of versionLabels.
func lostLabels(want, got map[string]string) []string {
	var lost []string
	for k, v := range want {
		g, ok := got[k]
		switch {
		case !ok:
			lost = append(lost, fmt.Sprintf("%s=%s dropped", k, v))
		case g != v && !slices.Contains(versionLabels, k):
			lost = append(lost, fmt.Sprintf("%s=%s changed to %s", k, v, g))
		}
	}
	sort.Strings(lost)
	return lost
}

// checkContainers checks that the Deployment runs upstream's containers again.
func (u *upstreamRelease) checkContainers(t *testing.T, ctx context.Context) {
	t.Helper()
	var d appsv1.Deployment
	testutil.Must(t, admin.Get(ctx, client.ObjectKeyFromObject(u.deploy), &d))
	if got, want := containerImages(&d), containerImages(u.deploy); !slices.Equal(got, want) {
		t.Errorf("after the rollback Deployment %s runs %v, want upstream's %v", d.Name, got, want)
	}
}

func firstImage(d *appsv1.Deployment) string {
	if cs := d.Spec.Template.Spec.Containers; len(cs) > 0 {
		return cs[0].Image
	}
	return ""
}

// containerImages lists a Deployment's containers as name=image.
func containerImages(d *appsv1.Deployment) []string {
	var out []string
	for _, c := range d.Spec.Template.Spec.Containers {
		out = append(out, c.Name+"="+c.Image)
	}
	return out
}

// checkOurPods checks that the pod template of the Deployment the upgrade left is the one our
// chart rendered (containers, images, args: nothing of upstream's left by the upgrade's
// merge), and that it runs our chart's image, or, when the values pin an image (a tag or a
// digest), the one upstream's chart made of them: the values keep their meaning. It returns
// that Deployment.
func checkOurPods(t *testing.T, ctx context.Context, before *appsv1.Deployment, manifest string, ours *chart.Chart, values map[string]any) *unstructured.Unstructured {
	t.Helper()
	objs, err := render.Decode(manifest)
	testutil.Must(t, err)
	rendered := render.OfKind(objs, "Deployment")
	if len(rendered) != 1 {
		t.Fatalf("our chart rendered %d Deployments, want 1", len(rendered))
	}
	var want, live appsv1.Deployment
	testutil.Must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(rendered[0].Object, &want))
	if err := admin.Get(ctx, client.ObjectKey{Namespace: before.Namespace, Name: want.Name}, &live); err != nil {
		t.Fatalf("the Deployment our chart renders: %v", err)
	}
	if got, w := containerImages(&live), containerImages(&want); !slices.Equal(got, w) {
		t.Errorf("after the upgrade Deployment %s runs %v, want our chart's %v", live.Name, got, w)
	} else {
		for i, c := range live.Spec.Template.Spec.Containers {
			if w := want.Spec.Template.Spec.Containers[i].Args; !slices.Equal(c.Args, w) {
				t.Errorf("after the upgrade container %s has args %q, our chart renders %q", c.Name, c.Args, w)
			}
		}
	}

	image, upstreamImage := firstImage(&live), firstImage(before)
	ourImage, _ := ours.Values["image"].(map[string]any)
	repo, _ := ourImage["repository"].(string)
	if pinned, ok := values["image"].(map[string]any); ok && (pinned["tag"] != "" && pinned["tag"] != nil || pinned["digest"] != "" && pinned["digest"] != nil) {
		if image != upstreamImage {
			t.Errorf("the values pin image %v: upstream's chart ran %s, ours runs %s", pinned, upstreamImage, image)
		} else {
			t.Logf("NOTE: the values pin image %v: after the upgrade the Deployment still runs %s, with our chart's args", pinned, image)
		}
	} else if repo == "" || !strings.HasPrefix(image, repo+":") && !strings.HasPrefix(image, repo+"@") {
		t.Errorf("after the upgrade the Deployment runs %s, not our chart's image %s", image, repo)
	} else {
		t.Logf("after the upgrade the Deployment runs %s (was %s)", image, upstreamImage)
	}

	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&live)
	testutil.Must(t, err)
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	return u
}

// checkSelectorsReachPods checks that the Service, PodDisruptionBudget and NetworkPolicy of
// the upgraded release select the pods of its Deployment as the API server holds it.
func checkSelectorsReachPods(t *testing.T, ctx context.Context, manifest, namespace string) {
	t.Helper()
	objs, err := render.Decode(manifest)
	testutil.Must(t, err)
	deployments := render.OfKind(objs, "Deployment")
	if len(deployments) != 1 {
		t.Fatalf("our chart rendered %d Deployments, want 1", len(deployments))
	}
	var d appsv1.Deployment
	testutil.Must(t, admin.Get(ctx, client.ObjectKey{Namespace: namespace, Name: deployments[0].GetName()}, &d))
	pods := labels.Set(d.Spec.Template.Labels)
	for _, o := range objs {
		var sel *metav1.LabelSelector
		switch o.GetKind() {
		case "Service":
			m, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector")
			sel = &metav1.LabelSelector{MatchLabels: m}
		case "PodDisruptionBudget", "NetworkPolicy":
			field := "selector"
			if o.GetKind() == "NetworkPolicy" {
				field = "podSelector"
			}
			m, _, _ := unstructured.NestedMap(o.Object, "spec", field)
			sel = &metav1.LabelSelector{}
			testutil.Must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(m, sel))
		default:
			continue
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			t.Fatalf("%s: %v", describeObject(o), err)
		}
		if s.Empty() || !s.Matches(pods) {
			t.Errorf("after the upgrade %s selects %q, which the pods of Deployment %s (%v) do not match", describeObject(o), s, d.Name, pods)
		}
	}
}

// removeReloaderConfigCRD deletes the ReloaderConfig CRD, if there, and waits until it is
// gone: each case starts on a cluster that has never had our chart.
func removeReloaderConfigCRD(t *testing.T, ctx context.Context) {
	t.Helper()
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(crdGVK)
	crd.SetName(reloaderConfigCRD)
	if err := admin.Delete(ctx, crd); apierrors.IsNotFound(err) {
		return
	} else if err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "CRD "+reloaderConfigCRD+" deleted", func() error { return nil }, func() error {
		err := admin.Get(ctx, client.ObjectKeyFromObject(crd), crd)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there")
	})
}

// waitReloaderConfigAPI checks that the upgrade installed the ReloaderConfig CRD and waits
// until it is established and served.
func waitReloaderConfigAPI(t *testing.T, ctx context.Context) {
	t.Helper()
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(crdGVK)
	err := admin.Get(ctx, client.ObjectKey{Name: reloaderConfigCRD}, crd)
	if apierrors.IsNotFound(err) {
		t.Fatalf("after the upgrade there is no CRD %s: the ReloaderConfig API is not installed (helm upgrade applies no chart's crds/ directory)", reloaderConfigCRD)
	}
	testutil.Must(t, err)
	t.Logf("CRD %s: annotations %v", reloaderConfigCRD, crd.GetAnnotations())
	eventually(t, ctx, "CRD "+reloaderConfigCRD+" established", func() error { return nil }, func() error {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return err
		}
		conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conditions {
			if c, ok := c.(map[string]any); ok && c["type"] == "Established" && c["status"] == "True" {
				return nil
			}
		}
		return fmt.Errorf("conditions %v", conditions)
	})
	eventually(t, ctx, "the ReloaderConfig API served", func() error { return nil }, func() error {
		return admin.List(ctx, &v1alpha1.ReloaderConfigList{})
	})
}
