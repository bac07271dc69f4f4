package pgtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// AnswerLosing is a proxy between a client and a test database that can
// lose the answer to the end of one transaction: PostgreSQL ended it
// (a COMMIT, or a statement outside a transaction, committed), and the
// client sees its connection die instead of the answer, as when the
// network fails right after the COMMIT went out. A client whose commit
// fails so cannot tell it from one that never committed.
type AnswerLosing struct {
	Pool *pgxpool.Pool // through the proxy

	ln            net.Listener
	network, addr string // the database's own address

	mu    sync.Mutex
	armed *losing
	conns map[net.Conn]struct{}
}

// losing is one answer to lose (LoseAnswer).
type losing struct {
	match  string
	before func()
	done   chan struct{}
	reset  bool // LoseAnswerReset
	orphan bool // Orphan
	drop   bool // LoseRequest
}

// NewAnswerLosing puts the proxy in front of pool's database (a Unix
// socket or TCP) and opens Pool, configured as pool is, through it.
func NewAnswerLosing(t testing.TB, pool *pgxpool.Pool) *AnswerLosing {
	t.Helper()
	pc := pool.Config()
	cc := pc.ConnConfig
	a := &AnswerLosing{network: "tcp", addr: net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))), conns: map[net.Conn]struct{}{}}
	if strings.HasPrefix(cc.Host, "/") {
		a.network, a.addr = "unix", filepath.Join(cc.Host, fmt.Sprintf(".s.PGSQL.%d", cc.Port))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	a.ln = ln
	go a.accept()
	t.Cleanup(a.close)
	cc.Host, cc.Port = "127.0.0.1", uint16(ln.Addr().(*net.TCPAddr).Port)
	cc.TLSConfig, cc.Fallbacks = nil, nil
	p, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatalf("open a pool through the proxy: %v", err)
	}
	t.Cleanup(p.Close)
	a.Pool = p
	return a
}

// LoseAnswer arms the proxy once: the next statement run whose text
// contains match (a simple query, or the execution of a prepared
// statement whose text does) goes to PostgreSQL, and so does the rest of
// its transaction; once PostgreSQL has ended that transaction (ready
// for a query outside one), before (if not nil) is called while the
// client still waits for the answer, and the client's connection is
// then closed without it. The channel is closed after that.
func (a *AnswerLosing) LoseAnswer(match string, before func()) <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.armed = &losing{match: match, before: before, done: make(chan struct{})}
	return a.armed.done
}

// LoseAnswerReset is LoseAnswer whose client connection is reset (the
// proxy closes it with SO_LINGER 0: an RST) instead of closed, as a
// proxy or load balancer between chatd and PostgreSQL may end it: the
// client reads ECONNRESET where the answer to the COMMIT was.
func (a *AnswerLosing) LoseAnswerReset(match string, before func()) <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.armed = &losing{match: match, before: before, done: make(chan struct{}), reset: true}
	return a.armed.done
}

// LoseAnswers loses the answer of every statement whose text contains
// match (as LoseAnswer does, each its connection), from now until stop
// is called, as when PostgreSQL is unreachable for that question (say
// pg_xact_status). It holds the proxy's one armed losing meanwhile: to
// lose a COMMIT's answer and then every such question, call it from
// that LoseAnswer's before.
func (a *AnswerLosing) LoseAnswers(match string) (stop func()) {
	var mu sync.Mutex
	stopped := false
	var arm func()
	arm = func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			a.LoseAnswer(match, arm)
		}
	}
	arm()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.armed != nil && a.armed.match == match {
			a.armed = nil
		}
	}
}

// Orphan arms the proxy once: the transaction that runs the next
// statement whose text contains match goes to PostgreSQL up to its
// COMMIT (a simple query), which the proxy does not forward: it closes
// the client's connection instead and keeps its own to PostgreSQL open,
// as when chatd's side of a connection died mid-transaction and nothing
// told PostgreSQL. The backend stays idle in transaction, its locks held
// and its transaction in progress, until PostgreSQL ends it (a timeout)
// or the test does. The channel is closed when the client's connection
// is.
func (a *AnswerLosing) Orphan(match string) <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.armed = &losing{match: match, done: make(chan struct{}), orphan: true}
	return a.armed.done
}

// LoseRequest arms the proxy once: the next statement run whose text
// contains match (a simple query, or the execution of a prepared
// statement whose text does) is not forwarded; the proxy closes both connections instead, as when the
// network failed with the request on its way. PostgreSQL never runs it,
// and the client cannot tell that from a lost answer. The channel is
// closed when the connections are.
func (a *AnswerLosing) LoseRequest(match string) <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.armed = &losing{match: match, done: make(chan struct{}), drop: true}
	return a.armed.done
}

// take returns the armed losing if text contains its match, disarming it.
func (a *AnswerLosing) take(text string) *losing {
	a.mu.Lock()
	defer a.mu.Unlock()
	if l := a.armed; l != nil && strings.Contains(text, l.match) {
		a.armed = nil
		return l
	}
	return nil
}

func (a *AnswerLosing) close() {
	a.ln.Close()
	a.mu.Lock()
	defer a.mu.Unlock()
	for c := range a.conns {
		c.Close()
	}
	a.conns = nil
}

