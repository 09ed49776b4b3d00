package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/pyjail/pyjail/mcpserver/tokens"
	"github.com/pyjail/pyjail/signin"
)

// authenticate judges the request's bearer token, by its form (package
// signin's Form): a static token against the tokens file only, a JWT by
// SignIn only (never looked up in the file), an opaque token against the
// file and then, if SignIn introspects, by the issuer. A refused request
// is answered here, before any MCP processing, and counted.
func (h *HTTPService) authenticate(w http.ResponseWriter, r *http.Request) (tokens.Tenant, bool) {
	header := r.Header.Get("Authorization")
	tok, ok := tokens.BearerToken(header)
	if !ok {
		reason := signin.ReasonMissingToken
		if header != "" {
			reason = signin.ReasonMalformed
		}
		h.refuse(w, &signin.Refusal{Status: http.StatusUnauthorized, Reason: reason,
			Description: "send Authorization: Bearer <token>"}, header != "")
		return tokens.Tenant{}, false
	}
	kind := signin.Form(tok)
	if kind != signin.KindJWT {
		if t, ok := h.cfg.Tokens.Authenticate(tok); ok {
			return t, true
		}
	}
	if h.cfg.SignIn == nil || kind == signin.KindStatic {
		h.refuse(w, &signin.Refusal{Status: http.StatusUnauthorized, Reason: signin.ReasonStatic,
			Description: "the token is not one of this server's tokens"}, true)
		return tokens.Tenant{}, false
	}
	id, err := h.cfg.SignIn.Authenticate(r.Context(), tok)
	var ref *signin.Refusal
	if errors.As(err, &ref) {
		h.refuse(w, ref, true)
		return tokens.Tenant{}, false
	}
	if err != nil {
		h.refuse(w, &signin.Refusal{Status: http.StatusServiceUnavailable, Reason: signin.ReasonUnavailable,
			Description: "the token could not be judged; try again shortly", Err: err}, true)
		return tokens.Tenant{}, false
	}
	return id.Tenant, true
}

// checkScope refuses, with 403 and error="insufficient_scope", a
// tools/call whose tool needs a right the signed-in caller's scopes do
// not grant, so that the client can ask for more (the MCP spec's step-up
// flow). The scope it names is what the caller has plus what the tool
// needs, so stepping up loses nothing. The pipeline checks the same right
// again for every call (Server.ToolRight is its table); this answers at
// the HTTP layer, where an OAuth client can act on it. Static tokens and
// other methods pass.
func (h *HTTPService) checkScope(w http.ResponseWriter, r *http.Request, t tokens.Tenant) bool {
	if h.cfg.SignIn == nil || !t.Scoped || r.Body == nil {
		return true
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != string(mcp.MethodToolsCall) {
		return true
	}
	right, ok := h.s.ToolRight(msg.Params.Name)
	if !ok || right == 0 || t.Rights().Has(right) {
		return true
	}
	a := h.cfg.SignIn
	scope := strings.Join(a.ScopesFor(t.Rights()|tokens.Rights(right)), " ")
	h.refuseScope(w, &signin.Refusal{Status: http.StatusForbidden, Reason: signin.ReasonInsufficient,
		Description: msg.Params.Name + " needs the " + right.String() + " right: scope " + a.Scope(right)}, true, scope)
	return false
}

// metadataURL is where the Protected Resource Metadata of SignIn's
// resource is served (RFC 9728 §3.1: the well-known prefix inserted
// before the resource's path).
func metadataURL(resource string) string {
	u, err := url.Parse(resource)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host + server.ProtectedResourceMetadataPath(resource)
}

// quoteParam makes s safe inside a quoted auth-param (RFC 9110 §11.2):
// no '"', no '\', no control characters.
func quoteParam(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '"':
			return '\''
		case r == '\\', r < 0x20, r == 0x7f:
			return ' '
		}
		return r
	}, s)
}

