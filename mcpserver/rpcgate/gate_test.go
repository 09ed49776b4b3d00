package rpcgate

import (
	"encoding/json"
	"strings"
	"testing"
)

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// readyGate returns a gate whose session is initialized.
func readyGate(t *testing.T, cfg Config) *Gate {
	t.Helper()
	g := New(cfg)
	if fwd, ans := g.Inbound([]byte(initialize)); fwd == nil || ans != nil {
		t.Fatalf("initialize: forward %s, answer %s", fwd, ans)
	}
	g.Outbound([]byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}`))
	return g
}

type answer struct {
	ID    json.RawMessage `json:"id"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeAnswer(t *testing.T, b []byte) answer {
	t.Helper()
	var a answer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	return a
}

func nested(depth int) string {
	return strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth)
}

func call(id, args string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"validate_json","arguments":` + args + `}}`
}

// TestInbound covers each decision of the gate on a ready session.
func TestInbound(t *testing.T) {
	for name, tc := range map[string]struct {
		msg string
		// forward: the rebuilt message mcp-go gets; "" when refused.
		forward string
		// id, code and msg of the answer when refused; code 0: no answer.
		id   string
		code int
		want string
	}{
		"ping": {msg: `{"jsonrpc":"2.0","id":7,"method":"ping"}`, forward: `{"jsonrpc":"2.0","id":7,"method":"ping"}`},
		"call at the depth limit": {
			msg:     call("2", `{"data":`+nested(128)+`}`),
			forward: call("2", `{"data":`+nested(128)+`}`),
		},
		// Issue 11: answered with id null, or never.
		"call past the depth limit": {
			msg: call("2", `{"data":`+nested(129)+`}`), id: "2", code: CodeInvalidRequest,
			want: "nesting exceeds the depth limit of 128 in params.arguments.data",
		},
		"100,000 nested arrays, id last": {
			msg: `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"v","arguments":{"data":` + nested(100_000) + `}},"id":"x"}`,
			id:  `"x"`, code: CodeInvalidRequest, want: "depth limit of 128",
		},
		"100,000 nested not": {
			msg: call("3", `{"data":1,"schema":`+strings.Repeat(`{"not":`, 100_000)+"true"+strings.Repeat("}", 100_000)+`}`),
			id:  "3", code: CodeInvalidRequest, want: "depth limit of 128 in params.arguments.schema",
		},
		"method not a string":  {msg: `{"jsonrpc":"2.0","id":2,"method":5}`, id: "2", code: CodeInvalidRequest, want: "method must be a string"},
		"no jsonrpc":           {msg: `{"id":2,"method":"ping"}`, id: "2", code: CodeInvalidRequest, want: `jsonrpc must be "2.0"`},
		"id object":            {msg: `{"jsonrpc":"2.0","id":{},"method":"ping"}`, id: "null", code: CodeInvalidRequest, want: "id must be"},
		"id too big":           {msg: `{"jsonrpc":"2.0","id":12345678901234567890,"method":"ping"}`, id: "null", code: CodeInvalidRequest, want: "2^53"},
		"two ids":              {msg: `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, id: "null", code: CodeInvalidRequest, want: "more than one id"},
		"params a string":      {msg: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":"x"}`, id: "4", code: CodeInvalidRequest, want: "params must be"},
		"not JSON":             {msg: `{not json`, id: "null", code: CodeParseError},
		"truncated, id found":  {msg: `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"a":`, id: "9", code: CodeParseError, want: "end of JSON input"},
		"bad deeper, id found": {msg: `{"jsonrpc":"2.0","id":9,"method":"x","params":{"a":[1,}}`, id: "9", code: CodeParseError},
		"batch":                {msg: `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, id: "null", code: CodeInvalidRequest, want: "batches"},
		"broken batch":         {msg: `[1, 2`, id: "null", code: CodeParseError},
		"a number":             {msg: `5`, id: "null", code: CodeInvalidRequest, want: "must be an object"},
		"no method":            {msg: `{"jsonrpc":"2.0","id":3}`, id: "3", code: CodeInvalidRequest, want: "no method"},
		"escaped names":        {msg: `{"jsonrpc":"2.0","i\u0064":5,"method":"ping"}`, forward: `{"jsonrpc":"2.0","id":5,"method":"ping"}`},
		// mcp-go's decoder matches names case-insensitively; the rebuilt
		// message leaves it nothing to match.
		"case-folded names dropped": {msg: `{"jsonrpc":"2.0","id":5,"ID":6,"Method":"x","method":"ping"}`, forward: `{"jsonrpc":"2.0","id":5,"method":"ping"}`},
		"string id re-encoded":      {msg: `{"jsonrpc":"2.0","id":"\u0061b","method":"ping"}`, forward: `{"jsonrpc":"2.0","id":"ab","method":"ping"}`},
		"notification":              {msg: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`, forward: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`},
		"deep notification":         {msg: `{"jsonrpc":"2.0","method":"notifications/x","params":{"a":` + nested(200) + `}}`},
		"stray response":            {msg: `{"jsonrpc":"2.0","id":3,"result":{}}`},
		"second initialize":         {msg: strings.Replace(initialize, `"id":1`, `"id":8`, 1), id: "8", code: CodeInvalidRequest, want: "already initialized"},
	} {
		t.Run(name, func(t *testing.T) {
			var refused []Refusal
			g := readyGate(t, Config{OnRefusal: func(r Refusal) { refused = append(refused, r) }})
			fwd, ans := g.Inbound([]byte(tc.msg))
			if got := string(fwd); got != tc.forward {
				t.Errorf("forward = %.200s, want %.200s", got, tc.forward)
			}
			if tc.code == 0 {
				if ans != nil {
					t.Errorf("answer = %s, want none", ans)
				}
				if tc.forward == "" && len(refused) != 1 {
					t.Errorf("a dropped message is reported once, got %v", refused)
				}
				return
			}
			a := decodeAnswer(t, ans)
			if string(a.ID) != tc.id || a.Error == nil || a.Error.Code != tc.code || !strings.Contains(a.Error.Message, tc.want) {
				t.Errorf("answer = %s, want id %s, code %d, message with %q", ans, tc.id, tc.code, tc.want)
			}
			if len(refused) != 1 || refused[0].Code != tc.code || strings.Contains(refused[0].Reason, "[[[") {
				t.Errorf("refusals = %+v, want one, without the payload", refused)
			}
		})
	}
}

// TestInboundOversize: a message over the cap is answered with its id,
// found wherever it is.
func TestInboundOversize(t *testing.T) {
	g := readyGate(t, Config{MaxMessageBytes: 1 << 10})
	big := `{"jsonrpc":"2.0","method":"tools/call","params":{"a":"` + strings.Repeat("x", 4<<10) + `"},"id":42}`
	fwd, ans := g.Inbound([]byte(big))
	a := decodeAnswer(t, ans)
	if fwd != nil || string(a.ID) != "42" || a.Error.Code != CodeInvalidRequest || !strings.Contains(a.Error.Message, "the limit is 1 KiB") {
		t.Errorf("forward %s, answer %s", fwd, ans)
	}
}

// TestLifecycle: before initialize is answered, only initialize and ping
// are served.
func TestLifecycle(t *testing.T) {
	g := New(Config{})
	for name, tc := range map[string]struct {
		msg       string
		forwarded bool
	}{
		"tools/call": {`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"1"}}}`, false},
		"tools/list": {`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, false},
		"ping":       {`{"jsonrpc":"2.0","id":4,"method":"ping"}`, true},
		"modern era": {`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, true},
	} {
		t.Run(name, func(t *testing.T) {
			fwd, ans := g.Inbound([]byte(tc.msg))
			if (fwd != nil) != tc.forwarded {
				t.Fatalf("forwarded %s, answer %s", fwd, ans)
			}
			if !tc.forwarded {
				a := decodeAnswer(t, ans)
				if a.Error == nil || a.Error.Code != CodeInvalidRequest || !strings.Contains(a.Error.Message, "send initialize first") {
					t.Errorf("answer %s", ans)
				}
			}
		})
	}
	if fwd, _ := g.Inbound([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); fwd != nil {
		t.Errorf("a notification before initialize is forwarded: %s", fwd)
	}
	if fwd, _ := g.Inbound([]byte(initialize)); fwd == nil {
		t.Fatal("initialize is not forwarded")
	}
	// A failed initialize leaves the session closed.
	g.Outbound([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}`))
	if fwd, _ := g.Inbound([]byte(`{"jsonrpc":"2.0","id":6,"method":"tools/list"}`)); fwd != nil {
		t.Error("tools/list forwarded after a failed initialize")
	}
	g.Inbound([]byte(initialize))
	g.Outbound([]byte(`{"jsonrpc":"2.0","id":1.0,"result":{}}`))
	if fwd, _ := g.Inbound([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)); fwd == nil {
		t.Error("tools/list refused after initialize was answered")
	}
}

