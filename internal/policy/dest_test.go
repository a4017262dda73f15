package policy

import (
	"encoding/json"
	"testing"
)

var destTests = []struct {
	name string
	in   string
	want Kind
}{
	// Public.
	{"https name", "https://example.com", KindPublic},
	{"https name path", "https://example.com/a/b?c=d#e", KindPublic},
	{"public v4", "http://93.184.216.34", KindPublic},
	{"public v4 port", "http://93.184.216.34:8080/x", KindPublic},
	{"public v6", "http://[2606:4700::1111]/", KindPublic},
	{"bare public v6 bracket", "[2606:4700::1111]", KindPublic},
	{"bare name", "example.com", KindPublic},
	{"bare name port", "example.com:443", KindPublic},
	{"userinfo public", "https://user:pw@example.com/", KindPublic},
	{"trailing dot public", "https://example.com./", KindPublic},
	{"upper case public", "HTTPS://EXAMPLE.COM/", KindPublic},
	{"punycode", "https://xn--bcher-kva.de/", KindPublic},
	{"idna public", "https://bücher.de/", KindPublic},
	{"ssh public", "ssh://git@github.com/a/b", KindPublic},
	{"numeric-looking label not last: an embedded internal address counts (wildcard DNS)", "http://169.254.169.254.example.com/", KindMetadata},
	{"nat64 public", "http://[64:ff9b::5db8:d822]/", KindPublic},

	// Metadata in every notation.
	{"metadata v4", "http://169.254.169.254/latest/meta-data/", KindMetadata},
	{"metadata decimal", "http://2852039166/", KindMetadata},
	{"metadata octal", "http://0251.0376.0251.0376/", KindMetadata},
	{"metadata hex", "http://0xA9FEA9FE/", KindMetadata},
	{"metadata hex dotted", "http://0xa9.0xfe.0xa9.0xfe/", KindMetadata},
	{"metadata short 3", "http://169.254.43518/", KindMetadata},
	{"metadata short 2", "http://169.16689662/", KindMetadata},
	{"metadata mixed", "http://0xa9.254.0251.0xfe/", KindMetadata},
	{"metadata leading zeros, decimal reading", "http://169.254.169.0254/", KindMetadata},
	{"metadata leading zeros, octal reading", "http://0251.254.169.254/", KindMetadata},
	{"leading zeros, neither reading metadata", "http://10.0.0.010/", KindAmbiguous},
	{"metadata mapped", "http://[::ffff:169.254.169.254]/", KindMetadata},
	{"metadata mapped hex", "http://[::ffff:a9fe:a9fe]/", KindMetadata},
	{"metadata compat", "http://[::169.254.169.254]/", KindMetadata},
	{"metadata nat64", "http://[64:ff9b::169.254.169.254]/", KindMetadata},
	{"metadata nat64 hex", "http://[64:ff9b::a9fe:a9fe]/", KindMetadata},
	{"metadata nat64 local /48", "http://[64:ff9b:1:a9fe:a9:fe00::]/", KindMetadata},
	{"metadata 6to4", "http://[2002:a9fe:a9fe::1]/", KindMetadata},
	{"metadata teredo", "http://[2001:0:4136:e378:8000:63bf:5601:5601]/", KindMetadata},
	{"metadata siit", "http://[::ffff:0:a9fe:a9fe]/", KindMetadata},
	{"metadata v6 aws", "http://[fd00:ec2::254]/latest/", KindMetadata},
	{"metadata alibaba", "http://100.100.100.200/", KindMetadata},
	{"metadata gcp name", "http://metadata.google.internal/computeMetadata/v1/", KindMetadata},
	{"metadata gcp trailing dot", "http://metadata.google.internal./", KindMetadata},
	{"metadata gcp upper", "http://METADATA.GOOGLE.INTERNAL/", KindMetadata},
	{"metadata short name", "http://metadata/", KindMetadata},
	{"metadata azure", "https://metadata.azure.com/", KindMetadata},
	{"metadata userinfo", "http://evil.example@169.254.169.254/", KindMetadata},
	{"metadata percent host", "http://%31%36%39.254.169.254/", KindMetadata},
	{"metadata fullwidth", "http://１６９.２５４.１６９.２５４/", KindMetadata},
	{"metadata ideographic dots", "http://169。254。169。254/", KindMetadata},
	{"metadata scheme-relative", "//169.254.169.254/", KindMetadata},
	{"metadata no scheme", "169.254.169.254/latest", KindMetadata},
	{"metadata no scheme port", "169.254.169.254:80", KindMetadata},
	{"metadata name port", "metadata.google.internal:80/x", KindMetadata},
	{"metadata ecs", "http://169.254.170.2/v2/credentials", KindMetadata},

	// Internal.
	{"loopback", "http://127.0.0.1/", KindLoopback},
	{"loopback short", "http://127.1/", KindLoopback},
	{"loopback decimal", "http://2130706433/", KindLoopback},
	{"loopback hex", "http://0x7f000001/", KindLoopback},
	{"loopback zeros", "http://127.000.000.001/", KindLoopback},
	{"loopback v6", "http://[::1]:8080/", KindLoopback},
	{"loopback mapped", "http://[::ffff:127.0.0.1]/", KindLoopback},
	{"localhost", "http://localhost:3000/", KindLoopback},
	{"localhost bare port", "localhost:8080", KindLoopback},
	{"localhost sub", "http://a.localhost/", KindLoopback},
	{"localhost trailing dot", "http://LOCALHOST./", KindLoopback},
	{"private 10", "http://10.0.0.1/", KindPrivate},
	{"private 172", "http://172.16.5.4/", KindPrivate},
	{"private 192", "https://192.168.1.1/admin", KindPrivate},
	{"private short", "http://10.1/", KindPrivate},
	{"link local", "http://169.254.1.1/", KindLinkLocal},
	{"link local v6 zone", "http://[fe80::1%25eth0]/", KindLinkLocal},
	{"cgnat", "http://100.64.0.1/", KindCGNAT},
	{"ula", "http://[fd12:3456::1]/", KindULA},
	{"unspecified", "http://0.0.0.0:8080/", KindUnspecified},
	{"unspecified zero", "http://0/", KindUnspecified},
	{"unspecified v6", "http://[::]/", KindUnspecified},
	{"multicast", "http://224.0.0.1/", KindMulticast},
	{"multicast v6", "http://[ff02::1]/", KindMulticast},
	{"svc", "http://api.default.svc/", KindClusterInternal},
	{"svc cluster local", "http://api.default.svc.cluster.local:8443/", KindClusterInternal},
	{"internal tld", "http://db.corp.internal/", KindClusterInternal},
	{"single label", "http://redis:6379/", KindClusterInternal},
	{"postgres url", "postgres://u:p@db.prod.svc:5432/x", KindClusterInternal},
	{"6to4 private", "http://[2002:0a00:0001::]/", KindPrivate},
	{"doc range", "http://192.0.2.1/", KindPrivate},

	// Ambiguous.
	{"two at", "http://user@169.254.169.254@evil.example/", KindAmbiguous},
	{"two at public", "http://a@b@example.com/", KindAmbiguous},
	{"backslash userinfo", `http://evil.example\@169.254.169.254/`, KindAmbiguous},
	{"backslash scheme", `http:\\169.254.169.254`, KindAmbiguous},
	{"backslash mixed", `http:/\169.254.169.254/`, KindAmbiguous},
	{"space", "http://169.254.169.254 /", KindAmbiguous},
	{"leading space", " http://example.com/", KindAmbiguous},
	{"tab", "http://exa\tmple.com/", KindAmbiguous},
	{"newline", "http://example.com/\n", KindAmbiguous},
	{"nul", "http://example.com\x00.evil/", KindAmbiguous},
	{"octal vs decimal", "http://0177.0.0.1/", KindAmbiguous},
	{"octal 08", "http://08.0.0.1/", KindAmbiguous},
	{"five parts", "http://1.2.3.4.5/", KindAmbiguous},
	{"overflow", "http://4294967296/", KindAmbiguous},
	{"part overflow", "http://256.1.1.1/", KindAmbiguous},
	{"bare 0x", "http://0x/", KindAmbiguous},
	{"numeric tld", "http://example.123/", KindAmbiguous},
	{"special no slashes", "http:169.254.169.254", KindAmbiguous},
	{"special one slash", "http:/169.254.169.254", KindAmbiguous},
	{"empty host", "http:///169.254.169.254", KindAmbiguous},
	{"double dot", "http://example..com/", KindAmbiguous},
	{"two trailing dots", "http://example.com../", KindAmbiguous},
	{"unbracketed v6", "http://::1/", KindAmbiguous},
	{"bad port", "http://example.com:80x/", KindAmbiguous},
	{"big port", "http://example.com:99999/", KindAmbiguous},
	{"unclosed bracket", "http://[::1/", KindAmbiguous},
	{"bad bracket", "http://[169.254.169.254]/", KindAmbiguous},
	{"bad percent", "http://exa%zzmple.com/", KindAmbiguous},
	{"double percent", "http://%2531%2536%2539.254.169.254/", KindAmbiguous},
	{"underscore bang", "http://exa!mple.com/", KindAmbiguous},
	{"zone on global", "http://[2606:4700::1111%25eth0]/", KindAmbiguous},
	{"soft hyphen", "http://exam\u00adple.com/", KindAmbiguous},
	{"empty", "", KindAmbiguous},

	// Not a network destination.
	{"mailto", "mailto:a@example.com", KindNone},
	{"file", "file:///etc/passwd", KindNone},
	{"urn", "urn:isbn:0451450523", KindNone},
}

