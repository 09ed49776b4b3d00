package egress

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"time"
)

// errHelloRead stops the handshake once the ClientHello is parsed.
var errHelloRead = errors.New("client hello read")

// readClientHello reads the TLS ClientHello from r and returns its server
// name and the bytes read, which the caller sends on to the upstream
// unchanged. crypto/tls parses the hello (the gateway has no TLS parser
// of its own): a server handshake over a connection that can only be
// read from stops in GetConfigForClient, before any answer is written.
func readClientHello(r io.Reader) (string, []byte, error) {
	var buf bytes.Buffer
	var sni string
	var seen bool
	err := tls.Server(readOnlyConn{r: io.TeeReader(r, &buf)}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni, seen = h.ServerName, true
			return nil, errHelloRead
		},
	}).Handshake()
	if !seen {
		if err == nil {
			err = errors.New("handshake ended without a ClientHello")
		}
		return "", nil, err
	}
	return sni, buf.Bytes(), nil
}

// readOnlyConn is a net.Conn that reads from r and writes nowhere, so the
// parsing handshake can never send the jail anything.
type readOnlyConn struct{ r io.Reader }

func (c readOnlyConn) Read(p []byte) (int, error)     { return c.r.Read(p) }
func (readOnlyConn) Write([]byte) (int, error)        { return 0, io.ErrClosedPipe }
func (readOnlyConn) Close() error                     { return nil }
func (readOnlyConn) LocalAddr() net.Addr              { return nil }
func (readOnlyConn) RemoteAddr() net.Addr             { return nil }
func (readOnlyConn) SetDeadline(time.Time) error      { return nil }
func (readOnlyConn) SetReadDeadline(time.Time) error  { return nil }
func (readOnlyConn) SetWriteDeadline(time.Time) error { return nil }
