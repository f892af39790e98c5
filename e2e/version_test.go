package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
)

// Both binaries, as built, say which version they are, and the same one: the version the
// build stamped, never "dev".
func TestTheBinariesSayWhichVersionTheyAre(t *testing.T) {
	f := features.New("versions").
		Assess("vidra --version and kubectl vidra version --client agree", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			operator, err := fleetenv.OperatorBinary(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out, err := exec.CommandContext(ctx, operator, "--version").Output()
			if err != nil {
				t.Fatalf("vidra --version: %v", err)
			}
			v, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "vidra ")
			if !ok || v == "" || v == "dev" {
				t.Fatalf("vidra --version printed %q", out)
			}
			if plugin := pluginWith(ctx, t, "version", "--client"); plugin != "client: "+v+"\n" {
				t.Errorf("kubectl vidra version --client printed %q, the operator says %s", plugin, v)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}
