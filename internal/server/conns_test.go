package server

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// guard bounds a read that waits for the server to act: hitting it fails the test.
const guard = 20 * time.Second

func dial(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// get sends one kept-alive request on c and reads its answer's status.
func get(t *testing.T, c net.Conn, r *bufio.Reader) int {
	t.Helper()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(guard))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// closedByServer waits until the server closes c.
func closedByServer(t *testing.T, c net.Conn, r io.Reader, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(guard))
	_, err := io.Copy(io.Discard, r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the server kept the connection open", what)
	}
}

// TestTimeouts: an idle kept-alive connection and one that never finishes its headers
// are closed by the server, not held forever (20,000 such connections once exhausted its
// file descriptors).
func TestTimeouts(t *testing.T) {
	s, err := Start(Config{Addr: "127.0.0.1:0", Data: filepath.Join(t.TempDir(), "data"), Logf: t.Logf,
		Limits: Limits{Idle: 200 * time.Millisecond, ReadHeader: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	idle := dial(t, s)
	r := bufio.NewReader(idle)
	if code := get(t, idle, r); code != 200 {
		t.Fatalf("GET /healthz: %d", code)
	}
	closedByServer(t, idle, r, "idle keep-alive connection")

	slow := dial(t, s)
	io.WriteString(slow, "GET /healthz HTTP/1.1\r\nHost: x\r\n") // and never the blank line
	closedByServer(t, slow, slow, "unfinished headers")
}

// TestConnectionCap: beyond MaxConns open connections, one more is answered 503 at once
// (a ServerException the SDKs retry) and closed; once a connection closes, a new one is
// served again.
func TestConnectionCap(t *testing.T) {
	s, err := Start(Config{Addr: "127.0.0.1:0", Data: filepath.Join(t.TempDir(), "data"), Logf: t.Logf, Limits: Limits{MaxConns: 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var held []net.Conn
	for range 3 {
		c := dial(t, s)
		if code := get(t, c, bufio.NewReader(c)); code != 200 {
			t.Fatalf("connection within the cap: %d", code)
		}
		held = append(held, c)
	}
	extra := dial(t, s)
	if code := get(t, extra, bufio.NewReader(extra)); code != http.StatusServiceUnavailable {
		t.Fatalf("connection beyond the cap: %d, want 503", code)
	}
	held[0].Close()
	// The server notices the close when it next reads that connection: try until a new
	// connection is served, within the guard.
	for deadline := time.Now().Add(guard); ; {
		c := dial(t, s)
		if code := get(t, c, bufio.NewReader(c)); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection was served again after one closed")
		}
	}
}
