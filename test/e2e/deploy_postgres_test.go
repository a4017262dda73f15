package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/agentcustody/custody/internal/cli"
	"github.com/agentcustody/custody/test/e2e/fixture"
)

// TestDeployPostgresOverlay applies deploy/postgres's RFC 6902 operations
// to deploy/custody.yaml's Deployment through the API server (dry run:
// the real validation, nothing changed), then checks the result: two
// replicas, the database URL from a Secret, no PersistentVolumeClaim, the
// shared keys mounted, and container args that `custody serve` accepts
// with CUSTODY_DATABASE_URL set.
func TestDeployPostgresOverlay(t *testing.T) {
	ctx := testCtx(t)
	root, err := fixture.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "postgres", "deployment-patch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ops, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	d, err := env.CP.Kube.AppsV1().Deployments("custody-system").Patch(ctx, "custody", types.JSONPatchType, ops,
		metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatalf("the API server refused the overlay's patch: %v", err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2", d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	for _, v := range pod.Volumes {
		if v.PersistentVolumeClaim != nil {
			t.Errorf("volume %s still uses a PersistentVolumeClaim", v.Name)
		}
	}
	if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == "custody-keys" }) {
		t.Errorf("volumes %+v: want the custody-keys Secret", pod.Volumes)
	}
	c := pod.Containers[0]
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "CUSTODY_DATABASE_URL" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "custody-database"
	}) {
		t.Errorf("env %+v: want CUSTODY_DATABASE_URL from Secret custody-database", c.Env)
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "keys" && m.ReadOnly }) {
		t.Errorf("volume mounts %+v: want the keys read-only", c.VolumeMounts)
	}

	if c.Args[0] != "serve" {
		t.Fatalf("args %v: want serve first", c.Args)
	}
	cfg := cli.Defaults()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := fs.Parse(c.Args[1:]); err != nil {
		t.Fatalf("custody serve refuses the overlay's args %v: %v", c.Args, err)
	}
	cfg.DatabaseURL = "postgres://custody@db:5432/custody" // what the Secret gives
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the overlay's configuration is invalid: %v", err)
	}
	if !strings.HasPrefix(cfg.SignerKeyFile, "/etc/custody/keys/") || !strings.HasPrefix(cfg.GatewaySigningKey, "/etc/custody/keys/") {
		t.Errorf("key files %q, %q: want both from the mounted Secret", cfg.SignerKeyFile, cfg.GatewaySigningKey)
	}
}
