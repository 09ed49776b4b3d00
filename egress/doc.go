// Package egress is pyjail's egress gateway (SPEC §12): the host-side
// forward proxy that is a jail's only way to the network, in profiles
// whose policy has an egress section (see policy.Egress).
//
// The gateway serves one [Run] per execution on a listener the jail
// package hands it (a socket on the jail's own loopback), under that
// run's policy, and decides every connection:
//
//  1. It reads one request with net/http's own parser (http.ReadRequest):
//     CONNECT host:port for HTTPS, an absolute-form request for plain
//     HTTP. Anything else is refused.
//  2. The host must be a name (never an IP literal, in any notation) that
//     a rule allows, on one of the rule's ports.
//  3. It resolves the name on the host, or takes the rule's resolve pin,
//     and drops every loopback, private, link-local, CGNAT, multicast,
//     unspecified and metadata address (IPv4-mapped forms included)
//     unless pinned. It dials the address it resolved, so no second
//     lookup can rebind the name.
//  4. For CONNECT it answers 200, reads the TLS ClientHello and requires
//     its SNI to name the CONNECT host; then it relays bytes end to end.
//     The gateway never sees inside such a tunnel.
//  5. For plain HTTP it forwards the one request (Connection: close, so
//     a smuggled second request on the connection is never read), with
//     the Host header set from the URL and proxy headers removed; for a
//     rule with upstream "https" it is the TLS client to Host:443 with
//     full verification and adds the rule's inject headers, whose values
//     it reads on the host at that moment.
//  6. It counts connections and bytes against the run's limits; the
//     first limit passed closes every connection of the run and reports
//     [Run.Exceeded], which the caller turns into the verdict
//     network_limit.
//
// Every refusal before a tunnel starts is an HTTP 403 whose body is one
// sentence ("blocked https://evil.example:443 — not in this profile's
// egress allowlist"), and every attempt becomes a record.NetworkEntry.
//
// # Why the standard library and not goproxy
//
// github.com/elazarl/goproxy was weighed and not taken. What a forward
// proxy must get right is HTTP parsing and TLS, and for both this package
// uses net/http and crypto/tls, the same code goproxy builds on. What is
// left is exactly the part goproxy does not do for us: pinning the
// address (goproxy dials by name through its own Transport, so pins and
// rebinding protection would mean replacing its dialer and its CONNECT
// handler anyway), checking SNI against the CONNECT host (goproxy either
// tunnels blind or terminates TLS with a MITM CA, and has no peek),
// counting bytes per run and failing closed. goproxy's default behaviour
// is to allow, its request path follows a chain of handlers where a
// missing one means "forward", and it brings a MITM certificate cache we
// do not want for hosts that are tunnels. A few hundred lines that refuse
// by default are easier to review than the same lines layered over it.
//
// # What the gateway does not do
//
// It does not terminate TLS that the jail started: an HTTPS connection
// is an end-to-end tunnel, so no header can be injected into it, and
// credentials are brokered only for rules with upstream "https", where
// the jail speaks plain HTTP to the gateway over its loopback and the
// gateway speaks TLS to the upstream. It never logs a payload or a
// header value. It makes no system calls of its own beyond sockets and
// reading inject files; it imports neither jail code, libcontainer, nor
// mcp-go.
package egress
