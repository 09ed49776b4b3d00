// Package rpcgate screens the JSON-RPC messages of an MCP session on their
// way into and out of mcp-go, so that every request gets exactly one answer
// carrying its id, within the server's limits, and in lifecycle order.
//
// mcp-go decodes each message whole with encoding/json before it reads the
// id: a message nested past encoding/json's depth limit, or one too large
// to decode, is answered with id null (or not at all), and the client
// waits for an answer that never comes. A Gate reads each message first
// with a shallow, streaming pass ([scanner]) that keeps constant memory
// whatever the size or nesting, and decides, in this order:
//
//  1. too large (Config.MaxMessageBytes): the message streams past without
//     being held, and its id, found on the way, gets the error;
//  2. nested deeper than Config.MaxDepth below the envelope (the limit
//     JSON text has in validate_json: "nesting exceeds the depth limit of
//     128 in params.arguments.data"): refused with its id;
//  3. a batch, not an object, or not JSON: Invalid Request or Parse error,
//     with the id when the top level gave one;
//  4. a bad envelope (jsonrpc not "2.0", a method that is not a string, an
//     id that is neither a string nor an exactly representable number,
//     duplicate members, params that are not structured): Invalid Request,
//     with the id when it is usable;
//  5. the lifecycle: until the server has answered initialize, only
//     initialize and ping are served; other requests get Invalid Request
//     and notifications are dropped (requests of protocol 2026-07-28,
//     which has no initialize and says so in _meta, pass);
//  6. Config.Precheck, for checks that need the server (prompt arguments);
//  7. otherwise the message is rebuilt from the members the gate checked
//     and handed on, so that mcp-go cannot read an id or method the gate
//     did not.
//
// Notifications are never answered (JSON-RPC), and responses from the
// client reach mcp-go only when they answer a request the server sent.
// On the way out, a message over Config.MaxAnswerBytes is replaced by an
// error with the same id (the official clients drop messages over 10 MiB
// and close the session), and the answer to initialize opens the session.
//
// The Gate is transport-neutral: Inbound takes one whole message and
// Outbound one answer, for any transport; [Stdio] applies it to a
// newline-delimited stream. The package writes nothing but answers, keeps
// no package-level state and never logs; OnRefusal reports what it
// refuses, without payloads.
package rpcgate
