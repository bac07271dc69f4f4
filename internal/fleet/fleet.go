package fleet

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/chatd/chatd/internal/mqtttest"
)

// Setup is the first input line.
type Setup struct {
	Addr    string  `json:"addr"`
	Devices []Phone `json:"devices"`
}

// Phone is one persistent session.
type Phone struct {
	ClientID string `json:"clientId"`
	User     int64  `json:"user"`
	Version  byte   `json:"version"`
	Password string `json:"password"`
	Local    string `json:"local"`  // source address
	Conv     int64  `json:"conv"`   // the conversation whose seq it tracks
	Expiry   uint32 `json:"expiry"` // v5 session expiry interval
}

// Command is an input line after the Setup.
type Command struct {
	Op       string `json:"op"`
	Deadline int64  `json:"deadline"` // unix ms
	Seq      int64  `json:"seq"`
}

// Connected answers connect.
type Connected struct {
	BackAfterMs []int64        `json:"backAfterMs"` // per phone, from the command
	Refused     map[string]int `json:"refused"`     // failed attempts by CONNACK code ("0x00": none, "0xff": SUBSCRIBE failed)
	Errors      []string       `json:"errors"`      // phones still out at the deadline
}

type phone struct {
	Phone
	mu     sync.Mutex
	c      *mqtttest.Client
	reader chan struct{} // closed when the connection's publishes are handled
	have   int64
	gaps   []string
}

// Run reads the Setup and then commands from r until it ends, answering
// each on w; at the end every phone is dropped.
func Run(r io.Reader, w io.Writer) error {
	in := bufio.NewScanner(r)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := json.NewEncoder(w)
	var setup Setup
	if !in.Scan() {
		return fmt.Errorf("read setup: %w", errOr(in.Err(), io.ErrUnexpectedEOF))
	}
	if err := json.Unmarshal(in.Bytes(), &setup); err != nil {
		return fmt.Errorf("decode setup: %w", err)
	}
	phones := make([]*phone, len(setup.Devices))
	for i, d := range setup.Devices {
		phones[i] = &phone{Phone: d}
	}
	defer dropAll(phones)
	for in.Scan() {
		var cmd Command
		if err := json.Unmarshal(in.Bytes(), &cmd); err != nil {
			return fmt.Errorf("decode command: %w", err)
		}
		var reply any
		switch cmd.Op {
		case "connect":
			reply = connectAll(setup.Addr, phones, time.UnixMilli(cmd.Deadline))
		case "drop":
			dropAll(phones)
			reply = struct{}{}
		case "missing":
			n := 0
			for _, p := range phones {
				if p.position() < cmd.Seq {
					n++
				}
			}
			reply = map[string]int{"missing": n}
		case "violations":
			var v []string
			for _, p := range phones {
				p.mu.Lock()
				for _, g := range p.gaps {
					v = append(v, p.ClientID+": "+g)
				}
				p.mu.Unlock()
			}
			reply = map[string][]string{"violations": v}
		default:
			return fmt.Errorf("unknown command %q", cmd.Op)
		}
		if err := out.Encode(reply); err != nil {
			return fmt.Errorf("write reply: %w", err)
		}
	}
	if err := in.Err(); err != nil {
		return fmt.Errorf("read command: %w", err)
	}
	return nil
}

func errOr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

func connectAll(addr string, phones []*phone, deadline time.Time) Connected {
	res := Connected{BackAfterMs: make([]int64, len(phones)), Refused: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for i, p := range phones {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
			for {
				code, err := p.connect(addr)
				if err == nil {
					break
				}
				mu.Lock()
				res.Refused[fmt.Sprintf("0x%02x", code)]++
				mu.Unlock()
				if time.Now().After(deadline) {
					mu.Lock()
					res.Errors = append(res.Errors, fmt.Sprintf("%s could not connect: %v", p.ClientID, err))
					mu.Unlock()
					break
				}
				time.Sleep(200*time.Millisecond + time.Duration(rnd.IntN(400))*time.Millisecond)
			}
			res.BackAfterMs[i] = time.Since(start).Milliseconds()
		})
	}
	wg.Wait()
	return res
}

// connect dials, starts reading and subscribes; code is the CONNACK's
// reason code of a refusal (0 when there was none, 0xff when the SUBSCRIBE
// failed).
func (p *phone) connect(addr string) (byte, error) {
	o := mqtttest.Options{Version: p.Version, ClientID: p.ClientID, Username: fmt.Sprint(p.User), Password: p.Password,
		Expiry: p.Expiry, ReadBuffer: 16, LocalAddr: p.Local}
	c, ack, err := mqtttest.Dial(addr, o)
	if err != nil {
		return ack.ReasonCode, err
	}
	reader := make(chan struct{})
	go func() {
		defer close(reader)
		for pk := range c.Publishes {
			p.handle(pk.Payload)
		}
	}()
	codes, err := c.Subscribe(fmt.Sprintf("chat/v1/user/%d/events", p.User))
	if err != nil || len(codes) != 1 || codes[0] >= 0x80 {
		c.Drop()
		<-reader
		return 0xff, fmt.Errorf("subscribe: %v %v", codes, err)
	}
	p.mu.Lock()
	p.c, p.reader = c, reader
	p.mu.Unlock()
	return 0, nil
}

func (p *phone) handle(payload []byte) {
	var ev struct {
		Type           string `json:"type"`
		ConversationID int64  `json:"conversationId"`
		Seq            int64  `json:"seq"`
	}
	if json.Unmarshal(payload, &ev) != nil || ev.Type != "message.new" || ev.ConversationID != p.Conv {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ev.Seq > p.have+1 && len(p.gaps) < 20 {
		p.gaps = append(p.gaps, fmt.Sprintf("conversation %d: got seq %d after %d (gap)", p.Conv, ev.Seq, p.have))
	}
	p.have = max(p.have, ev.Seq)
}

func (p *phone) position() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.have
}

// dropAll closes every connection and waits until each one's publishes
// are handled.
func dropAll(phones []*phone) {
	for _, p := range phones {
		p.mu.Lock()
		c, reader := p.c, p.reader
		p.c, p.reader = nil, nil
		p.mu.Unlock()
		if c != nil {
			c.Drop()
			<-reader
		}
	}
}