func TestClassifyURL(t *testing.T) {
	if len(destTests) < 60 {
		t.Fatalf("only %d cases", len(destTests))
	}
	for _, tt := range destTests {
		t.Run(tt.name, func(t *testing.T) {
			got := ClassifyURL(tt.in)
			if got.Kind != tt.want {
				t.Errorf("ClassifyURL(%q) = %s (%s, host %q), want %s", tt.in, got.Kind, got.Reason, got.Host, tt.want)
			}
		})
	}
}

func TestClassifyHost(t *testing.T) {
	tests := []struct {
		in       string
		want     Kind
		wantHost string
		wantIP   string
	}{
		{"169.254.169.254", KindMetadata, "169.254.169.254", "169.254.169.254"},
		{"0xA9FEA9FE", KindMetadata, "169.254.169.254", "169.254.169.254"},
		{"[::ffff:a9fe:a9fe]", KindMetadata, "::ffff:169.254.169.254", "169.254.169.254"},
		{"fd00:ec2::254", KindMetadata, "fd00:ec2::254", "fd00:ec2::254"},
		{"Metadata.Google.Internal.", KindMetadata, "metadata.google.internal", ""},
		{"example.com", KindPublic, "example.com", ""},
		{"2606:4700::1111", KindPublic, "2606:4700::1111", "2606:4700::1111"},
		{"kubernetes", KindClusterInternal, "kubernetes", ""},
		{"", KindAmbiguous, "", ""},
	}
	for _, tt := range tests {
		got := ClassifyHost(tt.in)
		ip := ""
		if got.IP.IsValid() {
			ip = got.IP.String()
		}
		if got.Kind != tt.want || got.Host != tt.wantHost || ip != tt.wantIP {
			t.Errorf("ClassifyHost(%q) = %s %q %q, want %s %q %q", tt.in, got.Kind, got.Host, ip, tt.want, tt.wantHost, tt.wantIP)
		}
	}
}

