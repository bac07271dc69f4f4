// Package kafkatest is what tests run Kafka with: an in-process
// Kafka-protocol server (kfake) started with a retry while its port is
// still held, a reader of every record of a topic's partitions and a
// count of kafka-go's goroutines. Only tests import it.
package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Start starts a one-broker kfake with opts (the topics to seed, the port,
// a data dir) and closes it at the end of the test. A port just released by
// a cluster closed a moment ago may still be held: Start retries for 10 s.
func Start(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)
	var c *kfake.Cluster
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err = kfake.NewCluster(opts...)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// ReadTopic reads every record of partitions 0..partitions-1 of topic, in
// partition order.
func ReadTopic(ctx context.Context, address, topic string, partitions int) ([]kafka.Message, error) {
	var out []kafka.Message
	for p := 0; p < partitions; p++ {
		msgs, err := ReadPartition(ctx, address, topic, p)
		if err != nil {
			return nil, fmt.Errorf("partition %d: %w", p, err)
		}
		out = append(out, msgs...)
	}
	return out, nil
}

// ReadPartition reads every record of partition p of topic, from its first
// offset to its last.
func ReadPartition(ctx context.Context, address, topic string, p int) ([]kafka.Message, error) {
	conn, err := kafka.DialLeader(ctx, "tcp", address, topic, p)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	first, last, err := conn.ReadOffsets()
	if err != nil {
		return nil, err
	}
	var out []kafka.Message
	for off := first; off < last; {
		if _, err := conn.Seek(off, kafka.SeekAbsolute); err != nil {
			return nil, err
		}
		b := conn.ReadBatch(1, 10<<20)
		before := off
		for {
			m, err := b.ReadMessage()
			if err != nil {
				break
			}
			out = append(out, m)
			off = m.Offset + 1
		}
		if err := b.Close(); err != nil && !errors.Is(err, kafka.RequestTimedOut) {
			return nil, err
		}
		if off == before {
			return nil, fmt.Errorf("no progress at offset %d of %d", off, last)
		}
	}
	return out, nil
}

// Header is the value of m's header key, "" if it has none.
func Header(m kafka.Message, key string) string {
	v, _ := LookupHeader(m, key)
	return v
}

// LookupHeader is the value of m's header key and whether m has it.
func LookupHeader(m kafka.Message, key string) (string, bool) {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// Goroutines counts the goroutines running kafka-go code: a client closed
// as it should leaves none of its own behind.
func Goroutines() int {
	n := 0
	for _, g := range Stacks() {
		if strings.Contains(g, "segmentio/kafka-go") {
			n++
		}
	}
	return n
}

// Stacks are the stacks of every goroutine, one a string.
func Stacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}
