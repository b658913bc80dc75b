package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
)

const auto = "reloader.stakater.com/auto"

func TestAutoReloadSetsEnvVarOnTheContainersThatUseTheConfigMap(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "app-config", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{auto: "true"}, podSpec("app-config"))
	create(t, cm, d)
	startReloader(t, ns)
	recorded(t, d)
	changes := templateChanges(t, d)

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })

	testutil.Eventually(t, "env var set on app", func() error {
		got := get(t, d)
		if _, ok := envOf(&got.Spec.Template, "app", "STAKATER_APP_CONFIG_CONFIGMAP"); !ok {
			return fmt.Errorf("no env var yet: %+v", got.Spec.Template.Spec.Containers[0].Env)
		}
		return nil
	})
	got := get(t, d)
	if _, ok := envOf(&got.Spec.Template, "sidecar", "STAKATER_APP_CONFIG_CONFIGMAP"); ok {
		t.Error("env var written to the sidecar, which does not use the ConfigMap")
	}
	handled(t, d, cm)
	if n := changes(); n != 1 {
		t.Errorf("%d template changes, want 1", n)
	}
	owners := map[string]bool{}
	for _, mf := range got.ManagedFields {
		owners[mf.Manager] = true
	}
	if !owners[controller.FieldOwner] {
		t.Errorf("no managed fields of %q: %v", controller.FieldOwner, owners)
	}
	eventuallyEvent(t, ns, "web", controller.ReasonReloaded)
}

func TestMetadataChangesAndIdenticalDataNeverReload(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v"})
	s := secret(ns, "sec", map[string]string{"p": "x"})
	tpl := podSpec("cfg")
	tpl.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "P", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "p"}}}}
	d := deployment(ns, "web", map[string]string{auto: "true"}, tpl)
	create(t, cm, s, d)
	startReloader(t, ns)
	recorded(t, d)
	before := get(t, d)

	update(t, cm, func(c *corev1.ConfigMap) {
		c.Labels = map[string]string{"team": "a"}
		c.Annotations = map[string]string{"note": "x"}
	})
	update(t, s, func(c *corev1.Secret) { c.Labels = map[string]string{"team": "a"} })
	update(t, cm, func(c *corev1.ConfigMap) { c.Data = map[string]string{"k": "v"} }) // identical re-apply
	update(t, s, func(c *corev1.Secret) { c.StringData = map[string]string{"p": "x"} })
	handled(t, d, cm, s)

	if err := unwritten(t, before); err != nil {
		t.Errorf("workload written: %v", err)
	}
}

func TestServiceAccountTokenSecretsAreIgnored(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	sa := &corev1.ServiceAccount{}
	sa.Namespace, sa.Name = ns, "bot"
	tok := secret(ns, "bot-token", map[string]string{"token": "a"})
	tok.Type = corev1.SecretTypeServiceAccountToken
	tok.Annotations = map[string]string{corev1.ServiceAccountNameKey: "bot"}
	tpl := podSpec()
	tpl.Spec.Volumes = []corev1.Volume{{Name: "t", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "bot-token"}}}}
	tpl.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "t", MountPath: "/t"}}
	d := deployment(ns, "web", map[string]string{auto: "true"}, tpl)
	create(t, sa, tok, d)
	startReloader(t, ns)
	handled(t, d)
	changes := templateChanges(t, d)

	update(t, tok, func(s *corev1.Secret) { s.Data["token"] = []byte("b") })
	handled(t, d) // the cache holds no token Secret: their updates never reach reloader
	if n := changes(); n != 0 {
		t.Errorf("service account token change reloaded the workload (%d template changes)", n)
	}
}