// challenge is the WWW-Authenticate value of a refusal: RFC 6750 §3, plus
// resource_metadata (RFC 9728 §5.1) and the scope to ask for, as the MCP
// authorization spec asks, when SignIn is set. withError adds error and
// error_description: a request with no token gets none (RFC 6750 §3.1).
func (h *HTTPService) challenge(ref *signin.Refusal, withError bool, scope string) string {
	parts := []string{`Bearer realm="pyjail"`}
	if withError {
		switch {
		case ref.Reason == signin.ReasonInsufficient:
			parts = append(parts, `error="insufficient_scope"`)
		case ref.Status == http.StatusUnauthorized:
			parts = append(parts, `error="invalid_token"`)
		}
		if ref.Description != "" {
			parts = append(parts, `error_description="`+quoteParam(ref.Description)+`"`)
		}
	}
	if a := h.cfg.SignIn; a != nil {
		parts = append(parts, `resource_metadata="`+metadataURL(a.Resource())+`"`)
		if scope == "" {
			// The everyday rights; operator is asked for when needed.
			scope = a.Scope(tokens.RightRun) + " " + a.Scope(tokens.RightWorkspace)
		}
		parts = append(parts, `scope="`+scope+`"`)
	}
	return strings.Join(parts, ", ")
}

// refuse answers a refused request and counts it.
func (h *HTTPService) refuse(w http.ResponseWriter, ref *signin.Refusal, withError bool) {
	h.refuseScope(w, ref, withError, "")
}

func (h *HTTPService) refuseScope(w http.ResponseWriter, ref *signin.Refusal, withError bool, scope string) {
	if ev := h.cfg.Events; ev != nil {
		if ref.Status == http.StatusUnauthorized {
			ev.Unauthorized()
		}
		ev.Refused(ref.Status, ref.Reason)
	}
	if ref.Err != nil {
		h.s.log.Warn("sign-in could not judge a token", logKeyError, ref.Err.Error(), "reason", ref.Reason)
	}
	// "401 Unauthorized" leads the body: clients that see only the text of
	// an error (the MCP Inspector's proxy passes on no status) start their
	// OAuth flow when they find it.
	msg := "401 Unauthorized: " + ref.Description
	switch ref.Status {
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "5")
		msg = "unavailable: " + ref.Description
	case http.StatusForbidden:
		msg = "forbidden: " + ref.Description
	}
	if ref.Status != http.StatusServiceUnavailable {
		w.Header().Set("WWW-Authenticate", h.challenge(ref, withError, scope))
	}
	if ref.Status == http.StatusUnauthorized {
		// An unauthenticated client keeps no idle connection open here
		// (issue 21): it reconnects with its token.
		w.Header().Set("Connection", "close")
	}
	if h.cfg.SignIn == nil && ref.Status == http.StatusUnauthorized {
		msg = "401 Unauthorized: send Authorization: Bearer <token> with a token from the server's tokens file"
	}
	http.Error(w, msg, ref.Status)
}

// MetadataPaths are the paths the Protected Resource Metadata is served
// at: the resource's path-suffixed well-known path and the bare one (the
// MCP spec's two fallbacks); none without SignIn.
func (h *HTTPService) MetadataPaths() []string {
	if h.cfg.SignIn == nil {
		return nil
	}
	paths := []string{server.WellKnownProtectedResourcePath}
	if p := server.ProtectedResourceMetadataPath(h.cfg.SignIn.Resource()); p != paths[0] {
		paths = append([]string{p}, paths...)
	}
	return paths
}

// Metadata serves the Protected Resource Metadata (RFC 9728) with
// mcp-go's handler: the resource, its authorization servers, the scopes,
// header bearer tokens only. It is nil without SignIn.
func (h *HTTPService) Metadata() http.Handler {
	a := h.cfg.SignIn
	if a == nil {
		return nil
	}
	meta := server.NewProtectedResourceMetadataHandler(server.ProtectedResourceMetadataConfig{
		Resource:               a.Resource(),
		AuthorizationServers:   a.Issuers(),
		ScopesSupported:        a.Scopes(),
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "pyjail",
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions {
			// mcp-go's preflight allows Content-Type and Authorization only;
			// browser clients (the MCP Inspector) also send
			// MCP-Protocol-Version when they fetch the metadata.
			w.Header().Set("Access-Control-Allow-Origin", "*")
			w.Header().Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
			w.Header().Set("Access-Control-Allow-Headers", "Content-Type, Authorization, MCP-Protocol-Version")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		meta.ServeHTTP(w, r)
	})
}
