package rpcgate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/pyjail/pyjail/policy"
)

// JSON-RPC 2.0 error codes the gate answers with.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// EnvelopeDepth is how many levels a tool argument's value sits below the
// top of a tools/call message: the message, params and arguments objects.
// The message nesting limit is Config.MaxDepth plus this, so that a value
// may nest exactly as deep in a message as in JSON text.
const EnvelopeDepth = 3

// Config configures a Gate.
type Config struct {
	// MaxMessageBytes caps one message from the client.
	MaxMessageBytes int64
	// MaxDepth caps nesting inside a message, counted below the
	// envelope (see EnvelopeDepth): the same limit as for JSON text.
	MaxDepth int
	// MaxAnswerBytes caps every message sent to the client; a response
	// over it is replaced by an error with its id.
	MaxAnswerBytes int64
	// Precheck, if set, sees every request that passed the gate's own
	// checks, before it is forwarded; an error it returns is the answer
	// instead. It must not keep params.
	Precheck func(method string, params json.RawMessage) *Error
	// OnRefusal, if set, is told of every message the gate refuses or
	// drops. It is called synchronously and must not block.
	OnRefusal func(Refusal)
	// TransportSessions is for a transport that keeps the MCP lifecycle
	// itself (streamable HTTP: a request without a session initialize
	// made is refused there): the gate then screens size, depth and
	// envelope only, and lets every method through.
	TransportSessions bool
}

// Error is a JSON-RPC error the gate or a Precheck answers with.
type Error struct {
	Code    int
	Message string
}

// Refusal describes a refused or dropped message, without its payload.
type Refusal struct {
	// Method is the message's method, "" when it has none or it could not
	// be read; at most 64 bytes.
	Method string
	// ID is the request's id as JSON, "" when it has none.
	ID string
	// Code is the error answered, 0 when nothing was answered.
	Code   int
	Reason string
	Bytes  int64
}

// initWait bounds how long a request sent behind initialize waits for
// initialize's answer before it is refused.
const initWait = 10 * time.Second

// lifecycle states of a session (MCP lifecycle, legacy era).
type state uint8

const (
	stateNew          state = iota // nothing but initialize and ping
	stateInitializing              // initialize forwarded, no answer yet
	stateReady                     // initialize answered with a result
)

// Gate screens the messages of one MCP session, in both directions, before
// mcp-go decodes them and after it encodes its answers. Each session (one
// stdio connection, one HTTP session) has its own Gate. A Gate is safe for
// concurrent use.
type Gate struct {
	cfg Config

	mu     sync.Mutex
	state  state
	initID []byte // the pending initialize request's id
	// initDone is closed when initialize is answered.
	initDone chan struct{}
	// serverCalls holds the ids of requests the server sent the client
	// and not yet answered: only responses to those are forwarded.
	serverCalls map[string]bool
}

// New builds a gate; zero limits take defaults (64 MiB messages, depth
// 128, answers up to policy.MaxAnswerBytes).
func New(cfg Config) *Gate {
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = 64 << 20
	}
	if cfg.MaxDepth <= 0 {
		cfg.MaxDepth = 128
	}
	if cfg.MaxAnswerBytes <= 0 || cfg.MaxAnswerBytes > policy.MaxAnswerBytes {
		cfg.MaxAnswerBytes = policy.MaxAnswerBytes
	}
	return &Gate{cfg: cfg, serverCalls: map[string]bool{}}
}

// Limits returns the gate's limits, defaults filled in.
func (g *Gate) Limits() Config { return g.cfg }

// Inbound screens one message from the client, held whole in memory,
// without its line terminator. It returns the message to give mcp-go
// (rebuilt from the members it checked, so mcp-go sees exactly what the
// gate saw), or the answer to send the client, or neither: notifications
// and stray responses that are dropped never get an answer.
func (g *Gate) Inbound(msg []byte) (forward, answer []byte) {
	if int64(len(msg)) > g.cfg.MaxMessageBytes {
		sc := g.newScanner()
		sc.feed(msg)
		sc.finish()
		return nil, g.oversize(int64(len(msg)), sc)
	}
	sc := g.newScanner()
	sc.feed(msg)
	sc.finish()
	return g.screen(msg, sc)
}

func (g *Gate) newScanner() *scanner { return newScanner(g.cfg.MaxDepth + EnvelopeDepth) }

