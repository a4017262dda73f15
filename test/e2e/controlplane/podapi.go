package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/agentcustody/custody/internal/tcpfwd"
)

// podAPI forwards pods' connections to the loopback-only API server.
type podAPI struct {
	ln net.Listener
	// only is the one source address served once set ([ControlPlane.OnlyPodAPIFrom]).
	only atomic.Pointer[net.IP]
}

// ServePodAPI gives pods on a real node the API server, which listens on
// loopback only. It forwards every TCP connection accepted on addr
// (host:port on the node's bridge, e.g. "10.244.0.1:6443"; the bridge
// must exist) to the API server, byte for byte (TLS is end to end), and
// points Service default/kubernetes at addr with an EndpointSlice (the
// API server runs with --endpoint-reconciler-type=none, so nothing else
// does). In-cluster clients then reach the API as 10.0.0.1:443 once
// kube-proxy has programmed the Service; the serving certificate holds
// that address. The forwarder stops with [ControlPlane.Stop]. Errors: addr
// cannot be listened on, or the EndpointSlice cannot be written.
func (cp *ControlPlane) ServePodAPI(ctx context.Context, addr string) error {
	if cp.podAPI != nil {
		return errors.New("controlplane: ServePodAPI called twice")
	}
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("controlplane: pod API address: %w", err)
	}
	port, err := strconv.Atoi(portText)
	ip := net.ParseIP(host)
	if err != nil || ip == nil || ip.To4() == nil || ip.IsLoopback() {
		return fmt.Errorf("controlplane: pod API address %q: want an IPv4 address off loopback and a port", addr)
	}
	u, err := url.Parse(cp.Server)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("controlplane: pod API: %w", err)
	}
	p := &podAPI{ln: ln}
	cp.podAPI = p
	ForwardTCPFrom(ln, u.Host, func(ip net.IP) bool {
		only := p.only.Load()
		return only == nil || only.Equal(ip)
	})
	return cp.SetKubernetesEndpoint(ctx, ip.String(), int32(port))
}

// OnlyPodAPIFrom makes the pod API forwarder serve connections from ip
// only (the pod that forwards for all others, see realnode), closing any
// other at once: the forwarder listens on the node's bridge address,
// which every pod reaches past the NetworkPolicy agent. No-op before
// ServePodAPI.
func (cp *ControlPlane) OnlyPodAPIFrom(ip net.IP) {
	if cp.podAPI != nil {
		cp.podAPI.only.Store(&ip)
	}
}

// SetKubernetesEndpoint points Service default/kubernetes at ip:port with
// the EndpointSlice "kubernetes" (created, or replaced). Pods then reach
// the API server as 10.0.0.1:443 once kube-proxy has programmed it.
func (cp *ControlPlane) SetKubernetesEndpoint(ctx context.Context, ip string, port int32) error {
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: "kubernetes", Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes", discoveryv1.LabelManagedBy: "custody-e2e"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	slices := cp.Kube.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault)
	_, err := slices.Create(ctx, slice, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		old, gerr := slices.Get(ctx, slice.Name, metav1.GetOptions{})
		if gerr != nil {
			return fmt.Errorf("controlplane: pod API endpoint slice: %w", gerr)
		}
		slice.ResourceVersion = old.ResourceVersion
		_, err = slices.Update(ctx, slice, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("controlplane: pod API endpoint slice: %w", err)
	}
	return nil
}

// ForwardTCPFrom accepts TCP connections on ln and copies each, byte for
// byte in both directions (tcpfwd.Pipe), to target (host:port), until ln
// is closed; a connection whose source address allow refuses is closed at
// once (allow nil: all are served). It returns at once. A
// forwarder on the bridge is reachable from every pod, past the
// NetworkPolicy agent (traffic to the node's own address is not
// forwarded traffic), so one that should serve a single forwarder pod
// must say so.
func ForwardTCPFrom(ln net.Listener, target string, allow func(net.IP) bool) {
	go func() { _ = tcpfwd.Serve(ln, target, allow) }()
}

// stop closes the listener; connections in flight end with the API
// server or the client.
func (p *podAPI) stop() { _ = p.ln.Close() }