// TestWildcardDNSAndDeepArgs covers what an attack review found allowed:
// names that wildcard DNS resolves to internal addresses, loopback
// aliases, service.namespace short forms, and destinations nested deeper
// than the old inspection depth.
func TestWildcardDNSAndDeepArgs(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want Kind
	}{
		{"http://x.169.254.169.254.nip.io/", KindMetadata},
		{"http://a9fea9fe.nip.io/", KindMetadata},
		{"http://127.0.0.1.nip.io/", KindLoopback},
		{"http://10.0.0.1.nip.io/", KindPrivate},
		{"http://127-0-0-1.sslip.io/", KindLoopback},
		{"http://app-10-0-0-1.nip.io/", KindPrivate},
		{"http://127.0.0.1.xip.io/", KindLoopback},
		{"http://localtest.me/", KindLoopback},
		{"http://api.lvh.me/", KindLoopback},
		{"http://kubernetes.default/", KindClusterInternal},
		{"http://deadbeef.example.com/", KindPublic},
		{"http://0a1b2c3d.pages.example.com/", KindPublic},
		{"http://1.2.3.4.nip.io/", KindPublic},
	} {
		if got := ClassifyURL(tc.url).Kind; got != tc.want {
			t.Errorf("ClassifyURL(%q).Kind = %v, want %v", tc.url, got, tc.want)
		}
	}
	deep := `{"url":[[[[[[[[[["http://169.254.169.254/latest/meta-data/iam"]]]]]]]]]]}`
	deep2 := `{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"url":"http://169.254.169.254/"}}}}}}}}}`
	for _, args := range []string{deep, deep2} {
		var m map[string]any
		if err := json.Unmarshal([]byte(args), &m); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, d := range findDestinations(m) {
			if d.Kind == KindMetadata {
				found = true
			}
		}
		if !found {
			t.Errorf("findDestinations(%s) missed the metadata address", args)
		}
	}
}
