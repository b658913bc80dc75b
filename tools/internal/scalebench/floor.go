package scalebench

import (
	"context"
	"io"
	"os"
	"os/exec"

	"github.com/reloader-operator/reloader/internal/testenv"
)

// Floor runs bin (cmd/rssfloor, a bare controller-runtime manager that prints its own
// memory) on an empty local control plane, its output to out.
func Floor(ctx context.Context, bin string, out io.Writer) error {
	cluster, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		return err
	}
	defer cluster.Stop()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
	cmd.Stdout, cmd.Stderr = out, out
	return cmd.Run()
}
