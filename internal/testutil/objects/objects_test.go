package objects

import "testing"

func TestAutoDeploymentReadsItsConfigMapAndSelectsItsPods(t *testing.T) {
	d := AutoDeployment("ns", "web", "cfg")
	if d.Namespace != "ns" || d.Name != "web" || d.Annotations["reloader.stakater.com/auto"] != "true" {
		t.Errorf("metadata %+v", d.ObjectMeta)
	}
	if got := d.Spec.Selector.MatchLabels["app"]; got != "web" || d.Spec.Template.Labels["app"] != "web" {
		t.Errorf("selector %v, template labels %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
	c := d.Spec.Template.Spec.Containers
	if len(c) != 1 || c[0].Name != "app" || c[0].EnvFrom[0].ConfigMapRef.Name != "cfg" {
		t.Errorf("containers %+v", c)
	}
	// The shared annotation map is copied: a test changing one Deployment changes no other.
	d.Annotations["x"] = "y"
	if _, ok := Auto["x"]; ok {
		t.Error("Auto changed through a Deployment's annotations")
	}
}

func TestSecretEncodesData(t *testing.T) {
	if s := Secret("ns", "s", map[string]string{"k": "v"}); string(s.Data["k"]) != "v" {
		t.Errorf("data %v", s.Data)
	}
}
