// Package egress is custody's way out for a sandbox's own connections
// (issue 10, part 3): tools that fetch URLs or open connections (WebFetch,
// curl, pip, git) go through custody, which decides each destination and
// dials it itself.
//
// It holds [Proxy], an HTTP forward proxy (plain HTTP in absolute form and
// CONNECT tunnels, no TLS interception) that authenticates each request,
// has it decided, and dials it with [Dialer]; and [Dialer] itself, a
// TCP dialer that checks the address it is about to connect to — after
// DNS, for every address tried — against the built-in destination rules
// (policy.ClassifyIP), so a name that resolves to an internal address, or
// re-resolves to one between a check and the dial (DNS rebinding), is
// refused at dial time. The check runs in the socket's control hook,
// before connect(2): no packet is sent to a refused address.
//
// A CONNECT tunnel is decided on its target (host and port) only: the
// bytes it carries are not looked at, so a TLS ClientHello naming
// another server (SNI), or an HTTP Host inside the tunnel, reaches
// whatever the decided address serves under that name (a CDN's or a
// shared front end's other names: domain fronting). The record names the
// CONNECT host and the address dialled, not the name spoken inside.
//
// Not here: the Authenticate, Decide and Complete that `custody serve`
// gives the proxy (a custody key or a run's gateway token; a signer
// decision recorded in the caller's run), its listener and flags
// (internal/cli), and HTTP_PROXY/HTTPS_PROXY from `custody exec`.
//
// Dialer contract:
//   - Allowed: addresses of kind public (global unicast), and addresses
//     inside an operator's AllowPrefixes.
//   - Refused with a *[DeniedError]: every other kind (metadata, loopback,
//     private, link-local, CGNAT, ULA, multicast, unspecified), IPv4
//     addresses embedded in IPv6 classified by the IPv4 address they
//     carry. The error names the address, its kind and the rule id
//     (CUSTODY-NET-METADATA or CUSTODY-NET-INTERNAL), never a credential.
//   - Networks other than tcp, tcp4 and tcp6 are refused.
package egress
