package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/records"
)

// TestImageRunsAndReloads runs the host architecture's image as a container runtime would,
// without one: its layer extracted into a directory that becomes the process's root
// (chroot), the config's entrypoint, user and working directory, and nothing from this
// machine's filesystem. Against a real control plane it must reload a Deployment.
func TestImageRunsAndReloads(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to chroot into the extracted image and switch to its user")
	}
	r := built(t)
	img, ok := r.Images[runtime.GOARCH]
	if !ok {
		t.Skipf("no image built for this machine's architecture %s", runtime.GOARCH)
	}
	cf, err := img.ConfigFile()
	testutil.Must(t, err)
	rootfs := extract(t, img)
	uid, gid := parseUser(t, cf.Config.User)
	if uid == 0 || gid == 0 {
		t.Fatalf("image runs as %q: root", cf.Config.User)
	}
	if _, err := os.Lstat(filepath.Join(rootfs, "bin", "sh")); !os.IsNotExist(err) {
		t.Errorf("image has /bin/sh (%v)", err)
	}

	out, err := container(rootfs, cf, uid, gid, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("reloader --version in the image: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), testMeta.Version) || !strings.Contains(string(out), testMeta.Commit) {
		t.Errorf("--version printed %q, want the stamped version %s and commit %s", out, testMeta.Version, testMeta.Commit)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cluster, err := testenv.Start(ctx, testenv.Options{})
	testutil.Must(t, err)
	t.Cleanup(func() { _ = cluster.Stop() })
	// The image's user must be able to read the kubeconfig, as with a mounted Secret.
	kubeconfig, err := os.ReadFile(cluster.Kubeconfig)
	testutil.Must(t, err)
	writeOwned(t, filepath.Join(rootfs, "tmp", "kubeconfig"), kubeconfig, uid, gid)

	cl, err := client.New(cluster.Config, client.Options{})
	testutil.Must(t, err)
	const ns = "image-test"
	testutil.Must(t, cluster.EnsureNamespace(ctx, cl, ns))
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "app-config", Namespace: ns},
		Data:       map[string]string{"greeting": "hello"},
	}
	dep := autoDeployment(ns, "app", cm.Name)
	for _, obj := range []client.Object{cm, dep} {
		testutil.Must(t, cl.Create(ctx, obj))
	}

	metricsAddr, err := proc.FreeAddr()
	testutil.Must(t, err)
	logPath := filepath.Join(t.TempDir(), "reloader.log")
	startContainer(t, container(rootfs, cf, uid, gid, "--kubeconfig=/tmp/kubeconfig", "--metrics-addr="+metricsAddr), logPath, uid)

	testutil.Eventually(t, "reloader ready and the Deployment recorded", testutil.Cond(func() (bool, error) {
		if !ready(ctx, metricsAddr) {
			return false, nil
		}
		var d appsv1.Deployment
		if err := cl.Get(ctx, client.ObjectKeyFromObject(dep), &d); err != nil {
			return false, err
		}
		return records.Recorded(ctx, cl, &d) // on it, or in the ledger of first records
	}))

	cm.Data["greeting"] = "hello again"
	testutil.Must(t, cl.Update(ctx, cm))
	testutil.Eventually(t, "the Deployment's pod template reloaded", testutil.Cond(func() (bool, error) {
		var d appsv1.Deployment
		if err := cl.Get(ctx, client.ObjectKeyFromObject(dep), &d); err != nil {
			return false, err
		}
		for _, env := range d.Spec.Template.Spec.Containers[0].Env {
			if env.Name == "STAKATER_APP_CONFIG_CONFIGMAP" && env.Value != "" {
				t.Logf("pod template now has %s=%s", env.Name, env.Value)
				return true, nil
			}
		}
		return false, nil
	}))
}

// container is the command a runtime would run for the image config: the entrypoint and
// its args, plus args, as the config's user, rooted in the extracted layer, with the
// config's environment only.
func container(rootfs string, cf *v1.ConfigFile, uid, gid uint32, args ...string) *exec.Cmd {
	c := cf.Config
	argv := append(append(append([]string{}, c.Entrypoint...), c.Cmd...), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = c.WorkingDir
	if cmd.Dir == "" {
		cmd.Dir = "/"
	}
	cmd.Env = append([]string{}, c.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:     rootfs,
		Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}},
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
	}
	return cmd
}

// startContainer starts cmd with its output in logPath, stops it at the end of the test
// (showing the log if the test failed), and checks that it runs as uid.
func startContainer(t *testing.T, cmd *exec.Cmd, logPath string, uid uint32) {
	t.Helper()
	logFile, err := os.Create(logPath)
	testutil.Must(t, err)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the image's entrypoint: %v", err)
	}
	t.Cleanup(func() {
		proc.StopGroup(cmd, 10*time.Second)
		logFile.Close()
		if t.Failed() {
			log, _ := os.ReadFile(logPath)
			t.Logf("reloader log:\n%s", log)
		}
	})
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	testutil.Must(t, err)
	want := fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d\n", uid, uid, uid, uid)
	if !strings.Contains(string(status), want) {
		t.Errorf("the entrypoint does not run as uid %d:\n%s", uid, status)
	}
}

// extract unpacks the image's layer into a new directory, with the modes and owners of
// the tar, as a runtime lays out a container's root filesystem.
func extract(t *testing.T, img v1.Image) string {
	t.Helper()
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	testutil.Must(t, os.Mkdir(rootfs, 0o755))
	tr := tar.NewReader(bytes.NewReader(uncompressedLayer(t, img)))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return rootfs
		}
		testutil.Must(t, err)
		if !filepath.IsLocal(h.Name) {
			t.Fatalf("layer entry %q leaves the root", h.Name)
		}
		path := filepath.Join(rootfs, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.Mkdir(path, 0o700)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(path, data, 0o600)
			}
		default:
			t.Fatalf("layer entry %q of type %c", h.Name, h.Typeflag)
		}
		if err == nil {
			err = os.Lchown(path, h.Uid, h.Gid)
		}
		if err == nil {
			// After chown, which clears set-id bits; FileInfo keeps the sticky bit.
			err = os.Chmod(path, h.FileInfo().Mode())
		}
		if err != nil {
			t.Fatalf("extract %s: %v", h.Name, err)
		}
	}
}

// parseUser reads a numeric "uid:gid" User, the only form that needs no /etc/passwd.
func parseUser(t *testing.T, user string) (uid, gid uint32) {
	t.Helper()
	u, g, ok := strings.Cut(user, ":")
	uid64, err1 := strconv.ParseUint(u, 10, 32)
	gid64, err2 := strconv.ParseUint(g, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("image user %q is not numeric uid:gid", user)
	}
	return uint32(uid64), uint32(gid64)
}

func writeOwned(t *testing.T, path string, data []byte, uid, gid uint32) {
	t.Helper()
	testutil.Must(t, os.WriteFile(path, data, 0o600))
	testutil.Must(t, os.Chown(path, int(uid), int(gid)))
}

func autoDeployment(ns, name, configMap string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Annotations: map[string]string{"reloader.stakater.com/auto": "true"},
		},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "registry.invalid/app:1",
					EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: configMap},
					}}},
				}}},
			},
		},
	}
}

func ready(ctx context.Context, addr string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/ready", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
