package policy

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// Kind is the class of a network destination. The values are the strings
// CEL rules see in dest.kind.
type Kind string

const (
	KindPublic          Kind = "public"           // a global unicast address or a public DNS name
	KindMetadata        Kind = "metadata"         // a cloud instance-metadata endpoint
	KindLoopback        Kind = "loopback"         // 127.0.0.0/8, ::1, localhost, *.localhost
	KindPrivate         Kind = "private"          // RFC 1918 and other special-purpose, non-global ranges
	KindLinkLocal       Kind = "link_local"       // 169.254.0.0/16, fe80::/10
	KindCGNAT           Kind = "cgnat"            // 100.64.0.0/10 (RFC 6598)
	KindULA             Kind = "ula"              // fc00::/7 (RFC 4193)
	KindClusterInternal Kind = "cluster_internal" // *.svc, *.cluster.local, *.internal, single-label names, …
	KindMulticast       Kind = "multicast"        // 224.0.0.0/4, ff00::/8
	KindUnspecified     Kind = "unspecified"      // 0.0.0.0/8, ::
	KindAmbiguous       Kind = "ambiguous"        // two reasonable parsers could disagree
	KindNone            Kind = "none"             // not a network destination (e.g. mailto:, file:///)
)

// Internal reports whether k is a destination the built-in rule
// CUSTODY-NET-INTERNAL denies. Metadata endpoints are internal too.
func (k Kind) Internal() bool {
	switch k {
	case KindMetadata, KindLoopback, KindPrivate, KindLinkLocal, KindCGNAT, KindULA,
		KindClusterInternal, KindMulticast, KindUnspecified:
		return true
	}
	return false
}

// severity orders kinds for choosing the primary destination of a call.
func (k Kind) severity() int {
	switch {
	case k == KindMetadata:
		return 4
	case k.Internal():
		return 3
	case k == KindAmbiguous:
		return 2
	case k == KindPublic:
		return 1
	}
	return 0
}

// Destination is a classified network destination.
type Destination struct {
	// Input is the string that was classified (a URL, host or host:port).
	Input string `json:"input"`
	// Host is the normalised host: a lower-case ASCII DNS name without the
	// trailing dot, or the canonical text of the IP address the input
	// denotes in whatever notation it was written. Empty when Kind is
	// ambiguous or none.
	Host string `json:"host,omitempty"`
	// IP is the address that was classified: the literal, or the IPv4
	// address embedded in an IPv4-mapped, -compatible, NAT64, 6to4 or
	// Teredo address. Invalid for a DNS name unless it was resolved to an
	// internal address.
	IP netip.Addr `json:"ip,omitzero"`
	// Kind is the class.
	Kind Kind `json:"kind"`
	// Reason says why the input is ambiguous or which special name or
	// range it is in. Safe to log.
	Reason string `json:"reason,omitempty"`
	// InText is set for a destination found inside free text (a shell
	// command, a prompt) rather than as a URL- or host-valued argument;
	// only metadata endpoints are taken from free text.
	InText bool `json:"in_text,omitempty"`
}

func ambiguous(reason string) Destination { return Destination{Kind: KindAmbiguous, Reason: reason} }

// celValue is the map CEL sees as dest.
func (d *Destination) celValue() map[string]string {
	ip := ""
	if d.IP.IsValid() {
		ip = d.IP.String()
	}
	return map[string]string{"host": d.Host, "ip": ip, "kind": string(d.Kind)}
}

// specialSchemes are the schemes for which browsers (WHATWG URL) and Go's
// net/url disagree on "scheme:host" and "scheme:/host", and an empty host
// is an error.
var specialSchemes = map[string]bool{"http": true, "https": true, "ws": true, "wss": true, "ftp": true, "": true}

// ClassifyURL classifies the destination of a URL, a scheme-relative URL
// ("//host/path"), or a bare "host", "host:port", "[v6]:port" or
// "host/path". See the package documentation for the rules.
func ClassifyURL(raw string) Destination {
	d := classifyURL(raw)
	d.Input = raw
	return d
}

