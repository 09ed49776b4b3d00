package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyjail/pyjail/mcpserver/fake"
	"github.com/pyjail/pyjail/policy"
)

// framingCap is the message limit of the framing tests: small, so that
// "huge" lines are cheap to make.
const framingCap = 16 << 10

// framingSeeds are stdio inputs, one message per line: truncated, deep,
// huge, invalid UTF-8, pipelined, and well-formed ones among them.
func framingSeeds() []string {
	deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	huge := strings.Repeat("x", 2*framingCap)
	return []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"validate_json","arguments":{"data":` + deep + `,"schema_name":"user"}}}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"validate_json","arguments":{"data":` + deep + `}},"id":"last"}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"validate_csv","arguments":{"csv":"` + huge + `"}}}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"validate_csv","arguments":{"csv":"` + huge + `"}},"id":5}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"print(1)"}}`,
		`{"jsonrpc":"2.0","id":7,"method":5}`,
		`{"jsonrpc":"2.0","id":"\xff\xfe","method":"ping"}`,
		"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\",\"params\":{\"x\":\"\xc3\x28\"}}",
		`{"jsonrpc":"2.0","id":9,"id":10,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1e2,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":12345678901234567890,"method":"ping"}`,
		`[{"jsonrpc":"2.0","id":11,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":12}`,
		`{"jsonrpc":"2.0","id":13,"result":{}}`,
		`{"jsonrpc":"2.0","id":14,"method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","id":15,"method":"prompts/get","params":{"name":"generate_secure_script"}}`,
		`{"jsonrpc":"2.0","id":16,"method":"resources/read","params":{"uri":"sandbox://status"}}`,
		`{"jsonrpc":"2.0","id":17,"method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":6}}`,
		`{"jsonrpc":"2.0","id":18,"method":"ping"} trailing`,
		`{"jsonrpc":"2.0","i\u0064":19,"method":"ping"}`,
		`{"jsonrpc":"2.0","ID":20,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":21,"method":"ping","params":{"a":[1,}}`,
		`{"jsonrpc":"2.0","id":22 "method":"ping"}`,
		`{"id":23,"method":"ping"}`,
		`not json at all`,
		``,
		"\r",
		`{"jsonrpc":"2.0","id":24,"method":"tools/call","params":{"name":"validate_json","arguments":{"data":1,"schema":` + strings.Repeat(`{"not":`, 200) + `true` + strings.Repeat(`}`, 200) + `}}}`,
	}
}

// framingHarness serves a Server over in-memory pipes, as ServeStdio does
// for a real client, and collects what it writes.
type framingHarness struct {
	t    *testing.T
	inW  *io.PipeWriter
	done chan error

	mu   sync.Mutex
	msgs []map[string]json.RawMessage
	more chan struct{}
	read chan struct{}
}

func newFramingServer(t testing.TB) *Server {
	t.Helper()
	cfg := Config{Policy: policy.Default(), Runner: &fake.Runner{}, Host: healthyHost(), Logger: slog.New(slog.DiscardHandler)}
	cfg.Policy.Server = policy.DefaultServerLimits()
	cfg.Policy.Server.MessageBytes = framingCap
	cfg.Validator = newTestPool(t, cfg, nil)
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

func startFraming(t *testing.T, srv *Server) *framingHarness {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h := &framingHarness{t: t, inW: inW, done: make(chan error, 1), more: make(chan struct{}, 1), read: make(chan struct{})}
	go func() {
		h.done <- srv.ServeStdio(t.Context(), inR, outW)
		outW.Close()
	}()
	go func() {
		defer close(h.read)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("server wrote a line that is not JSON: %.200q", sc.Bytes())
				continue
			}
			h.mu.Lock()
			h.msgs = append(h.msgs, m)
			h.mu.Unlock()
			select {
			case h.more <- struct{}{}:
			default:
			}
		}
	}()
	return h
}

func (h *framingHarness) send(line string) {
	h.t.Helper()
	if _, err := io.WriteString(h.inW, line+"\n"); err != nil {
		h.t.Fatalf("writing a line: %v", err)
	}
}

// answers counts the answers by id key; null ids count under "null".
func (h *framingHarness) answers() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := map[string]int{}
	for _, m := range h.msgs {
		if _, isReq := m["method"]; isReq {
			continue // a notification or a request to the client
		}
		n[oracleKey(m["id"])]++
	}
	return n
}

// waitFor waits until every id in want has at least its count of answers.
func (h *framingHarness) waitFor(want map[string]int) {
	h.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		got := h.answers()
		missing := ""
		for id, n := range want {
			if got[id] < n {
				missing = id
				break
			}
		}
		if missing == "" {
			return
		}
		select {
		case <-h.more:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			h.t.Fatalf("no answer for id %s within 20 s; answers so far: %v", missing, got)
		}
	}
}

