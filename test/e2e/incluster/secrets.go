package incluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentcustody/custody/test/e2e/fixture"
)

// secrets creates the Secrets deploy/postgres's header asks the operator
// for (custody-database, custody-keys from `custody keys init`) and the
// two the overlay mounts (custody-provider-keys, custody-admin). It
// returns the admin token.
func (d *Deployment) secrets(ctx context.Context, opts Options) (string, error) {
	kube := d.cluster.CP.Kube
	for _, name := range []string{fixture.CustodyNS, fixture.Namespace} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("incluster: namespace %s: %w", name, err)
		}
	}
	// custody's serving certificate, as deploy/ expects it (Secret
	// custody-tls; the sandboxes' ConfigMap custody-ca), from the
	// harness CA: the names of its Service, for the sandboxes.
	tlsFiles, err := fixture.IssueServing(filepath.Join(opts.Dir, "tls"), "custody", "custody.custody-system", "custody.custody-system.svc.cluster.local")
	if err != nil {
		return "", fmt.Errorf("incluster: serving certificate: %w", err)
	}
	d.caFile = tlsFiles.CA
	tlsData := map[string][]byte{}
	for key, f := range map[string]string{"tls.crt": tlsFiles.Cert, "tls.key": tlsFiles.Key, "ca.crt": tlsFiles.CA} {
		if tlsData[key], err = os.ReadFile(f); err != nil {
			return "", err
		}
	}
	ca := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "custody-ca", Namespace: fixture.Namespace}, Data: map[string]string{"ca.crt": string(tlsData["ca.crt"])}}
	if _, err := kube.CoreV1().ConfigMaps(fixture.Namespace).Create(ctx, ca, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("incluster: configmap custody-ca: %w", err)
	}
	host, err := url.Parse(d.pgURL)
	if err != nil {
		return "", fmt.Errorf("incluster: PostgreSQL URL: %w", err)
	}
	inCluster := url.URL{Scheme: "postgres", User: host.User, Host: d.StoreAddr, Path: "/" + d.Database, RawQuery: "sslmode=disable"}
	keysDir := filepath.Join(opts.Dir, "keys")
	if out, code := d.CLI(ctx, "keys", "init", "--dir", keysDir); code != 0 {
		return "", fmt.Errorf("incluster: custody keys init: exit %d: %s", code, out)
	}
	keys := map[string][]byte{}
	ents, err := os.ReadDir(keysDir)
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		if b, err := os.ReadFile(filepath.Join(keysDir, e.Name())); err == nil && e.Type().IsRegular() {
			keys[e.Name()] = b
		}
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	admin := hex.EncodeToString(raw[:])
	for name, data := range map[string]map[string][]byte{
		"custody-database":      {"url": []byte(inCluster.String())},
		"custody-keys":          keys,
		"custody-provider-keys": {"anthropic": []byte(opts.ProviderKey)},
		"custody-admin":         {"token": []byte(admin)},
		"custody-tls":           tlsData,
		"custody-mcp": {
			"docs": []byte(d.mcpCredential),
			"upstreams.yaml": []byte("upstreams:\n  - name: docs\n    url: " + d.mcpURL +
				"\n    tenants: [agents]\n    credential: {file: /etc/custody/mcp/docs}\n"),
		},
	} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fixture.CustodyNS}, Data: data}
		if _, err := kube.CoreV1().Secrets(fixture.CustodyNS).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return "", fmt.Errorf("incluster: secret %s: %w", name, err)
		}
	}
	d.step("secrets: custody-database (-> %s), custody-keys (%d files from custody keys init), custody-provider-keys, custody-admin, custody-mcp (upstream docs and its credential), custody-tls (serving certificate for %s from the harness CA) and ConfigMap %s/custody-ca", inCluster.Redacted(), len(keys), fixture.ServerName, fixture.Namespace)
	return admin, nil
}