// TestOutbound: answers over the cap become errors with the same id.
func TestOutbound(t *testing.T) {
	var refused []Refusal
	g := readyGate(t, Config{MaxAnswerBytes: 1 << 10, OnRefusal: func(r Refusal) { refused = append(refused, r) }})
	small := []byte(`{"jsonrpc":"2.0","id":"a","result":{}}`)
	if got := g.Outbound(small); string(got) != string(small) {
		t.Errorf("small answer changed: %s", got)
	}
	big := []byte(`{"jsonrpc":"2.0","id":"a","result":{"text":"` + strings.Repeat("x", 2<<10) + `"}}`)
	a := decodeAnswer(t, g.Outbound(big))
	if string(a.ID) != `"a"` || a.Error == nil || a.Error.Code != CodeInternalError || !strings.Contains(a.Error.Message, "over the server's limit of 1 KiB") {
		t.Errorf("big answer became %+v", a)
	}
	if got := g.Outbound([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"m":"` + strings.Repeat("x", 2<<10) + `"}}`)); got != nil {
		t.Errorf("big notification sent as %.100s", got)
	}
	if len(refused) != 2 {
		t.Errorf("refusals %+v, want 2", refused)
	}
}

// TestClientResponses: only answers to the server's own requests reach it.
func TestClientResponses(t *testing.T) {
	g := readyGate(t, Config{})
	g.Outbound([]byte(`{"jsonrpc":"2.0","id":17,"method":"sampling/createMessage","params":{}}`))
	if fwd, ans := g.Inbound([]byte(`{"jsonrpc":"2.0","id":17,"result":{"x":1}}`)); string(fwd) != `{"jsonrpc":"2.0","id":17,"result":{"x":1}}` || ans != nil {
		t.Errorf("answer to a server request: forward %s, answer %s", fwd, ans)
	}
	if fwd, ans := g.Inbound([]byte(`{"jsonrpc":"2.0","id":17,"result":{"x":1}}`)); fwd != nil || ans != nil {
		t.Errorf("a second answer: forward %s, answer %s", fwd, ans)
	}
}

// TestBatchWording (issue 27): a batch is refused in the transport's own
// terms, a line over stdio and a request over HTTP.
func TestBatchWording(t *testing.T) {
	for name, tc := range map[string]struct {
		transportSessions bool
		want, notWant     string
	}{
		"stdio": {false, "one JSON-RPC message per line", "HTTP"},
		"http":  {true, "one JSON-RPC message per HTTP request", "per line"},
	} {
		t.Run(name, func(t *testing.T) {
			g := New(Config{TransportSessions: tc.transportSessions})
			fwd, answer := g.Inbound([]byte(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`))
			if fwd != nil {
				t.Fatalf("a batch was forwarded: %s", fwd)
			}
			if got := string(answer); !strings.Contains(got, tc.want) || strings.Contains(got, tc.notWant) {
				t.Errorf("answer %s: want %q, not %q", got, tc.want, tc.notWant)
			}
		})
	}
}
