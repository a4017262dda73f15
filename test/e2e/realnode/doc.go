// Package realnode turns the host side (test/e2e/node) and the local
// control plane (test/e2e/controlplane) into one Ready node that runs real
// pods and enforces NetworkPolicy. It is opt-in: nothing in `make test` or
// `make demo` uses it yet; `go run ./test/e2e/cmd/realnode-check` runs it
// by hand (Linux, root).
//
// # Contract
//
// [Start] does, in order, and on any error undoes what it did:
//
//  1. builds the pause and netprobe images ([PauseImage], [NetprobeImage]) from this module
//     (test/e2e/cmd/pause, test/e2e/cmd/netprobe) with [images.GoBuild];
//  2. [node.Up] (which runs the idempotent [node.Teardown] first): guard
//     table, cni0 10.244.0.1/24, containerd, the pause image;
//  3. controlplane.Start with RealNodes, then ServePodAPI on
//     [node.BridgeIP]:6443 (pods reach the loopback-only API server as
//     10.0.0.1:443);
//  4. controlplane.BuildNode (cached binaries), and these host processes
//     through [node.Host.Spawn], each with a pid file:
//     the kubelet (config from [KubeletConfig]; listens on 127.0.0.1:10250,
//     healthz 127.0.0.1:10248), kube-scheduler (127.0.0.1:10259, no leader
//     election), kube-proxy (nftables, [KubeProxyConfig]; metrics
//     127.0.0.1:10249, healthz 127.0.0.1:10256). The control plane's ports
//     are ephemeral (>= 32768), so these fixed ports do not collide;
//  5. waits until Node [NodeName] is Ready;
//  6. CoreDNS as a pod (image built from the BuildNode binary, imported),
//     ServiceAccount, RBAC, the Corefile ConfigMap (kubernetes plugin for
//     cluster.local, no forward: nothing leaves the machine) and Service
//     kube-dns at [DNSServiceIP]; then a netprobe pod polls a lookup of
//     kubernetes.default.svc.cluster.local through its resolv.conf (the
//     Service IP) until it answers (a Ready CoreDNS pod does not mean
//     kube-proxy has programmed the Service yet; the host cannot ask,
//     the guard table drops host output to the service CIDR);
//  7. the policy agent kube-network-policies (--kubeconfig, --nfqueue-compat,
//     --disable-nri, metrics 127.0.0.1:9080), stopped with SIGINT, the only
//     signal on which it removes its nft table.
//
// [Cluster.Stop] deletes every pod through the API with a 1 s grace period
// and waits up to 30 s for the kubelet to confirm (so CNI DEL and the
// unmounts run), then [node.Host.Down] (policy agent first, then the rest
// by pid file, shims, tables, sysctls, paths), then stops the control
// plane. A crashed run leaves the node processes running on purpose (the
// control plane dies with its parent); the next Start's [node.Up] tears
// them down first. All traffic stays on this machine: every address used is
// loopback, cni0's 10.244.0.0/24 or a Service IP kube-proxy DNATs there.
package realnode
