package testenv

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// ReplyCutter is a TCP proxy in front of a server that can cut a reply in
// flight: armed (CutNextReply), it lets the next request through, and when
// the server's answer comes back it drops it and closes the client's
// connection. The client sees a broken reply to a command that ran — what
// a connection reset or a read timeout after a script ran looks like, and
// why go-redis sends a pipeline again (its retries). Not a network
// emulator: one fault, on demand, for the tests of what a resent script
// answers.
type ReplyCutter struct {
	ln     net.Listener
	target string
	armed  atomic.Bool
	cuts   atomic.Int64
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

// StartReplyCutter starts a cutter in front of target ("host:port"), closed
// when the test ends.
func StartReplyCutter(t testing.TB, target string) *ReplyCutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: reply cutter: %v", err)
	}
	p := &ReplyCutter{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is where clients connect instead of the server.
func (p *ReplyCutter) Addr() string { return p.ln.Addr().String() }

// CutNextReply arms the cutter: the next bytes the server sends back, on
// any connection, are dropped and that connection closed.
func (p *ReplyCutter) CutNextReply() { p.armed.Store(true) }

// Cuts is how many replies were cut so far.
func (p *ReplyCutter) Cuts() int64 { return p.cuts.Load() }

func (p *ReplyCutter) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { // requests, as they are
			defer p.wg.Done()
			_, _ = io.Copy(server, client)
			server.Close()
		}()
		go func() { // replies, unless one is to be cut
			defer p.wg.Done()
			defer client.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := server.Read(buf)
				if n > 0 {
					if p.armed.CompareAndSwap(true, false) {
						p.cuts.Add(1)
						server.Close()
						return
					}
					if _, werr := client.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

func (p *ReplyCutter) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
