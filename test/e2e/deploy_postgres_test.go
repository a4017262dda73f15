package e2e

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/agentcustody/custody/internal/cli"
	"github.com/agentcustody/custody/test/e2e/fixture"
)

// kustomizeBuild builds the kustomization in deploy/<dir> as `kubectl
// apply -k` would and returns its objects by kind/name.
func kustomizeBuild(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	root, err := fixture.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root, "deploy", dir))
	if err != nil {
		t.Fatalf("kustomize build deploy/%s: %v", dir, err)
	}
	out := map[string][]byte{}
	for _, r := range m.Resources() {
		b, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		out[r.GetKind()+"/"+r.GetName()] = b
	}
	return out
}

// TestDeployKustomizations builds deploy/ (one replica, SQLite) and
// deploy/postgres (the overlay for several replicas) with kustomize,
// has the API server validate the overlay's Deployment (a dry-run
// create), and checks it: two replicas, the database URL from a Secret,
// no PersistentVolumeClaim, the shared keys mounted read-only, and
// container args that `custody serve` accepts with CUSTODY_DATABASE_URL
// set.
func TestDeployKustomizations(t *testing.T) {
	ctx := testCtx(t)
	sqlite := kustomizeBuild(t, ".")
	if _, ok := sqlite["PersistentVolumeClaim/custody-data"]; !ok {
		t.Errorf("deploy/: no PersistentVolumeClaim for the SQLite store")
	}
	pg := kustomizeBuild(t, "postgres")
	if _, ok := pg["PersistentVolumeClaim/custody-data"]; ok {
		t.Errorf("deploy/postgres: still has the PersistentVolumeClaim")
	}
	for k := range sqlite {
		if _, ok := pg[k]; !ok && k != "PersistentVolumeClaim/custody-data" {
			t.Errorf("deploy/postgres lost %s", k)
		}
	}
	// Both mount the tenant policies from the generated ConfigMap.
	for name, objs := range map[string]map[string][]byte{"deploy/": sqlite, "deploy/postgres": pg} {
		var dep appsv1.Deployment
		if err := json.Unmarshal(objs["Deployment/custody"], &dep); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(dep.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.ConfigMap != nil })
		if i < 0 {
			t.Errorf("%s: no policies volume", name)
			continue
		}
		cm := dep.Spec.Template.Spec.Volumes[i].ConfigMap.Name
		if _, ok := objs["ConfigMap/"+cm]; !ok || !strings.HasPrefix(cm, "custody-policies-") {
			t.Errorf("%s: policies volume names ConfigMap %q, not the generated one", name, cm)
		}
		if !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--policy-dir=/etc/custody/policies") {
			t.Errorf("%s: custody serve is not given the mounted policies", name)
		}
	}
	var d appsv1.Deployment
	if err := json.Unmarshal(pg["Deployment/custody"], &d); err != nil {
		t.Fatal(err)
	}
	// The API server validates the whole object (dry run, in a namespace
	// of its own so the base Deployment the fixture applied is untouched).
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "custody-overlay-check"}}
	if _, err := env.CP.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.CP.Kube.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}) })
	check := d.DeepCopy()
	check.Namespace = ns.Name
	if _, err := env.CP.Kube.AppsV1().Deployments(ns.Name).Create(ctx, check, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("the API server refused the overlay's Deployment: %v", err)
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
