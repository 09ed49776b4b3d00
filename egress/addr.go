package egress

import "net/netip"

// blockedPrefix is an address range the gateway never dials unless a rule
// pins it, with the words a refusal uses for it.
type blockedPrefix struct {
	Prefix netip.Prefix
	Kind   string
}

// blockedPrefixes is the table of SPEC §12's forbidden ranges. IPv4-mapped
// IPv6 addresses are unmapped before the lookup, so ::ffff:127.0.0.1 is
// loopback too; NAT64 and 6to4 prefixes, which embed an IPv4 address a
// translator would reach, are refused whole.
var blockedPrefixes = []blockedPrefix{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.169.254/32"), "cloud metadata"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "NAT64"},
	{netip.MustParsePrefix("2002::/16"), "6to4"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "cloud metadata"},
	{netip.MustParsePrefix("fc00::/7"), "private"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// blockedKind returns what kind of forbidden address a is, or "" if the
// gateway may dial it without a pin. The first, most specific, match in
// table order wins (metadata before link-local).
func blockedKind(a netip.Addr) string {
	a = a.Unmap()
	if a.Zone() != "" {
		return "scoped"
	}
	for _, b := range blockedPrefixes {
		if b.Prefix.Contains(a) {
			return b.Kind
		}
	}
	return ""
}
