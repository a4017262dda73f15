// Package incluster runs custody inside a real-node cluster
// (test/e2e/realnode) the way deploy/ says a user does, and the peers the
// network checks need:
//
//   - Images without Docker (test/e2e/images): custody.local/custody:dev
//     (cmd/custody), custody.local/agent:v1 (test/e2e/cmd/probe, the
//     sandbox's agent process) and custody.local/provider-standin:v1,
//     imported into the node's containerd.
//   - deploy/postgres built with kustomize (krusty, as `kubectl apply -k`
//     does) through an overlay written at run time: the images rewritten
//     to the local tags with imagePullPolicy Never, one replica (the
//     harness talks to one pod), the demo's provider, provider key, admin
//     listener and signer idle time as extra args and Secret mounts, and
//     the SandboxTemplate's busybox replaced by the agent image running
//     `probe -exchange-every=1s` against the projected token at the path
//     the template mounts. Everything else (ServiceAccounts, RBAC, the
//     Service, the policies ConfigMap, the sandbox's NetworkPolicy) is as
//     shipped.
//   - The store: a database of its own (custody_e2e_<hex>) on the
//     machine's PostgreSQL ($CUSTODY_TEST_POSTGRES_URL, default
//     postgres://postgres@127.0.0.1:5432/test), reached by pods as Service
//     custody-store/postgres:5432, whose EndpointSlice points at a TCP
//     forwarder on the bridge address ([node.BridgeIP]:15432 ->
//     127.0.0.1:5432). The database is dropped by [Deployment.Stop].
//   - The provider stand-in as a pod of its own (namespace
//     provider-standin, Service provider:8080), and a plain server pod in
//     namespace "other" (netprobe serve :8080), so the sandbox's must-fail
//     probes have real targets that a canary can reach.
//
// The harness reaches custody's pod by its IP on cni0 (the guard table
// keeps the host off the Service CIDR). Nothing leaves the machine.
package incluster
