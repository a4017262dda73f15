// Package node prepares and restores the host side of a real Kubernetes
// node for custody's end-to-end harness: the checks that say why a real
// node cannot run here, the Debian packages, a guard nftables table that
// keeps all traffic on this machine, the cni0 bridge and CNI config, and
// containerd with its own config as a child process. The kubelet,
// kube-proxy, the scheduler, CoreDNS and the policy agent are started by
// the harness on top of a [Host]; this package only records and undoes
// what they change on the host.
//
// # Contract
//
//   - [Check] never changes the machine. Its [Preflight] lists every reason
//     a real node cannot run (not Linux, not root, missing packages and
//     whether apt-get can install them, missing kernel features), each as
//     one line a user can act on.
//   - [Install] runs `apt-get update` and `apt-get install -y` for the
//     missing packages, with apt's progress on the given writer.
//   - [Up] first runs [Teardown], then writes the state file
//     ([DefaultStateDir]/state.json) BEFORE it changes anything: the boot
//     ID, the original values of the sysctls the kubelet and the CNI
//     bridge rewrite ([TrackedSysctls]), and the nft tables, ipsets and
//     links that already exist. Everything the node adds afterwards is
//     undone by comparing against that baseline: tables, ipsets and links
//     present at the baseline are never touched.
//   - [Teardown] is idempotent and safe on a clean machine (a no-op). It
//     runs first and last. It kills processes only by their pid files
//     (checked against the recorded start time, so a reused pid is never
//     hit) and shims only when their command line names this node's
//     containerd socket; it unmounts everything under the node's paths
//     before removing them, and refuses to remove a path that still has a
//     mount under it. If the state file is from an earlier boot, only the
//     on-disk paths are cleaned (the reboot reset the kernel state).
//   - All traffic stays on this machine: the guard table ([GuardTable])
//     drops every packet forwarded out of the default-route interface and
//     host output to the pod and service CIDRs through it. Up first proves
//     the ruleset on this kernel with [VerifyGuard] (throwaway network
//     namespaces, a canary that must get through without it, the same
//     probes that must not with it) and installs it before the bridge
//     exists. While the node is up it also drops other forwarding out of
//     that interface on this machine.
//   - The harness starts the kubelet, kube-proxy, the scheduler, the
//     policy agent and the API forwarder with [Host.Spawn], which records
//     a pid file; the processes outlive a crash of the harness on purpose
//     and are stopped by [Host.Down] or the next [Teardown].
//   - Tables, ipsets, netns and links created by anything else while the
//     node is up are deleted by Teardown as if the node had made them
//     (only the bridge and veth* links): one node per machine, and
//     nothing else changing netfilter meanwhile.
//
// Everything here needs Linux and root except [Check], the config
// renderers and the image builder in test/e2e/images; the manual command
// `go run ./test/e2e/cmd/node-check` exercises it end to end.
package node
