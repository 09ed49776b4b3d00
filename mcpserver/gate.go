package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/pyjail/pyjail/mcpserver/rpcgate"
	"github.com/pyjail/pyjail/policy"
)

// maxPromptArgBytes caps the arguments of one prompts/get: a prompt embeds
// them, and its answer must stay far below what clients accept.
const maxPromptArgBytes = 1 << 20

// NewGate returns the gate for one session of this server, for any
// transport: the server's message, depth and answer limits, the prompt
// argument check mcp-go lacks, and a trace in sandbox://logs for every
// refusal.
func (s *Server) NewGate() *rpcgate.Gate { return s.newGate(false) }

// newGate is NewGate; transportSessions leaves the lifecycle to a
// transport that keeps it (HTTP).
func (s *Server) newGate(transportSessions bool) *rpcgate.Gate {
	return rpcgate.New(rpcgate.Config{
		MaxMessageBytes:   s.limits.MessageBytes,
		MaxDepth:          s.vlim.MaxDepth,
		MaxAnswerBytes:    policy.MaxAnswerBytes,
		Precheck:          s.precheck,
		OnRefusal:         s.recordRefusal,
		TransportSessions: transportSessions,
	})
}

// precheck answers the requests whose errors mcp-go would get wrong: a
// prompt handler's error is always -32603 (Internal error) in mcp-go
// (server/handler_errors.go, handlerError), but missing or oversized
// prompt arguments are the caller's mistake, -32602 (Invalid params).
func (s *Server) precheck(method string, params json.RawMessage) *rpcgate.Error {
	if method != string(mcp.MethodPromptsGet) {
		return nil
	}
	var p struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return &rpcgate.Error{Code: rpcgate.CodeInvalidParams, Message: "prompts/get: params must be {name, arguments}: " + err.Error()}
	}
	prompt, ok := s.mcp.ListPrompts()[p.Name]
	if !ok {
		return nil // mcp-go names an unknown prompt itself
	}
	if len(params) > maxPromptArgBytes {
		return &rpcgate.Error{Code: rpcgate.CodeInvalidParams, Message: fmt.Sprintf("prompt %s: the arguments are %s; the limit is %s",
			p.Name, policy.FormatBytes(int64(len(params))), policy.FormatBytes(maxPromptArgBytes))}
	}
	var missing, notStrings []string
	for _, a := range prompt.Prompt.Arguments {
		v, ok := p.Arguments[a.Name]
		str, isStr := v.(string)
		switch {
		case ok && !isStr:
			notStrings = append(notStrings, a.Name)
		case a.Required && strings.TrimSpace(str) == "":
			missing = append(missing, a.Name)
		}
	}
	switch {
	case len(notStrings) > 0:
		return &rpcgate.Error{Code: rpcgate.CodeInvalidParams, Message: fmt.Sprintf("prompt %s: argument(s) must be strings: %s", p.Name, strings.Join(notStrings, ", "))}
	case len(missing) > 0:
		return &rpcgate.Error{Code: rpcgate.CodeInvalidParams, Message: fmt.Sprintf("prompt %s: missing required argument(s): %s", p.Name, strings.Join(missing, ", "))}
	}
	return nil
}

// recordRefusal keeps a refused message in sandbox://logs and the log:
// method, id, size and reason, never the payload.
func (s *Server) recordRefusal(r rpcgate.Refusal) {
	tr := trace{
		Time: time.Now().UTC(), Level: slog.LevelWarn.String(), Message: "message refused",
		Method: r.Method, RequestID: truncate(r.ID, 64), MessageBytes: r.Bytes, ErrorCode: r.Code, Error: r.Reason,
	}
	if r.Code == 0 {
		tr.Message = "message dropped"
	}
	s.traces.add(tr)
	s.log.LogAttrs(context.Background(), slog.LevelWarn, tr.Message,
		slog.String(logKeyMethod, r.Method), slog.String(logKeyRequestID, tr.RequestID), slog.Int64(logKeyBytes, r.Bytes),
		slog.Int(logKeyErrorCode, r.Code), slog.String(logKeyError, r.Reason))
}
