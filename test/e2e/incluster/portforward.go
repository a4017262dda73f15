package incluster

import (
	"context"
	"fmt"
	"io"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// Sandboxd's ports in the sandbox pod (the template's sandboxd container,
// see overlay.go).
const (
	SandboxdGRPCPort = 50051
	SandboxdRESTPort = 50052
)

// PortForward forwards local loopback ports to the pod's ports, as
// `kubectl port-forward` does (API server -> kubelet -> containerd, into
// the pod's network namespace, so no NetworkPolicy is involved). It
// returns the local addresses in the order of ports and a stop function.
func (d *Deployment) PortForward(ctx context.Context, pod *corev1.Pod, ports ...int) ([]string, func(), error) {
	cp := d.cluster.CP
	transport, upgrader, err := spdy.RoundTripperFor(cp.Config)
	if err != nil {
		return nil, nil, err
	}
	u := cp.Kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	var specs []string
	for _, p := range ports {
		specs = append(specs, fmt.Sprintf("0:%d", p))
	}
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, specs, stop, ready, io.Discard, io.Discard)
	if err != nil {
		return nil, nil, err
	}
	errc := make(chan error, 1)
	go func() { errc <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errc:
		return nil, nil, fmt.Errorf("incluster: port-forward to %s: %w", pod.Name, err)
	case <-ctx.Done():
		close(stop)
		return nil, nil, ctx.Err()
	}
	got, err := pf.GetPorts()
	if err != nil {
		close(stop)
		return nil, nil, err
	}
	addrs := make([]string, len(got))
	for i, p := range got {
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", p.Local)
	}
	return addrs, func() { close(stop) }, nil
}
