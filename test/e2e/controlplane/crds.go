package controlplane

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// AgentSandboxModule is the module whose k8s/crds are installed.
const AgentSandboxModule = "sigs.k8s.io/agent-sandbox"

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRDs applies every CRD in the agent-sandbox module's k8s/crds and
// waits until each is Established. The CRDs ask for webhook conversion,
// served by the controller's webhook, which the harness runs disabled; the
// conversion strategy is set to None, under which the API server converts
// between v1alpha1 and v1beta1 by rewriting apiVersion only. Owner
// references written as v1alpha1 are therefore still exercised.
func (cp *ControlPlane) installCRDs(ctx context.Context) error {
	dir, err := ModuleDir(ctx, AgentSandboxModule)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(dir, "k8s", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("controlplane: no CRDs in %s/k8s/crds", dir)
	}
	var names []string
	for _, f := range files {
		objs, err := decodeYAML(f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				continue
			}
			if err := unstructured.SetNestedField(o.Object, map[string]any{"strategy": "None"}, "spec", "conversion"); err != nil {
				return err
			}
			_, err := cp.Dynamic.Resource(crdGVR).Create(ctx, o, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("controlplane: create CRD %s: %w", o.GetName(), err)
			}
			names = append(names, o.GetName())
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, name := range names {
		for {
			crd, err := cp.Dynamic.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err == nil && established(crd) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("controlplane: CRD %s not established: %v", name, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// decodeYAML reads every document of a multi-document YAML file.
func decodeYAML(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return DecodeYAML(data)
}

// DecodeYAML decodes every non-empty document of a multi-document YAML
// stream into unstructured objects.
func DecodeYAML(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if err == io.EOF {
				return out, nil
			}
			return nil, fmt.Errorf("controlplane: decode YAML: %w", err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}