// InboundFrom is Inbound for one whole message read from r, such as an
// HTTP request body: past MaxMessageBytes the rest streams through the
// shallow pass without being held, so a huge message still gets its id's
// answer in constant memory. err is r's, other than EOF.
func (g *Gate) InboundFrom(r io.Reader) (forward, answer []byte, err error) {
	sc := g.newScanner()
	var (
		buf  []byte
		size int64
		over bool
	)
	chunk := make([]byte, 32<<10)
	for {
		n, rerr := r.Read(chunk)
		if n > 0 {
			size += int64(n)
			sc.feed(chunk[:n])
			if !over {
				if size > g.cfg.MaxMessageBytes {
					over, buf = true, nil
				} else {
					buf = append(buf, chunk[:n]...)
				}
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return nil, nil, rerr
		}
	}
	sc.finish()
	if over {
		return nil, g.oversize(size, sc), nil
	}
	forward, answer = g.screen(buf, sc)
	return forward, answer, nil
}

// envelope is what the shallow pass made of a message's members.
type envelope struct {
	id       []byte // canonical JSON of a valid id, nil without one
	idErr    string // why the id is unusable, if it is present but bad
	method   string
	hasMeth  bool
	methErr  string
	isNotify bool
	// isResponse: no method, but a result or an error.
	isResponse bool
}

// batchReason is the answer to a batch, in the transport's own terms:
// over stdio a message is a line, over HTTP a request body (issue 27).
func (g *Gate) batchReason() string {
	if g.cfg.TransportSessions {
		return "batches are not supported: send one JSON-RPC message per HTTP request"
	}
	return "batches are not supported: send one JSON-RPC message per line"
}

// readEnvelope checks the id, method and jsonrpc members.
func readEnvelope(sc *scanner) envelope {
	var e envelope
	if m := sc.members[mID]; m.count > 0 {
		switch {
		case m.count > 1:
			e.idErr = "the message has more than one id"
		default:
			e.id, e.idErr = canonicalID(m)
		}
	}
	if m := sc.members[mMethod]; m.count > 0 {
		e.hasMeth = true
		switch {
		case m.count > 1:
			e.methErr = "the message has more than one method"
		case m.first != '"' || m.raw.overflow:
			e.methErr = "method must be a string of at most 1 KiB"
		default:
			if err := json.Unmarshal(m.raw.b, &e.method); err != nil {
				e.methErr = "method is not a valid JSON string"
			}
		}
	}
	e.isNotify = e.hasMeth && sc.members[mID].count == 0
	e.isResponse = !e.hasMeth && sc.members[mResult].count+sc.members[mError].count > 0
	return e
}

// maxSafeID is the largest integer id every client (JavaScript's numbers
// are float64) reads back exactly.
const maxSafeID = 1 << 53

// canonicalID checks an id member: a string, or a number an answer can
// carry back exactly. Strings are re-encoded, so that an answer's id reads
// back as the same string whatever escapes the request used.
func canonicalID(m member) ([]byte, string) {
	if m.raw.overflow {
		return nil, "id is longer than 1 KiB"
	}
	switch {
	case m.first == '"':
		var s string
		if err := json.Unmarshal(m.raw.b, &s); err != nil {
			return nil, "id is not a valid JSON string"
		}
		b, _ := json.Marshal(s)
		return b, ""
	case m.first == '-' || m.first >= '0' && m.first <= '9':
		lit := string(m.raw.b)
		if !isJSONNumber(lit) {
			return nil, "id is not a valid JSON number"
		}
		if !strings.ContainsAny(lit, ".eE") {
			n, err := strconv.ParseInt(lit, 10, 64)
			if err != nil || n > maxSafeID || n < -maxSafeID {
				return nil, "an integer id must be at most 2^53 in magnitude"
			}
			return []byte(lit), ""
		}
		if f, err := strconv.ParseFloat(lit, 64); err != nil || math.IsInf(f, 0) {
			return nil, "id is a number out of range"
		}
		return []byte(lit), ""
	}
	return nil, "id must be a string or a number"
}

// screen decides on a message held in memory, after a complete scan.
func (g *Gate) screen(msg []byte, sc *scanner) (forward, answer []byte) {
	e := readEnvelope(sc)
	refuse := func(code int, reason string) ([]byte, []byte) {
		return nil, g.refuse(e, code, reason, int64(len(msg)))
	}
	switch {
	case sc.started && sc.topArray && json.Valid(msg):
		// MCP (2025-06-18 on) has no batches; answering each element
		// would need decoding it first.
		return refuse(CodeInvalidRequest, g.batchReason())
	case sc.started && sc.topArray:
		return refuse(CodeParseError, "parse error: the message is not valid JSON")
	case sc.started && len(msg) > 0 && msg[firstByte(msg)] != '{' && json.Valid(msg):
		return refuse(CodeInvalidRequest, "a JSON-RPC message must be an object")
	}
	if off, why, ok := syntaxCheck(msg, sc); !ok {
		// Only what precedes the first syntax error counts, as for any
		// decoder reading the message in order: an id after it is not
		// the message's id.
		pre := g.newScanner()
		pre.feed(msg[:off])
		pre.endLiteral()
		e = readEnvelope(pre)
		if pre.deepAt >= 0 {
			return nil, g.refuse(e, CodeInvalidRequest, g.depthReason(pre), int64(len(msg)))
		}
		if e.idErr != "" {
			e.id = nil
		}
		return nil, g.refuse(e, CodeParseError, fmt.Sprintf("parse error: %s (after byte %d)", why, off), int64(len(msg)))
	}
	if sc.deepAt >= 0 {
		return refuse(CodeInvalidRequest, g.depthReason(sc))
	}
	switch {
	case e.idErr != "":
		return refuse(CodeInvalidRequest, e.idErr)
	case e.methErr != "":
		return refuse(CodeInvalidRequest, e.methErr)
	}
	validVersion := sc.members[mJSONRPC].count == 1 && string(sc.members[mJSONRPC].raw.b) == `"2.0"`
	if e.isResponse {
		// A response from the client is never answered, whatever is
		// wrong with it.
		if !validVersion {
			g.drop(e, `a response without jsonrpc "2.0"`, int64(len(msg)))
			return nil, nil
		}
		return g.clientResponse(msg, sc, e)
	}
	if !validVersion {
		return refuse(CodeInvalidRequest, `jsonrpc must be "2.0"`)
	}
	params := sc.members[mParams]
	if params.count > 1 {
		return refuse(CodeInvalidRequest, "the message has more than one params")
	}
	if params.count == 1 && params.first != '{' && params.first != '[' {
		return refuse(CodeInvalidRequest, "params must be an object or an array")
	}
	var rawParams []byte
	if params.count == 1 {
		rawParams = msg[params.start:params.end]
	}
	if !e.hasMeth {
		return g.clientResponse(msg, sc, e)
	}
	if reason := g.admit(e, rawParams); reason != "" {
		return refuse(CodeInvalidRequest, reason)
	}
	if !e.isNotify && g.cfg.Precheck != nil {
		if perr := g.cfg.Precheck(e.method, rawParams); perr != nil {
			return refuse(perr.Code, perr.Message)
		}
	}
	return rebuild(e, rawParams), nil
}

// clientResponse handles a message without a method: the client's answer
// to a request the server sent. Only answers to requests in flight are
// forwarded; anything else is dropped (JSON-RPC never answers a response).
func (g *Gate) clientResponse(msg []byte, sc *scanner, e envelope) (forward, answer []byte) {
	res, errm := sc.members[mResult], sc.members[mError]
	if res.count+errm.count == 0 {
		return nil, g.refuse(e, CodeInvalidRequest, "the message has no method", int64(len(msg)))
	}
	if res.count+errm.count != 1 || e.id == nil {
		// A malformed response: answering it could only confuse.
		g.drop(e, "a response needs an id and exactly one of result and error", int64(len(msg)))
		return nil, nil
	}
	g.mu.Lock()
	known := g.serverCalls[idKey(e.id)]
	delete(g.serverCalls, idKey(e.id))
	g.mu.Unlock()
	if !known {
		g.drop(e, "a response to no request in flight", int64(len(msg)))
		return nil, nil
	}
	m := res
	name := "result"
	if errm.count == 1 {
		m, name = errm, "error"
	}
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(e.id)
	fmt.Fprintf(&b, `,%q:`, name)
	b.Write(msg[m.start:m.end])
	b.WriteByte('}')
	return b.Bytes(), nil
}

// admit enforces the lifecycle: before the server has answered
// initialize, only initialize and ping are served. It returns why a
// request is refused, or "". Notifications before initialization are
// dropped by it (it returns a reason; the caller answers nothing).
func (g *Gate) admit(e envelope, params []byte) string {
	if g.cfg.TransportSessions {
		return ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == stateInitializing && !e.isNotify && e.method != string(mcp.MethodPing) && e.method != string(mcp.MethodInitialize) {
		// A client that sends requests right behind initialize, without
		// waiting for its answer, gets them served in order once the
		// answer is out, rather than refused for a race it cannot see.
		done := g.initDone
		g.mu.Unlock()
		t := time.NewTimer(initWait)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
		g.mu.Lock()
	}
	switch {
	case e.method == string(mcp.MethodPing):
		return ""
	case e.method == string(mcp.MethodInitialize) && !e.isNotify:
		switch g.state {
		case stateInitializing:
			return "initialize is already in progress"
		case stateReady:
			return "the session is already initialized"
		}
		g.state, g.initID, g.initDone = stateInitializing, e.id, make(chan struct{})
		return ""
	case g.state == stateReady:
		return ""
	case modernRequest(params):
		// Protocol 2026-07-28 has no initialize: each request states its
		// version and the client's capabilities in _meta, and mcp-go
		// serves it on that basis.
		return ""
	case g.state == stateInitializing:
		return "the session is not initialized yet: wait for the answer to initialize (only ping is served before it)"
	}
	return "the session is not initialized: send initialize first (only ping is served before it)"
}

// modernRequest reports whether params carry a protocol version of the
// era without initialize.
func modernRequest(params []byte) bool {
	if len(params) == 0 || !bytes.Contains(params, []byte(mcp.MetaKeyProtocolVersion)) {
		return false
	}
	var p struct {
		Meta *mcp.Meta `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	return mcp.IsModernProtocol(p.Meta.ProtocolVersion())
}

// rebuild writes the message mcp-go gets: the members the gate checked,
// and nothing else, so that no decoder can read an id or method the gate
// did not (JSON decoders differ on duplicate and case-folded names).
func rebuild(e envelope, params []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(params) + 96)
	b.WriteString(`{"jsonrpc":"2.0"`)
	if e.id != nil {
		b.WriteString(`,"id":`)
		b.Write(e.id)
	}
	m, _ := json.Marshal(e.method)
	b.WriteString(`,"method":`)
	b.Write(m)
	if params != nil {
		b.WriteString(`,"params":`)
		b.Write(params)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// oversize answers a message too large to hold; sc has seen all of it.
func (g *Gate) oversize(size int64, sc *scanner) []byte {
	e := readEnvelope(sc)
	reason := fmt.Sprintf("the message is %s; the limit is %s", policy.FormatBytes(size), policy.FormatBytes(g.cfg.MaxMessageBytes))
	return g.refuse(e, CodeInvalidRequest, reason, size)
}

func (g *Gate) depthReason(sc *scanner) string {
	where := ""
	if sc.deepPath != "" {
		where = " in " + sc.deepPath
	}
	return fmt.Sprintf("nesting exceeds the depth limit of %d%s (at byte %d of the message)", g.cfg.MaxDepth, where, sc.deepAt)
}

// refuse answers a refused message: with its id when it has a usable one
// and is a request, with id null when it has none to find, and not at all
// when it is a notification or a response.
func (g *Gate) refuse(e envelope, code int, reason string, size int64) []byte {
	r := Refusal{Method: clipMethod(e.method), Code: code, Reason: reason, Bytes: size}
	if e.id != nil {
		r.ID = string(e.id)
	}
	// JSON-RPC never answers a notification; a message that does not
	// parse may not be one, and gets its parse error.
	if (e.isNotify || e.isResponse) && code != CodeParseError {
		r.Code = 0
		g.report(r)
		return nil
	}
	if e.isResponse {
		// Not even a parse error may carry the id of a response.
		e.id = nil
	}
	g.report(r)
	return errorResponse(e.id, code, reason)
}

// drop records a message dropped without an answer.
func (g *Gate) drop(e envelope, reason string, size int64) {
	r := Refusal{Method: clipMethod(e.method), Reason: reason, Bytes: size}
	if e.id != nil {
		r.ID = string(e.id)
	}
	g.report(r)
}

func (g *Gate) report(r Refusal) {
	if g.cfg.OnRefusal != nil {
		g.cfg.OnRefusal(r)
	}
}

func clipMethod(m string) string {
	if len(m) > 64 {
		return m[:64] + "…"
	}
	return m
}

// errorResponse encodes a JSON-RPC error answer; a nil id is null.
func errorResponse(id []byte, code int, msg string) []byte {
	if id == nil {
		id = []byte("null")
	}
	m, _ := json.Marshal(msg)
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(id)
	fmt.Fprintf(&b, `,"error":{"code":%d,"message":`, code)
	b.Write(m)
	b.WriteString(`}}`)
	return b.Bytes()
}

// Outbound screens one message the server sends (without its line
// terminator) and returns what to send instead: the message itself, an
// error answer with the same id when a response is over MaxAnswerBytes, or
// nil to send nothing (a notification over the limit). It also follows the
// lifecycle: the answer to initialize opens the session.
func (g *Gate) Outbound(msg []byte) []byte {
	sc := g.newScanner()
	// mcp-go writes "jsonrpc", then "id", then the rest; the whole
	// message is scanned only when it is over the limit, to find its id.
	if int64(len(msg)) <= g.cfg.MaxAnswerBytes {
		sc.feed(msg[:min(len(msg), 4<<10)])
	} else {
		sc.feed(msg)
		sc.finish()
	}
	e := readEnvelope(sc)
	hasResult, hasError := sc.members[mResult].count > 0, sc.members[mError].count > 0
	if int64(len(msg)) <= g.cfg.MaxAnswerBytes && !hasResult && !hasError && !e.hasMeth && e.id != nil {
		// The prefix did not reach past the id; the kind of message
		// matters only for the lifecycle, so look further.
		sc = g.newScanner()
		sc.feed(msg)
		sc.finish()
		e = readEnvelope(sc)
		hasResult = sc.members[mResult].count > 0
	}
	g.mu.Lock()
	switch {
	case e.hasMeth && e.id != nil:
		// A request to the client: remember it, to forward its answer.
		g.serverCalls[idKey(e.id)] = true
	case g.state == stateInitializing && e.id != nil && sameID(e.id, g.initID) && !e.hasMeth:
		if hasResult {
			g.state = stateReady
		} else {
			g.state = stateNew
		}
		close(g.initDone)
	}
	g.mu.Unlock()
	if int64(len(msg)) <= g.cfg.MaxAnswerBytes {
		return msg
	}
	r := Refusal{Method: clipMethod(e.method), Reason: fmt.Sprintf("an answer of %s is over the limit of %s", policy.FormatBytes(int64(len(msg))), policy.FormatBytes(g.cfg.MaxAnswerBytes)), Bytes: int64(len(msg))}
	if e.hasMeth || e.id == nil {
		g.report(r)
		return nil
	}
	r.ID, r.Code = string(e.id), CodeInternalError
	g.report(r)
	return errorResponse(e.id, CodeInternalError, fmt.Sprintf("the answer is %s, over the server's limit of %s for one message: ask for less",
		policy.FormatBytes(int64(len(msg))), policy.FormatBytes(g.cfg.MaxAnswerBytes)))
}

// syntaxCheck reports whether msg is one JSON value and otherwise where
// its first syntax error is and what it is, as encoding/json sees it. A
// message nested past encoding/json's own depth limit (10,000) is read
// token by token, which has none.
func syntaxCheck(msg []byte, sc *scanner) (int64, string, bool) {
	if sc.deepAt < 0 && sc.complete() && json.Valid(msg) {
		return 0, "", true
	}
	// Where the error is comes from a token reader, which has no depth
	// limit: the end of the last token it read whole. Its own offsets
	// are unreliable for errors inside a token.
	dec := json.NewDecoder(bytes.NewReader(msg))
	good, err := skipTokens(dec)
	if err != nil {
		why := "unexpected end of JSON input"
		var se *json.SyntaxError
		if errors.As(err, &se) {
			why = se.Error()
		}
		return good, why, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return good, "data after the message", false
	}
	return 0, "", true
}

// skipTokens reads one value token by token and returns the offset after
// the last token it read whole.
func skipTokens(dec *json.Decoder) (int64, error) {
	depth := 0
	for {
		good := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return good, err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return dec.InputOffset(), nil
		}
	}
}

// firstByte is the index of the first non-whitespace byte of msg, or 0.
func firstByte(msg []byte) int {
	for i, b := range msg {
		if b != ' ' && b != '\t' && b != '\r' && b != '\n' {
			return i
		}
	}
	return 0
}

// idKey is the map key of an id: numbers by value, strings by text.
func idKey(id []byte) string {
	if len(id) > 0 && id[0] != '"' {
		if f, err := strconv.ParseFloat(string(id), 64); err == nil {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
	}
	return string(id)
}

// sameID compares ids as JSON values: mcp-go re-encodes a numeric id, so
// 1.0 comes back as 1.
func sameID(a, b []byte) bool { return idKey(a) == idKey(b) }

// isJSONNumber reports whether s is a number in JSON's grammar.
func isJSONNumber(s string) bool {
	i := 0
	digits := func() bool {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(s)
}
