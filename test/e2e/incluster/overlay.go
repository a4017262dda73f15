package incluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"text/template"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// overlay is what the run-time kustomization adds to deploy/postgres.
type overlay struct {
	Base        string // deploy/postgres, relative to the overlay
	Mediated    string // deploy/components/mediated, relative to the overlay
	ProviderURL string
	SignerIdle  time.Duration
	CustodyName string
	CustodyTag  string
	AgentImage  string
}

var overlayTmpl = template.Must(template.New("k").Parse(`# Written by test/e2e/incluster: deploy/postgres with the mediated
# component (custody the sandbox's only way out) as a user applies it,
# with the local images and the demo's provider and admin listener.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - {{.Base}}
components:
  - {{.Mediated}}
images:
  - name: custody
    newName: {{.CustodyName}}
    newTag: {{.CustodyTag}}
patches:
  - target:
      group: apps
      version: v1
      kind: Deployment
      name: custody
    patch: |-
      - op: replace
        path: /spec/replicas
        value: 1
      - op: add
        path: /spec/template/spec/containers/0/imagePullPolicy
        value: Never
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --gateway-provider=anthropic={{.ProviderURL}}
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --gateway-keys-dir=/etc/custody/provider-keys
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --admin-listen=:8867
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --admin-token-file=/etc/custody/admin/token
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --signer-idle={{.SignerIdle}}
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --mcp-upstreams=/etc/custody/mcp/upstreams.yaml
      - op: add
        path: /spec/template/spec/volumes/-
        value: {name: mcp, secret: {secretName: custody-mcp, defaultMode: 0440}}
      - op: add
        path: /spec/template/spec/containers/0/volumeMounts/-
        value: {name: mcp, mountPath: /etc/custody/mcp, readOnly: true}
      - op: add
        path: /spec/template/spec/containers/0/ports/-
        value: {name: admin, containerPort: 8867}
      - op: add
        path: /spec/template/spec/volumes/-
        value: {name: provider-keys, secret: {secretName: custody-provider-keys, defaultMode: 0440}}
      - op: add
        path: /spec/template/spec/volumes/-
        value: {name: admin, secret: {secretName: custody-admin, defaultMode: 0440}}
      - op: add
        path: /spec/template/spec/containers/0/volumeMounts/-
        value: {name: provider-keys, mountPath: /etc/custody/provider-keys, readOnly: true}
      - op: add
        path: /spec/template/spec/containers/0/volumeMounts/-
        value: {name: admin, mountPath: /etc/custody/admin, readOnly: true}
  - target:
      group: extensions.agents.x-k8s.io
      kind: SandboxTemplate
      name: agent
    patch: |-
      - op: replace
        path: /spec/podTemplate/spec/containers/0/image
        value: {{.AgentImage}}
      - op: add
        path: /spec/podTemplate/spec/containers/0/imagePullPolicy
        value: Never
      - op: replace
        path: /spec/podTemplate/spec/containers/0/command
        value: ["/probe", "-exchange-every=1s"]
      - op: add
        path: /spec/podTemplate/spec/containers/-
        value:
          name: sandboxd
          image: {{.AgentImage}}
          imagePullPolicy: Never
          command: ["/sandboxd", "--grpc-port", "50051", "--rest-port", "50052", "--root-dir", "/workspace", "--shutdown-timeout", "2s"]
          volumeMounts:
            - {name: workspace, mountPath: /workspace}
            - {name: custody-ca, mountPath: /var/run/secrets/custody-ca, readOnly: true}
      - op: add
        path: /spec/podTemplate/spec/volumes/-
        value: {name: workspace, emptyDir: {}}
      - op: add
        path: /spec/podTemplate/spec/volumes/-
        value: {name: custody-ca, configMap: {name: custody-ca}}
`))

// build writes the overlay into dir/overlay and returns its kustomize
// build, in kustomize's order (namespaces first).
func build(root, dir string, o overlay) ([]*unstructured.Unstructured, error) {
	odir := filepath.Join(dir, "overlay")
	if err := os.MkdirAll(odir, 0o755); err != nil {
		return nil, err
	}
	base, err := filepath.Rel(odir, filepath.Join(root, "deploy", "postgres"))
	if err != nil {
		return nil, err
	}
	o.Base = base
	if o.Mediated, err = filepath.Rel(odir, filepath.Join(root, "deploy", "components", "mediated")); err != nil {
		return nil, err
	}
	o.CustodyName, o.CustodyTag = splitRef(CustodyImage)
	o.AgentImage = AgentImage
	var b bytes.Buffer
	if err := overlayTmpl.Execute(&b, o); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(odir, "kustomization.yaml"), b.Bytes(), 0o644); err != nil {
		return nil, err
	}
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsNone // the overlay lives outside the repository
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), odir)
	if err != nil {
		return nil, fmt.Errorf("incluster: kustomize build %s: %w", odir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range m.Resources() {
		obj, err := r.Map()
		if err != nil {
			return nil, err
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
	return out, nil
}

// splitRef splits "host/name:tag" at the last colon.
func splitRef(ref string) (name, tag string) {
	for i := len(ref) - 1; i >= 0; i-- {
		if ref[i] == ':' {
			return ref[:i], ref[i+1:]
		}
	}
	return ref, ""
}
