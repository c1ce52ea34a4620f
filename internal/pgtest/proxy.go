package pgtest

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy is a TCP proxy between a client and the database, for partition tests: Cut
// makes it a black hole (connections stay open and every byte is dropped, as when the
// network between them fails, so the client learns of it only from its own deadlines),
// and Heal forwards again on new connections.
type Proxy struct {
	// URL is the database URL with the proxy in place of the server.
	URL    string
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

// NewProxy proxies dbURL (a postgres:// URL) until the test ends.
func NewProxy(t testing.TB, dbURL string) *Proxy {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: u.Host, conns: map[net.Conn]bool{}}
	u.Host = ln.Addr().String()
	p.URL = u.String()
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns[c] = true
		cut := p.cut
		p.mu.Unlock()
		if cut {
			p.wg.Add(1)
			go p.drop(c)
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[s] = true
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(s, c)
		go p.pipe(c, s)
	}
}

// pipe copies from src to dst, dropping what it reads while the proxy is cut.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			cut := p.cut
			p.mu.Unlock()
			if !cut {
				if _, err := dst.Write(buf[:n]); err != nil {
					src.Close()
					return
				}
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

// drop reads and drops everything from c until it is closed.
func (p *Proxy) drop(c net.Conn) {
	defer p.wg.Done()
	io.Copy(io.Discard, c)
}

// Cut drops every byte from now on, on open connections and new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
}

// Heal closes every connection (their streams lost bytes while cut) and forwards on new
// ones.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *Proxy) close() {
	p.ln.Close()
	p.Heal()
	p.wg.Wait()
}