// oracleKey is an id's key, decoded independently of the gate: numbers by
// value, strings as decoded text, null and absent alike.
func oracleKey(raw json.RawMessage) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if len(raw) == 0 || dec.Decode(&v) != nil || v == nil {
		return "null"
	}
	switch v := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return "bad-number"
		}
		return "n:" + strconv.FormatFloat(f, 'g', -1, 64)
	case string:
		return "s:" + v
	}
	return "other"
}

// oracleID reads a line's id with encoding/json's token reader, which has
// no depth limit and stops at the first syntax error, independently of
// the gate's scanner. It reports the id's key and whether the line is a
// request whose id can be answered: a top-level object with exactly one
// "id" (a string, or a number a client reads back exactly) before any
// syntax error, that is not a response (result or error without method).
func oracleID(line []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false
	}
	var (
		id                   json.RawMessage
		ids                  int
		hasMethod, isReponse bool
	)
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			break
		}
		key, _ := k.(string)
		if key == "id" {
			ids++
			var v json.RawMessage
			if dec.Decode(&v) != nil {
				ids = 0
				break
			}
			id = v
			continue
		}
		switch key {
		case "method":
			hasMethod = true
		case "result", "error":
			isReponse = true
		}
		if skipValue(dec) != nil {
			break
		}
	}
	if ids != 1 || (isReponse && !hasMethod) {
		return "", false
	}
	key := oracleKey(id)
	switch {
	case strings.HasPrefix(key, "s:"):
		return key, true
	case strings.HasPrefix(key, "n:"):
		lit := string(bytes.TrimSpace(id))
		if !strings.ContainsAny(lit, ".eE") {
			n, err := strconv.ParseInt(lit, 10, 64)
			if err != nil || n > 1<<53 || n < -(1<<53) {
				return "", false
			}
		}
		return key, true
	}
	return "", false
}

// idMention finds the id members a line spells, valid or not.
var idMention = regexp.MustCompile(`"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*)`)

// skipValue reads one value token by token: unlike Decode, Token has no
// depth limit.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

const (
	framingInit = `{"jsonrpc":"2.0","id":"fz-init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}`
	framingEnd  = `{"jsonrpc":"2.0","id":"fz-end","method":"ping"}`
)

// checkFraming sends lines after a normal initialization and checks that
// every id the oracle can read gets exactly one answer, that no answer
// carries an id no line had, and that no line gets more than one answer.
func checkFraming(t *testing.T, srv *Server, lines []string) {
	h := startFraming(t, srv)
	h.send(framingInit)
	h.waitFor(map[string]int{"s:fz-init": 1})
	h.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	want := map[string]int{"s:fz-init": 1, "s:fz-end": 1}
	// Ids of lines the gate cannot validate in full (over the cap and not
	// valid JSON): a syntax error deep inside may hide a member after it
	// from one reader and not the other, so their answers are allowed, not
	// required.
	maybe := map[string]bool{}
	for _, l := range lines {
		l = strings.TrimSuffix(l, "\r")
		key, ok := oracleID([]byte(l))
		oversize := len(l) > framingCap && !json.Valid([]byte(l))
		switch {
		case oversize:
			// The gate streams an oversize line without validating it
			// deep down, so it may find an id after a syntax error the
			// oracle stops at: any id the line spells may be answered.
			for _, m := range idMention.FindAllStringSubmatch(l, -1) {
				maybe[oracleKey(json.RawMessage(m[1]))] = true
			}
		case ok:
			want[key]++
		}
		h.send(l)
	}
	h.send(framingEnd)
	h.waitFor(want)
	h.inW.Close()
	select {
	case err := <-h.done:
		if err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeStdio did not return at EOF")
	}
	<-h.read
	total := 0
	for id, n := range h.answers() {
		total += n
		switch {
		case id == "null" || maybe[id]:
		case n != want[id]:
			t.Errorf("id %s: %d answers, want %d", id, n, want[id])
		}
	}
	// Each line gets at most one answer: the two of the harness, the rest
	// the lines'.
	if total > len(lines)+2 {
		t.Errorf("%d answers to %d lines", total, len(lines)+2)
	}
}

// FuzzStdioFraming feeds arbitrary input, split into lines, to the real
// stdio transport: the gate in front of mcp-go and the tools behind it.
func FuzzStdioFraming(f *testing.F) {
	for _, s := range framingSeeds() {
		f.Add([]byte(s))
	}
	f.Add([]byte(strings.Join(framingSeeds(), "\n")))
	srv := newFramingServer(f)
	f.Fuzz(func(t *testing.T, input []byte) {
		checkFraming(t, srv, strings.Split(string(input), "\n"))
	})
}

// TestStdioFramingCorpus is FuzzStdioFraming's static twin: every seed
// alone, then all of them on one connection, so that pipelined lines,
// cancellations and answers interleave.
func TestStdioFramingCorpus(t *testing.T) {
	srv := newFramingServer(t)
	seeds := framingSeeds()
	t.Run("all", func(t *testing.T) { checkFraming(t, srv, seeds) })
	for i, s := range seeds {
		t.Run(strconv.Itoa(i), func(t *testing.T) { checkFraming(t, srv, []string{s}) })
	}
}
