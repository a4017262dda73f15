package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/agentcustody/custody/test/e2e/fixture"
)

// TestDeployTLS: deploy/ serves TLS from Secret custody-tls mounted where
// --tls-cert-file and --tls-key-file point, probes over HTTPS, and gives
// the sandbox an https CUSTODY_URL and custody's CA; the cert-manager
// component issues that Secret for custody's Service names.
func TestDeployTLS(t *testing.T) {
	objs := kustomizeBuild(t, ".")
	var dep appsv1.Deployment
	if err := json.Unmarshal(objs["Deployment/custody"], &dep); err != nil {
		t.Fatal(err)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--tls-cert-file=/etc/custody/tls/tls.crt") || !slices.Contains(c.Args, "--tls-key-file=/etc/custody/tls/tls.key") {
		t.Errorf("args %v: want the certificate and key from /etc/custody/tls", c.Args)
	}
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--plaintext") }) {
		t.Errorf("args %v: deploy/ serves some listener in plain HTTP", c.Args)
	}
	mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.MountPath == "/etc/custody/tls" && m.ReadOnly && m.SubPath == ""
	})
	secret := slices.ContainsFunc(dep.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == "custody-tls" })
	if !mounted || !secret {
		t.Errorf("Secret custody-tls mounted read-only at /etc/custody/tls (no subPath, so renewals arrive): mount %v, volume %v", mounted, secret)
	}
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Scheme != "HTTPS" {
			t.Errorf("probe %+v: want HTTPS", p)
		}
	}
	tmpl := string(objs["SandboxTemplate/agent"])
	for _, want := range []string{`"value":"https://custody.custody-system.svc:8865"`, `"name":"CUSTODY_CA_FILE","value":"/var/run/secrets/custody/ca.crt"`, `"configMap":{"items":[{"key":"ca.crt","path":"ca.crt"}],"name":"custody-ca"}`} {
		if !strings.Contains(tmpl, want) {
			t.Errorf("SandboxTemplate lacks %s", want)
		}
	}

	// An overlay with the cert-manager component, as a user writes it.
	root, err := fixture.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	base, _ := filepath.Rel(dir, filepath.Join(root, "deploy"))
	comp, _ := filepath.Rel(dir, filepath.Join(root, "deploy", "components", "cert-manager"))
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + base + "\ncomponents:\n  - " + comp + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build with components/cert-manager: %v", err)
	}
	var cert map[string]any
	for _, r := range m.Resources() {
		if r.GetKind() == "Certificate" && r.GetName() == "custody-tls" {
			b, _ := r.MarshalJSON()
			json.Unmarshal(b, &cert)
		}
	}
	spec, _ := cert["spec"].(map[string]any)
	if spec == nil || spec["secretName"] != "custody-tls" {
		t.Fatalf("Certificate custody-tls: %v, want secretName custody-tls", cert)
	}
	names, _ := json.Marshal(spec["dnsNames"])
	for _, n := range []string{`"custody.custody-system.svc"`, `"custody.custody-system.svc.cluster.local"`} {
		if !strings.Contains(string(names), n) {
			t.Errorf("Certificate dnsNames %s lack %s", names, n)
		}
	}
}