func (a *AnswerLosing) track(cs ...net.Conn) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conns == nil {
		return false
	}
	for _, c := range cs {
		a.conns[c] = struct{}{}
	}
	return true
}

func (a *AnswerLosing) accept() {
	for {
		client, err := a.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial(a.network, a.addr)
		if err != nil {
			client.Close()
			continue
		}
		if !a.track(client, server) {
			client.Close()
			server.Close()
			return
		}
		s := &session{a: a, client: client, server: server, stmts: map[string]string{}}
		go s.up()
		go s.down()
	}
}

// session is one client connection and its server connection.
type session struct {
	a              *AnswerLosing
	client, server net.Conn

	mu       sync.Mutex
	orphaned bool              // Orphan: the server connection outlives the client's
	sent     int               // requests forwarded that PostgreSQL answers with ReadyForQuery
	lose     *losing           // the answer to lose, from request loseAt on
	loseAt   int               // 0: none
	stmts    map[string]string // prepared statements' texts by name
}

func (s *session) stop() {
	s.client.Close()
	s.mu.Lock()
	orphaned := s.orphaned
	s.mu.Unlock()
	if !orphaned {
		s.server.Close()
	}
}

// up forwards what the client sends, noting the requests that end in
// ReadyForQuery (the startup message, a simple query, a Sync) and the
// statement that arms a losing.
func (s *session) up() {
	defer s.stop()
	r := bufio.NewReader(s.client)
	for first := true; ; first = false {
		var msg []byte
		var err error
		if first {
			msg, err = readMessage(r, false) // the startup message has no type
		} else {
			msg, err = readMessage(r, true)
		}
		if err != nil {
			return
		}
		s.mu.Lock()
		switch {
		case first:
			s.sent++
		case msg[0] == 'Q':
			text := cstrings(msg[5:], 1)[0]
			if l := s.lose; l != nil && l.orphan && strings.EqualFold(strings.TrimSpace(text), "commit") {
				s.orphaned = true
				s.mu.Unlock()
				s.client.Close()
				close(l.done)
				return
			}
			if l := s.arm(text); l != nil {
				s.mu.Unlock()
				s.stop()
				close(l.done)
				return
			}
			s.sent++
		case msg[0] == 'P':
			f := cstrings(msg[5:], 2)
			s.stmts[f[0]] = f[1]
		case msg[0] == 'B':
			if l := s.arm(s.stmts[cstrings(msg[5:], 2)[1]]); l != nil {
				s.mu.Unlock()
				s.stop()
				close(l.done)
				return
			}
		case msg[0] == 'S':
			s.sent++
		}
		s.mu.Unlock()
		if _, err := s.server.Write(msg); err != nil {
			return
		}
	}
}

// arm makes the request being sent (the next one answered) lose the
// answer that ends its transaction, if text is the armed statement's;
// an armed LoseRequest it returns instead, for the caller to drop the
// request.
func (s *session) arm(text string) *losing {
	if s.lose != nil {
		return nil
	}
	l := s.a.take(text)
	switch {
	case l == nil:
	case l.drop:
		return l
	default:
		s.lose, s.loseAt = l, s.sent+1
	}
	return nil
}

// down forwards what PostgreSQL answers, holding back the answers from
// the armed request on until one ends a transaction: those it drops,
// and closes the client's connection.
func (s *session) down() {
	defer s.stop()
	r := bufio.NewReader(s.server)
	var held []byte
	answered := 0
	for {
		msg, err := readMessage(r, true)
		if err != nil {
			return
		}
		s.mu.Lock()
		l, at := s.lose, s.loseAt
		s.mu.Unlock()
		if l == nil || answered+1 < at {
			if msg[0] == 'Z' {
				answered++
			}
			if _, err := s.client.Write(msg); err != nil {
				return
			}
			continue
		}
		held = append(held, msg...)
		if msg[0] != 'Z' {
			continue
		}
		answered++
		if msg[5] != 'I' {
			// Still in the transaction: the client needs these answers
			// to end it.
			if _, err := s.client.Write(held); err != nil {
				return
			}
			held = nil
			continue
		}
		if l.before != nil {
			l.before()
		}
		if tc, ok := s.client.(*net.TCPConn); ok && l.reset {
			_ = tc.SetLinger(0)
		}
		s.stop()
		close(l.done)
		return
	}
}

// readMessage reads one protocol message whole: a type byte (typed) and
// a length that counts itself.
func readMessage(r *bufio.Reader, typed bool) ([]byte, error) {
	head := 4
	if typed {
		head = 5
	}
	msg := make([]byte, head)
	if _, err := io.ReadFull(r, msg); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(msg[head-4:]))
	if n < 4 || n > 1<<30 {
		return nil, fmt.Errorf("message length %d", n)
	}
	msg = append(msg, make([]byte, n-4)...)
	if _, err := io.ReadFull(r, msg[head:]); err != nil {
		return nil, err
	}
	return msg, nil
}

// cstrings reads the first n NUL-terminated strings of b ("" for those
// missing).
func cstrings(b []byte, n int) []string {
	out := make([]string, n)
	for i := range out {
		j := bytes.IndexByte(b, 0)
		if j < 0 {
			break
		}
		out[i], b = string(b[:j]), b[j+1:]
	}
	return out
}