// A ConfigMap and a Secret changed 20 ms apart, or one ConfigMap written ten times in a row,
// must roll the workload once.
func TestChangesLandingTogetherRollOnce(t *testing.T) {
	// Alone: timed by reloader's windows.
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "0"})
	s := secret(ns, "sec", map[string]string{"p": "0"})
	tpl := podSpec("cfg")
	tpl.Spec.Containers[0].EnvFrom = append(tpl.Spec.Containers[0].EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}})
	d := deployment(ns, "web", map[string]string{auto: "true"}, tpl)
	create(t, cm, s, d)
	startReloader(t, ns, func(o *options.Options) { o.CoalesceWindow = 300 * time.Millisecond })
	recorded(t, d)
	changes := templateChanges(t, d)

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "1" })
	time.Sleep(20 * time.Millisecond) // the subject: two changes 20 ms apart
	update(t, s, func(c *corev1.Secret) { c.Data["p"] = []byte("1") })

	testutil.Eventually(t, "both env vars", func() error {
		got := get(t, d)
		_, a := envOf(&got.Spec.Template, "app", "STAKATER_CFG_CONFIGMAP")
		_, b := envOf(&got.Spec.Template, "app", "STAKATER_SEC_SECRET")
		if !a || !b {
			return fmt.Errorf("configmap env %v, secret env %v", a, b)
		}
		return nil
	})
	handled(t, d, cm, s)
	if n := changes(); n != 1 {
		t.Fatalf("ConfigMap + Secret: %d template changes, want exactly 1", n)
	}

	for i := 2; i < 12; i++ {
		update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = fmt.Sprint(i) })
	}
	testutil.Eventually(t, "last write applied", func() error {
		got := get(t, d)
		rec, _ := reload.ParseRecord(got.Annotations[reload.RecordAnnotation])
		v, _ := envOf(&got.Spec.Template, "app", "STAKATER_CFG_CONFIGMAP")
		if v == "" || rec["configmap/cfg"] != v {
			return fmt.Errorf("env %q, record %q", v, rec["configmap/cfg"])
		}
		if changes() < 2 {
			return fmt.Errorf("not reloaded yet")
		}
		return nil
	})
	handled(t, d, cm)
	if n := changes(); n != 2 {
		t.Errorf("ten writes: %d template changes, want exactly 1", n-1)
	}
}

func TestChangeWhileStoppedIsReloadedOnStart(t *testing.T) {
	t.Parallel()
	ns, cm, d, stop := autoDeployment(t)
	stop()

	changes := templateChanges(t, d)
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	startReloader(t, ns)
	testutil.Eventually(t, "reloaded after start", func() error {
		if n := changes(); n != 1 {
			return fmt.Errorf("%d template changes, want 1", n)
		}
		return nil
	})
}

func TestStartAndRestartOverUnchangedSourcesChangeNoTemplate(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	s := secret(ns, "sec", map[string]string{"p": "x"})
	tpl := podSpec("cfg")
	tpl.Spec.Containers[0].EnvFrom = append(tpl.Spec.Containers[0].EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}})
	d := deployment(ns, "web", map[string]string{auto: "true"}, tpl)
	sts := statefulSet(ns, "db", map[string]string{auto: "true"}, podSpec("cfg"))
	create(t, cm, s, d, sts)
	changes := []func() int{templateChanges(t, d), templateChanges(t, sts)}

	// First install: the record is written, the template is not.
	stop := startReloader(t, ns)
	recorded(t, d)
	recorded(t, sts)
	handled(t, d)
	handled(t, sts)
	stop()
	for i, n := range changes {
		if n() != 0 {
			t.Fatalf("install changed template %d: %d changes", i, n())
		}
	}
	before := []client.Object{get(t, d).DeepCopy(), get(t, sts).DeepCopy()}

	// Restart: nothing at all is written.
	startReloader(t, ns)
	handled(t, d)
	handled(t, sts)
	for _, b := range before {
		if err := unwritten(t, b); err != nil {
			t.Errorf("%s written on restart: %v", b.GetName(), err)
		}
	}
}

func TestStatefulSetsAndDaemonSetsReload(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	sts := statefulSet(ns, "db", map[string]string{auto: "true"}, podSpec("cfg"))
	ds := daemonSet(ns, "agent", map[string]string{auto: "true"}, podSpec("cfg"))
	create(t, cm, sts, ds)
	startReloader(t, ns)
	recorded(t, sts)
	recorded(t, ds)

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	testutil.Eventually(t, "both reloaded", func() error {
		s, d := get(t, sts), get(t, ds)
		_, a := envOf(&s.Spec.Template, "app", "STAKATER_CFG_CONFIGMAP")
		_, b := envOf(&d.Spec.Template, "app", "STAKATER_CFG_CONFIGMAP")
		if !a || !b {
			return fmt.Errorf("statefulset %v, daemonset %v", a, b)
		}
		return nil
	})
}