func classifyURL(raw string) Destination {
	if raw == "" {
		return ambiguous("empty URL")
	}
	if len(raw) > maxURLLen {
		return ambiguous("URL too long")
	}
	if !utf8.ValidString(raw) {
		return ambiguous("invalid UTF-8")
	}
	for _, r := range raw {
		if r < 0x20 || r == 0x7f || unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) {
			return ambiguous("whitespace or control character")
		}
	}
	pre := raw
	if i := strings.IndexAny(pre, "?#"); i >= 0 {
		pre = pre[:i]
	}
	if strings.Contains(pre, `\`) {
		return ambiguous("backslash before the path ends")
	}

	scheme, rest, hasScheme := "", raw, false
	if i := strings.IndexByte(raw, ':'); i > 0 && validScheme(raw[:i]) {
		s, after := strings.ToLower(raw[:i]), raw[i+1:]
		switch {
		case strings.HasPrefix(after, "//"):
			scheme, rest, hasScheme = s, after[2:], true
		case strings.Contains(s, ".") || startsWithPort(after):
			// "localhost:8080", "metadata.google.internal:80/x": host:port.
		case specialSchemes[s]:
			return ambiguous("special scheme without //")
		default:
			return Destination{Kind: KindNone, Reason: "opaque URI"}
		}
	} else if strings.HasPrefix(raw, "//") {
		rest = raw[2:]
	}

	authority := rest
	if i := strings.IndexAny(authority, "/?#"); i >= 0 {
		authority = authority[:i]
	}
	hostport := authority
	switch n := strings.Count(authority, "@"); {
	case n > 1:
		return ambiguous("more than one @ in authority")
	case n == 1:
		hostport = authority[strings.IndexByte(authority, '@')+1:]
	}

	var host, port string
	hasPort := false
	if strings.HasPrefix(hostport, "[") {
		j := strings.IndexByte(hostport, ']')
		if j < 0 {
			return ambiguous("unclosed [")
		}
		host, port = hostport[:j+1], hostport[j+1:]
		if port != "" {
			if port[0] != ':' {
				return ambiguous("text after ]")
			}
			port, hasPort = port[1:], true
		}
	} else {
		switch strings.Count(hostport, ":") {
		case 0:
			host = hostport
		case 1:
			i := strings.IndexByte(hostport, ':')
			host, port, hasPort = hostport[:i], hostport[i+1:], true
		default:
			return ambiguous("unbracketed IPv6 address or several ports")
		}
	}
	if hasPort && port != "" {
		if _, err := strconv.ParseUint(port, 10, 16); err != nil || strings.IndexFunc(port, notDigit) >= 0 {
			return ambiguous("bad port")
		}
	}
	if host == "" {
		if specialSchemes[scheme] {
			return ambiguous("empty host")
		}
		return Destination{Kind: KindNone, Reason: "no host"}
	}
	if strings.Contains(host, "%") {
		dec, ok := percentDecode(host)
		if !ok {
			return ambiguous("bad percent-encoding in host")
		}
		if !strings.HasPrefix(host, "[") && strings.Contains(dec, "%") {
			return ambiguous("percent-encoding in host decodes to %")
		}
		host = dec
	}
	d := ClassifyHost(host)
	if d.Kind != KindPublic {
		return d
	}
	// Differential check: Go's net/url must see the same host.
	u := raw
	if !hasScheme {
		if strings.HasPrefix(raw, "//") {
			u = "http:" + raw
		} else {
			u = "http://" + raw
		}
	}
	pu, err := url.Parse(u)
	if err != nil {
		return ambiguous("net/url rejects the URL")
	}
	gh := pu.Hostname()
	if strings.Contains(gh, ":") {
		gh = "[" + gh + "]"
	}
	if g := ClassifyHost(gh); g.Kind != d.Kind || g.Host != d.Host {
		return ambiguous("net/url reads another host")
	}
	return d
}

const maxURLLen = 8192

func notDigit(r rune) bool { return r < '0' || r > '9' }

func startsWithPort(s string) bool {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i > 0 && (i == len(s) || strings.IndexByte("/?#", s[i]) >= 0)
}

func validScheme(s string) bool {
	if s == "" || !isLetter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isLetter(c) && !(c >= '0' && c <= '9') && c != '+' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func percentDecode(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), true
}

// ClassifyHost classifies a host as it appears in a URL after
// percent-decoding: a DNS name, an IPv4 address in any notation inet_aton
// or the WHATWG URL parser accepts, an IPv6 address (bracketed or not,
// with an optional zone).
func ClassifyHost(host string) Destination {
	d := classifyHost(host)
	d.Input = host
	return d
}

func classifyHost(h string) Destination {
	if h == "" {
		return ambiguous("empty host")
	}
	if len(h) > 2*maxNameLen {
		return ambiguous("host too long")
	}
	if strings.HasPrefix(h, "[") || strings.Contains(h, ":") {
		in := h
		if strings.HasPrefix(h, "[") {
			if !strings.HasSuffix(h, "]") {
				return ambiguous("unclosed [")
			}
			in = h[1 : len(h)-1]
		}
		a, err := netip.ParseAddr(in)
		if err != nil || !a.Is6() {
			return ambiguous("bad IPv6 literal")
		}
		d := classifyIP(a)
		if a.Zone() != "" && d.Kind == KindPublic {
			return ambiguous("zone on a global address")
		}
		return d
	}
	for i := 0; i < len(h); i++ {
		if h[i] >= utf8.RuneSelf {
			a, err := idna.Lookup.ToASCII(h)
			if err != nil {
				return ambiguous("IDNA mapping fails")
			}
			h = a
			break
		}
	}
	h = strings.ToLower(h)
	h = strings.TrimSuffix(h, ".")
	if h == "" || strings.HasPrefix(h, ".") || strings.HasSuffix(h, ".") || strings.Contains(h, "..") {
		return ambiguous("empty label")
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z') && !(c >= '0' && c <= '9') && c != '-' && c != '_' && c != '.' {
			return ambiguous("character not allowed in a host name")
		}
	}
	last := h[strings.LastIndexByte(h, '.')+1:]
	if numericLabel(last) {
		a, reason := parseIPv4Loose(h)
		if !a.IsValid() {
			return ambiguous(reason)
		}
		return classifyIP(a)
	}
	if len(h) > maxNameLen {
		return ambiguous("name too long")
	}
	for _, l := range strings.Split(h, ".") {
		if len(l) > 63 {
			return ambiguous("label too long")
		}
	}
	d := Destination{Host: h, Kind: KindPublic}
	switch {
	case metadataNames[h]:
		d.Kind, d.Reason = KindMetadata, "metadata name"
	case h == "localhost" || strings.HasSuffix(h, ".localhost"):
		d.Kind, d.Reason = KindLoopback, "localhost"
	case !strings.Contains(h, "."):
		d.Kind, d.Reason = KindClusterInternal, "single-label name"
	case loopbackNames[h] || hasSuffixIn(h, loopbackNames):
		d.Kind, d.Reason = KindLoopback, "name that resolves to loopback"
	default:
		if a, ok := embeddedIPv4(h); ok {
			if e := classifyIP(a); e.Kind != KindPublic {
				e.Host, e.Reason = h, "name embeds "+a.String()+" (wildcard DNS resolves it there)"
				return e
			}
		}
		for _, s := range internalSuffixes {
			if strings.HasSuffix(h, s) {
				d.Kind, d.Reason = KindClusterInternal, "internal suffix "+s
				break
			}
		}
	}
	return d
}

const maxNameLen = 253

// metadataNames are DNS names of cloud instance-metadata services.
var metadataNames = map[string]bool{
	"metadata":                     true, // GCE search-domain short name, many images
	"metadata.google.internal":     true, // GCP
	"metadata.goog":                true, // GCP
	"metadata.azure.com":           true, // Azure-style
	"metadata.azure.internal":      true,
	"instance-data":                true, // AWS
	"instance-data.ec2.internal":   true, // AWS
	"metadata.ec2.internal":        true,
	"metadata.tencentyun.com":      true, // Tencent Cloud
	"metadata.packet.net":          true, // Equinix Metal
	"metadata.platformequinix.com": true, // Equinix Metal
	"169.254.169.254.nip.io":       true, // wildcard-DNS rebinding names
	"169-254-169-254.nip.io":       true,
	"169.254.169.254.sslip.io":     true,
	"169-254-169-254.sslip.io":     true,
}

// loopbackNames are public names (and, with a dot before, their
// subdomains) that resolve to 127.0.0.1.
var loopbackNames = map[string]bool{"localtest.me": true, "lvh.me": true, "vcap.me": true, "lacolhost.com": true}

func hasSuffixIn(h string, names map[string]bool) bool {
	for n, on := range names {
		if on && strings.HasSuffix(h, "."+n) {
			return true
		}
	}
	return false
}

// embeddedIPv4 finds an IPv4 address written into a name the way
// wildcard-DNS services (nip.io, sslip.io, xip.io and their kind) resolve
// it: four consecutive decimal labels (10.0.0.1.nip.io), a label with four
// dash-separated parts (10-0-0-1.sslip.io, app-10-0-0-1.nip.io), or, under
// the known services only (hex labels are common in ordinary names), an
// 8-hex-digit label (0a000001.nip.io). The first such address counts.
func embeddedIPv4(h string) (netip.Addr, bool) {
	labels := strings.Split(h, ".")
	for i := 0; i+4 <= len(labels)-1; i++ {
		if a, err := netip.ParseAddr(strings.Join(labels[i:i+4], ".")); err == nil && a.Is4() {
			return a, true
		}
	}
	for _, l := range labels[:len(labels)-1] {
		parts := strings.Split(l, "-")
		for i := 0; i+4 <= len(parts); i++ {
			if a, err := netip.ParseAddr(strings.Join(parts[i:i+4], ".")); err == nil && a.Is4() {
				return a, true
			}
		}
		if len(l) == 8 && wildcardDNS(h) {
			var b [4]byte
			if _, err := fmt.Sscanf(l, "%02x%02x%02x%02x", &b[0], &b[1], &b[2], &b[3]); err == nil && isHexString(l) {
				return netip.AddrFrom4(b), true
			}
		}
	}
	return netip.Addr{}, false
}

// wildcardDNS reports whether h is under a known wildcard-DNS service.
func wildcardDNS(h string) bool {
	for _, s := range []string{"nip.io", "sslip.io", "xip.io", "nip.direct", "traefik.me", "ip.addr.tools"} {
		if h == s || strings.HasSuffix(h, "."+s) {
			return true
		}
	}
	return false
}

func isHexString(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}

// internalSuffixes are name suffixes that never denote a public host:
// Kubernetes service names, RFC 6761/6762/8375 special-use names and the
// private-use TLDs of RFC 6762 appendix G.
var internalSuffixes = []string{
	".svc", ".svc.cluster.local", ".cluster.local", ".internal", ".local",
	".localdomain", ".home.arpa", ".intranet", ".private", ".corp", ".home", ".lan",
	".in-addr.arpa", ".ip6.arpa", ".test", ".invalid", ".example", ".onion", ".alt",
	".default", ".default.svc", ".kube-system", ".kube-system.svc", // service.namespace short forms
}

// numericLabel reports whether the last label of a host makes the WHATWG
// URL parser and inet_aton read the host as an IPv4 address: all decimal
// digits, or 0x followed by hex digits.
func numericLabel(l string) bool {
	if l == "" {
		return false
	}
	if len(l) >= 2 && l[0] == '0' && l[1]|0x20 == 'x' {
		for i := 2; i < len(l); i++ {
			if !isHex(l[i]) {
				return false
			}
		}
		return true
	}
	return strings.IndexFunc(l, notDigit) < 0
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'f'
}

// parseIPv4Loose parses the IPv4 notations inet_aton(3) and the WHATWG
// URL parser accept: 1 to 4 parts, each decimal, octal (leading 0) or hex
// (0x), the last part filling the remaining bytes. It fails (with a
// reason) where parsers disagree: a leading zero read as octal by one and
// decimal by another (unless one reading is a metadata address, which it
// then returns), "0x" with no digits, overflow.
func parseIPv4Loose(h string) (netip.Addr, string) {
	parts := strings.Split(h, ".")
	if len(parts) > 4 {
		return netip.Addr{}, "numeric host with more than 4 parts"
	}
	loose, ok := combineIPv4(parts, true)
	if !ok {
		return netip.Addr{}, "numeric host that is not an IPv4 address"
	}
	// A part with a leading zero is octal to inet_aton and WHATWG but
	// decimal to others (older Go, Python's ipaddress rejects it).
	leadingZero := false
	for _, p := range parts {
		if len(p) > 1 && p[0] == '0' && p[1]|0x20 != 'x' {
			leadingZero = true
		}
	}
	if leadingZero {
		if dec, ok := combineIPv4(parts, false); ok && dec != loose {
			// Should either reading be a metadata address, the host is
			// that one: some client reaches the metadata service with
			// it, and free text denies metadata, not ambiguous, hosts.
			for _, a := range []netip.Addr{loose, dec} {
				if classifyIP(a).Kind == KindMetadata {
					return a, ""
				}
			}
			return netip.Addr{}, "leading zeros read as octal or decimal"
		}
	}
	return loose, ""
}

func combineIPv4(parts []string, bases bool) (netip.Addr, bool) {
	var v uint64
	n := len(parts)
	for i, p := range parts {
		base := 10
		if bases {
			switch {
			case len(p) >= 2 && p[0] == '0' && p[1]|0x20 == 'x':
				base, p = 16, p[2:]
				if p == "" {
					return netip.Addr{}, false
				}
			case len(p) > 1 && p[0] == '0':
				base, p = 8, p[1:]
			}
		} else if strings.IndexFunc(p, notDigit) >= 0 {
			return netip.Addr{}, false
		}
		if len(p) > 32 {
			return netip.Addr{}, false
		}
		x, err := strconv.ParseUint(p, base, 64)
		if err != nil {
			return netip.Addr{}, false
		}
		if i < n-1 {
			if x > 255 {
				return netip.Addr{}, false
			}
			v |= x << (8 * uint(3-i))
		} else {
			if x >= 1<<(8*uint(5-n)) {
				return netip.Addr{}, false
			}
			v |= x
		}
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

var (
	metadataIPs = map[netip.Addr]bool{
		netip.MustParseAddr("169.254.169.254"): true, // AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle, …
		netip.MustParseAddr("169.254.170.2"):   true, // AWS ECS task metadata
		netip.MustParseAddr("169.254.170.23"):  true, // AWS EKS pod identity
		netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
		netip.MustParseAddr("192.0.0.192"):     true, // Oracle Cloud (legacy)
		netip.MustParseAddr("168.63.129.16"):   true, // Azure WireServer (goal state, extension settings) and its DNS
		netip.MustParseAddr("fd00:ec2::254"):   true, // AWS IMDS over IPv6
		netip.MustParseAddr("fd00:ec2::23"):    true, // AWS EKS pod identity over IPv6
	}
	v4Ranges = []struct {
		p netip.Prefix
		k Kind
	}{
		{netip.MustParsePrefix("0.0.0.0/8"), KindUnspecified},
		{netip.MustParsePrefix("127.0.0.0/8"), KindLoopback},
		{netip.MustParsePrefix("10.0.0.0/8"), KindPrivate},
		{netip.MustParsePrefix("172.16.0.0/12"), KindPrivate},
		{netip.MustParsePrefix("192.168.0.0/16"), KindPrivate},
		{netip.MustParsePrefix("169.254.0.0/16"), KindLinkLocal},
		{netip.MustParsePrefix("100.64.0.0/10"), KindCGNAT},
		{netip.MustParsePrefix("224.0.0.0/4"), KindMulticast},
		{netip.MustParsePrefix("240.0.0.0/4"), KindPrivate},     // reserved, broadcast
		{netip.MustParsePrefix("192.0.0.0/24"), KindPrivate},    // IETF protocol assignments
		{netip.MustParsePrefix("192.0.2.0/24"), KindPrivate},    // TEST-NET-1
		{netip.MustParsePrefix("198.51.100.0/24"), KindPrivate}, // TEST-NET-2
		{netip.MustParsePrefix("203.0.113.0/24"), KindPrivate},  // TEST-NET-3
		{netip.MustParsePrefix("198.18.0.0/15"), KindPrivate},   // benchmarking
		{netip.MustParsePrefix("192.88.99.0/24"), KindPrivate},  // 6to4 relay anycast
	}
	v6Ranges = []struct {
		p netip.Prefix
		k Kind
	}{
		{netip.MustParsePrefix("fe80::/10"), KindLinkLocal},
		{netip.MustParsePrefix("fc00::/7"), KindULA},
		{netip.MustParsePrefix("ff00::/8"), KindMulticast},
		{netip.MustParsePrefix("fec0::/10"), KindPrivate},     // site-local (deprecated)
		{netip.MustParsePrefix("100::/64"), KindPrivate},      // discard-only
		{netip.MustParsePrefix("2001:db8::/32"), KindPrivate}, // documentation
		{netip.MustParsePrefix("2001:10::/28"), KindPrivate},  // ORCHID
		{netip.MustParsePrefix("2001:20::/28"), KindPrivate},  // ORCHIDv2
	}
	nat64WKP   = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	teredo     = netip.MustParsePrefix("2001::/32")
)

// ClassifyIP classifies an IP address, as [ClassifyHost] does for its
// literal: IPv4 addresses embedded in IPv6 (mapped, compatible, SIIT,
// NAT64, 6to4, Teredo) are unwrapped and the stricter class is kept. The
// egress dialer uses it on the address it is about to connect to.
func ClassifyIP(a netip.Addr) Destination {
	d := classifyIP(a)
	d.Input = a.String()
	return d
}

// classifyIP classifies an address, unwrapping IPv4 addresses embedded in
// IPv6 (mapped, compatible, SIIT, NAT64, 6to4, Teredo).
func classifyIP(a netip.Addr) Destination {
	d := Destination{Host: a.WithZone("").String(), IP: a.WithZone("")}
	e, why := effectiveIP(a.WithZone(""))
	d.Kind, d.Reason = classifyPlain(e)
	if e != d.IP {
		d.IP = e
		d.Reason = strings.TrimSuffix(why+"; "+d.Reason, "; ")
	}
	return d
}

func effectiveIP(a netip.Addr) (netip.Addr, string) {
	if !a.Is6() || metadataIPs[a] {
		return a, ""
	}
	if a.Is4In6() {
		return a.Unmap(), "IPv4-mapped"
	}
	b := a.As16()
	v4 := func(x []byte) netip.Addr { return netip.AddrFrom4([4]byte{x[0], x[1], x[2], x[3]}) }
	zero := func(x []byte) bool {
		for _, c := range x {
			if c != 0 {
				return false
			}
		}
		return true
	}
	switch {
	case a.IsUnspecified() || a.IsLoopback():
		return a, ""
	case zero(b[:12]):
		return v4(b[12:]), "IPv4-compatible"
	case zero(b[:8]) && b[8] == 0xff && b[9] == 0xff && zero(b[10:12]):
		return v4(b[12:]), "IPv4-translated (SIIT)"
	case nat64WKP.Contains(a):
		return v4(b[12:]), "NAT64"
	case nat64Local.Contains(a):
		// RFC 6052 /48 layout: bytes 6, 7, 9, 10 (byte 8 is u); also the
		// /96 layout. Take the stricter.
		x := v4([]byte{b[6], b[7], b[9], b[10]})
		y := v4(b[12:])
		kx, _ := classifyPlain(x)
		ky, _ := classifyPlain(y)
		if kx.severity() >= ky.severity() {
			return x, "NAT64 local-use"
		}
		return y, "NAT64 local-use"
	case sixToFour.Contains(a):
		return v4(b[2:6]), "6to4"
	case teredo.Contains(a):
		return v4([]byte{^b[12], ^b[13], ^b[14], ^b[15]}), "Teredo client"
	}
	return a, ""
}

func classifyPlain(a netip.Addr) (Kind, string) {
	if metadataIPs[a] {
		return KindMetadata, "metadata address"
	}
	if a.Is4() {
		for _, r := range v4Ranges {
			if r.p.Contains(a) {
				return r.k, r.p.String()
			}
		}
		return KindPublic, ""
	}
	switch {
	case a.IsUnspecified():
		return KindUnspecified, "::"
	case a.IsLoopback():
		return KindLoopback, "::1"
	}
	for _, r := range v6Ranges {
		if r.p.Contains(a) {
			return r.k, r.p.String()
		}
	}
	if !a.IsGlobalUnicast() {
		return KindPrivate, "not global unicast"
	}
	return KindPublic, ""
}
