package server

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// capConns wraps a listener so that at most max connections are open at once. A
// connection beyond that is answered 503 at once and closed: the server sheds load
// instead of running out of file descriptors, which would fail jobs' launches too.
func capConns(ln net.Listener, max int) net.Listener {
	return &capListener{Listener: ln, max: int64(max)}
}

type capListener struct {
	net.Listener
	max  int64
	open atomic.Int64
}

const busy = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nX-Amzn-ErrorType: ServerException\r\n" +
	"Retry-After: 1\r\nConnection: close\r\nContent-Length: 73\r\n\r\n" +
	`{"__type":"ServerException","message":"too many connections; try again"}` + "\n"

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			go func() {
				c.SetWriteDeadline(time.Now().Add(time.Second))
				c.Write([]byte(busy))
				c.Close()
			}()
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

type countedConn struct {
	net.Conn
	l    *capListener
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
