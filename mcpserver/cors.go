package mcpserver

import (
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Cross-origin requests to /mcp (CORS), for MCP clients that run in a
// browser page and reach the server from the page itself: the MCP
// Inspector in "Direct" mode, a web host's own client.
//
// checkHost runs first, so a request that gets here carries no Origin or
// one whose host is loopback or one of --allowed-hosts; such an Origin is
// echoed in Access-Control-Allow-Origin, never "*", and never with
// Access-Control-Allow-Credentials: the server takes no cookies, and a
// page reads nothing it could not already read without a token of its
// own in the Authorization header.
var (
	corsAllowMethods = strings.Join([]string{http.MethodGet, http.MethodPost, http.MethodDelete}, ", ")
	// What MCP clients send: the token, the session, the protocol
	// version, and the resumption point of an event stream.
	corsAllowHeaders = strings.Join([]string{"Authorization", "Content-Type", "Accept",
		server.HeaderKeySessionID, mcp.HeaderProtocolVersion, "Last-Event-ID"}, ", ")
	// What a browser client must read: the session a new one got, and the
	// challenge of a 401 or 403 (resource_metadata, error, scope).
	corsExposeHeaders = strings.Join([]string{server.HeaderKeySessionID, mcp.HeaderProtocolVersion,
		"WWW-Authenticate"}, ", ")
)

// corsPreflightMaxAge is how long (seconds) a browser may reuse an answer
// to a preflight.
const corsPreflightMaxAge = "600"

// cors adds the CORS headers for a request from a page of another origin,
// and answers its preflight (an OPTIONS with Access-Control-Request-Method)
// itself, returning true. A preflight never carries a token (browsers send
// none on it), so it is answered before authentication: otherwise it gets
// a 401, which the browser takes as "no", and the request it asks for —
// the one that would carry the token — is never sent.
func (h *HTTPService) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || origin == "null" {
		return false
	}
	hd := w.Header()
	hd.Add("Vary", "Origin")
	hd.Set("Access-Control-Allow-Origin", origin)
	hd.Set("Access-Control-Expose-Headers", corsExposeHeaders)
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	hd.Set("Access-Control-Allow-Methods", corsAllowMethods)
	hd.Set("Access-Control-Allow-Headers", corsAllowHeaders)
	hd.Set("Access-Control-Max-Age", corsPreflightMaxAge)
	w.WriteHeader(http.StatusNoContent)
	return true
}