func statefulSet(ns, name string, annotations map[string]string, tpl corev1.PodTemplateSpec) *appsv1.StatefulSet {
	d := deployment(ns, name, annotations, tpl)
	return &appsv1.StatefulSet{ObjectMeta: d.ObjectMeta, Spec: appsv1.StatefulSetSpec{Selector: d.Spec.Selector, Template: tpl}}
}

func daemonSet(ns, name string, annotations map[string]string, tpl corev1.PodTemplateSpec) *appsv1.DaemonSet {
	d := deployment(ns, name, annotations, tpl)
	return &appsv1.DaemonSet{ObjectMeta: d.ObjectMeta, Spec: appsv1.DaemonSetSpec{Selector: d.Spec.Selector, Template: tpl}}
}

// A reload the API server refuses must say so in a ReloadFail Event and the metric, and be
// retried: once the refusal is lifted, the workload reloads.
func TestRefusedPatchIsAReloadFailAndIsRetried(t *testing.T) {
	t.Parallel()
	ns, cm, d, _ := autoDeployment(t)

	deny := denyReloaderWrites(t, ns)
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	eventuallyEvent(t, ns, "web", controller.ReasonReloadFail)
	deny()
	testutil.Eventually(t, "reloaded after the refusal is lifted", func() error {
		if _, ok := envOf(&get(t, d).Spec.Template, "app", "STAKATER_CFG_CONFIGMAP"); !ok {
			return fmt.Errorf("not yet")
		}
		return nil
	})
}

// denyReloaderWrites makes the API server refuse Deployment updates in ns until the returned
// func is called.
func denyReloaderWrites(t *testing.T, ns string) (lift func()) {
	t.Helper()
	probe := deployment(ns, "probe", nil, podSpec())
	create(t, probe)
	return deny(t, ns, admissionv1.Update, "apps", "deployments", func() error {
		p := get(t, probe)
		p.Labels = map[string]string{"probe": fmt.Sprint(time.Now().UnixNano())}
		return k8s.Update(context.Background(), p)
	})
}

// deny makes the API server refuse one operation on one resource in ns, with a
// ValidatingAdmissionPolicy, until the returned func is called. Policies take effect
// asynchronously: deny returns once probe, an attempt of that operation, fails.
//
// Dry runs are let through: reloader dry-runs a Job's replacement before deleting the Job,
// and the failures these tests inject are the ones that come after that check (a create
// refused between the dry run and the create). denyAll refuses dry runs too.
func deny(t *testing.T, ns string, op admissionv1.OperationType, group, resource string, probe func() error) (lift func()) {
	t.Helper()
	return denyWhere(t, ns, op, group, resource, "request.dryRun", probe)
}

// denyAll is deny, dry runs included.
func denyAll(t *testing.T, ns string, op admissionv1.OperationType, group, resource string, probe func() error) (lift func()) {
	t.Helper()
	return denyWhere(t, ns, op, group, resource, "false", probe)
}

// denyWhere refuses the operation unless allow, a CEL expression over the request, holds.
func denyWhere(t *testing.T, ns string, op admissionv1.OperationType, group, resource, allow string, probe func() error) (lift func()) {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("deny-%s-%s", resource, ns)
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{op},
					Rule:       admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}},
				},
			}}},
			Validations: []admissionv1.Validation{{Expression: allow, Message: "test: writes refused"}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns},
			}},
		},
	}
	create(t, policy, binding)
	testutil.Eventually(t, "policy in force", func() error {
		if probe() == nil {
			return fmt.Errorf("%s %s still allowed", op, resource)
		}
		return nil
	})
	lifted := false
	lift = func() {
		if !lifted {
			lifted = true
			_ = k8s.Delete(ctx, binding)
			_ = k8s.Delete(ctx, policy)
		}
	}
	t.Cleanup(lift)
	return lift
}
